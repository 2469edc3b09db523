// Feeds for a plan whose decoder step appends to in-place caches, made from onnxruntime-style past/present tensors,
// and the check of one graph of a plan against onnxruntime's outputs.
import * as assert from 'uvu/assert';
import { Tensor } from '../../compiler/tensor.ts';
import { fromRt, toRt } from '../../bench/reference/rt-tensors.ts';
import type { Plan } from '../../runtime/plan.ts';
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
    if (!(k.startsWith('past_key_values.') && k.includes('.decoder.'))) { out[k] = v; continue; }
    const [b, h, p, d] = v.dims as [number, number, number, number];
    past = p;
    const data = new Float32Array(b * h * capacity * d).fill(NaN);
    const src = v.nums;
    for (let r = 0; r < b * h; r++) for (let j = 0; j < p * d; j++) data[r * capacity * d + j] = src[r * p * d + j]!;
    out[`${CACHE_INPUT_PREFIX}${k.slice('past_key_values.'.length)}`] = new Tensor('float32', [b, h, capacity, d], data);
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
 * Runs one graph of a plan and compares every output with onnxruntime's within tol. A decoder step with in-place caches
 * gets its past as cache feeds (NaN past the valid rows, `capacity` rows) and its present outputs are checked in the
 * caches it appended to.
 */
export function checkGraph(plan: Plan, graph: string, c: GraphCase, tol: number, capacity: number): void {
  const inPlace = plan.inputs(graph).some((i) => i.name === PAST_LENGTH_INPUT);
  const feeds = inPlace ? toCacheFeeds(c.feeds, capacity) : c.feeds;
  const rt = Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, toRt(v)]));
  const out = plan.runSync(graph, rt);
  const expected = { ...c.expected };
  if (inPlace) {
    for (const [k, want] of Object.entries(c.expected)) {
      if (!k.startsWith('present.')) continue;
      const cache = rt[`${CACHE_INPUT_PREFIX}${k.slice('present.'.length)}`]!;
      const e = relErr(cacheRows(cache.data as Float32Array, cache.dims, want.dims[2]!), want);
      assert.ok(e < tol, `${graph}/${k} (in the cache): relative error ${e.toExponential(2)}`);
      delete expected[k];
    }
  }
  assert.equal(Object.keys(out).sort(), Object.keys(expected).sort());
  for (const [k, want] of Object.entries(expected)) {
    const e = relErr(fromRt(out[k]!), want);
    assert.ok(e < tol, `${graph}/${k}: relative error ${e.toExponential(2)}`);
  }
}
