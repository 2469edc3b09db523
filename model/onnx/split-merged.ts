// Splits optimum's merged decoder (both decoders behind an If on `use_cache_branch`) into decoder and decoder_with_past.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { Graph, Node } from '../../compiler/ir.ts';

/** The two graphs a merged decoder holds: the first step (else branch) and the step with past (then branch). */
export interface SplitDecoders {
  decoder: Graph;
  decoderWithPast: Graph;
}

/**
 * Finds the If whose condition is a bool graph input and makes one graph per branch: the branch's nodes after the
 * nodes outside the If, the branch outputs renamed to the If's outputs, only the inputs the branch reads. The step
 * with past drops outputs that compute nothing (an input passed through or a constant: optimum returns empty
 * placeholders for the cross-attention cache there; the three-file export has no such outputs). Identity nodes over initializers (the exporter's weight sharing) become
 * initializer names, so both layouts give the same graphs.
 */
export function splitMergedDecoder(merged: Graph, file: string): SplitDecoders {
  const ifs = merged.nodes.filter((n) => n.op === 'If' && n.domain === '' && merged.inputs.includes(n.inputs[0]!));
  if (ifs.length !== 1) {
    throw new PlancError(
      'PLANC_E009',
      `a merged decoder needs one If on a bool graph input (use_cache_branch); found ${ifs.length}`,
      { file, graph: merged.name },
    );
  }
  const iff = ifs[0]!;
  const branch = (name: string): Graph => {
    const a = iff.attrs[name];
    if (a?.kind !== 'graph')
      throw new PlancError('PLANC_E009', `the merged decoder's If has no ${name}`, {
        file,
        graph: merged.name,
        node: iff.name,
      });
    return a.value;
  };
  return {
    decoder: fromBranch(merged, iff, branch('else_branch'), 'decoder', false),
    decoderWithPast: fromBranch(merged, iff, branch('then_branch'), 'decoder_with_past', true),
  };
}

function fromBranch(merged: Graph, iff: Node, b: Graph, name: string, dropPassThrough: boolean): Graph {
  if (b.outputs.length !== iff.outputs.length) {
    throw new PlancError(
      'PLANC_E009',
      `the ${name} branch has ${b.outputs.length} outputs, the If ${iff.outputs.length}`,
      { graph: merged.name, node: iff.name },
    );
  }
  const cond = iff.inputs[0]!;
  const initializers = new Map([...merged.initializers, ...b.initializers]);
  const values = new Map([...merged.values, ...b.values]);
  const rename = new Map<string, string>();
  const nodes: Node[] = [];
  const names = new Set<string>();
  for (const n of [...merged.nodes.filter((x) => x !== iff), ...b.nodes]) {
    if (n.op === 'Identity' && n.domain === '' && initializers.has(n.inputs[0]!)) {
      initializers.set(n.outputs[0]!, initializers.get(n.inputs[0]!)!);
      const type = values.get(n.inputs[0]!)?.type;
      values.set(n.outputs[0]!, { name: n.outputs[0]!, ...(type ? { type } : {}) });
      continue;
    }
    nodes.push({ ...n, name: uniqueName(n.name, names), inputs: [...n.inputs], outputs: [...n.outputs] });
  }
  // branch outputs get the If's output names
  b.outputs.forEach((o, k) => {
    const target = iff.outputs[k]!;
    if (o === target) return;
    if (initializers.has(o) || merged.inputs.includes(o)) {
      nodes.push({
        name: `${target}_identity`,
        op: 'Identity',
        domain: '',
        inputs: [o],
        outputs: [target],
        attrs: {},
        origin: [iff.name],
      });
    } else {
      rename.set(o, target);
    }
  });
  for (const n of nodes) {
    n.inputs = n.inputs.map((x) => rename.get(x) ?? x);
    n.outputs = n.outputs.map((x) => rename.get(x) ?? x);
  }
  let outputs = [...iff.outputs];
  if (dropPassThrough) {
    const producer = new Map(nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
    const source = (v: string): string => {
      const p = producer.get(v);
      return p && p.op === 'Identity' ? source(p.inputs[0]!) : v;
    };
    const computed = (v: string): boolean =>
      !merged.inputs.includes(v) && !initializers.has(v) && producer.get(v)?.op !== 'Constant';
    outputs = outputs.filter((o) => computed(source(o)));
  }
  const live = liveNodes(nodes, outputs);
  const used = new Set(live.flatMap(readsOf));
  for (const [from, to] of rename) {
    const v = values.get(from);
    if (v && !values.has(to)) values.set(to, { ...v, name: to });
  }
  const inputs = merged.inputs.filter((i) => i !== cond && used.has(i));
  const all = new Set([...inputs, ...outputs, ...live.flatMap((n) => [...n.inputs, ...n.outputs])]);
  for (const k of [...values.keys()]) if (!all.has(k)) values.delete(k);
  for (const k of [...initializers.keys()]) if (!all.has(k)) initializers.delete(k);
  return { name, inputs, outputs, nodes: live, values, initializers };
}

/** The nodes some output depends on, in their order. */
function liveNodes(nodes: Node[], outputs: string[]): Node[] {
  const need = new Set(outputs);
  const keep = new Array<boolean>(nodes.length).fill(false);
  for (let i = nodes.length - 1; i >= 0; i--) {
    const n = nodes[i]!;
    if (!n.outputs.some((o) => need.has(o))) continue;
    keep[i] = true;
    for (const x of readsOf(n)) if (x) need.add(x);
  }
  return nodes.filter((_, i) => keep[i]);
}

/** The values a node reads: its inputs and, for nodes with subgraphs, every name their nodes read. */
function readsOf(n: Node): string[] {
  const out = [...n.inputs];
  for (const a of Object.values(n.attrs)) {
    const gs = a.kind === 'graph' ? [a.value] : a.kind === 'graphs' ? a.value : [];
    for (const g of gs) for (const m of g.nodes) out.push(...readsOf(m));
  }
  return out;
}

/** A node name not taken yet (the branch and the outer graph name their nodes independently). */
function uniqueName(name: string, taken: Set<string>): string {
  let n = name;
  for (let k = 1; taken.has(n); k++) n = `${name}_${k}`;
  taken.add(n);
  return n;
}
