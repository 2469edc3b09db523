// Library errors about decoding options, worded with the command line's flags: `--beam 0: it must be ...`, not `beamSize = 0`.
import { PlancError } from '../compiler/diagnostics.ts';

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
 * The error as the command line words it: a PlancError whose detail names a decoding option becomes PLANC_E301 naming
 * the flag and the value given (`--beam 0: it must be an integer in [1, 64]`); other errors are returned as they are.
 */
export function cliOptionError(e: unknown): unknown {
  if (!(e instanceof PlancError) || e.detail.option === undefined) return e;
  if (e.code === 'PLANC_E410') return e; // the plan cannot decode HRT as asked: its own code, flags named in the message
  const flag = DECODING_FLAGS[e.detail.option];
  if (flag === undefined) return e;
  const v = e.detail.value;
  const given = `${flag} ${typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v))}`;
  const why =
    e.detail.expected !== undefined
      ? `it must be ${e.detail.expected}`
      : e.message
          .replace(/^PLANC_E\d+: /, '')
          .replace(/^bad decoding option: /, '')
          .replace(/ \[[^\]]*\]$/, '')
          .replace(/\b\w+ \/ (--[\w-]+)/g, '$1');
  return new PlancError('PLANC_E301', `${given}: ${why}`, e.where, e.detail);
}

/** Runs `f`, rethrowing its option errors worded with the flags (cliOptionError). */
export async function withFlagNames<T>(f: () => T | Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw cliOptionError(e);
  }
}
