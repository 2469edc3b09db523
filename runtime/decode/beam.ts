// Beam search over a Plan: k beams per sentence, float64 log-prob sums, cache rows gathered by beam origin each step.
import type { Plan } from '../plan.ts';
import type { RtTensor } from '../tensor.ts';
import type { DecodingRules } from './conventions.ts';
import type { Hypothesis } from './greedy.ts';
import { penalized } from './options.ts';
import { rowTop } from './scores.ts';
import { StepRunner } from './step-runner.ts';
import { runToEnd, type Steps } from './steps.ts';

/** A live beam: its tokens so far, its log-prob sum and the cache row it continues. */
interface Beam {
  ids: number[];
  logProb: number;
  row: number;
}

/** One sentence's search state. */
interface Search {
  live: Beam[];
  finished: Hypothesis[];
  done: boolean;
}

/** A candidate continuation: log-prob sum, source row, token. */
interface Cand {
  score: number;
  row: number;
  tok: number;
}

/** Best first; ties go to the lower (row, token), i.e. the earlier beam and the smaller id. */
const byScore = (a: Cand, b: Cand) => b.score - a.score || a.row - b.row || a.tok - b.tok;

/**
 * The best `n` candidates over the rows `rows` (scores = beam sum + log-softmax), best first, none of row j's
 * `banned[j]` tokens. Each row's own n best allowed tokens suffice.
 */
export function topCandidates(out: Record<string, RtTensor>, rows: number[], sums: number[], n: number, banned: ReadonlySet<number>[]): Cand[] {
  const all: Cand[] = [];
  rows.forEach((r, j) => {
    const top = rowTop(out, r, n, banned[j]);
    top.ids.forEach((tok, k) => all.push({ score: sums[j]! + top.logProbs[k]!, row: r, tok }));
  });
  return all.sort(byScore).slice(0, n);
}

/**
 * One beam step for one sentence (the rule of fairseq): of the best candidates, an eos among the first k ranks
 * finishes a hypothesis (length = tokens + eos); the first k non-eos candidates become the live beams. The sentence is
 * done when it has k finished hypotheses, or when `last` (max length reached: the live beams finish unterminated).
 */
export function advance(s: Search, cands: Cand[], beamOfRow: Map<number, Beam>, k: number, isEos: (tok: number) => boolean, last: boolean): void {
  const live: Beam[] = [];
  cands.forEach((c, rank) => {
    const from = beamOfRow.get(c.row)!;
    if (isEos(c.tok)) {
      if (rank < k && s.finished.length < k) s.finished.push({ ids: from.ids, logProb: c.score, length: from.ids.length + 1 });
    } else if (live.length < k) {
      live.push({ ids: [...from.ids, c.tok], logProb: c.score, row: c.row });
    }
  });
  s.live = live;
  if (s.finished.length >= k) s.done = true;
  else if (last) {
    for (const b of live) s.finished.push({ ids: b.ids, logProb: b.logProb, length: b.ids.length });
    s.done = true;
  }
}

/** Finished hypotheses, best first by length-penalized score (stable for ties). */
export function ranked(hyps: Hypothesis[], alpha: number): Hypothesis[] {
  return hyps
    .map((h, i) => ({ h, i, s: penalized(h.logProb, h.length, alpha) }))
    .sort((a, b) => b.s - a.s || a.i - b.i)
    .map((x) => x.h);
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
 * Beam search of one batch (k beams per sentence: the plan runs sentences × k rows, at most). Returns each sentence's
 * finished hypotheses, best first under the length penalty alpha. A step the rules force gives every live beam the
 * forced token at log-prob 0; otherwise beams rank rules.candidates(k) allowed continuations. Each step the
 * self-attention cache rows are gathered by beam origin; the encoder mask and K/V rows are gathered only when the
 * row → sentence layout changes (the first expansion to k beams, and when sentences finish and leave the batch).
 */
export function beamBatch(plan: Plan, sources: number[][], maxLens: number[], rules: DecodingRules, k: number, alpha: number): Hypothesis[][] {
  return runToEnd(beamSteps(plan, sources, maxLens, rules, k, alpha));
}

/** beamBatch as a generator that yields after each decoder step. */
export function* beamSteps(plan: Plan, sources: number[][], maxLens: number[], rules: DecodingRules, k: number, alpha: number): Steps<Hypothesis[][]> {
  const searches: Search[] = sources.map((_, i) => ({ live: [{ ids: [], logProb: 0, row: i }], finished: [], done: false }));
  const runner = new StepRunner(plan, sources, rules.c, sources.length * k, Math.max(...maxLens));
  const isEos = (tok: number) => rules.isEos(tok);
  try {
    let rowSentence = sources.map((_, i) => i);
    for (let t = 0; ; t++) {
      searches.forEach((s, i) => {
        if (s.done) return;
        const last = t + 1 >= maxLens[i]!;
        const forced = rules.forced(t, last);
        const cands = forced !== undefined
          ? s.live.map((b) => ({ score: b.logProb, row: b.row, tok: forced })).sort(byScore)
          : topCandidates(runner.out, s.live.map((b) => b.row), s.live.map((b) => b.logProb), rules.candidates(k), s.live.map((b) => rules.banned(b.ids)));
        advance(s, cands, new Map(s.live.map((b) => [b.row, b])), k, isEos, last);
      });
      const { origin, sentence, tokens } = nextRows(searches);
      if (origin.length === 0) break;
      runner.select(origin, sentence.join() === rowSentence.join());
      rowSentence = sentence;
      let row = 0;
      for (const s of searches) if (!s.done) for (const b of s.live) b.row = row++;
      runner.step(tokens);
      yield;
    }
  } finally {
    runner.release(); // its resident buffers go back to the plan for the next batch
  }
  return searches.map((s) => ranked(s.finished, alpha));
}
