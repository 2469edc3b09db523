// DecodingOptions: the one options type for translateIds (greedy, beam, Jacobi, batching), its defaults and its validation.
import { fail } from '../../compiler/diagnostics-catalog.ts';
import type { Text } from '../../compiler/diagnostics.ts';
import type { JacobiSentenceTrace } from './jacobi-trace.ts';

/** How to decode. Every field has a default (DEFAULT_DECODING_OPTIONS); pass a Partial to translateIds. */
export interface DecodingOptions {
  /**
   * The decoding strategy by name (runtime/decode/strategy.ts STRATEGIES: greedy, beam, and the parallel Jacobi ones pj,
   * pgj, hgj and n-gram lookup drafting of runtime/decode/jacobi.ts, whose output equals greedy's); 'auto' = greedy for
   * beamSize 1, else beam.
   * Default 'auto'.
   */
  strategy: string;
  /**
   * Block size b of the pgj and hgj strategies: tokens one decoder step refines in parallel (the plan must take b tokens
   * per step: --step-tokens b or more). pj's block is the whole sentence, in chunks of the plan's step tokens. Default 3
   * (as in the paper). Range [1, 256].
   */
  jacobiBlock: number;
  /**
   * Chunk size k of strategy 'hrt' (docs/hrt.md, runtime/decode/hrt.ts): Skip-AT generates every k-th token, one
   * Skip-CMLM pass fills the rest; 1 = plain autoregressive decoding with the HRT model. It must be one of the plan's
   * HRT chunk sizes (its model's config.json hrt.chunk_sizes, and 1). Default 0: the plan's smallest chunk size above 1.
   * Range [0, 64]; other strategies take only 0.
   */
  chunk: number;
  /**
   * Strategy 'hrt' with beamSize > 1: the best Skip-AT hypotheses the Skip-CMLM pass fills (b_nat ≤ b_at = beamSize);
   * the translation is the one with the best sum of both stages' log-probs. Default 0: beamSize. Range [0, 64].
   */
  natBeams: number;
  /**
   * Beams per sentence; 1 = greedy. Default: the plan's num_beams (generation_config.json), else 1. Range [1, 64];
   * beamSize × sentences per batch must fit the plan's maxBatch.
   */
  beamSize: number;
  /**
   * Absolute cap on generated tokens (counting the eos). Default: the plan's max_new_tokens (or max_length - 1), else
   * 256; always capped by the plan's maxTgtLen. Range [1, 65536]. A forced_eos_token_id is forced at the last step.
   */
  maxLength: number;
  /** Per-sentence cap: ceil(maxLengthRatio × source length + maxLengthConstant) tokens; 0 turns it off. Default 0. Range [0, 100]. */
  maxLengthRatio: number;
  /** The constant added in the ratio cap. Default 10. Range [0, 65536]. */
  maxLengthConstant: number;
  /**
   * Length penalty alpha (generate()'s length_penalty): a finished hypothesis' score is (sum of token log-probs) /
   * length^alpha, where length counts the generated tokens including the eos when present. 0 = raw log-prob sum; a
   * negative alpha favours shorter outputs. Default: the plan's length_penalty, else 1 (mean log-prob). Range [-10, 10].
   */
  lengthPenalty: number;
  /**
   * When beam search is done with a sentence (generate()'s early_stopping, runtime/decode/beam-rules.ts):
   * true = as soon as it has beamSize finished hypotheses; false = when the best running beam, scored at its current
   * length, cannot beat the worst of beamSize finished ones; 'never' = the same with the best running beam scored at
   * the maximum length when lengthPenalty > 0 (canonical beam search). Default: the plan's early_stopping, else false.
   */
  earlyStopping: boolean | 'never';
  /**
   * No eos before this many generated tokens (generate()'s min_new_tokens; a plan's min_length counts the decoder start
   * token, so it gives min_length - 1). Default: from the plan, else 0. Range [0, 65536].
   */
  minNewTokens: number;
  /**
   * generate()'s no_repeat_ngram_size n: no n-gram occurs twice in [decoder start, ...output] (a token that would repeat
   * one is banned); 0 = off. Default: the plan's, else 0. Range [0, 65536].
   */
  noRepeatNgramSize: number;
  /**
   * generate()'s encoder_no_repeat_ngram_size n: no n-gram of the source ids occurs in the output; 0 = off. Greedy and
   * beam only. Default: the plan's, else 0. Range [0, 65536].
   */
  encoderNoRepeatNgramSize: number;
  /**
   * generate()'s repetition_penalty p: the scores of the decoder start and the tokens so far are × p when negative,
   * else ÷ p (beam search: the log-probs; greedy: the logits, so it needs a plan made with --topk 0); 1 = off. Beam
   * search on a top-k plan is exact where the plan's k shows it (else that step is an error naming the fix). Not
   * with the Jacobi strategies. Default: the plan's, else 1. Range [0.01, 100].
   */
  repetitionPenalty: number;
  /**
   * generate()'s do_sample: draw each token from the processed distribution (runtime/decode/sampling.ts) instead of
   * taking the best: generate()'s sample mode, with strategy greedy / beamSize 1 (beam sampling is not implemented,
   * and the Jacobi strategies refuse it). The logits processors come first, then temperature, topK, topP. A sentence
   * draws from its own random stream, (seed, its index in the call), so its sample does not depend on the rest of the
   * batch. On a top-k plan it needs 1 ≤ topK < the plan's k - the ids a step may ban (else an error naming the fix).
   * Default: the plan's do_sample, else false.
   */
  doSample: boolean;
  /** generate()'s temperature: the scores are divided by it before top_k / top_p (sampling only). Default: the plan's, else 1. A number > 0. */
  temperature: number;
  /** generate()'s top_k: sample among the topK best tokens (and those tied with the last); 0 = all. Default: the plan's, else 50 (generate()'s). Range [0, 2^31 - 1]. */
  topK: number;
  /** generate()'s top_p: sample among the fewest best tokens whose probability reaches topP; 1 = all. Default: the plan's, else 1. In (0, 1]. */
  topP: number;
  /** The random seed of sampling: the same seed, sources and options give the same samples. Default 0. An integer in [0, 2^53 - 1]. */
  seed: number;
  /**
   * Sampling: sentence j of the call draws from the stream of (seed, sampleIndices[j]) instead of (seed, j), so that a
   * caller translating one input in pieces (planc translate's chunks) samples each sentence as one call would. One
   * integer in [0, 2^53 - 1] per sentence; default unset (each sentence's index).
   */
  sampleIndices?: number[] | undefined;
  /** Return each result's score (length-penalized log-prob, as above). Default false. */
  returnScores: boolean;
  /**
   * Return this many best hypotheses (the best first) as `alternatives` (generate()'s num_return_sequences, in its order
   * and with its sequences_scores); 0 = none. Default 0. Range [0, beamSize].
   */
  returnAlternatives: number;
  /** Sentences per batch (before × beamSize). Default 32; capped by the plan's maxBatch / beamSize. Range [1, 65536]. */
  batchSize: number;
  /** When > 0, cut batches by tokens instead: sentences × longest source ≤ batchTokens (one sentence always fits). Default 0. Range [0, 2^24]. */
  batchTokens: number;
  /** Sort sources by length before batching (less padding); results come back in input order either way. Default true. */
  sortByLength: boolean;
  /**
   * The target language: the token of that name in the plan's tokenizer (en_XX, __en__, eng_Latn, ...) is forced as the
   * first generated token instead of the model's forced_bos_token_id. Default '' (the model's own).
   */
  targetLang: string;
  /** Sources over the plan's maxSrcLen keep their first tokens (and their final eos) instead of failing. Default false. */
  truncate: boolean;
  /**
   * Jacobi strategies (pj, pgj, hgj) only: called with each sentence's trace (drafts, fixed-at iterations, dependency
   * graph: runtime/decode/jacobi-trace.ts) as its batch ends, in decoding order (JacobiTraceCollector restores the
   * input order). Nothing is recorded when unset (the default).
   */
  jacobiTrace?: ((trace: JacobiSentenceTrace) => void) | undefined;
}

export const DEFAULT_DECODING_OPTIONS: Readonly<DecodingOptions> = Object.freeze({
  strategy: 'auto',
  jacobiBlock: 3,
  chunk: 0,
  natBeams: 0,
  beamSize: 1,
  maxLength: 256,
  maxLengthRatio: 0,
  maxLengthConstant: 10,
  lengthPenalty: 1,
  earlyStopping: false,
  minNewTokens: 0,
  noRepeatNgramSize: 0,
  encoderNoRepeatNgramSize: 0,
  repetitionPenalty: 1,
  doSample: false,
  temperature: 1,
  topK: 50,
  topP: 1,
  seed: 0,
  sampleIndices: undefined,
  returnScores: false,
  returnAlternatives: 0,
  batchSize: 32,
  batchTokens: 0,
  sortByLength: true,
  targetLang: '',
  truncate: false,
  jacobiTrace: undefined,
});

type NumKey =
  | 'jacobiBlock'
  | 'chunk'
  | 'natBeams'
  | 'beamSize'
  | 'maxLength'
  | 'maxLengthRatio'
  | 'maxLengthConstant'
  | 'lengthPenalty'
  | 'minNewTokens'
  | 'noRepeatNgramSize'
  | 'encoderNoRepeatNgramSize'
  | 'repetitionPenalty'
  | 'topK'
  | 'seed'
  | 'returnAlternatives'
  | 'batchSize'
  | 'batchTokens';

/** Numeric options: [min, max, integer?]. */
const RANGES: Record<NumKey, [number, number, boolean]> = {
  jacobiBlock: [1, 256, true],
  chunk: [0, 64, true],
  natBeams: [0, 64, true],
  beamSize: [1, 64, true],
  maxLength: [1, 65536, true],
  maxLengthRatio: [0, 100, false],
  maxLengthConstant: [0, 65536, true],
  lengthPenalty: [-10, 10, false],
  minNewTokens: [0, 65536, true],
  noRepeatNgramSize: [0, 65536, true],
  encoderNoRepeatNgramSize: [0, 65536, true],
  repetitionPenalty: [0.01, 100, false],
  topK: [0, 2 ** 31 - 1, true],
  seed: [0, Number.MAX_SAFE_INTEGER, true],
  returnAlternatives: [0, 64, true],
  batchSize: [1, 65536, true],
  batchTokens: [0, 2 ** 24, true],
};

function bad(why: string): never {
  fail('decodingOptions', { why });
}

/** The error for option `name` = `v` (PLANC_E411; structured: option, value, expected), worded with the library's names. */
export function badOption(name: string, v: unknown, expected: Text): never {
  fail('badDecodingOption', { option: name, value: v, expected });
}

function checkNumber(name: NumKey, v: unknown): void {
  const [min, max, int] = RANGES[name];
  const kind = int ? 'an integer' : 'a number';
  if (typeof v !== 'number' || !Number.isFinite(v) || (int && !Number.isInteger(v)) || v < min || v > max) {
    badOption(name, v, `${kind} in [${min}, ${max}]`);
  }
}

function checkBoolean(name: 'returnScores' | 'sortByLength' | 'truncate' | 'doSample', v: unknown): void {
  if (typeof v !== 'boolean') badOption(name, v, 'true or false');
}

/**
 * The full options from a partial one over `defaults` (a plan's own: planDefaults in translate-ids.ts), or a
 * PlancError PLANC_E411 naming the bad option and its allowed range.
 */
export function validateDecodingOptions(
  partial: Partial<DecodingOptions> = {},
  defaults: Partial<DecodingOptions> = {},
): DecodingOptions {
  if (typeof partial !== 'object' || partial === null) bad('options must be an object');
  for (const k of Object.keys(partial)) {
    if (!(k in DEFAULT_DECODING_OPTIONS))
      bad(`unknown option '${k}' (known: ${Object.keys(DEFAULT_DECODING_OPTIONS).join(', ')})`);
  }
  const o: DecodingOptions = { ...DEFAULT_DECODING_OPTIONS, ...defaults };
  for (const [k, v] of Object.entries(partial)) if (v !== undefined) (o as unknown as Record<string, unknown>)[k] = v;
  for (const k of Object.keys(RANGES) as NumKey[]) checkNumber(k, o[k]);
  checkBoolean('returnScores', o.returnScores);
  checkBoolean('sortByLength', o.sortByLength);
  checkBoolean('truncate', o.truncate);
  checkBoolean('doSample', o.doSample);
  if (typeof o.temperature !== 'number' || !Number.isFinite(o.temperature) || !(o.temperature > 0))
    badOption('temperature', o.temperature, 'a number > 0 (for greedy decoding, doSample false)');
  if (typeof o.topP !== 'number' || !(o.topP > 0 && o.topP <= 1)) badOption('topP', o.topP, 'a number in (0, 1]');
  if (o.sampleIndices !== undefined) {
    const si: unknown = o.sampleIndices;
    if (!Array.isArray(si)) badOption('sampleIndices', si, 'undefined or an array of integers (one per sentence)');
    const at = si.findIndex((i: unknown) => !(Number.isSafeInteger(i) && (i as number) >= 0));
    if (at >= 0)
      fail('badDecodingOption', {
        option: `sampleIndices[${at}]`,
        value: si[at],
        expected: `an integer in [0, ${Number.MAX_SAFE_INTEGER}]`,
      });
  }
  if (o.earlyStopping !== true && o.earlyStopping !== false && o.earlyStopping !== 'never')
    badOption('earlyStopping', o.earlyStopping, "true, false or 'never'");
  if (typeof o.strategy !== 'string') badOption('strategy', o.strategy, 'a strategy name such as greedy or beam');
  if (typeof o.targetLang !== 'string') badOption('targetLang', o.targetLang, 'a token name such as en_XX');
  if (o.jacobiTrace !== undefined && typeof o.jacobiTrace !== 'function')
    bad('jacobiTrace must be a function (one trace per sentence) or undefined');
  if (o.chunk !== 0 && o.strategy !== 'hrt')
    badOption('chunk', o.chunk, "0 unless strategy is 'hrt' (the chunk size of HRT decoding)");
  if (o.natBeams !== 0 && o.strategy !== 'hrt') badOption('natBeams', o.natBeams, "0 unless strategy is 'hrt'");
  if (o.natBeams > o.beamSize) badOption('natBeams', o.natBeams, `in [0, beamSize = ${o.beamSize}] (0: beamSize)`);
  if (o.returnAlternatives > o.beamSize)
    badOption('returnAlternatives', o.returnAlternatives, `in [0, beamSize = ${o.beamSize}]`);
  return o;
}

/** The token cap for one source: min(maxLength, ratio cap when on, plan cap). */
export function maxLengthFor(o: DecodingOptions, srcLen: number, planCap: number): number {
  let cap = Math.min(o.maxLength, planCap);
  if (o.maxLengthRatio > 0) cap = Math.min(cap, Math.ceil(o.maxLengthRatio * srcLen + o.maxLengthConstant));
  return Math.max(1, cap);
}

/** generate()'s length penalty: score / length^alpha. */
export function penalized(logProbSum: number, length: number, alpha: number): number {
  return alpha === 0 ? logProbSum : logProbSum / Math.max(1, length) ** alpha;
}

/** early_stopping as a generation config spells it ('true', 'false', 'never') → the option's value. */
export function earlyStoppingOf(text: string): boolean | 'never' {
  return text === 'never' ? 'never' : text === 'true';
}
