// Turns the past/present KV Concat chain of a decoder step into an in-place cache: planc.CacheWrite appends one step's
// rows to a preallocated cache input, planc.Attention reads the first past+new rows, and the present outputs go away.
// With --step-tokens N > 1 that attention is causal among the new tokens, and a step left uncached is refused.
import { CACHE_INPUT_PREFIX, PAST_LENGTH_INPUT } from '../compiler/plan/io-names.ts';
import { Diagnostics, PlancError } from '../compiler/diagnostics.ts';
import { inferGraph } from '../model/infer/infer.ts';
import type { Graph, Model, Node } from '../compiler/ir.ts';
import { dimAdd, dimEq, isSym, sym, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { graphPass, GraphView, Rewrites, type Pass, type PassContext } from './pass.ts';
import { rebuildShape } from './shape-rebuild.ts';
import { isPastSelfInput, stepTokensOf } from './step-tokens.ts';

const NAME = 'kv-cache-in-place';

/** The symbol naming the cache's row capacity (bound from the cache inputs' dims at run time). */
export const CACHE_CAPACITY = 'cache_capacity';

/** The cache input that replaces a past input: past_key_values.0.decoder.key → kv_cache.0.decoder.key. */
export function cacheInputName(past: string): string {
  return past.startsWith('past_key_values.')
    ? `${CACHE_INPUT_PREFIX}${past.slice('past_key_values.'.length)}`
    : `${past}.cache`;
}

interface CacheMatch {
  concat: number;
  past: string;
  rows: string;
  present: string;
  /** Shape nodes reading the present value: rebuilt from the step's rows and the past length. */
  shapes: number[];
}

/**
 * Where a cache write reads its new rows: the [B,H,S,D] value itself (layout 0), or, when that value is only the
 * head split (Reshape to [B,S,H,D] + Transpose 0,2,1,3) of a [B,S,H*D] projection read by the Concat alone, the
 * projection (layout 1, the split nodes go away).
 */
function rowsSource(v: GraphView, m: CacheMatch): { value: string; layout: number; seqAxis: number; drop: number[] } {
  const plain = { value: m.rows, layout: 0, seqAxis: 2, drop: [] };
  const t = v.prod(m.rows, 'Transpose');
  if (t?.[1].attrs.perm?.kind !== 'ints' || t[1].attrs.perm.value.join() !== '0,2,1,3') return plain;
  if ((v.uses.get(m.rows) ?? []).some((j) => j !== m.concat)) return plain;
  const r = v.prod(t[1].inputs[0]!, 'Reshape');
  if (!r || (v.uses.get(r[1].outputs[0]!) ?? []).length !== 1) return plain;
  const src = r[1].inputs[0]!;
  const sd = v.shape(src),
    rd = v.shape(m.rows);
  if (
    sd?.length !== 3 ||
    rd?.length !== 4 ||
    !dimEq(sd[1]!, rd[2]!) ||
    typeof rd[1] !== 'number' ||
    typeof rd[3] !== 'number' ||
    !dimEq(sd[2]!, rd[1] * rd[3])
  )
    return plain;
  return { value: src, layout: 1, seqAxis: 1, drop: [t[0], r[0]] };
}

/** A Concat(past input, new rows) on the row axis whose present value only planc.Attention reads as K or V (or Shape). */
function cacheConcat(v: GraphView, i: number, explain: (node: string, why: string) => void): CacheMatch | undefined {
  const n = v.g.nodes[i]!;
  if (n.inputs.length !== 2) return undefined;
  const [past, rows] = n.inputs as [string, string];
  const present = n.outputs[0]!;
  const axis = n.attrs.axis?.kind === 'int' ? n.attrs.axis.value : 0;
  if (!v.g.inputs.includes(past) || v.rank(past) !== 4 || (axis !== 2 && axis !== -2)) return undefined;
  const readers = (v.uses.get(present) ?? []).filter((j) => j >= 0); // present is a graph output too, until this pass
  const isShape = (j: number) => v.g.nodes[j]!.op === 'Shape' && v.g.nodes[j]!.domain === '';
  if (
    readers.some((j) => {
      const r = v.g.nodes[j]!;
      return (
        !isShape(j) &&
        (r.op !== 'Attention' || r.domain !== 'planc' || r.inputs[0] === present || r.inputs[3] === present)
      );
    })
  ) {
    explain(n.name, `'${present}' is read by something other than planc.Attention as K or V (or Shape)`);
    return undefined;
  }
  const pastReaders = v.readers(past, []);
  if (!pastReaders || pastReaders.some((j) => j !== i)) {
    explain(n.name, `past input '${past}' has other readers`);
    return undefined;
  }
  return { concat: i, past, rows, present, shapes: readers.filter(isShape) };
}

/**
 * With N > 1 every past self-attention input must have become a cache that planc.Attention reads causally: one left
 * as a Concat would attend each new token to the later ones. Refuses naming its reader and why it was not rewritten.
 */
function rewriteGraph(g: Graph, model: Model, ctx: PassContext): number {
  const n = stepTokensOf(ctx);
  if (n === 1) return rewriteCaches(g, model, ctx, false);
  const declined = new Map<string, string>();
  const made = rewriteCaches(
    g,
    model,
    {
      ...ctx,
      explain: (pass, node, why) => {
        declined.set(node, why);
        ctx.explain?.(pass, node, why);
      },
    },
    true,
  );
  const left = g.inputs.find(isPastSelfInput);
  if (left === undefined) return made;
  const readers = g.nodes.filter((x) => x.inputs.includes(left));
  const reader = readers.find((x) => declined.has(x.name)) ?? readers.find((x) => x.op !== 'Shape') ?? readers[0];
  const why = reader && declined.get(reader.name);
  throw new PlancError(
    'PLANC_E404',
    (opt) =>
      `${opt('stepTokens')} ${n}: past input '${left}' did not become an in-place cache read by planc.Attention${why ? ` (${why})` : ''}, so its attention cannot be made causal among the new tokens`,
    { graph: g.name, stage: NAME, ...(reader ? { node: reader.name, op: reader.op } : {}) },
  );
}

function rewriteCaches(g: Graph, model: Model, ctx: PassContext, causal: boolean): number {
  const explain = (node: string, why: string) => ctx.explain?.(NAME, node, why);
  const v = new GraphView(g, model, inferGraph(model, g, { annotate: false }, new Diagnostics()));
  let matches = v
    .all('Concat')
    .map((i) => cacheConcat(v, i, explain))
    .filter((m) => m !== undefined);
  // an attention reads both K and V from caches or neither (its kv_len applies to both)
  const cached = new Set(matches.map((m) => m.present));
  const half = new Set<string>();
  for (const n of v.all('planc.Attention').map((i) => g.nodes[i]!)) {
    if (cached.has(n.inputs[1]!) === cached.has(n.inputs[2]!)) continue;
    explain(n.name, 'only one of its K and V comes from a past/present Concat');
    half.add(n.inputs[1]!).add(n.inputs[2]!);
  }
  matches = matches.filter((m) => !half.has(m.present));
  if (matches.length === 0) return 0;
  const pastDim = v.shape(matches[0]!.past)![2]!;
  const rowsDim = v.shape(matches[0]!.rows)![2];
  if (!isSym(pastDim) || pastDim.terms.size !== 1) {
    explain(g.nodes[matches[0]!.concat]!.name, 'the past length is not one symbol');
    return 0;
  }
  if (
    matches.some(
      (m) => !dimEq(v.shape(m.past)![2]!, pastDim) || rowsDim === undefined || !dimEq(v.shape(m.rows)![2]!, rowsDim),
    )
  ) {
    explain(g.nodes[matches[0]!.concat]!.name, 'the caches do not share one past length and step length');
    return 0;
  }
  const rewrites = new Rewrites();
  const sources = matches.map((m) => rowsSource(v, m));
  // kv_len = past + new rows, computed once before the first cache write (host-side shape math)
  const first = matches[0]!;
  const kvLen = `${PAST_LENGTH_INPUT}:plus_new`;
  const lengths = [
    { value: kvLen, dim: dimAdd(pastDim, rowsDim!) },
    { value: PAST_LENGTH_INPUT, dim: pastDim },
  ];
  // Shape(present) = [B, H, past + new, D]: from the step's rows and the lengths; planned before anything changes
  const presentShapes = new Map<number, Node[] | undefined>();
  for (const [k, m] of matches.entries()) {
    for (const j of m.shapes) {
      presentShapes.set(
        j,
        j > first.concat ? rebuildShape(g, g.nodes[j]!, v.shape(m.present)!, [sources[k]!.value], lengths) : undefined,
      );
    }
  }
  const stuck = [...presentShapes].find(([, r]) => !r);
  if (stuck) {
    explain(
      g.nodes[stuck[0]]!.name,
      'a Shape of a present K/V cannot be rebuilt from the step rows and the past length',
    );
    return 0;
  }
  const origin = g.nodes[first.concat]!.origin;
  const stepNodes: Node[] = [
    {
      name: `${kvLen}/shape`,
      op: 'Shape',
      domain: '',
      inputs: [sources[0]!.value],
      outputs: [`${kvLen}/shape`],
      attrs: {},
      origin,
    },
    {
      name: `${kvLen}/axis`,
      op: 'Constant',
      domain: '',
      inputs: [],
      outputs: [`${kvLen}/axis`],
      origin,
      attrs: { value: { kind: 'tensor', value: Tensor.fromNumbers('int64', [], [sources[0]!.seqAxis]) } },
    },
    {
      name: `${kvLen}/step`,
      op: 'Gather',
      domain: '',
      inputs: [`${kvLen}/shape`, `${kvLen}/axis`],
      outputs: [`${kvLen}/step`],
      attrs: { axis: { kind: 'int', value: 0 } },
      origin,
    },
    {
      name: kvLen,
      op: 'Add',
      domain: '',
      inputs: [PAST_LENGTH_INPUT, `${kvLen}/step`],
      outputs: [kvLen],
      attrs: {},
      origin,
    },
  ];
  for (const [j, nodes] of presentShapes) rewrites.replace([j], nodes!);
  const renamed = new Map<string, string>();
  for (const [k, m] of matches.entries()) {
    const concat = g.nodes[m.concat]!;
    const src = sources[k]!;
    const cache = cacheInputName(m.past);
    const written = `${cache}:written`;
    const heads = v.shape(m.past)![1]!;
    const write: Node = {
      name: `${concat.name}:cache_write`,
      op: 'CacheWrite',
      domain: 'planc',
      inputs: [cache, src.value, PAST_LENGTH_INPUT],
      outputs: [written],
      attrs: {
        new_layout: { kind: 'int', value: src.layout },
        num_heads: { kind: 'int', value: typeof heads === 'number' ? heads : 0 },
      },
      origin: concat.origin,
    };
    rewrites.replace([m.concat, ...src.drop], m === first ? [...stepNodes, write] : [write]);
    renamed.set(m.present, written);
    const pd = v.shape(m.past)!;
    g.values.set(cache, { name: cache, type: { dtype: 'float32', shape: cacheDims(pd) } });
    g.inputs[g.inputs.indexOf(m.past)] = cache;
    for (const j of v.uses.get(m.past) ?? []) {
      const r = g.nodes[j]!;
      if (j === m.concat) continue;
      const rebuilt = rebuildShape(g, r, pd, [cache], [{ value: PAST_LENGTH_INPUT, dim: pastDim }]);
      if (!rebuilt) throw new Error(`internal: cannot rebuild ${r.name}`);
      rewrites.replace([j], rebuilt);
    }
  }
  for (const n of v.all('planc.Attention').map((i) => g.nodes[i]!)) {
    if (!renamed.has(n.inputs[1]!)) continue;
    n.inputs = [
      n.inputs[0]!,
      renamed.get(n.inputs[1]!)!,
      renamed.get(n.inputs[2]!) ?? n.inputs[2]!,
      n.inputs[3] ?? '',
      kvLen,
    ];
    // query i (position past + i) sees keys up to past + i: the kernels' causal frontier kv_len - Sq + i
    if (causal) n.attrs = { ...n.attrs, is_causal: { kind: 'int', value: 1 } };
  }
  g.outputs = g.outputs.filter((o) => !renamed.has(o));
  g.inputs.push(PAST_LENGTH_INPUT);
  g.values.set(PAST_LENGTH_INPUT, { name: PAST_LENGTH_INPUT, type: { dtype: 'int64', shape: [], sym: [pastDim] } });
  rewrites.apply(g);
  return matches.length;
}

export const KV_CACHE_IN_PLACE: Pass = graphPass(
  NAME,
  'past/present KV Concat  ⇒  planc.CacheWrite into a preallocated cache input read by planc.Attention',
  rewriteGraph,
);

/** The cache's dims for a past input's dims: the row axis becomes the capacity symbol. */
function cacheDims(past: Dim[]): Dim[] {
  return [past[0]!, past[1]!, sym(CACHE_CAPACITY), past[3]!];
}
