// The optimization profile: largest batch and lengths a plan accepts, and the upper bound of each runtime symbol.
import { type OptionNamer, PlancError } from '../compiler/diagnostics.ts';
import { MAX_DIM, MAX_PLAN_BYTES } from '../compiler/limits.ts';
import { STEP_TOKENS_SYMBOL } from '../compiler/plan/io-names.ts';

export interface ProfileOptions {
  maxBatch: number;
  maxSrcLen: number;
  maxTgtLen: number;
  /** Explicit bounds by symbol name (--max-dim NAME=N), winning over the name rules. */
  maxDims?: Record<string, number>;
  /** The most new tokens a decoder step takes (the model's, from --step-tokens): the bound of its step_tokens symbol. */
  stepTokens?: number;
}

export { MAX_DIM, MAX_PLAN_BYTES };

/**
 * The optimize option that sets a symbol's bound, for messages: the name rule's flag (with `p`, --max-dim when it set
 * this one; without, the flag or --max-dim, which always can).
 */
export function boundOption(name: string, p?: ProfileOptions): (opt: OptionNamer) => string {
  return (opt) => {
    if (name === STEP_TOKENS_SYMBOL) return opt('stepTokens');
    const dim = `${opt('maxDim')} ${name}=N`;
    if (p?.maxDims?.[name] !== undefined) return dim;
    const option = /batch/i.test(name)
      ? 'maxBatch'
      : /encoder|src|source/i.test(name)
        ? 'maxSrcLen'
        : /decoder|tgt|target|past|cache/i.test(name)
          ? 'maxTgtLen'
          : undefined;
    return option === undefined ? dim : p ? opt(option) : `${opt(option)} or ${dim}`;
  };
}

export const DEFAULT_PROFILE: ProfileOptions = { maxBatch: 16, maxSrcLen: 128, maxTgtLen: 128 };

/**
 * The bound of a symbol from its name: step_tokens → the step's new tokens (the model's, not --max-dim); batch → max
 * batch; encoder/source → max source; decoder/past/target/cache → max target.
 */
export function symbolBound(name: string, p: ProfileOptions): number | undefined {
  if (name === STEP_TOKENS_SYMBOL && p.stepTokens !== undefined) return p.stepTokens;
  if (p.maxDims?.[name] !== undefined) return p.maxDims[name];
  if (/batch/i.test(name)) return p.maxBatch;
  if (/encoder|src|source/i.test(name)) return p.maxSrcLen;
  if (/decoder|tgt|target|past|cache/i.test(name)) return p.maxTgtLen;
  if (/seq|len/i.test(name)) return Math.max(p.maxSrcLen, p.maxTgtLen);
  return undefined;
}

/** Bounds for every symbol in `names`; fails listing the ones no rule covers. */
export function symbolBounds(names: Iterable<string>, p: ProfileOptions): Record<string, number> {
  const out: Record<string, number> = {};
  const missing: string[] = [];
  for (const n of names) {
    const b = symbolBound(n, p);
    if (b === undefined) missing.push(n);
    else if (!Number.isSafeInteger(b) || b < 1 || b > MAX_DIM) {
      throw new PlancError(
        'PLANC_E404',
        (opt) =>
          `the bound of runtime dimension '${n}' is ${b} (${boundOption(n, p)(opt)}); it must be an integer in [1, ${MAX_DIM}]`,
      );
    } else out[n] = b;
  }
  if (missing.length) {
    throw new PlancError(
      'PLANC_E404',
      (opt) =>
        `no upper bound for the runtime dimension(s) ${missing.map((m) => `'${m}'`).join(', ')}: pass ${opt('maxDim')} ${missing[0]}=N`,
    );
  }
  return out;
}
