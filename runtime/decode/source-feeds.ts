// A batch's source feeds: padded input_ids and attention_mask, int64 tensors from numbers.
import type { RtTensor } from '../tensor.ts';

/** int64 [rows, cols] from numbers. */
export function int64(rows: number, cols: number, values: number[]): RtTensor {
  return { dtype: 'int64', dims: [rows, cols], data: BigInt64Array.from(values, (v) => BigInt(v)) };
}

/** Padded input_ids and attention_mask for a batch of sources. */
export function sourceFeeds(sources: number[][], padId: number): { ids: RtTensor; mask: RtTensor } {
  const len = Math.max(...sources.map((s) => s.length));
  const ids = sources.flatMap((s) => [...s, ...new Array<number>(len - s.length).fill(padId)]);
  const mask = sources.flatMap((s) => [...s.map(() => 1), ...new Array<number>(len - s.length).fill(0)]);
  return { ids: int64(sources.length, len, ids), mask: int64(sources.length, len, mask) };
}
