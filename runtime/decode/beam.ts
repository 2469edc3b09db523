// Beam search over a Plan: k beams per sentence, float64 log-prob sums, cache rows gathered by beam origin each step.
import type { Plan } from '../plan.ts';
import type { RtTensor } from '../tensor.ts';
import type { DecodingRules } from './conventions.ts';
import { advance, byScore, newSearch, type BeamRules, type Cand, type Search } from './beam-rules.ts';
import type { Hypothesis } from './greedy.ts';
import { penalizedTop, rowTop } from './scores.ts';
import { StepRunner, type StepRunnerOptions } from './step-runner.ts';
import { runToEnd, type Steps } from './steps.ts';

/**
 * The best `n` candidates over the rows `rows` (scores = beam sum + log-softmax), best first, none of row j's
 * `banned[j]` tokens; with a repetition penalty p ≠ 1, row j's `seen[j]` tokens have their log-probs penalized first
 * (generate()'s order: repetition penalty, then bans). Each row's own n best allowed tokens suffice.
 */
export function topCandidates(
  out: Record<string, RtTensor>,
  rows: number[],
  sums: number[],
  n: number,
  banned: ReadonlySet<number>[],
  p = 1,
  seen: ReadonlySet<number>[] = [],
): Cand[] {
  const all: Cand[] = [];
  rows.forEach((r, j) => {
    const top = p === 1 ? rowTop(out, r, n, banned[j]) : penalizedTop(out, r, n, banned[j]!, seen[j]!, p);
    top.ids.forEach((tok, k) => all.push({ score: sums[j]! + top.logProbs[k]!, row: r, tok }));
  });
  return all.sort(byScore).slice(0, n);
}

/** The rows of the next step: live beams of unfinished sentences, sentence by sentence. */
function nextRows(searches: Search[]): { origin: number[]; sentence: number[]; tokens: number[] } {
  const origin: number[] = [];
  const sentence: number[] = [];
  const tokens: number[] = [];
  searches.forEach((s, i) => {
    if (s.done) return;
    for (const b of s.live) {
      origin.push(b.row);
      sentence.push(i);
      tokens.push(b.ids[b.ids.length - 1]!);
    }
  });
  return { origin, sentence, tokens };
}

/**
 * Beam search of one batch (k beams per sentence: the plan runs sentences × k rows, at most) under generate()'s rules
 * (runtime/decode/beam-rules.ts: early_stopping, length_penalty). Returns each sentence's k finished hypotheses, best
 * first by length-penalized score (generate()'s sequences and sequences_scores order). A step the rules force gives every live beam the
 * forced token at log-prob 0; otherwise beams rank rules.candidates(k) allowed continuations. Each step the
 * self-attention cache rows are gathered by beam origin; the encoder mask and K/V rows are gathered only when the
 * row → sentence layout changes (the first expansion to k beams, and when sentences finish and leave the batch).
 */
export function beamBatch(
  plan: Plan,
  sources: number[][],
  maxLens: number[],
  rules: DecodingRules,
  b: BeamRules,
): Hypothesis[][] {
  return runToEnd(beamSteps(plan, sources, maxLens, rules, b));
}

/** beamBatch as a generator that yields after each decoder step; `runnerOptions`: the steps' position ids (HRT's Skip-AT). */
export function* beamSteps(
  plan: Plan,
  sources: number[][],
  maxLens: number[],
  rules: DecodingRules,
  b: BeamRules,
  runnerOptions: StepRunnerOptions = {},
): Steps<Hypothesis[][]> {
  const k = b.k;
  const searches: Search[] = sources.map((_, i) => newSearch(i));
  const runner = new StepRunner(plan, sources, rules.c, sources.length * k, Math.max(...maxLens), runnerOptions);
  const isEos = (tok: number) => rules.isEos(tok);
  try {
    let rowSentence = sources.map((_, i) => i);
    for (let t = 0; ; t++) {
      searches.forEach((s, i) => {
        if (s.done) return;
        const last = t + 1 >= maxLens[i]!;
        const forced = rules.forced(t, last);
        const cands =
          forced !== undefined
            ? s.live.map((x) => ({ score: x.logProb, row: x.row, tok: forced })).sort(byScore)
            : topCandidates(
                runner.out,
                s.live.map((x) => x.row),
                s.live.map((x) => x.logProb),
                rules.candidates(k),
                s.live.map((x) => rules.banned(x.ids, sources[i])),
                rules.penalty,
                rules.penalty === 1 ? [] : s.live.map((x) => rules.seen(x.ids)),
              );
        advance(s, cands, new Map(s.live.map((x) => [x.row, x])), b, isEos, t, maxLens[i]!);
      });
      const { origin, sentence, tokens } = nextRows(searches);
      if (origin.length === 0) break;
      runner.select(origin, sentence.join() === rowSentence.join());
      rowSentence = sentence;
      let row = 0;
      for (const s of searches) if (!s.done) for (const x of s.live) x.row = row++;
      runner.step(tokens);
      yield;
    }
  } finally {
    runner.release(); // its resident buffers go back to the plan for the next batch
  }
  return searches.map((s) => s.finished);
}
