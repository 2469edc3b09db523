// Turns the past/present KV Concat chain of a decoder step into an in-place cache: planc.CacheWrite appends one step's
// rows to a preallocated cache input, planc.Attention reads the first past+new rows, and the present outputs go away.
import { Diagnostics } from '../compiler/diagnostics.ts';
import { CACHE_INPUT_PREFIX, PAST_LENGTH_INPUT } from '../compiler/plan/io-names.ts';
import { inferGraph } from '../compiler/infer/infer.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { dimAdd, dimEq, isSym, sym, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { consumers, fusionPass, Rewrites, type Pass, type PassContext } from './pass.ts';
import { rebuildShape } from './shape-rebuild.ts';

const NAME = 'kv-cache-in-place';

/** The symbol naming the cache's row capacity (bound from the cache inputs' dims at run time). */
export const CACHE_CAPACITY = 'cache_capacity';

/** The cache input that replaces a past input: past_key_values.0.decoder.key → kv_cache.0.decoder.key. */
export function cacheInputName(past: string): string {
  return past.startsWith('past_key_values.') ? `${CACHE_INPUT_PREFIX}${past.slice('past_key_values.'.length)}` : `${past}.cache`;
}

interface CacheMatch {
  concat: number; past: string; rows: string; present: string;
  /** Shape nodes reading the present value: rebuilt from the step's rows and the past length. */
  shapes: number[];
}

/**
 * Where a cache write reads its new rows: the [B,H,S,D] value itself (layout 0), or, when that value is only the
 * head split (Reshape to [B,S,H,D] + Transpose 0,2,1,3) of a [B,S,H*D] projection read by the Concat alone, the
 * projection (layout 1, the split nodes go away).
 */
function rowsSource(g: Graph, uses: Map<string, number[]>, m: CacheMatch, shapeOf: (v: string) => Dim[] | undefined): { value: string; layout: number; seqAxis: number; drop: number[] } {
  const plain = { value: m.rows, layout: 0, seqAxis: 2, drop: [] };
  const t = g.nodes.findIndex((n) => n.outputs[0] === m.rows);
  const tn = g.nodes[t];
  if (!tn || tn.op !== 'Transpose' || tn.attrs.perm?.kind !== 'ints' || tn.attrs.perm.value.join() !== '0,2,1,3') return plain;
  if ((uses.get(m.rows) ?? []).some((j) => j !== m.concat)) return plain;
  const r = g.nodes.findIndex((n) => n.outputs[0] === tn.inputs[0]);
  const rn = g.nodes[r];
  if (!rn || rn.op !== 'Reshape' || (uses.get(rn.outputs[0]!) ?? []).length !== 1) return plain;
  const src = rn.inputs[0]!;
  const sd = shapeOf(src), rd = shapeOf(m.rows);
  if (sd?.length !== 3 || rd?.length !== 4 || !dimEq(sd[1]!, rd[2]!) || typeof rd[1] !== 'number' || typeof rd[3] !== 'number' || !dimEq(sd[2]!, rd[1] * rd[3])) return plain;
  return { value: src, layout: 1, seqAxis: 1, drop: [t, r] };
}

function rewriteGraph(g: Graph, model: Model, ctx: PassContext): number {
  const explain = (node: string, why: string) => ctx.explain?.(NAME, node, why);
  const facts = inferGraph(model, g, { annotate: false }, new Diagnostics());
  const uses = consumers(g);
  const shapeOf = (v: string) => facts.get(v)?.shape;
  let matches: CacheMatch[] = [];
  g.nodes.forEach((n, i) => {
    if (n.op !== 'Concat' || n.domain !== '' || n.inputs.length !== 2) return;
    const [past, rows] = n.inputs as [string, string];
    const present = n.outputs[0]!;
    const axis = n.attrs.axis?.kind === 'int' ? n.attrs.axis.value : 0;
    const pd = shapeOf(past);
    if (!g.inputs.includes(past) || pd?.length !== 4 || (axis !== 2 && axis !== -2)) return;
    const readers = (uses.get(present) ?? []).filter((j) => j >= 0);
    const isShape = (r: Node) => r.op === 'Shape' && r.domain === '';
    if (readers.some((j) => { const r = g.nodes[j]!; return !isShape(r) && (r.op !== 'Attention' || r.domain !== 'planc' || r.inputs[0] === present || r.inputs[3] === present); })) {
      return explain(n.name, `'${present}' is read by something other than planc.Attention as K or V (or Shape)`);
    }
    const pastReaders = (uses.get(past) ?? []).map((j) => (j < 0 ? undefined : g.nodes[j]!));
    if (pastReaders.some((r) => !r || (r !== n && r.op !== 'Shape'))) return explain(n.name, `past input '${past}' has other readers`);
    matches.push({ concat: i, past, rows, present, shapes: readers.filter((j) => isShape(g.nodes[j]!)) });
  });
  // an attention reads both K and V from caches or neither (its kv_len applies to both)
  const cached = new Set(matches.map((m) => m.present));
  const half = new Set<string>();
  for (const n of g.nodes) {
    if (n.op !== 'Attention' || n.domain !== 'planc' || cached.has(n.inputs[1]!) === cached.has(n.inputs[2]!)) continue;
    explain(n.name, 'only one of its K and V comes from a past/present Concat');
    half.add(n.inputs[1]!).add(n.inputs[2]!);
  }
  matches = matches.filter((m) => !half.has(m.present));
  if (matches.length === 0) return 0;
  const pastDim = shapeOf(matches[0]!.past)![2]!;
  const rowsDim = shapeOf(matches[0]!.rows)![2];
  if (!isSym(pastDim) || pastDim.terms.size !== 1) { explain(g.nodes[matches[0]!.concat]!.name, 'the past length is not one symbol'); return 0; }
  if (matches.some((m) => !dimEq(shapeOf(m.past)![2]!, pastDim) || rowsDim === undefined || !dimEq(shapeOf(m.rows)![2]!, rowsDim))) {
    explain(g.nodes[matches[0]!.concat]!.name, 'the caches do not share one past length and step length');
    return 0;
  }
  const rewrites = new Rewrites();
  const sources = matches.map((m) => rowsSource(g, uses, m, shapeOf));
  // kv_len = past + new rows, computed once before the first cache write (host-side shape math)
  const first = matches[0]!;
  const kvLen = `${PAST_LENGTH_INPUT}:plus_new`;
  const lengths = [{ value: kvLen, dim: dimAdd(pastDim, rowsDim!) }, { value: PAST_LENGTH_INPUT, dim: pastDim }];
  // Shape(present) = [B, H, past + new, D]: from the step's rows and the lengths; planned before anything changes
  const presentShapes = new Map<number, Node[] | undefined>();
  for (const [k, m] of matches.entries()) {
    for (const j of m.shapes) {
      presentShapes.set(j, j > first.concat ? rebuildShape(g, g.nodes[j]!, shapeOf(m.present)!, [sources[k]!.value], lengths) : undefined);
    }
  }
  const stuck = [...presentShapes].find(([, r]) => !r);
  if (stuck) { explain(g.nodes[stuck[0]]!.name, 'a Shape of a present K/V cannot be rebuilt from the step rows and the past length'); return 0; }
  const origin = g.nodes[first.concat]!.origin;
  const stepNodes: Node[] = [
    { name: `${kvLen}/shape`, op: 'Shape', domain: '', inputs: [sources[0]!.value], outputs: [`${kvLen}/shape`], attrs: {}, origin },
    { name: `${kvLen}/axis`, op: 'Constant', domain: '', inputs: [], outputs: [`${kvLen}/axis`], origin, attrs: { value: { kind: 'tensor', value: Tensor.fromNumbers('int64', [], [sources[0]!.seqAxis]) } } },
    { name: `${kvLen}/step`, op: 'Gather', domain: '', inputs: [`${kvLen}/shape`, `${kvLen}/axis`], outputs: [`${kvLen}/step`], attrs: { axis: { kind: 'int', value: 0 } }, origin },
    { name: kvLen, op: 'Add', domain: '', inputs: [PAST_LENGTH_INPUT, `${kvLen}/step`], outputs: [kvLen], attrs: {}, origin },
  ];
  for (const [j, nodes] of presentShapes) rewrites.replace([j], nodes!);
  const renamed = new Map<string, string>();
  for (const [k, m] of matches.entries()) {
    const concat = g.nodes[m.concat]!;
    const src = sources[k]!;
    const cache = cacheInputName(m.past);
    const written = `${cache}:written`;
    const heads = shapeOf(m.past)![1]!;
    const write: Node = {
      name: `${concat.name}:cache_write`, op: 'CacheWrite', domain: 'planc', inputs: [cache, src.value, PAST_LENGTH_INPUT], outputs: [written],
      attrs: { new_layout: { kind: 'int', value: src.layout }, num_heads: { kind: 'int', value: typeof heads === 'number' ? heads : 0 } }, origin: concat.origin,
    };
    rewrites.replace([m.concat, ...src.drop], m === first ? [...stepNodes, write] : [write]);
    renamed.set(m.present, written);
    const pd = shapeOf(m.past)!;
    g.values.set(cache, { name: cache, type: { dtype: 'float32', shape: cacheDims(pd) } });
    g.inputs[g.inputs.indexOf(m.past)] = cache;
    for (const j of uses.get(m.past) ?? []) {
      const r = g.nodes[j]!;
      if (j === m.concat) continue;
      const rebuilt = rebuildShape(g, r, pd, [cache], [{ value: PAST_LENGTH_INPUT, dim: pastDim }]);
      if (!rebuilt) throw new Error(`internal: cannot rebuild ${r.name}`);
      rewrites.replace([j], rebuilt);
    }
  }
  for (const n of g.nodes) {
    if (n.op !== 'Attention' || n.domain !== 'planc' || !renamed.has(n.inputs[1]!)) continue;
    n.inputs = [n.inputs[0]!, renamed.get(n.inputs[1]!)!, renamed.get(n.inputs[2]!) ?? n.inputs[2]!, n.inputs[3] ?? '', kvLen];
  }
  g.outputs = g.outputs.filter((o) => !renamed.has(o));
  g.inputs.push(PAST_LENGTH_INPUT);
  g.values.set(PAST_LENGTH_INPUT, { name: PAST_LENGTH_INPUT, type: { dtype: 'int64', shape: [], sym: [pastDim] } });
  rewrites.apply(g);
  return matches.length;
}

export const KV_CACHE_IN_PLACE: Pass = fusionPass(NAME, 'past/present KV Concat  ⇒  planc.CacheWrite into a preallocated cache input read by planc.Attention', rewriteGraph);

/** The cache's dims for a past input's dims: the row axis becomes the capacity symbol. */
function cacheDims(past: Dim[]): Dim[] {
  return [past[0]!, past[1]!, sym(CACHE_CAPACITY), past[3]!];
}
