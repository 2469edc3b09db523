// Greedy decoding over a Plan with batch shrinking: finished sentences leave the batch (their cache rows are dropped).
import type { Plan } from '../plan.ts';
import type { RtTensor } from '../tensor.ts';
import type { DecodingRules } from './conventions.ts';
import type { SampleToken } from './sampling.ts';
import { penalizedBest, rowBest } from './scores.ts';
import { StepRunner } from './step-runner.ts';
import { runToEnd, type Steps } from './steps.ts';

/** One decoded hypothesis: ids without start and eos, the sum of its token log-probs, its length (tokens + eos if any). */
export interface Hypothesis {
  ids: number[];
  logProb: number;
  length: number;
}

/** Row r's token of a step (batch sentence `sentence`) when the rules force none; `banned` must not be chosen. */
export type PickToken = (
  out: Record<string, RtTensor>,
  r: number,
  sentence: number,
  banned: ReadonlySet<number>,
) => number;

/** What a caller learns of each sentence while the batch decodes (the serving scheduler answers rows as they finish). */
export interface RowHooks {
  /** Sentence i is done (an eos or its cap): its final hypothesis. */
  finished?(i: number, h: Hypothesis): void;
  /** Whether sentence i is no longer wanted: it then leaves the batch at this step boundary, unfinished. */
  cancelled?(i: number): boolean;
}

/**
 * Greedy decoding of one batch; maxLens[i] caps sentence i's generated tokens (eos included). Each step a row takes
 * the token the rules force, else its best allowed token; sentences that emitted an eos or hit their cap leave the
 * batch: the rows of the encoder mask, the encoder K/V and the self-attention cache are compacted, so later steps
 * compute only live rows. Log-probs are computed only when `scores` is set (a forced token adds 0). `pick` replaces
 * the best-allowed-token choice (vocabulary calibration records the step, or takes a masked argmax; no log-probs then).
 */
export function greedyBatch(
  plan: Plan,
  sources: number[][],
  maxLens: number[],
  rules: DecodingRules,
  scores: boolean,
  pick?: PickToken,
): Hypothesis[] {
  return runToEnd(greedySteps(plan, sources, maxLens, rules, scores, pick));
}

/**
 * Step t of sentence i (row r of `out`; h: its hypothesis so far, extended here): the token the rules force, else the
 * picked, sampled or best allowed one. Returns the token the next step takes, or undefined when the sentence ended
 * (an eos or its cap maxLen).
 */
export function greedyToken(
  out: Record<string, RtTensor>,
  r: number,
  i: number,
  t: number,
  maxLen: number,
  h: Hypothesis,
  source: readonly number[],
  rules: DecodingRules,
  scores: boolean,
  pick?: PickToken,
  sample?: SampleToken,
): number | undefined {
  const last = t + 1 >= maxLen;
  const forced = rules.forced(t, last);
  const { tok, logProb } =
    forced !== undefined
      ? { tok: forced, logProb: 0 }
      : pick
        ? { tok: pick(out, r, i, rules.banned(h.ids, source)), logProb: 0 }
        : sample
          ? sample(out, r, i, rules.banned(h.ids, source), () => rules.seen(h.ids))
          : rules.penalty !== 1
            ? penalizedBest(out, r, scores, rules.banned(h.ids, source), rules.seen(h.ids), rules.penalty)
            : rowBest(out, r, scores, rules.banned(h.ids, source));
  h.logProb += logProb;
  h.length++;
  const eos = rules.isEos(tok);
  if (!eos) h.ids.push(tok);
  return eos || last ? undefined : tok;
}

/**
 * greedyBatch as a generator that yields after each decoder step (the async driver returns to the event loop there);
 * `hooks` hears of each sentence as it finishes and can drop sentences mid-flight (their rows leave like finished ones).
 * `sample` (generate()'s sample mode, runtime/decode/sampling.ts) draws each unforced token instead of the best one.
 */
export function* greedySteps(
  plan: Plan,
  sources: number[][],
  maxLens: number[],
  rules: DecodingRules,
  scores: boolean,
  pick?: PickToken,
  hooks: RowHooks = {},
  sample?: SampleToken,
): Steps<Hypothesis[]> {
  const out: Hypothesis[] = sources.map(() => ({ ids: [], logProb: 0, length: 0 }));
  const runner = new StepRunner(plan, sources, rules.c, sources.length, Math.max(...maxLens));
  try {
    let live = sources.map((_, i) => i);
    for (let t = 0; ; t++) {
      const next: number[] = [];
      const keep: number[] = [];
      live.forEach((i, r) => {
        if (hooks.cancelled?.(i)) return;
        const h = out[i]!;
        const tok = greedyToken(runner.out, r, i, t, maxLens[i]!, h, sources[i]!, rules, scores, pick, sample);
        if (tok === undefined) {
          hooks.finished?.(i, h);
          return;
        }
        keep.push(r);
        next.push(tok);
      });
      if (keep.length === 0) return out;
      runner.select(keep);
      live = keep.map((r) => live[r]!);
      runner.step(next);
      yield;
    }
  } finally {
    runner.release(); // its resident buffers go back to the plan for the next batch
  }
}
