// The accuracy gate of --quantize: the quantized plan against the float32 plan on held-out text — identical greedy
// sentences, teacher-forced top-1 agreement per step, BLEU of both — measured with the plans' own kernels.
import { PlancError } from '../compiler/diagnostics.ts';
import { corpusBleu } from '../compiler/vocab/bleu.ts';
import type { ProgressReporter } from '../passes/pass.ts';
import type { DecodingRules } from '../runtime/decode/conventions.ts';
import { rowBest } from '../runtime/decode/scores.ts';
import type { Plan } from '../runtime/plan.ts';
import type { Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { greedyExposed } from './vocab-calibrate.ts';

/** The gate a quantized plan must hold: identical sentences at least `identical`, BLEU at most `bleuDrop` below float32. */
export interface Gate {
  identical: number;
  bleuDrop: number;
}
export const DEFAULT_GATE: Gate = { identical: 0.97, bleuDrop: 0.3 };

export interface GateMeasure {
  evalSentences: number;
  /** Fraction of sentences whose greedy output equals the float32 plan's. */
  identicalSentences: number;
  /** Teacher-forced on the float32 output: fraction of steps whose best token equals float32's. */
  top1Agreement: number;
  bleu?: number;
  bleuFp32?: number;
  /** The sentence indices that differ. */
  differing: number[];
}

export const gateText = (g: Gate) => `identical >= ${g.identical}, bleu within ${g.bleuDrop}`;

export function gatePassed(m: GateMeasure, g: Gate): boolean {
  const bleuOk = m.bleu === undefined || m.bleuFp32 === undefined || m.bleu >= m.bleuFp32 - g.bleuDrop;
  return m.identicalSentences >= g.identical && bleuOk;
}

/** The float32 plan's greedy output on the evaluation text (ids without eos), kept for every measurement against it. */
export interface Fp32Reference {
  sources: number[][];
  ids: number[][];
  bleu?: number;
  refs?: string[];
}

export function fp32Reference(
  fp32: Plan,
  tok: Tokenizer,
  rules: DecodingRules,
  src: string[],
  refs: string[] | undefined,
  maxSrcLen: number,
  maxTgtLen: number,
  progress?: ProgressReporter,
): Fp32Reference {
  const sources = src.map((s) => tok.encodeSource(s));
  const long = sources.findIndex((s) => s.length > maxSrcLen);
  if (long >= 0)
    throw new PlancError(
      'PLANC_E501',
      (opt) =>
        `${opt('evalSrc')} sentence ${long + 1} has ${sources[long]!.length} tokens, over ${opt('maxSrcLen')} ${maxSrcLen}`,
    );
  const bar = progress?.bar('float32 reference', sources.length);
  const ids = greedyExposed(fp32, sources, rules, maxTgtLen, undefined, (k) => bar?.tick(k));
  bar?.done();
  const bleu = refs
    ? corpusBleu(
        ids.map((x) => tok.decode(x)),
        refs,
      ).score
    : undefined;
  return { sources, ids, bleu, refs };
}

/**
 * The quantized plan against the float32 reference: free-running greedy, then teacher-forced on float32's tokens;
 * `batch` sentences a run (default CALIBRATION_BATCH).
 */
export function measureQuantized(
  q: Plan,
  ref: Fp32Reference,
  tok: Tokenizer,
  rules: DecodingRules,
  eosId: number,
  maxTgtLen: number,
  progress?: ProgressReporter,
  batch?: number,
): GateMeasure {
  const n = ref.sources.length;
  const bar = progress?.bar('quantized vs float32', 2 * n);
  const ids = greedyExposed(q, ref.sources, rules, maxTgtLen, undefined, (k) => bar?.tick(k), batch);
  // the steps pick sees: a forced first token (forced bos) is not picked
  const pos = new Array<number>(n).fill(rules.c.forcedBosId === undefined ? 0 : 1);
  let steps = 0,
    agree = 0;
  greedyExposed(
    q,
    ref.sources,
    rules,
    maxTgtLen,
    (out, r, s, banned) => {
      const want = ref.ids[s]!;
      const t = pos[s]!++;
      const forced = t < want.length ? want[t]! : eosId;
      steps++;
      if (rowBest(out, r, false, banned).tok === forced) agree++;
      return forced;
    },
    (k) => bar?.tick(k),
    batch,
  );
  bar?.done();
  const differing = ids.flatMap((x, i) => (x.join() === ref.ids[i]!.join() ? [] : [i]));
  return {
    evalSentences: n,
    identicalSentences: (n - differing.length) / n,
    top1Agreement: steps ? agree / steps : 1,
    differing,
    ...(ref.refs
      ? {
          bleu: corpusBleu(
            ids.map((x) => tok.decode(x)),
            ref.refs,
          ).score,
          bleuFp32: ref.bleu,
        }
      : {}),
  };
}
