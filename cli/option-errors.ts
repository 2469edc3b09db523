// Library errors worded with the command line's flags: `--beam 0: it must be ...`, not `beamSize = 0`. The library
// names its options by their own names (compiler/diagnostics-catalog.ts); this file is the one table that maps them.
import { type OptionNamer, PlancError, type Text } from '../compiler/diagnostics.ts';
import { worded } from '../compiler/diagnostics-catalog.ts';

/** The flag that sets each DecodingOptions key (runtime/decode/options.ts) in planc translate and ddgviz. */
export const DECODING_FLAGS: Readonly<Record<string, string>> = {
  strategy: '--strategy',
  jacobiBlock: '--jacobi-block',
  chunk: '--chunk',
  natBeams: '--nat-beams',
  beamSize: '--beam',
  maxLength: '--max-length',
  lengthPenalty: '--length-penalty',
  batchSize: '--batch',
  batchTokens: '--batch-tokens',
  targetLang: '--target-lang',
  returnAlternatives: '--n-best',
  truncate: '--truncate',
  earlyStopping: '--early-stopping',
  minNewTokens: '--min-new-tokens',
  noRepeatNgramSize: '--no-repeat-ngram-size',
  encoderNoRepeatNgramSize: '--encoder-no-repeat-ngram-size',
  repetitionPenalty: '--repetition-penalty',
  doSample: '--do-sample',
  temperature: '--temperature',
  topK: '--top-k',
  topP: '--top-p',
  seed: '--seed',
};

/**
 * The flag of every other library option a message names (CompileOptions, BuildOptions, serve's options, the
 * requests of --quantize and --vocab): the library's name → the flag of planc optimize, serve, worker, ...
 */
export const LIBRARY_FLAGS: Readonly<Record<string, string>> = {
  target: '--target',
  arch: '--arch',
  device: '--device',
  threads: '--threads',
  topk: '--topk',
  stepTokens: '--step-tokens',
  maxBatch: '--max-batch',
  maxSrcLen: '--max-src-len',
  maxTgtLen: '--max-tgt-len',
  maxDim: '--max-dim',
  decoderStartId: '--decoder-start-id',
  eosId: '--eos-id',
  padId: '--pad-id',
  unkId: '--unk-id',
  tokenizer: '--tokenizer',
  disable: '--disable',
  fuse: '--no-fuse',
  dumpAfter: '--dump-after',
  explain: '--explain',
  emitTs: '--emit-ts',
  vocab: '--vocab',
  calibrate: '--calibrate',
  evalSrc: '--eval-src',
  evalRef: '--eval-ref',
  quantize: '--quantize',
  quantizeLayers: '--quantize-layers',
  fast: '--fast',
  tune: '--tune',
  tuneBatch: '--tune-batch',
  tuningCache: '--tuning-cache',
  ids: '--ids',
  apiKeyFile: '--api-key-file',
  queue: '--queue',
  redis: '--redis',
  model: '--model',
  maxSentences: '--max-sentences',
  maxQueue: '--max-queue',
  timeoutMs: '--timeout-ms',
  maxBodyBytes: '--max-body-bytes',
};

/** Every library option's flag: decoding options and the rest. */
export const OPTION_FLAGS: Readonly<Record<string, string>> = { ...DECODING_FLAGS, ...LIBRARY_FLAGS };

/** An option as the command line names it: its flag (the library's name when it has none). */
export const flagName: OptionNamer = (option) => OPTION_FLAGS[option] ?? option;

/**
 * The error as the command line words it, options named by their flags. A bad option value (PLANC_E302) and a decoding
 * option the library names (PLANC_E411 with its detail) become PLANC_E301 naming the flag and the value given
 * (`--beam 0: it must be an integer in [1, 64]`); other PlancErrors keep their code; other values are returned as they
 * are.
 */
export function cliOptionError(e: unknown): unknown {
  if (!(e instanceof PlancError)) return e;
  const flag = e.detail.option === undefined ? undefined : OPTION_FLAGS[e.detail.option];
  const usage = e.code === 'PLANC_E302' || (e.code === 'PLANC_E411' && flag !== undefined);
  if (!usage || flag === undefined || !('value' in e.detail) || e.template?.id === 'optionProblem')
    return e.renamed(flagName, e.code === 'PLANC_E302' ? 'PLANC_E301' : e.code);
  const v = e.detail.value;
  const given = `${flag} ${typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v))}`;
  const expected = e.template?.params.expected as Text | undefined;
  const why =
    e.detail.expected !== undefined
      ? `it must be ${expected === undefined ? e.detail.expected : worded(expected, flagName)}`
      : e.text(flagName).replace(/^bad decoding option: /, '');
  return new PlancError('PLANC_E301', `${given}: ${why}`, e.where, e.detail, e.template);
}

/** Runs `f`, rethrowing its option errors worded with the flags (cliOptionError). */
export async function withFlagNames<T>(f: () => T | Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw cliOptionError(e);
  }
}
