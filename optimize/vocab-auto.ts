// --vocab auto: the tuner's vocabulary alternatives. One calibration, then every R × K point of the grid measured on
// the held-out text; the cheapest point that holds the accuracy gate is kept (none: the full projection), and the whole
// curve is recorded in the plan for the report.
import { PlancError } from '../compiler/diagnostics.ts';
import type { PlanVocab, PlanVocabPoint } from '../compiler/plan/types.ts';
import { activeSetStats, clusterActiveSets } from '../compiler/vocab/clusters.ts';
import { emptyVocab } from '../compiler/vocab/header.ts';
import { kmeans, type KMeansResult } from '../compiler/vocab/kmeans.ts';
import type { VocabSpec } from '../compiler/vocab/spec.ts';
import type { ProgressReporter, VocabRewriteOptions } from '../passes/pass.ts';
import type { DecodingRules } from '../runtime/decode/conventions.ts';
import type { Plan } from '../runtime/plan.ts';
import type { Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { DEFAULT_GATE, gatePassed, gateText } from './quantize-gate.ts';
import { assignFn, type Calibration } from './vocab-calibrate.ts';
import { evaluateQuality, type OutputLayer } from './vocab-evaluate.ts';

type ClustersRewrite = Extract<VocabRewriteOptions, { method: 'clusters' }>;

/** What auto measures with: the calibration (top-K ids per state for the grid's largest K), the exposed plan, the text. */
export interface AutoSetup {
  cal: Calibration;
  calibrationFile: string;
  plan: Plan;
  tok: Tokenizer;
  layer: OutputLayer;
  rules: DecodingRules;
  evalSrc: string[];
  evalRef?: string[];
  evalSource: string;
  specials: number[];
  vocabSize: number;
  maxSrcLen: number;
  maxTgtLen: number;
  progress?: ProgressReporter;
}

/** The first k of every row of a [n, stride] id matrix (a calibration's top ids cut to a smaller K). */
export function prefix(ids: Int32Array, stride: number, k: number): Int32Array {
  if (k === stride) return ids;
  const n = ids.length / stride;
  const out = new Int32Array(n * k);
  for (let i = 0; i < n; i++) out.set(ids.subarray(i * stride, i * stride + k), i * k);
  return out;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** One measured point of the grid with what building it made: the rewrite, its k-means run, its calibration active fraction. */
export interface MeasuredPoint {
  point: PlanVocabPoint;
  rewrite: ClustersRewrite;
  km: KMeansResult;
  calibrationActiveMean: number;
}

/**
 * Measures every R × K point of the grid on the held-out text (emulated on the exposed float32 plan, against its full
 * projection), each point with the gate's verdict and its cost per decoder row (R centroid distances + the mean active
 * ids, in dot products of length D). One k-means run per R; K cuts the calibration's top ids.
 */
export function measureClusters(
  spec: Extract<VocabSpec, { method: 'auto' }>,
  s: AutoSetup,
): { points: MeasuredPoint[]; bleuFull: number } {
  const { cal } = s;
  const kMax = Math.max(...spec.topK);
  const stride = cal.states ? cal.topK.length / cal.states : 0; // ids the calibration kept per state
  if (stride < kMax)
    throw new PlancError('PLANC_E302', `internal: the calibration keeps ${stride} ids per state, auto needs ${kMax}`);
  const { assign } = assignFn();
  const points: MeasuredPoint[] = [];
  const rs = [...new Set(spec.clusters.map((r) => Math.min(r, cal.states)))];
  let bleuFull = 0; // the full projection's BLEU on the text (the same for every point)
  let fullIds: number[][] | undefined; // and its output, decoded once
  const bar = s.progress?.bar(
    `vocabulary: ${rs.length} R × ${spec.topK.length} K measured on ${s.evalSrc.length} sentences`,
    rs.length * spec.topK.length,
  );
  for (const r of rs) {
    const km = kmeans(cal.hidden, cal.states, cal.d, { clusters: r, clampClusters: true, assign });
    for (const k of spec.topK) {
      const sets = clusterActiveSets(
        km.assignments,
        prefix(cal.topK, stride, k),
        k,
        km.clusters,
        s.specials,
        s.vocabSize,
      );
      const rewrite: ClustersRewrite = {
        method: 'clusters',
        centroids: km.centroids,
        cnorm: km.cnorm,
        offsets: sets.offsets,
        ids: sets.ids,
        clusters: km.clusters,
        dim: cal.d,
      };
      const q = evaluateQuality(
        s.plan,
        s.tok,
        s.layer,
        s.rules,
        s.evalSrc,
        s.evalRef,
        { kind: 'clusters', c: rewrite },
        s.maxSrcLen,
        s.maxTgtLen,
        undefined,
        fullIds,
      );
      fullIds = q.fullIds;
      const point: PlanVocabPoint = {
        clusters: km.clusters,
        topK: k,
        activeMean: q.activeMean,
        activeMax: q.activeMax,
        top1Agreement: q.top1Agreement,
        identicalSentences: q.identicalSentences,
        bleu: q.bleu ?? 0,
        gatePassed: gatePassed(
          {
            identicalSentences: q.identicalSentences,
            top1Agreement: q.top1Agreement,
            evalSentences: q.evalSentences,
            bleu: q.bleu,
            bleuFp32: q.bleuFull,
            differing: [],
          },
          DEFAULT_GATE,
        ),
        cost: km.clusters + q.activeMean * s.vocabSize,
      };
      bleuFull = q.bleuFull ?? 0;
      points.push({
        point,
        rewrite,
        km,
        calibrationActiveMean: activeSetStats(sets, km.assignments).weightedMeanFraction,
      });
      bar?.tick(1);
    }
  }
  bar?.done();
  return { points, bleuFull };
}

/** The plan's vocab header of a measured grid: the calibration, the text, the curve; `chosen` adds its point's facts. */
export function clustersHeader(
  s: AutoSetup,
  points: MeasuredPoint[],
  bleuFull: number,
  chosen: MeasuredPoint | undefined,
  choice: string,
): PlanVocab {
  const header = emptyVocab('clusters');
  Object.assign(header, {
    specialIds: s.specials,
    calibrationFile: s.calibrationFile,
    calibrationSentences: s.cal.sentences,
    calibrationStates: s.cal.states,
    evalSource: s.evalSource,
    evalSentences: s.evalSrc.length,
    evalMode: 'emulated',
    curve: points.map((m) => m.point),
    hasBleu: s.evalRef !== undefined,
    bleuFull,
    choice,
  });
  if (chosen) {
    const best = chosen.point;
    Object.assign(header, {
      clusters: best.clusters,
      topK: best.topK,
      kmeansIterations: chosen.km.iterations,
      kmeansConverged: chosen.km.converged,
      kmeansInertia: chosen.km.inertia,
      emptyClusters: chosen.km.emptyClusters,
      calibrationActiveMean: chosen.calibrationActiveMean,
      activeMean: best.activeMean,
      activeMax: best.activeMax,
      top1Agreement: best.top1Agreement,
      identicalSentences: best.identicalSentences,
      bleu: best.bleu,
    });
  }
  return header;
}

/**
 * Measures the grid and chooses: the point of least cost per decoder row among those that hold the gate. Returns the
 * rewrite (undefined: none held it) and the plan's vocab header with the curve and the reason.
 */
export function autoClusters(
  spec: Extract<VocabSpec, { method: 'auto' }>,
  s: AutoSetup,
): { rewrite?: ClustersRewrite; header: PlanVocab } {
  const { points, bleuFull } = measureClusters(spec, s);
  const curve = points.map((m) => m.point);
  const passing = points
    .filter((m) => m.point.gatePassed)
    .sort((a, b) => a.point.cost - b.point.cost || a.point.clusters - b.point.clusters);
  const full = s.vocabSize;
  const text = (p: PlanVocabPoint) =>
    `R ${p.clusters} K ${p.topK} (identical ${pct(p.identicalSentences)}, top-1 ${pct(p.top1Agreement)}, ${p.cost.toFixed(0)} dot products a row vs ${full} for the full projection)`;
  const best = passing[0];
  if (!best)
    return {
      header: clustersHeader(
        s,
        points,
        bleuFull,
        undefined,
        `none of the ${curve.length} points holds the gate (${gateText(DEFAULT_GATE)}) on ${s.evalSource}: the full projection is kept (more calibration text, larger K or fewer clusters move the curve up)`,
      ),
    };
  return {
    rewrite: best.rewrite,
    header: clustersHeader(
      s,
      points,
      bleuFull,
      best,
      `${text(best.point)}: the cheapest of ${passing.length} of ${curve.length} points that hold the gate (${gateText(DEFAULT_GATE)})`,
    ),
  };
}
