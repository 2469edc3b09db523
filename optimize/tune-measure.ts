// Measuring a plan's kernel calls in context: every graph run on synthetic feeds at an operating point (batch, source
// length, past length), warmed up, then timed over repeated runs with the runtime's per-call profile.
import { PlancError } from '../compiler/diagnostics.ts';
import { STEP_TOKENS_SYMBOL } from '../compiler/plan/io-names.ts';
import type { PlanFile } from '../compiler/plan/types.ts';
import { Plan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';

/** Where the tuner measures: the rows of a run (sentences × beams), the source length, the decoder's past length. */
export interface OperatingPoint {
  batch: number;
  srcLen: number;
  past: number;
}

/** A median and a spread (max - min), µs; from rounds, between: the slowest round's median minus the fastest's. */
export interface Timing {
  micros: number;
  spread: number;
  between?: number;
}

/** One graph at one point: each kernel call's timing and the whole run's. */
export interface GraphTimings {
  calls: Timing[];
  run: Timing;
}

/**
 * Warm-up and timed runs per measurement; rounds: how many times the plans are loaded anew and measured again (two
 * loads of the same plan can run several percent apart: where its buffers land in memory; the fastest round counts).
 */
export interface MeasureOptions {
  warmup: number;
  runs: number;
  rounds?: number;
}

/**
 * Feeds for a graph at a point: token ids spread over the plan's vocabulary, full masks, the past length, small floats;
 * one new token a step (what greedy and beam feed a multi-token step).
 */
export function syntheticFeeds(plan: Plan, graph: string, pt: OperatingPoint): Record<string, RtTensor> {
  const max = plan.header.profile.symbolMax;
  // ids 4..62 where the vocabulary has them (past the usual special ids), else every id of a smaller one
  const vocab = plan.header.decoding.vocabSize || 64;
  const [first, span] = vocab >= 64 ? [4, 59] : [0, vocab];
  const feeds: Record<string, RtTensor> = {};
  for (const io of plan.inputs(graph)) {
    const dims = io.dims.map((d) =>
      /^\d+$/.test(d)
        ? Number(d)
        : /batch/.test(d)
          ? pt.batch
          : /cache_capacity/.test(d)
            ? (max[d] ?? pt.past + 1)
            : /past/.test(d)
              ? pt.past
              : /encoder/.test(d)
                ? pt.srcLen
                : /decoder_sequence/.test(d) || d === STEP_TOKENS_SYMBOL
                  ? 1
                  : Math.min(max[d] ?? 1, pt.srcLen),
    );
    const n = dims.reduce((x, y) => x * y, 1);
    if (io.dtype === 'int64') {
      const v = /input_ids/.test(io.name)
        ? (i: number) => BigInt(first + ((i * 37) % span))
        : /past/.test(io.name)
          ? () => BigInt(pt.past)
          : () => 1n;
      feeds[io.name] = { dtype: 'int64', dims, data: BigInt64Array.from({ length: n }, (_, i) => v(i)) };
    } else if (io.dtype === 'uint8' || io.dtype === 'bool') {
      feeds[io.name] = { dtype: io.dtype, dims, data: new Uint8Array(n).fill(1) } as RtTensor;
    } else {
      feeds[io.name] = {
        dtype: 'float32',
        dims,
        data: Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37) * 0.3),
      };
    }
  }
  return feeds;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const timing = (xs: number[]): Timing => ({ micros: median(xs), spread: Math.max(...xs) - Math.min(...xs) });

/**
 * One timing from several rounds' of the same thing: the lowest median (the round least disturbed), the widest
 * spread, and how far the rounds' medians lie apart (this machine's noise between loads of a plan).
 */
export const fastestRound = (ts: Timing[]): Timing => {
  const medians = ts.map((t) => t.micros);
  return {
    micros: Math.min(...medians),
    spread: Math.max(...ts.map((t) => t.spread)),
    between: Math.max(...medians) - Math.min(...medians),
  };
};

/**
 * Loads the plan (header and blob as they are: its calls' variants included; throws the runtime's refusal when this
 * machine cannot run one) and times every graph at every point. Result: [point][graph].
 */
export function measurePlan(
  file: PlanFile,
  graphs: string[],
  points: OperatingPoint[],
  o: MeasureOptions,
): GraphTimings[][] {
  const plan = new Plan(file, '<tuning>');
  try {
    return points.map((pt) =>
      graphs.map((g) => {
        const feeds = syntheticFeeds(plan, g, pt);
        for (let i = 0; i < o.warmup; i++) plan.runSync(g, feeds);
        const perCall: number[][] = [];
        const runs: number[] = [];
        for (let r = 0; r < o.runs; r++) {
          plan.profile(g, true);
          const t0 = performance.now();
          plan.runSync(g, feeds);
          runs.push((performance.now() - t0) * 1000);
          plan.profile(g, false).forEach((c, k) => (perCall[k] ??= []).push(c.ms * 1000));
        }
        plan.profile(g, false);
        return { calls: perCall.map(timing), run: timing(runs) };
      }),
    );
  } finally {
    plan.close();
  }
}

/**
 * The operating points a plan is tuned at, at a typical length: one row, its profile's most rows, and from 16 most rows
 * on the power of two nearest their geometric middle (8 for 32): a batch decode shrinks as sentences end, and a beam
 * runs a few rows a sentence, so most steps of a large batch run at the rows in between.
 */
export function tuningPoints(file: PlanFile, batches?: number[]): OperatingPoint[] {
  const p = file.header.profile;
  const over = batches?.find((b) => b > p.maxBatch);
  if (over !== undefined)
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${opt('tuneBatch')} ${over}: the plan runs at most ${p.maxBatch} rows (its ${opt('maxBatch')})`,
    );
  const srcLen = Math.max(1, Math.min(p.maxSrcLen, 24));
  const past = Math.max(1, Math.min(p.maxTgtLen - 1, 12));
  const middle = p.maxBatch >= 16 ? [2 ** Math.round(Math.log2(p.maxBatch) / 2)] : [];
  return [...new Set(batches ?? [1, ...middle, p.maxBatch])]
    .sort((a, b) => a - b)
    .map((batch) => ({ batch, srcLen, past }));
}

/**
 * Whole runs of one graph in several plans: the end-to-end confirmation, where a second copy of the untuned plan
 * measures the noise. In o.rounds rounds (default 1), each plan is loaded alone, warmed up and run o.runs times in a
 * row, as a decode runs one plan step after step (run by run alternation between plans measured them in another cache
 * regime here: their weights together overflow the last-level cache, and the ranking changed); the order of the plans
 * rotates round by round, and a plan's time at a point is its lowest median over the rounds, so the machine's drift
 * falls on all alike (one load of the same plan ran up to 13% apart from another here: bench/results/tune.jsonl `aa`).
 * Result: per point, per plan.
 */
export function measureInRounds(
  files: PlanFile[],
  graph: string,
  points: OperatingPoint[],
  o: MeasureOptions,
): Timing[][] {
  const n = files.length;
  const runs: Timing[][][] = points.map(() => files.map(() => [])); // [point][plan][round]
  for (let round = 0; round < (o.rounds ?? 1); round++) {
    for (let j = 0; j < n; j++) {
      const k = (j + round) % n;
      measurePlan(files[k]!, [graph], points, o).forEach((perGraph, i) => runs[i]![k]!.push(perGraph[0]!.run));
    }
  }
  return runs.map((perPlan) => perPlan.map(fastestRound));
}
