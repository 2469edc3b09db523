// Feeds for a plan whose decoder step appends to in-place caches, made from onnxruntime-style past/present tensors.
import { Tensor } from '../../compiler/tensor.ts';
import { PAST_LENGTH_INPUT } from '../../runtime/decode/kv-cache.ts';

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
    out[`kv_cache.${k.slice('past_key_values.'.length)}`] = new Tensor('float32', [b, h, capacity, d], data);
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
