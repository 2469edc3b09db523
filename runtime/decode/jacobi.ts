// Parallel Jacobi decoding (PJ, PGJ(b), HGJ(b) of Santilli et al. 2023): blocks of guessed tokens refined in parallel
// by multi-token decoder steps until they stop changing; a token is final only when all before it are, so the output
// is greedy's by construction. 'lookup' verifies the same way drafts copied from n-grams of the source and of the
// output so far (where one matches; else the step is greedy's, one token).
import { type OptionNamer, PlancError } from '../../compiler/diagnostics.ts';
import type { Plan } from '../plan.ts';
import type { RtTensor } from '../tensor.ts';
import type { DecodingRules } from './conventions.ts';
import type { Hypothesis } from './greedy.ts';
import { JacobiTraceRecorder } from './jacobi-trace.ts';
import { positionBest } from './scores.ts';
import { StepRunner, stepTokenRange } from './step-runner.ts';
import { runToEnd, type Steps } from './steps.ts';
import type { BatchJob, DecodingStrategy } from './strategy.ts';

/** The three algorithms of the paper, and n-gram lookup drafts verified alike. */
export type JacobiKind = 'pj' | 'pgj' | 'hgj' | 'lookup';

/** One sentence's work: decoder runs it took part in (the first one included) and the tokens it got (eos included). */
export interface JacobiSentenceStats {
  iterations: number;
  tokens: number;
}

/** One batch's work: decoder runs, token rows they computed (rows × tokens per run), and per sentence (batch order). */
export interface JacobiBatchStats {
  strategy: JacobiKind;
  /** The block b (pj: the plan's most step tokens, its chunk). */
  block: number;
  steps: number;
  tokenRows: number;
  sentences: JacobiSentenceStats[];
  /** lookup: runs whose draft some n-gram gave (the others were one-token steps). */
  drafted?: number;
}

/** One sentence's state: its draft (final prefix, then guesses) over the positions its cap allows. */
interface Row {
  /** The sentence's source ids (lookup drafts copy from them). */
  source: readonly number[];
  /** Tokens the sentence may generate (eos included). */
  cap: number;
  /** HGJ: parallel blocks start only below this position (the source length, at most the cap). */
  parallelUntil: number;
  /** Token per position: draft[0, fixed) are final (greedy's tokens), the rest are the last iteration's guesses. */
  draft: number[];
  fixed: number;
  /** lookup: tokens drafted past the final prefix by the last lookup (0: none found). */
  drafted: number;
  logProb: number;
  iterations: number;
  done: boolean;
}

/**
 * Reads one decoder run of row r into its state. The run fed `fed` (the token before position `base`, then the draft
 * from `base` on) and output i predicts position base + i. The prediction at position q is exact (greedy's token) when
 * every token fed before it is final: the final prefix is walked and grows while a fed guess equals its prediction
 * (it did not change since the last iteration: the paper's stop rule, applied per prefix). Past the first changed
 * guess, predictions only become the next iteration's guesses (Jacobi). The rules (forced tokens, banned ids, the cap)
 * apply at every position as greedy applies them.
 */
function absorb(
  row: Row,
  out: Record<string, RtTensor>,
  r: number,
  base: number,
  fed: number[],
  rules: DecodingRules,
  scores: boolean,
): void {
  const seen = row.draft.slice(); // the tokens the run saw: output i was conditioned on seen[0, base + i)
  let exact = true;
  for (let i = 0; i < fed.length; i++) {
    const q = base + i;
    if (q >= row.cap) return;
    if (q < row.fixed) continue; // final already, and fed as such: the chain holds
    const forced = rules.forced(q, q + 1 >= row.cap);
    const banned = () => rules.banned(seen.slice(0, q));
    if (!exact) {
      row.draft[q] = forced ?? positionBest(out, r, i, false, banned()).tok;
      continue;
    }
    const { tok, logProb } =
      forced !== undefined ? { tok: forced, logProb: 0 } : positionBest(out, r, i, scores, banned());
    row.draft[q] = tok;
    row.fixed = q + 1;
    row.logProb += logProb;
    if (rules.isEos(tok) || q + 1 >= row.cap) {
      row.done = true;
      return;
    }
    exact = i + 1 < fed.length && fed[i + 1] === tok;
  }
}

/** Tokens the next run feeds per row, before clamping to the plan and the caps: one rule per algorithm. */
type NextTokens = (base: number, live: Row[], block: number) => number;

/** PGJ's block containing position `base`: position 0 comes from the first decoder run alone, blocks tile 1, 1 + b, ... */
function blockEnd(base: number, b: number): number {
  return 1 + Math.floor((base - 1) / b) * b + b;
}

/**
 * The three algorithms, as the next run's token count. Choices where the paper leaves room (it assumes the gold length
 * for PJ/PGJ): every strategy iterates up to the sentence's cap (the max-length rule) and a sentence stops as soon as
 * an eos is final, which is the paper's "cut at the first eos" without computing the positions after it. PJ's block
 * (the whole rest of the sentence) is fed in chunks of the plan's most step tokens (a sliding window: positions past
 * the chunk keep no guesses). HGJ's prefixed length is the source length (its tokens, at most the cap): blocks that
 * start below it run as PGJ, then one token per step (greedy's step).
 */
const NEXT: Record<JacobiKind, NextTokens> = {
  pj: (base, live) => Math.max(...live.map((r) => r.cap)) - base,
  // Jacobi inside the block, Gauss-Seidel over blocks: the block's positions from the first non-final one
  pgj: (base, _live, b) => blockEnd(base, b) - base,
  hgj: (base, live, b) =>
    blockEnd(base, b) - b < Math.max(...live.map((r) => r.parallelUntil)) ? blockEnd(base, b) - base : 1,
  // each row's final tokens from base on and its draft (up to b - 1 tokens), plus one to predict past the draft: a row
  // without a draft takes greedy's one-token step (a longer step costs more: about 1.25x at 3 tokens, batch 1)
  lookup: (base, live) => Math.max(...live.map((r) => r.fixed - base + r.drafted + 1)),
};

/** Longest n-gram of the final tokens that a draft is looked up by. */
const LOOKUP_NGRAM = 3;

/**
 * Where `tail` last occurs in `seq` (ending before `end`), the tokens that follow it there (up to `len`); empty when it
 * does not occur.
 */
function followers(seq: readonly number[], end: number, tail: readonly number[], len: number): number[] {
  for (let at = end - tail.length; at >= 0; at--) {
    let k = 0;
    while (k < tail.length && seq[at + k] === tail[k]) k++;
    if (k === tail.length) return seq.slice(at + tail.length, Math.min(seq.length, at + tail.length + len));
  }
  return [];
}

/**
 * Lookup drafting (prompt-lookup decoding): the longest tail (LOOKUP_NGRAM tokens down to 1) of the row's final tokens
 * that occurred before, in its output so far or else in its source ids (useful where source and target share the
 * vocabulary: names, numbers, code copied), and the tokens that followed it become the draft after the final prefix.
 * Forced positions keep their token. Sets and returns row.drafted, the tokens drafted (0: none found).
 */
function lookupDraft(row: Row, len: number, rules: DecodingRules): number {
  const final = row.draft.slice(0, row.fixed);
  row.drafted = 0;
  for (let m = Math.min(LOOKUP_NGRAM, final.length); m >= 1; m--) {
    const tail = final.slice(-m);
    let next = followers(final, final.length - 1, tail, len);
    if (next.length === 0) next = followers(row.source, row.source.length, tail, len);
    if (next.length === 0) continue;
    next = next.slice(0, row.cap - row.fixed);
    next.forEach((tok, i) => {
      const q = row.fixed + i;
      row.draft[q] = rules.forced(q, q + 1 >= row.cap) ?? tok;
    });
    row.drafted = next.length;
    return row.drafted;
  }
  return 0;
}

/**
 * The block a strategy feeds on this plan, or PLANC_E411 naming stepTokens: pgj/hgj need the plan to take b tokens
 * per step; pj refines the whole sentence in chunks of the plan's most step tokens, which must be at least 2.
 */
export function jacobiBlock(plan: Plan, kind: JacobiKind, b: number): number {
  const [lo, hi] = stepTokenRange(plan);
  const need = kind === 'pj' ? 2 : b;
  if (lo > 1 || hi < need) {
    const takes = lo === hi ? `exactly ${lo} token${lo === 1 ? '' : 's'}` : `${lo} to ${hi} tokens`;
    const what = (opt: OptionNamer) =>
      kind === 'pj'
        ? 'refines the whole sentence in chunks of the tokens a step takes (at least 2)'
        : `feeds blocks of ${b} tokens (${opt('jacobiBlock')})`;
    const fix = (opt: OptionNamer) =>
      kind === 'pj' ? `${opt('stepTokens')} N (N ≥ 2, e.g. 8)` : `${opt('stepTokens')} ${b} or more`;
    throw new PlancError(
      'PLANC_E411',
      (opt) =>
        `strategy '${kind}' ${what(opt)}, but plan ${plan.source}'s decoder step takes ${takes} per row; optimize it with ${fix(opt)}`,
      {},
      { option: 'strategy', value: kind },
    );
  }
  return kind === 'pj' ? hi : b;
}

/**
 * Decodes one batch with a Jacobi strategy; yields after each decoder run. Rows share one cached length and one number
 * of fed tokens: each run feeds every live row the last token all rows have final plus its draft from there, then the
 * cache is truncated to the prefix every live row has final (a row ahead recomputes its final tokens, which stay
 * final). Finished sentences (final eos or cap) leave the batch. Guesses start as pad (the paper's initialization),
 * forced tokens as themselves.
 */
export function* jacobiSteps(
  job: BatchJob,
  kind: JacobiKind,
  onStats?: (s: JacobiBatchStats) => void,
): Steps<Hypothesis[]> {
  const { plan, sources, maxLens, rules, options } = job;
  const block = jacobiBlock(plan, kind, options.jacobiBlock);
  const most = stepTokenRange(plan)[1];
  const pad = rules.c.padId;
  const rows: Row[] = sources.map((s, i) => {
    const cap = maxLens[i]!;
    const draft = Array.from({ length: cap }, (_, q) => rules.forced(q, q + 1 >= cap) ?? pad);
    return {
      source: s,
      cap,
      parallelUntil: Math.min(cap, s.length),
      draft,
      fixed: 0,
      drafted: 0,
      logProb: 0,
      iterations: 0,
      done: false,
    };
  });
  const stats: JacobiBatchStats = { strategy: kind, block, steps: 1, tokenRows: rows.length, sentences: [] };
  const trace = options.jacobiTrace ? new JacobiTraceRecorder(kind, block, sources, rows) : undefined;
  const runner = new StepRunner(plan, sources, rules.c, sources.length, Math.max(...maxLens));
  try {
    if (runner.length !== 1)
      throw new PlancError(
        'PLANC_E411',
        `strategy '${kind}' needs the first decoder run to cache one position (the start token); plan ${plan.source}'s caches ${runner.length}`,
      );
    let live = rows;
    let base = 0;
    let fed: number[][] = rows.map(() => [rules.c.startId]);
    for (;;) {
      let drafted = false;
      live.forEach((row, r) => {
        row.iterations++;
        absorb(row, runner.out, r, base, fed[r]!, rules, options.returnScores);
        trace?.record(row, base, fed[r]!.length);
        if (kind === 'lookup' && !row.done && lookupDraft(row, block - 1, rules) > 0) drafted = true;
      });
      if (drafted) stats.drafted = (stats.drafted ?? 0) + 1;
      const keep = live.flatMap((row, r) => (row.done ? [] : [r]));
      if (keep.length === 0) break;
      runner.select(keep);
      live = keep.map((r) => live[r]!);
      base = Math.min(runner.length, ...live.map((row) => row.fixed));
      runner.truncate(base);
      const room = Math.max(...live.map((row) => row.cap)) - base;
      const n = Math.max(1, Math.min(NEXT[kind](base, live, block), most, room));
      fed = live.map((row) => Array.from({ length: n }, (_, i) => row.draft[base - 1 + i] ?? pad));
      runner.step(fed);
      stats.steps++;
      stats.tokenRows += n * live.length;
      yield;
    }
  } finally {
    runner.release(); // its resident buffers go back to the plan for the next batch
  }
  stats.sentences = rows.map((row) => ({ iterations: row.iterations, tokens: row.fixed }));
  onStats?.(stats);
  if (trace) for (const t of trace.finish()) options.jacobiTrace!(t);
  return rows.map((row) => {
    const tokens = row.draft.slice(0, row.fixed);
    const ids = rules.isEos(tokens[tokens.length - 1]!) ? tokens.slice(0, -1) : tokens;
    return { ids, logProb: row.logProb, length: row.fixed };
  });
}

/** jacobiSteps run to its end (tests, synchronous callers). */
export function jacobiBatch(job: BatchJob, kind: JacobiKind, onStats?: (s: JacobiBatchStats) => void): Hypothesis[] {
  return runToEnd(jacobiSteps(job, kind, onStats));
}

/** Receives the stats of every batch a registered Jacobi strategy decodes (benchmarks); undefined stops it. */
let statsListener: ((s: JacobiBatchStats) => void) | undefined;

/** Sets (or clears) the listener of the registered Jacobi strategies' batch stats. */
export function onJacobiStats(listener: ((s: JacobiBatchStats) => void) | undefined): void {
  statsListener = listener;
}

const SUMMARIES: Record<JacobiKind, string> = {
  pj: 'parallel Jacobi: the whole sentence refined in parallel until it stops changing (output = greedy; a plan of several step tokens: the cpu default)',
  pgj: 'parallel Gauss-Seidel-Jacobi: blocks of jacobiBlock tokens, Jacobi inside (output = greedy; a plan of several step tokens: the cpu default)',
  hgj: 'hybrid GS-Jacobi: PGJ blocks up to the source length, then one token per step (output = greedy; a plan of several step tokens: the cpu default)',
  lookup:
    'n-gram lookup: jacobiBlock - 1 tokens copied from the source or the output so far after a matching n-gram, verified in one step (output = greedy; a plan of several step tokens: the cpu default)',
};

/** The strategy entry for one algorithm. */
export function jacobiStrategy(kind: JacobiKind): DecodingStrategy {
  return {
    name: kind,
    summary: SUMMARIES[kind],
    check(o) {
      if (o.beamSize !== 1)
        throw new PlancError(
          'PLANC_E411',
          `bad decoding option: strategy '${kind}' decodes one hypothesis (greedy's), but beamSize = ${o.beamSize}; use beamSize 1`,
          {},
          { option: 'beamSize', value: o.beamSize, expected: `1 with strategy '${kind}'` },
        );
    },
    checkPlan(plan, o) {
      jacobiBlock(plan, kind, o.jacobiBlock);
    },
    topkNeeded: (rules) => rules.topkNeeded(1),
    *decode(job) {
      const hyps = yield* jacobiSteps(job, kind, statsListener);
      return hyps.map((h) => [h]);
    },
  };
}

export const PJ = jacobiStrategy('pj');
export const PGJ = jacobiStrategy('pgj');
export const HGJ = jacobiStrategy('hgj');
export const LOOKUP = jacobiStrategy('lookup');
