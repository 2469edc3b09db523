// The decoding conventions of transformers' generate(): any of the eos ids ends, forced bos/eos, banned tokens.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { PlanDecoding } from '../../compiler/plan/types.ts';
import type { DecodeIds } from './step-runner.ts';

/** A model's decoding ids and conventions (absent: the model does not use it). */
export interface Conventions extends DecodeIds {
  /** Every id that ends a sentence (default [eosId]). */
  eosIds?: number[];
  /** Forced as the first generated token (generate()'s ForcedBOSTokenLogitsProcessor). */
  forcedBosId?: number;
  /** Forced at the last allowed step (ForcedEOSTokenLogitsProcessor). */
  forcedEosId?: number;
  /** Never generated (suppress_tokens). */
  suppressTokens?: number[];
  /** Not generated at the first step that forced_bos leaves free (begin_suppress_tokens). */
  beginSuppressTokens?: number[];
  /** bad_words_ids: [t] bans t every step; [a, b, t] bans t right after a, b (the decoder start counts as history). */
  badWords?: number[][];
  /** Every eos id is banned before this many generated tokens (min_new_tokens; min_length - 1). */
  minNewTokens?: number;
  /** no_repeat_ngram_size n: a token that would repeat an n-gram of [start, ...generated] is banned. */
  noRepeatNgramSize?: number;
  /** encoder_no_repeat_ngram_size n: a token that would complete an n-gram of the source is banned. */
  encoderNoRepeatNgramSize?: number;
  /** repetition_penalty: the scores of the decoder start and generated tokens × p when negative, else ÷ p (1 = none). */
  repetitionPenalty?: number;
}

/** A plan's (or a model's) conventions, with the given start/eos/pad ids or its own (pad defaults to the eos). */
export function conventionsOf(d: PlanDecoding, ids?: DecodeIds): Conventions {
  const list = <T>(v: T[] | undefined) => (v?.length ? v : undefined);
  if (!ids && (d.decoderStartId === undefined || d.eosId === undefined))
    throw new PlancError('PLANC_E011', 'the model records no decoder start id or eos id');
  return {
    ...(ids ?? { startId: d.decoderStartId!, eosId: d.eosId!, padId: d.padId ?? d.eosId! }),
    eosIds: list(d.eosIds),
    forcedBosId: d.forcedBosId,
    forcedEosId: d.forcedEosId,
    suppressTokens: list(d.suppressTokens),
    beginSuppressTokens: list(d.beginSuppressTokens),
    badWords: list(d.badWords?.map((w) => w.ids)),
    minNewTokens: Math.max(d.minNewTokens ?? 0, (d.minLength ?? 0) - 1) || undefined,
    noRepeatNgramSize: d.noRepeatNgramSize || undefined,
    encoderNoRepeatNgramSize: d.encoderNoRepeatNgramSize || undefined,
    repetitionPenalty: d.repetitionPenalty !== undefined && d.repetitionPenalty !== 1 ? d.repetitionPenalty : undefined,
  };
}

const NONE: ReadonlySet<number> = new Set();

/**
 * The conventions compiled for decoding. Processed like generate() does it: banned tokens get -inf after the
 * log-softmax (the other tokens keep their log-probs), a forced token replaces the whole distribution by log-prob 0
 * for itself (so it adds 0 to a hypothesis' score and 1 to its length), and forced eos wins over forced bos.
 */
export class DecodingRules {
  private readonly eos: ReadonlySet<number>;
  private readonly always: ReadonlySet<number>;
  private readonly sequences: number[][];
  private readonly begin: number[];
  private readonly beginStep: number;
  private readonly minNew: number;
  /**
   * The most tokens banned at any one step (an upper bound), without no_repeat_ngram_size's bans, which grow with the
   * output: a top-k plan is exact for them while a row's k best hold the candidates besides them, and a step where
   * they do not is an error naming the --topk needed (scores.ts positionTop).
   */
  readonly maxBanned: number;

  constructor(readonly c: Conventions) {
    this.eos = new Set(c.eosIds ?? [c.eosId]);
    const words = c.badWords ?? [];
    // like generate(): a bad word that is just an eos id is dropped
    const single = words.filter((w) => w.length === 1 && !this.eos.has(w[0]!)).map((w) => w[0]!);
    this.always = new Set([...(c.suppressTokens ?? []), ...single]);
    this.sequences = words.filter((w) => w.length > 1);
    this.begin = c.beginSuppressTokens ?? [];
    this.beginStep = c.forcedBosId === undefined ? 0 : 1;
    this.minNew = c.minNewTokens ?? 0;
    this.maxBanned =
      this.always.size + this.sequences.length + this.begin.length + (this.minNew > 0 ? this.eos.size : 0);
  }

  /** generate()'s repetition_penalty (1 = none). */
  get penalty(): number {
    return this.c.repetitionPenalty ?? 1;
  }

  /** The tokens the repetition penalty applies to after `generated`: the decoder start and the generated ones. */
  seen(generated: readonly number[]): ReadonlySet<number> {
    return new Set([this.c.startId, ...generated]);
  }

  isEos(tok: number): boolean {
    return this.eos.has(tok);
  }

  /** The token forced at step `step` (0 = the first generated token); `last`: the last step the length cap allows. */
  forced(step: number, last: boolean): number | undefined {
    if (last && this.c.forcedEosId !== undefined) return this.c.forcedEosId;
    return step === 0 ? this.c.forcedBosId : undefined;
  }

  /**
   * The tokens banned after `generated` (the tokens so far, without the decoder start); `source`: the sentence's
   * source ids, for encoder_no_repeat_ngram_size.
   */
  banned(generated: readonly number[], source?: readonly number[]): ReadonlySet<number> {
    const step = generated.length;
    const at = (h: number) => (h === 0 ? this.c.startId : generated[h - 1]!); // h indexes [start, ...generated]
    let extra: number[] | undefined;
    if (step === this.beginStep && this.begin.length) extra = [...this.begin];
    if (step < this.minNew) (extra ??= []).push(...this.eos);
    const n = this.c.noRepeatNgramSize ?? 0;
    if (n > 0 && step + 2 >= n) {
      // generate()'s NoRepeatNGramLogitsProcessor over h = [start, ...generated]: the n-grams whose first n - 1 tokens
      // are h's last n - 1 ban their last token
      const h = [this.c.startId, ...generated];
      const L = h.length;
      for (let i = 0; i + n <= L; i++) {
        let match = true;
        for (let j = 0; j < n - 1 && match; j++) match = h[i + j] === h[L + 1 - n + j];
        if (match) (extra ??= []).push(h[i + n - 1]!);
      }
    }
    const e = this.c.encoderNoRepeatNgramSize ?? 0;
    if (e > 0 && source && step + 2 >= e) {
      // EncoderNoRepeatNGramLogitsProcessor: the source's e-grams whose first e - 1 tokens are the last e - 1 of
      // [start, ...generated] ban their last token
      const L = step + 1;
      const at = (j: number) => (j === 0 ? this.c.startId : generated[j - 1]!);
      for (let i = 0; i + e <= source.length; i++) {
        let match = true;
        for (let j = 0; j < e - 1 && match; j++) match = source[i + j] === at(L + 1 - e + j);
        if (match) (extra ??= []).push(source[i + e - 1]!);
      }
    }
    for (const w of this.sequences) {
      const p = w.length - 1;
      if (p > step + 1) continue;
      let match = true;
      for (let j = 0; j < p && match; j++) match = at(step + 1 - p + j) === w[j];
      if (match) (extra ??= []).push(w[p]!);
    }
    if (!extra) return this.always.size ? this.always : NONE;
    return new Set([...this.always, ...extra]);
  }

  /** Candidates a step ranks: 1 for greedy; for beam k, max(2, 1 + eos ids) × k, as generate() keeps. */
  candidates(beam: number): number {
    return beam === 1 ? 1 : Math.max(2, 1 + this.eos.size) * beam;
  }

  /**
   * The k a planc.ProjectTopK plan needs for this beam to be exact: the candidates plus every token that can be
   * banned at one step. Of a row's top (n + m) tokens at most m are banned, so the first n allowed ones are exactly
   * the n best allowed tokens of the full vocabulary, with the log-probs of the full log-softmax.
   */
  topkNeeded(beam: number): number {
    return this.candidates(beam) + this.maxBanned;
  }
}

/** New tokens the model's generation config allows: max_new_tokens, else max_length - 1 (it counts the start token). */
export function maxNewTokensOf(d: PlanDecoding): number | undefined {
  if (d.maxNewTokens !== undefined) return d.maxNewTokens;
  return d.maxLength !== undefined && d.maxLength > 1 ? d.maxLength - 1 : undefined;
}
