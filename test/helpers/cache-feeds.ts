// Feeds for a plan whose decoder step appends to in-place caches, made from onnxruntime-style past/present tensors,
// and the check of one graph of a plan against onnxruntime's outputs.
import * as assert from 'uvu/assert';
import { Tensor } from '../../compiler/tensor.ts';
import { fromRt, toRt } from '../reference/rt-tensors.ts';
import type { Plan } from '../../runtime/plan.ts';
import { float64Outputs } from './float64-reference.ts';
import { relErr } from './ort.ts';
import type { GraphCase } from './seq2seq-feeds.ts';
import { CACHE_INPUT_PREFIX, PAST_LENGTH_INPUT } from '../../compiler/plan/io-names.ts';

/**
 * past_key_values.*.decoder.* [B,H,P,D] → kv_cache.*.decoder.* [B,H,capacity,D] holding the P past rows, NaN after
 * them (rows the step must neither read nor leave unwritten), plus the past length. Other feeds pass through.
 */
export function toCacheFeeds(feeds: Record<string, Tensor>, capacity: number): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  let past = 0;
  for (const [k, v] of Object.entries(feeds)) {
    if (!(k.startsWith('past_key_values.') && k.includes('.decoder.'))) {
      out[k] = v;
      continue;
    }
    const [b, h, p, d] = v.dims as [number, number, number, number];
    past = p;
    const data = new Float32Array(b * h * capacity * d).fill(NaN);
    const src = v.nums;
    for (let r = 0; r < b * h; r++) for (let j = 0; j < p * d; j++) data[r * capacity * d + j] = src[r * p * d + j]!;
    out[`${CACHE_INPUT_PREFIX}${k.slice('past_key_values.'.length)}`] = new Tensor(
      'float32',
      [b, h, capacity, d],
      data,
    );
  }
  out[PAST_LENGTH_INPUT] = Tensor.fromNumbers('int64', [], [past]);
  return out;
}

/** Rows [0, n) of a cache [B,H,capacity,D] as a [B,H,n,D] tensor (what onnxruntime returns as present). */
export function cacheRows(cache: Float32Array, dims: number[], n: number): Tensor {
  const [b, h, cap, d] = dims as [number, number, number, number];
  const out = new Float32Array(b * h * n * d);
  for (let r = 0; r < b * h; r++) out.set(cache.subarray(r * cap * d, r * cap * d + n * d), r * n * d);
  return new Tensor('float32', [b, h, n, d], out);
}

/**
 * How far float32 may be from onnxruntime on this output: within tol, or (where onnxruntime's own float32 output is
 * tol or more from the float64 truth, so the model amplifies rounding past tol and no float32 order of summation can
 * promise tol) no further from the float64 truth than twice onnxruntime's own distance. Only up to 100 tol: further
 * off, the widened copy is not trusted as the truth. Returns the failure, or null.
 */
export async function judge(
  c: GraphCase,
  graph: string,
  name: string,
  got: Tensor,
  truth: () => Promise<Record<string, Tensor>>,
  tol: number,
): Promise<string | null> {
  const want = c.expected[name]!;
  const e = relErr(got, want);
  if (e < tol) return null;
  const fail = `${graph}/${name}: relative error ${e.toExponential(2)}`;
  if (!c.source) return fail;
  let exact: Tensor | undefined;
  try {
    exact = (await truth())[name];
  } catch (e) {
    return `${fail} (no float64 reference: ${(e as Error).message.split('\n')[0]})`;
  }
  if (!exact) return `${fail} (no float64 reference output)`;
  const ortErr = relErr(want, exact),
    ours = relErr(got, exact);
  const facts = `${fail}; from the float64 truth: onnxruntime ${ortErr.toExponential(2)}, planc ${ours.toExponential(2)}`;
  // past 100 tol the float64 copy itself is suspect (a float compared or cast to an integer may round the other way)
  return ortErr >= tol && ortErr < 100 * tol && ours <= 2 * ortErr ? null : facts;
}

/**
 * Runs one graph of a plan and compares every output with onnxruntime's within tol (see judge). A decoder step with
 * in-place caches gets its past as cache feeds (NaN past the valid rows, `capacity` rows) and its present outputs are
 * checked in the caches it appended to.
 */
export async function checkGraph(
  plan: Plan,
  graph: string,
  c: GraphCase,
  tol: number,
  capacity: number,
): Promise<void> {
  const inPlace = plan.inputs(graph).some((i) => i.name === PAST_LENGTH_INPUT);
  const feeds = inPlace ? toCacheFeeds(c.feeds, capacity) : c.feeds;
  const rt = Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, toRt(v)]));
  const out = plan.runSync(graph, rt);
  let exact: Promise<Record<string, Tensor>> | undefined;
  const truth = () => (exact ??= float64Outputs(c.source!, c.feeds));
  const got: Record<string, Tensor> = {};
  for (const [k, want] of Object.entries(c.expected)) {
    if (inPlace && k.startsWith('present.')) {
      const cache = rt[`${CACHE_INPUT_PREFIX}${k.slice('present.'.length)}`]!;
      got[k] = cacheRows(cache.data as Float32Array, cache.dims, want.dims[2]!);
    }
  }
  assert.equal([...Object.keys(out), ...Object.keys(got)].sort(), Object.keys(c.expected).sort());
  for (const [k, v] of Object.entries(out)) got[k] = fromRt(v);
  for (const k of Object.keys(c.expected).sort()) {
    const failure = await judge(c, graph, k, got[k]!, truth, tol);
    assert.ok(failure === null, failure ?? '');
  }
}
