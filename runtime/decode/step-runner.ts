// Runs a plan's decoder step by step for a batch: encoder, first step, then decoder_with_past with the caches carried.
import type { Plan } from '../plan.ts';
import type { RtData, RtTensor } from '../tensor.ts';
import { vocabFeeds } from '../vocab.ts';
import { hasInPlaceCache, KVCaches } from './kv-cache.ts';

type Feeds = Record<string, RtTensor>;

/** Model ids a decoder needs. */
export interface DecodeIds {
  startId: number;
  eosId: number;
  padId: number;
}

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

/**
 * One batch's decoder state. `out` holds the last step's outputs (logits, or topk_logprobs/topk_ids of a plan with
 * planc.ProjectTopK). `select(rows)` says which rows the next step continues; `step(tokens)` runs it. With an in-place
 * cache plan the self-attention caches live in KVCaches (appended natively); otherwise past/present are carried.
 */
export class StepRunner {
  out: Feeds;
  private mask: RtTensor;
  private encKV: Feeds;
  private decKV: Feeds = {};
  private readonly caches?: KVCaches;
  private rows: number;
  /** Shortlist plans: the batch's vocab_active mask, fed to every decoder step (runtime/vocab.ts). */
  private readonly vocab: Feeds;

  /** maxRows: the most rows a step will run (beams × sentences); capacity: the most tokens a row will hold. */
  constructor(private readonly plan: Plan, sources: number[][], d: DecodeIds, maxRows: number, capacity: number) {
    const { ids, mask } = sourceFeeds(sources, d.padId);
    const enc = plan.runSync('encoder', { input_ids: ids, attention_mask: mask }).last_hidden_state!;
    const b = sources.length;
    this.rows = b;
    this.vocab = vocabFeeds(plan.header, sources);
    this.out = plan.runSync('decoder', { input_ids: int64(b, 1, new Array<number>(b).fill(d.startId)), encoder_attention_mask: mask, encoder_hidden_states: enc, ...this.vocab });
    this.mask = mask;
    this.encKV = pastFrom(this.out, '.encoder.');
    if (hasInPlaceCache(plan)) {
      this.caches = new KVCaches(plan, Math.max(maxRows, b), capacity);
      this.caches.fill(this.out);
    } else {
      this.decKV = pastFrom(this.out, '.decoder.');
    }
  }

  /**
   * The next step continues rows `from` of this one (row i ← from[i]). The encoder mask and K/V rows are gathered too
   * unless `sameSources` says each row keeps the source it had (beams of one sentence share them).
   */
  select(from: number[], sameSources = false): void {
    const identity = from.length === this.rows && from.every((r, i) => r === i);
    this.rows = from.length;
    if (!sameSources && !identity) {
      this.mask = gatherRows(this.mask, from);
      this.encKV = gatherAll(this.encKV, from);
    }
    if (this.caches) this.caches.select(from);
    else this.decKV = identity ? pastFrom(this.out, '.decoder.') : gatherAll(pastFrom(this.out, '.decoder.'), from);
  }

  /** Runs decoder_with_past on one token per row. */
  step(tokens: number[]): void {
    const rows = tokens.length;
    const base = { input_ids: int64(rows, 1, tokens), encoder_attention_mask: this.mask, ...this.encKV, ...this.vocab };
    if (this.caches) {
      this.out = this.plan.runSync('decoder_with_past', { ...base, ...this.caches.feeds() });
      this.caches.length++;
    } else {
      this.out = this.plan.runSync('decoder_with_past', { ...base, ...this.decKV });
    }
  }
}
