// Vocabulary calibration: greedy decoding on a plan exposing ProjectTopK's hidden state, the states' k-means clusters.
import { PlancError } from '../compiler/diagnostics.ts';
import type { Model } from '../compiler/ir.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { VOCAB_HIDDEN_OUTPUT } from '../compiler/plan/io-names.ts';
import { activeSetStats, clusterActiveSets } from '../compiler/vocab/clusters.ts';
import { assignTs, kmeans, type AssignFn, type KMeansResult } from '../compiler/vocab/kmeans.ts';
import { buildPlan, type BuildOptions } from '../codegen/build-plan.ts';
import type { ProgressReporter, VocabRewriteOptions } from '../passes/pass.ts';
import { runPipeline, type PipelineOptions } from '../passes/pipeline.ts';
import type { DecodingRules } from '../runtime/decode/conventions.ts';
import { greedyBatch, type PickToken } from '../runtime/decode/greedy.ts';
import { maxLengthFor, validateDecodingOptions } from '../runtime/decode/options.ts';
import { rowTop } from '../runtime/decode/scores.ts';
import { planDefaults } from '../runtime/decode/translate-ids.ts';
import { native, nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { Tokenizer } from '../runtime/tokenizer/tokenizer.ts';

/** Sentences per batch when calibrating and evaluating (the calibration plan is built to take them). */
export const CALIBRATION_BATCH = 32;

/**
 * A CPU plan of the model exposing ProjectTopK's hidden state (`vocab_hidden`): calibration and evaluation run it.
 * Its batch limit fits CALIBRATION_BATCH whatever the user's plan allows.
 */
export function exposePlan(model: Model, pipe: PipelineOptions, build: BuildOptions): { plan: Plan; optimized: Model } {
  const optimized = runPipeline(model, { ...pipe, vocab: { method: 'expose' } });
  const built = buildPlan(optimized, {
    ...build,
    maxBatch: Math.max(build.maxBatch, CALIBRATION_BATCH),
    target: 'cpu',
    onProgress: undefined,
  });
  return { plan: loadPlanBytes(encodePlan(built.header, built.blob), 'calibration.plan'), optimized };
}

/** A step's hidden states [rows, D] (the expose plan's vocab_hidden). */
export const hiddenOf = (out: Parameters<PickToken>[0]) => out[VOCAB_HIDDEN_OUTPUT]!.data as Float32Array;

/**
 * Greedy decoding over an expose plan as the runtime's greedy decoding does it (greedyBatch: the rules' forced, banned
 * and eos ids), CALIBRATION_BATCH sentences at a time; `pick(out, r, sentence, banned)` chooses an unforced token
 * (default: the best allowed one). Caps: the runtime's with maxLengthRatio 2, maxLengthConstant 10 (the model's max
 * length and maxTgtLen too). `batch`: sentences per run (default CALIBRATION_BATCH). Returns the ids per sentence
 * (without eos).
 */
export function greedyExposed(
  plan: Plan,
  sources: number[][],
  rules: DecodingRules,
  maxTgtLen: number,
  pick: PickToken | undefined,
  onBatch?: (n: number) => void,
  batch = CALIBRATION_BATCH,
): number[][] {
  const o = validateDecodingOptions({ beamSize: 1, maxLengthRatio: 2, maxLengthConstant: 10 }, planDefaults(plan));
  const order = sources.map((_, i) => i).sort((a, b) => sources[a]!.length - sources[b]!.length);
  const out: number[][] = sources.map(() => []);
  for (let b0 = 0; b0 < order.length; b0 += batch) {
    const idx = order.slice(b0, b0 + batch);
    const hyps = greedyBatch(
      plan,
      idx.map((i) => sources[i]!),
      idx.map((i) => maxLengthFor(o, sources[i]!.length, maxTgtLen)),
      rules,
      false,
      pick && ((step, r, j, banned) => pick(step, r, idx[j]!, banned)),
    );
    hyps.forEach((h, j) => (out[idx[j]!] = h.ids));
    onBatch?.(idx.length);
  }
  return out;
}

export interface Calibration {
  sentences: number;
  skipped: number;
  states: number;
  d: number;
  /** [states, D] and [states, K]. */
  hidden: Float32Array;
  topK: Int32Array;
  /** The greedy translations (ids without eos) of the sentences kept. */
  outputs: number[][];
}

/**
 * Translates the calibration sentences greedily (full projection, the model's conventions), recording the hidden
 * state and the top-K allowed ids of every step whose token is not forced.
 */
export function calibrate(
  plan: Plan,
  tok: Tokenizer,
  sentences: string[],
  topK: number,
  rules: DecodingRules,
  maxSrcLen: number,
  maxTgtLen: number,
  progress?: ProgressReporter,
): Calibration {
  return calibrateIds(
    plan,
    sentences.map((s) => tok.encodeSource(s)),
    topK,
    rules,
    maxSrcLen,
    maxTgtLen,
    progress,
  );
}

/** calibrate() on sources already as ids (the model's framing): for models without a tokenizer. */
export function calibrateIds(
  plan: Plan,
  all: number[][],
  topK: number,
  rules: DecodingRules,
  maxSrcLen: number,
  maxTgtLen: number,
  progress?: ProgressReporter,
): Calibration {
  const sources = all.filter((s) => s.length <= maxSrcLen);
  const skipped = all.length - sources.length;
  if (sources.length === 0)
    throw new PlancError(
      'PLANC_E501',
      (opt) => `every calibration sentence is longer than the plan's source limit (${opt('maxSrcLen')} ${maxSrcLen})`,
    );
  const dim = Number(
    /(\d+)\]?$/.exec(
      plan
        .outputs('decoder_with_past')
        .find((o) => o.name === VOCAB_HIDDEN_OUTPUT)!
        .dims.at(-1)!,
    )![1],
  );
  let hidden = new Float32Array(1 << 16),
    ids = new Int32Array(1 << 14);
  let n = 0;
  const bar = progress?.bar('calibrating', sources.length);
  const outputs = greedyExposed(
    plan,
    sources,
    rules,
    maxTgtLen,
    (out, r, _s, banned) => {
      if ((n + 1) * dim > hidden.length) {
        const h = new Float32Array(hidden.length * 2);
        h.set(hidden);
        hidden = h;
      }
      if ((n + 1) * topK > ids.length) {
        const x = new Int32Array(ids.length * 2);
        x.set(ids);
        ids = x;
      }
      hidden.set(hiddenOf(out).subarray(r * dim, (r + 1) * dim), n * dim);
      const top = rowTop(out, r, topK, banned).ids;
      ids.set(top, n * topK);
      n++;
      return top[0]!;
    },
    (k) => bar?.tick(k),
  );
  bar?.done();
  return {
    sentences: sources.length,
    skipped,
    states: n,
    d: dim,
    hidden: hidden.subarray(0, n * dim),
    topK: ids.subarray(0, n * topK),
    outputs,
  };
}

/** The native k-means assignment when the addon has it (kmeansAssign), else the TS one. */
export function assignFn(): { assign: AssignFn; native: boolean } {
  if (nativeAvailable()) {
    const f = (native() as unknown as { kmeansAssign?: AssignFn }).kmeansAssign;
    if (typeof f === 'function') return { assign: (...a) => f(...a), native: true };
  }
  return { assign: assignTs, native: false };
}

/** The clusters of a calibration: k-means (R clamped to the states, recorded), active sets with the special ids. */
export function buildClusters(
  cal: Calibration,
  r: number,
  topK: number,
  vocab: number,
  specials: number[],
  progress?: ProgressReporter,
): {
  rewrite: Extract<VocabRewriteOptions, { method: 'clusters' }>;
  km: KMeansResult;
  adjustments: string[];
  activeMean: number;
  assignNative: boolean;
} {
  const adjustments: string[] = [];
  if (cal.skipped) adjustments.push(`skipped ${cal.skipped} calibration sentence(s) longer than --max-src-len`);
  if (r > cal.states) adjustments.push(`R = ${r} lowered to ${cal.states}, the number of calibration states`);
  const { assign, native: assignNative } = assignFn();
  const bar = progress?.bar('k-means', 1);
  const km = kmeans(cal.hidden, cal.states, cal.d, { clusters: r, clampClusters: true, assign });
  bar?.done();
  const sets = clusterActiveSets(km.assignments, cal.topK, topK, km.clusters, specials, vocab);
  const stats = activeSetStats(sets, km.assignments);
  return {
    rewrite: {
      method: 'clusters',
      centroids: km.centroids,
      cnorm: km.cnorm,
      offsets: sets.offsets,
      ids: sets.ids,
      clusters: km.clusters,
      dim: cal.d,
    },
    km,
    adjustments,
    activeMean: stats.weightedMeanFraction,
    assignNative,
  };
}
