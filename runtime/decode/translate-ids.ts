// translateIds: source id sequences in, translations (ids, optional scores and alternatives) out, over a Plan.
import { PlancError } from '../../compiler/diagnostics.ts';
import { TOPK_IDS_OUTPUT } from '../../compiler/plan/io-names.ts';
import type { Plan } from '../plan.ts';
import { planTokenizer, type Tokenizer } from '../tokenizer/tokenizer.ts';
import { makeBatches, runBatches, sentencesPerBatch } from './batching.ts';
import { conventionsOf, DecodingRules, maxNewTokensOf } from './conventions.ts';
import type { Hypothesis } from './greedy.ts';
import { runYielding } from './steps.ts';
import { strategyFor, type DecodingStrategy } from './strategy.ts';
import type { DecodeIds } from './step-runner.ts';
import {
  badOption,
  earlyStoppingOf,
  maxLengthFor,
  penalized,
  validateDecodingOptions,
  type DecodingOptions,
} from './options.ts';
import { RandomStream } from './random.ts';
import { checkSampling } from './sampling-check.ts';

export interface TranslationResult {
  /** Output ids without the start token and without the eos. */
  ids: number[];
  /** Length-penalized log-prob (see DecodingOptions.lengthPenalty), when returnScores. */
  score?: number;
  /** The best returnAlternatives hypotheses, the best first (so alternatives[0] is this result), when asked. */
  alternatives?: { ids: number[]; score: number }[];
}

/** Throws a PlancError naming the first sentence that is not an array of integer ids in [0, vocabSize). */
export function validateIds(ids: unknown, vocabSize: number): asserts ids is number[][] {
  if (!Array.isArray(ids)) throw new PlancError('PLANC_E405', 'sources must be an array of id arrays');
  ids.forEach((s: unknown, i) => {
    if (!Array.isArray(s)) throw new PlancError('PLANC_E405', `sentence ${i} is not an array of ids`);
    s.forEach((v: unknown, j) => {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || (vocabSize > 0 && v >= vocabSize)) {
        throw new PlancError(
          'PLANC_E405',
          `sentence ${i} holds id ${String(v)} at position ${j}; ids must be integers in [0, ${vocabSize || 'vocabSize'})`,
        );
      }
    });
  });
}

/** The plan's start/eos/pad ids, or a PlancError when the plan does not record them. */
export function decodeIds(plan: Plan): DecodeIds {
  const { decoderStartId, eosId, padId } = plan.header.decoding;
  if (decoderStartId === undefined || eosId === undefined) {
    throw new PlancError('PLANC_E405', `plan ${plan.source} records no decoderStartId/eosId; it cannot be decoded`);
  }
  return { startId: decoderStartId, eosId, padId: padId ?? eosId };
}

/**
 * The plan's decoding conventions; targetLang (a token name in the plan's tokenizer) replaces its forced bos; the
 * options' logits processors (min_new_tokens, no_repeat_ngram_size, repetition_penalty) join them.
 */
export async function planRules(
  plan: Plan,
  targetLang = '',
  o: Partial<
    Pick<DecodingOptions, 'minNewTokens' | 'noRepeatNgramSize' | 'encoderNoRepeatNgramSize' | 'repetitionPenalty'>
  > = {},
): Promise<DecodingRules> {
  const c = conventionsOf(plan.header.decoding, decodeIds(plan));
  if (targetLang) c.forcedBosId = await languageId(plan, targetLang);
  // the options (whose defaults are the plan's own) replace the plan's processors; 0 and 1 turn them off
  if (o.minNewTokens !== undefined) c.minNewTokens = o.minNewTokens || undefined;
  if (o.noRepeatNgramSize !== undefined) c.noRepeatNgramSize = o.noRepeatNgramSize || undefined;
  if (o.encoderNoRepeatNgramSize !== undefined) c.encoderNoRepeatNgramSize = o.encoderNoRepeatNgramSize || undefined;
  if (o.repetitionPenalty !== undefined)
    c.repetitionPenalty = o.repetitionPenalty !== 1 ? o.repetitionPenalty : undefined;
  return new DecodingRules(c);
}

/** The special tokens of a tokenizer that name a language (en_XX, __en__, eng_Latn, >>fra<<): the targetLang choices. */
export function languageTokens(tok: Tokenizer): string[] {
  return tok
    .specialTokens()
    .filter((t) => /^(__[a-z]{2,3}(_[A-Za-z]+)?__|[a-z]{2,3}_[A-Z][A-Za-z]{1,3}|>>[a-z_]{2,8}<<)$/.test(t));
}

/** The id of a language token by its name in the plan's tokenizer, or a PlancError naming the option and the choices. */
async function languageId(plan: Plan, lang: string): Promise<number> {
  const tok = await planTokenizer(
    plan,
    (opt) => `the target language is found by its token name there, so ${opt('targetLang')} needs one`,
  );
  const id = tok.tokenId(lang);
  if (id !== undefined) return id;
  const langs = languageTokens(tok);
  throw new PlancError(
    'PLANC_E409',
    (opt) =>
      `unknown target language '${lang}' (${opt('targetLang')}): plan ${plan.source}'s tokenizer has no such token${langs.length ? `; its language tokens: ${langs.slice(0, 20).join(', ')}${langs.length > 20 ? `, ... (${langs.length})` : ''}` : ''}`,
  );
}

/**
 * The decoding defaults the plan's generation config gives: num_beams, max_new_tokens, early_stopping, length_penalty,
 * min_length / min_new_tokens, no_repeat_ngram_size, repetition_penalty (clamped to the options' ranges), do_sample,
 * temperature, top_k and top_p (a temperature ≤ 0 or top_p 0, which generate() ignores without do_sample, only with it).
 */
export function planDefaults(plan: Plan): Partial<DecodingOptions> {
  const d = plan.header.decoding;
  const out: Partial<DecodingOptions> = {};
  if (d.numBeams !== undefined) out.beamSize = Math.min(64, d.numBeams);
  if (d.earlyStopping) out.earlyStopping = earlyStoppingOf(d.earlyStopping);
  if (d.lengthPenalty !== undefined) out.lengthPenalty = Math.max(-10, Math.min(10, d.lengthPenalty));
  const minNew = Math.max(d.minNewTokens ?? 0, (d.minLength ?? 0) - 1);
  if (minNew > 0) out.minNewTokens = Math.min(65536, minNew);
  if (d.noRepeatNgramSize) out.noRepeatNgramSize = Math.min(65536, d.noRepeatNgramSize);
  if (d.encoderNoRepeatNgramSize) out.encoderNoRepeatNgramSize = Math.min(65536, d.encoderNoRepeatNgramSize);
  if (d.repetitionPenalty !== undefined) out.repetitionPenalty = Math.max(0.01, Math.min(100, d.repetitionPenalty));
  if (d.doSample !== undefined) out.doSample = d.doSample;
  if (d.temperature !== undefined && (d.temperature > 0 || d.doSample)) out.temperature = d.temperature;
  if (d.topK !== undefined) out.topK = Math.min(2 ** 31 - 1, d.topK);
  if (d.topP !== undefined && (d.topP > 0 || d.doSample)) out.topP = d.topP;
  const max = maxNewTokensOf(d);
  if (max !== undefined) out.maxLength = Math.min(65536, max);
  return out;
}

/** Fails before decoding when a step needs more of a row's best tokens than a top-k plan keeps (candidates + banned). */
function checkTopk(plan: Plan, rules: DecodingRules, strategy: DecodingStrategy, o: DecodingOptions): void {
  if (!plan.graphs.includes('decoder_with_past')) return;
  const ids = plan.outputs('decoder_with_past').find((x) => x.name === TOPK_IDS_OUTPUT);
  const k = ids ? Number(ids.dims[ids.dims.length - 1]) : Infinity;
  const need = strategy.topkNeeded(rules, o);
  if (need > k) {
    const beamSize = o.beamSize;
    const what = beamSize === 1 ? `${strategy.name} decoding` : `beamSize ${beamSize}`;
    const why = rules.maxBanned
      ? ` (${rules.candidates(beamSize)} candidates and up to ${rules.maxBanned} banned ids)`
      : '';
    throw new PlancError(
      'PLANC_E411',
      (opt) =>
        `${what} needs the ${need} best tokens per step${why} but plan ${plan.source} keeps ${k}; optimize with ${opt('topk')} ${need} or more`,
    );
  }
}

/** A source cut to `max` ids: its first ones, and its last one when that is an eos (the model's framing ends there). */
export function truncateIds(s: number[], max: number, rules: DecodingRules): number[] {
  if (s.length <= max) return s;
  return rules.isEos(s[s.length - 1]!) ? [...s.slice(0, max - 1), s[s.length - 1]!] : s.slice(0, max);
}

/** The error of a source over the plan's maxSrcLen. */
export function tooLong(what: string, length: number, max: number): PlancError {
  return new PlancError(
    'PLANC_E408',
    (opt) =>
      `${what} has ${length} tokens, over the plan's maxSrcLen ${max}: split it, pass ${opt('truncate')}, or build the plan with a larger ${opt('maxSrcLen')}`,
  );
}

/** One call's decoding set-up: its options over the plan's defaults, its strategy and the plan's rules. */
export interface Decoding {
  o: DecodingOptions;
  strategy: DecodingStrategy;
  rules: DecodingRules;
}

/** Validates the options (over the plan's defaults), picks the strategy, reads the rules and checks the plan's top-k fits. */
export async function prepareDecoding(plan: Plan, options: Partial<DecodingOptions>): Promise<Decoding> {
  const o = validateDecodingOptions(options, planDefaults(plan));
  const strategy = strategyFor(o);
  strategy.checkPlan?.(plan, o);
  sentencesPerBatch(o, plan.header.profile.maxBatch); // the beams fit the plan's rows
  const rules = await planRules(plan, o.targetLang, o);
  if (o.repetitionPenalty !== 1 && strategy.name !== 'greedy' && strategy.name !== 'beam') {
    throw new PlancError(
      'PLANC_E411',
      `bad decoding option: repetitionPenalty = ${o.repetitionPenalty} works with strategy greedy or beam, not '${strategy.name}'`,
      {},
      { option: 'repetitionPenalty', value: o.repetitionPenalty, expected: '1 with the Jacobi strategies' },
    );
  }
  if (o.encoderNoRepeatNgramSize > 0 && strategy.name !== 'greedy' && strategy.name !== 'beam') {
    throw new PlancError(
      'PLANC_E411',
      `bad decoding option: encoderNoRepeatNgramSize = ${o.encoderNoRepeatNgramSize} works with strategy greedy or beam, not '${strategy.name}'`,
      {},
      {
        option: 'encoderNoRepeatNgramSize',
        value: o.encoderNoRepeatNgramSize,
        expected: '0 with the Jacobi strategies',
      },
    );
  }
  if (
    o.repetitionPenalty !== 1 &&
    strategy.name === 'greedy' &&
    plan.outputs('decoder_with_past').some((x) => x.name === TOPK_IDS_OUTPUT)
  ) {
    throw new PlancError(
      'PLANC_E411',
      (opt) =>
        `repetition_penalty ${o.repetitionPenalty} with greedy decoding acts on the logits (as generate() does); plan ${plan.source} keeps only its top-k: optimize with ${opt('topk')} 0`,
    );
  }
  checkSampling(plan, o, rules, strategy.name);
  checkTopk(plan, rules, strategy, o);
  return { o, strategy, rules };
}

/** Hypotheses (best first) → a result with the options' extras. */
export function toResult(hyps: Hypothesis[], o: DecodingOptions): TranslationResult {
  const best = hyps[0]!;
  const r: TranslationResult = { ids: best.ids };
  if (o.returnScores) r.score = penalized(best.logProb, best.length, o.lengthPenalty);
  if (o.returnAlternatives > 0) {
    r.alternatives = hyps
      .slice(0, o.returnAlternatives)
      .map((h) => ({ ids: h.ids, score: penalized(h.logProb, h.length, o.lengthPenalty) }));
  }
  return r;
}

/**
 * Translates source id sequences, taken verbatim (the model's own framing, e.g. `X </s>` or `es_XX X </s>`), with the
 * options' decoding strategy (greedy for beamSize 1, beam search otherwise, by default) under the plan's generate()
 * conventions, in batches sorted by length, and returns results in the input order. An empty source gives an empty
 * translation. Decoding returns to the event loop every few milliseconds (runtime/decode/steps.ts runYielding).
 */
export async function translateIds(
  plan: Plan,
  ids: number[][],
  options: Partial<DecodingOptions> = {},
): Promise<TranslationResult[]> {
  const { o, strategy, rules } = await prepareDecoding(plan, options);
  const prof = plan.header.profile;
  validateIds(ids, plan.header.decoding.vocabSize ?? 0);
  const sources = ids.map((s) => (o.truncate ? truncateIds(s, prof.maxSrcLen, rules) : s));
  sources.forEach((s, i) => {
    if (s.length > prof.maxSrcLen) throw tooLong(`sentence ${i}`, s.length, prof.maxSrcLen);
  });
  if (o.sampleIndices !== undefined && o.sampleIndices.length !== ids.length)
    badOption('sampleIndices', `${o.sampleIndices.length} indices`, `one index per sentence (${ids.length})`);
  const results = new Array<TranslationResult>(sources.length);
  const todo = sources.flatMap((s, i) => (s.length > 0 ? [i] : []));
  sources.forEach((s, i) => {
    if (s.length === 0) results[i] = o.returnScores ? { ids: [], score: 0 } : { ids: [] };
  });
  if (todo.length === 0) return results;
  const batches = makeBatches(
    todo.map((i) => sources[i]!.length),
    o,
    prof.maxBatch,
  );
  const done = await runBatches(
    todo.map((i) => sources[i]!),
    batches,
    async (batch, at) => {
      const maxLens = batch.map((s) => maxLengthFor(o, s.length, prof.maxTgtLen));
      // sampling: each sentence's own stream, from the seed and its index in the call
      const streams = o.doSample
        ? at.map((j) => new RandomStream(o.seed, o.sampleIndices?.[todo[j]!] ?? todo[j]!))
        : undefined;
      const hyps = await runYielding(strategy.decode({ plan, sources: batch, maxLens, rules, options: o, streams }));
      return hyps.map((hs) => toResult(hs, o));
    },
  );
  todo.forEach((i, j) => (results[i] = done[j]!));
  return results;
}
