// A batch's source feeds: padded input_ids and attention_mask, int64 tensors from numbers.
import { bigInt64Of, type RtTensor } from '../tensor.ts';

/** int64 [rows, cols] from numbers. */
export function int64(rows: number, cols: number, values: readonly number[]): RtTensor {
  return { dtype: 'int64', dims: [rows, cols], data: bigInt64Of(values) };
}

/** Padded input_ids and attention_mask for a batch of sources. */
export function sourceFeeds(sources: number[][], padId: number): { ids: RtTensor; mask: RtTensor } {
  const len = Math.max(...sources.map((s) => s.length));
  const ids = new Array<number>(sources.length * len).fill(padId);
  const mask = new Array<number>(sources.length * len).fill(0);
  sources.forEach((s, r) => {
    for (let j = 0; j < s.length; j++) {
      ids[r * len + j] = s[j]!;
      mask[r * len + j] = 1;
    }
  });
  return { ids: int64(sources.length, len, ids), mask: int64(sources.length, len, mask) };
}
