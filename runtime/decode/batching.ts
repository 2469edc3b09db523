// Batching for decoding: sort by length, cut by sentences or tokens, run, restore the input order.
import { badOption, type DecodingOptions } from './options.ts';

/** Sentences per batch: batchSize, never more than the plan's maxBatch rows (sentences × beamSize). */
export function sentencesPerBatch(o: DecodingOptions, maxBatch: number): number {
  const fit = Math.floor(maxBatch / o.beamSize);
  if (fit < 1) badOption('beamSize', o.beamSize, `in [1, ${maxBatch}] (the plan's maxBatch)`);
  return Math.min(o.batchSize, fit);
}

/** Source indices in decoding order: longest first (stable) when sortByLength, else input order. */
export function decodingOrder(lengths: number[], sortByLength: boolean): number[] {
  const order = lengths.map((_, i) => i);
  return sortByLength ? order.sort((a, b) => lengths[b]! - lengths[a]! || a - b) : order;
}

/** Cuts the order into batches of at most `perBatch` sentences and, when batchTokens > 0, sentences × longest ≤ batchTokens. */
export function makeBatches(lengths: number[], o: DecodingOptions, maxBatch: number): number[][] {
  const perBatch = sentencesPerBatch(o, maxBatch);
  const batches: number[][] = [];
  let cur: number[] = [];
  let longest = 0;
  for (const i of decodingOrder(lengths, o.sortByLength)) {
    const nextLongest = Math.max(longest, lengths[i]!);
    const overTokens = o.batchTokens > 0 && (cur.length + 1) * nextLongest > o.batchTokens;
    if (cur.length > 0 && (cur.length >= perBatch || overTokens)) {
      batches.push(cur);
      cur = [];
      longest = 0;
    }
    cur.push(i);
    longest = Math.max(longest, lengths[i]!);
  }
  if (cur.length > 0) batches.push(cur);
  return batches;
}

/**
 * Runs `decode` on each batch of sources (and their indices in `sources`) and returns its results in the original
 * order. It yields to the event loop between batches (a synchronous decode blocks it only for one batch at a time).
 */
export async function runBatches<R>(
  sources: number[][],
  batches: number[][],
  decode: (batch: number[][], indices: number[]) => R[] | Promise<R[]>,
): Promise<R[]> {
  const out = new Array<R>(sources.length);
  for (const [n, batch] of batches.entries()) {
    if (n > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    const results = await decode(
      batch.map((i) => sources[i]!),
      batch,
    );
    batch.forEach((i, j) => (out[i] = results[j]!));
  }
  return out;
}
