// planc.QMatMul nodes that quantize the same float32 A (int8 or int16 input, same K: an attention block's Q, K and V
// products over one layer-norm output) → one planc.QuantizeRows before the first of them, whose rows and scales they
// read (QMatMul's a_scale input): A is quantized once instead of once per product, with the same values.
import type { Graph, Node } from '../compiler/ir.ts';
import { freshName, graphPass } from './pass.ts';

const NAME = 'share-quantized-rows';

/** The int input of a QMatMul that quantizes its float32 A itself (int8 / int16, not yet sharing rows), or undefined. */
function quantizesA(n: Node): 'int8' | 'int16' | undefined {
  if (n.domain !== 'planc' || n.op !== 'QMatMul' || n.inputs[6]) return undefined;
  const input = n.attrs.input?.kind === 'string' ? n.attrs.input.value : 'int8';
  return input === 'int8' || input === 'int16' ? input : undefined;
}

/** A node name not yet used in g: base, or base_1, base_2, ... */
function freshNodeName(g: Graph, base: string): string {
  const used = new Set(g.nodes.map((n) => n.name));
  let name = base;
  for (let i = 1; used.has(name); i++) name = `${base}_${i}`;
  return name;
}

function shareRows(g: Graph): number {
  // consumers by (A, input, K), in node order
  const groups = new Map<string, number[]>();
  g.nodes.forEach((n, i) => {
    const input = quantizesA(n);
    const k = n.attrs.k?.kind === 'int' ? n.attrs.k.value : undefined;
    if (!input || k === undefined || !n.inputs[0]) return;
    const key = JSON.stringify([n.inputs[0], input, k]);
    (groups.get(key) ?? groups.set(key, []).get(key)!).push(i);
  });
  const before = new Map<number, Node>();
  for (const [key, users] of groups) {
    if (users.length < 2) continue;
    const [a, input, k] = JSON.parse(key) as [string, 'int8' | 'int16', number];
    const first = g.nodes[users[0]!]!;
    const q = freshName(g, `${a}:rows`);
    g.values.set(q, { name: q });
    const scale = freshName(g, `${a}:row_scales`);
    g.values.set(scale, { name: scale });
    before.set(users[0]!, {
      name: freshNodeName(g, `${first.name}:quantize_rows`),
      op: 'QuantizeRows',
      domain: 'planc',
      inputs: [a],
      outputs: [q, scale],
      attrs: { input: { kind: 'string', value: input }, k: { kind: 'int', value: k } },
      origin: [...new Set(users.flatMap((u) => g.nodes[u]!.origin))],
    });
    for (const u of users) {
      const n = g.nodes[u]!;
      const ins = [...n.inputs];
      while (ins.length < 6) ins.push('');
      ins[0] = q;
      ins[6] = scale;
      n.inputs = ins;
    }
  }
  if (before.size === 0) return 0;
  g.nodes = g.nodes.flatMap((n, i) => (before.has(i) ? [before.get(i)!, n] : [n]));
  return before.size;
}

export const SHARE_QUANTIZED_ROWS = graphPass(
  NAME,
  'planc.QMatMul nodes quantizing the same A (int8 / int16) → one planc.QuantizeRows whose rows they all read',
  (g) => shareRows(g),
);
