// Greedy decoding over a Plan with batch shrinking: finished sentences leave the batch (their cache rows are dropped).
import type { Plan } from '../plan.ts';
import type { RtData, RtTensor } from '../tensor.ts';

/** One decoded hypothesis: ids without start and eos, the sum of its token log-probs, its length (tokens + eos if any). */
export interface Hypothesis {
  ids: number[];
  logProb: number;
  length: number;
}

/** Model ids a decoder needs. */
export interface DecodeIds {
  startId: number;
  eosId: number;
  padId: number;
}

type Feeds = Record<string, RtTensor>;

/** Rows `rows` of a tensor whose first dim is the batch, in that order (a fresh copy). */
export function gatherRows(t: RtTensor, rows: number[]): RtTensor {
  const rowSize = t.dims[0] ? t.data.length / t.dims[0] : 0;
  const Ctor = t.data.constructor as { new (n: number): RtData };
  const data = new Ctor(rows.length * rowSize);
  rows.forEach((r, i) => (data as Float32Array).set((t.data as Float32Array).subarray(r * rowSize, (r + 1) * rowSize), i * rowSize));
  return { dtype: t.dtype, dims: [rows.length, ...t.dims.slice(1)], data };
}

/** Gathers the same rows of every tensor of a record. */
export function gatherAll(feeds: Feeds, rows: number[]): Feeds {
  return Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, gatherRows(v, rows)]));
}

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

/** The present.* outputs whose name contains `part` ('.encoder.' or '.decoder.'), renamed past_key_values.*. */
export function pastFrom(outputs: Feeds, part: string): Feeds {
  const out: Feeds = {};
  for (const [k, v] of Object.entries(outputs)) if (k.startsWith('present.') && k.includes(part)) out[k.replace('present.', 'past_key_values.')] = v;
  return out;
}

/** Encoder on the batch, then the first decoder step on the start token: the state every decoder starts from. */
export function firstStep(plan: Plan, sources: number[][], d: DecodeIds): { mask: RtTensor; encKV: Feeds; step: Feeds } {
  const { ids, mask } = sourceFeeds(sources, d.padId);
  const enc = plan.runSync('encoder', { input_ids: ids, attention_mask: mask }).last_hidden_state!;
  const b = sources.length;
  const step = plan.runSync('decoder', { input_ids: int64(b, 1, new Array<number>(b).fill(d.startId)), encoder_attention_mask: mask, encoder_hidden_states: enc });
  return { mask, encKV: pastFrom(step, '.encoder.'), step };
}

/** Argmax of row `r` of logits [rows, steps, vocab] at the last step. */
export function argmaxRow(logits: RtTensor, r: number): number {
  const [, t, v] = logits.dims as [number, number, number];
  const x = logits.data as Float32Array;
  const base = (r * t + t - 1) * v;
  let best = 0;
  for (let k = 1; k < v; k++) if (x[base + k]! > x[base + best]!) best = k;
  return best;
}

/** log(sum(exp(x))) over row `r` of logits at the last step, in float64. */
export function logSumExpRow(logits: RtTensor, r: number): number {
  const [, t, v] = logits.dims as [number, number, number];
  const x = logits.data as Float32Array;
  const base = (r * t + t - 1) * v;
  let max = -Infinity;
  for (let k = 0; k < v; k++) if (x[base + k]! > max) max = x[base + k]!;
  let sum = 0;
  for (let k = 0; k < v; k++) sum += Math.exp(x[base + k]! - max);
  return max + Math.log(sum);
}

/** The logit of token `tok` in row `r` at the last step. */
export function logitAt(logits: RtTensor, r: number, tok: number): number {
  const [, t, v] = logits.dims as [number, number, number];
  return (logits.data as Float32Array)[(r * t + t - 1) * v + tok]!;
}

/**
 * Greedy decoding of one batch; maxLens[i] caps sentence i's generated tokens (eos included). Each step, sentences that
 * emitted eos or hit their cap leave the batch: the rows of the encoder mask, the encoder K/V and the self-attention
 * cache are compacted, so later steps compute only live rows. Log-probs are computed only when `scores` is set.
 */
export function greedyBatch(plan: Plan, sources: number[][], maxLens: number[], d: DecodeIds, scores: boolean): Hypothesis[] {
  const out: Hypothesis[] = sources.map(() => ({ ids: [], logProb: 0, length: 0 }));
  let { mask, encKV, step } = firstStep(plan, sources, d);
  let live = sources.map((_, i) => i);
  for (let t = 0; ; t++) {
    const logits = step.logits!;
    const next: number[] = [];
    const keep: number[] = [];
    live.forEach((i, r) => {
      const tok = argmaxRow(logits, r);
      const h = out[i]!;
      if (scores) h.logProb += logitAt(logits, r, tok) - logSumExpRow(logits, r);
      h.length++;
      if (tok !== d.eosId) h.ids.push(tok);
      if (tok === d.eosId || t + 1 >= maxLens[i]!) return;
      keep.push(r);
      next.push(tok);
    });
    if (keep.length === 0) return out;
    let decKV = pastFrom(step, '.decoder.');
    if (keep.length < live.length) {
      mask = gatherRows(mask, keep);
      encKV = gatherAll(encKV, keep);
      decKV = gatherAll(decKV, keep);
      live = keep.map((r) => live[r]!);
    }
    step = plan.runSync('decoder_with_past', { input_ids: int64(keep.length, 1, next), encoder_attention_mask: mask, ...encKV, ...decKV });
  }
}
