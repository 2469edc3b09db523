// --fast: one accuracy-gated search over quantization rungs × vocabulary points, each combination built with the plan's
// own kernels and measured against the float32 plan with the full projection on the evaluation text, timed on this
// machine at the plan's batch; the fastest combination that holds the gate is the plan, and every measured point is
// recorded (PlanFast) with what was traded. The gate, the rungs, the calibration and the grid are the ones of
// --quantize auto (quantize-step.ts, quantize-gate.ts) and --vocab auto (vocab-step.ts, vocab-auto.ts).
import { PlancError } from '../compiler/diagnostics.ts';
import type { Model } from '../compiler/ir.ts';
import {
  emptyQuantization,
  fastPointName,
  type PlanFast,
  type PlanFastPoint,
  type PlanVocab,
  type PlanVocabPoint,
} from '../compiler/plan/types.ts';
import { readSentences, shortlistVocab, specialIdsOf } from '../compiler/vocab/header.ts';
import { AUTO_CLUSTERS, AUTO_TOPK, type VocabSpec } from '../compiler/vocab/spec.ts';
import type { PassContext, QuantizeOptions, QuantizeResult, VocabResult } from '../passes/pass.ts';
import type { Plan } from '../runtime/plan.ts';
import {
  DEFAULT_GATE,
  fp32Reference,
  gatePassed,
  gateText,
  measureQuantized,
  type GateMeasure,
} from './quantize-gate.ts';
import { layerErrors } from './quantize-sensitivity.ts';
import { cpuPlan, gateInputs, LADDER, layerRecords, type Rung, rungOptions, setMeasure } from './quantize-step.ts';
import { clustersHeader, type MeasuredPoint, measureClusters } from './vocab-auto.ts';
import { greedyExposed } from './vocab-calibrate.ts';
import { autoSetup, type CalibrationSetup, exposedPlan } from './vocab-step.ts';

/** A vocabulary point of a combination: a clusters point of the grid, or the shortlist given. */
type Candidate = { kind: 'clusters'; m: MeasuredPoint } | { kind: 'shortlist'; header: PlanVocab };

/** What --fast asks of the compile (the option fields a caller sets; the CLI maps its flags onto them). */
export interface FastRequest {
  /** Held-out source sentences, one per line: the gate and the timing run on them (required). */
  evalSrc: string;
  /** Their references: BLEU joins the gate. */
  evalRef?: string;
  /** A lexical shortlist: one more vocabulary point, measured on every rung that holds the gate. */
  shortlist?: Extract<VocabSpec, { method: 'shortlist' }>;
  /** Source sentences the clusters are calibrated on; without it no clusters point is measured. */
  calibrate?: string;
  /** The clusters grid (default AUTO_CLUSTERS × AUTO_TOPK, as --vocab auto). */
  clusters?: number[];
  topK?: number[];
  /** Sentences of the evaluation text timed per combination (default TIME_SENTENCES). */
  timeSentences?: number;
}

export interface FastResult {
  /** The chosen rung's quantize options and record (undefined: float32 products). */
  quantized?: QuantizeResult;
  /** The chosen vocabulary point (undefined: the full projection). */
  vocab?: VocabResult;
  record: PlanFast;
}

/** Sentences timed per combination, and timing runs (the fastest kept: other load on the machine only slows a run). */
export const TIME_SENTENCES = 200;
const TIME_ROUNDS = 3;

/** The rungs --fast measures besides float32: int8 everywhere, then --quantize auto's ladder. */
const INT8: Rung = { id: 'int8', name: 'int8 everywhere', layers: () => 'int8' };
export const FAST_RUNGS: readonly Rung[] = [INT8, ...LADDER];

/**
 * The search holds a combination to the gate's identical share at the lower end of a one-sided 90% Wilson interval
 * over the sentences measured, not at the share measured: it keeps the fastest of many points that pass, so one that
 * passes by less than the sample's noise is likely to fall below the gate on other text (es-en: int16 + clusters R64
 * K16 at 97.8% of 500 dev sentences was 96.1% of 1,000 test sentences at batch 1). At 100% identical that takes 54
 * sentences for a 97% gate; on 500, about 98% measured.
 */
const FAST_Z = 1.2816;

/** The lower end of the one-sided Wilson score interval of a share p measured on n trials, at z. */
export function wilsonLower(p: number, n: number, z = FAST_Z): number {
  if (n <= 0) return 0;
  const z2 = z * z;
  return (p + z2 / (2 * n) - z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / (1 + z2 / n);
}

/** The gate the search holds a combination to: DEFAULT_GATE, its identical share at the sample's lower bound. */
export function fastGatePassed(m: GateMeasure): boolean {
  return gatePassed({ ...m, identicalSentences: wilsonLower(m.identicalSentences, m.evalSentences) }, DEFAULT_GATE);
}
const FAST_GATE_TEXT = `${gateText(DEFAULT_GATE)}, identical at the lower end of a one-sided 90% Wilson interval over the sentences measured`;

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
/**
 * Times the plans on the same sentences at `batch`: one warm-up batch each, then TIME_ROUNDS rounds in which every plan
 * translates them once in turn; each plan's fastest round, in seconds. Interleaved, so that a change in the machine's
 * other load during the search does not favour the plans measured while it was quiet.
 */
function timeInterleaved(
  plans: Plan[],
  sources: number[][],
  rules: Parameters<typeof greedyExposed>[2],
  maxTgtLen: number,
  batch: number,
): number[] {
  for (const p of plans) greedyExposed(p, sources.slice(0, batch), rules, maxTgtLen, undefined, undefined, batch);
  const best = plans.map(() => Infinity);
  for (let i = 0; i < TIME_ROUNDS; i++)
    plans.forEach((p, j) => {
      const t0 = performance.now();
      greedyExposed(p, sources, rules, maxTgtLen, undefined, undefined, batch);
      best[j] = Math.min(best[j]!, (performance.now() - t0) / 1e3);
    });
  return best;
}

/**
 * The search. Order, to cost minutes: (1) the float32 plan's reference output; (2) every rung on the full projection;
 * (3) with calibration text, one calibration and the clusters grid measured on float32 products (emulated, as --vocab
 * auto), the points failing the gate there dropped (quantization only adds error); (4) for each rung that held on the
 * full projection, the remaining points natively from the fewest dot products a row up, stopping at the first that
 * holds (the others do more work at the same precision); (5) the combinations that hold the gate timed together,
 * interleaved, and the fastest kept. Every combination measured joins the curve.
 */
export async function fastSearch(
  model: Model,
  request: FastRequest,
  pipe: PassContext,
  topk: number,
  setup: CalibrationSetup,
): Promise<FastResult> {
  const { progress, profile } = setup;
  if (!request.evalSrc)
    throw new PlancError('PLANC_E302', (opt) => `the fast search measures plans on text: it needs ${opt('evalSrc')}`);
  const g = await gateInputs(
    model,
    setup,
    request.evalSrc,
    request.evalRef,
    (opt) => `the fast search (${opt('fast')})`,
  );
  const { dec, tok, rules } = g;
  const evalSrc = g.evalSrc!;
  const base: PassContext = { ...pipe, vocab: undefined };
  const batch = profile.maxBatch;
  const notes: string[] = [];
  if (wilsonLower(1, evalSrc.length) < DEFAULT_GATE.identical)
    notes.push(
      `the evaluation text has ${evalSrc.length} sentences: too few for any combination but float32 to hold the gate at the sample's lower bound even at 100% identical; give more held-out text`,
    );
  const curve: PlanFastPoint[] = [];
  const plans: Plan[] = [];
  const open = (p: Plan) => {
    plans.push(p);
    return p;
  };
  const close = (p: Plan) => {
    p.close();
    plans.splice(plans.indexOf(p), 1);
  };
  try {
    progress?.start('building the float32 plan');
    const fp32 = open(cpuPlan(model, base, setup, undefined, 'float32.plan'));
    const ref = fp32Reference(fp32, tok, rules, evalSrc, g.evalRef, profile.maxSrcLen, profile.maxTgtLen, progress);
    const timed = ref.sources.slice(0, request.timeSentences ?? TIME_SENTENCES);
    /** The combinations that hold the gate, their plans kept open to be timed together at the end. */
    const held = new Map<PlanFastPoint, Plan>();
    const fp32Point: PlanFastPoint = {
      rung: 'float32',
      clusters: 0,
      topK: 0,
      shortlist: false,
      identicalSentences: 1,
      top1Agreement: 1,
      bleu: ref.bleu ?? 0,
      gatePassed: true,
      seconds: 0,
      chosen: false,
    };
    curve.push(fp32Point);
    held.set(fp32Point, fp32);
    const measures = new Map<PlanFastPoint, GateMeasure>();
    /** Builds and gates one combination (its plan kept when it holds); it joins the curve. */
    const measure = (rung: string, q: QuantizeOptions | undefined, vocab: Candidate | undefined) => {
      const clusters = vocab?.kind === 'clusters' ? vocab.m.point : undefined;
      const what = `${rung}${clusters ? ` R${clusters.clusters} K${clusters.topK}` : vocab ? ' shortlist' : ''}`;
      progress?.start(`building the ${what} plan`);
      const rewrite =
        vocab?.kind === 'clusters' ? vocab.m.rewrite : vocab ? ({ method: 'shortlist' } as const) : undefined;
      const header = vocab?.kind === 'shortlist' ? vocab.header : undefined;
      const p = open(cpuPlan(model, { ...base, vocab: rewrite }, setup, q, `${what}.plan`, header));
      // a vocabulary point is gated at batch 1: each row its own cluster's ids, each sentence its own shortlist (a
      // batch's mask is the union of its rows'), the strictest
      const m = measureQuantized(
        p,
        ref,
        tok,
        rules,
        dec.eosId ?? 0,
        profile.maxTgtLen,
        progress,
        vocab ? 1 : undefined,
      );
      const point: PlanFastPoint = {
        rung,
        clusters: clusters?.clusters ?? 0,
        topK: clusters?.topK ?? 0,
        shortlist: vocab?.kind === 'shortlist',
        identicalSentences: m.identicalSentences,
        top1Agreement: m.top1Agreement,
        bleu: m.bleu ?? 0,
        gatePassed: fastGatePassed(m),
        seconds: 0,
        chosen: false,
      };
      if (point.gatePassed) held.set(point, p);
      else close(p);
      curve.push(point);
      measures.set(point, m);
      return point;
    };

    // (2) the rungs on the full projection
    // the layers' int8 errors pick the mixed rung's w8 layers, on the calibration text (as --quantize auto: else the
    // evaluation text)
    const calibrationText = request.calibrate ?? request.evalSrc;
    progress?.start("measuring each layer's int8 error");
    const calib = request.calibrate ? readSentences(request.calibrate, 'calibrate') : evalSrc;
    const errors = layerErrors(model, base, fp32, tok, rules, calib, profile, progress);
    notes.push(
      `layer errors measured on ${calibrationText}; ${errors.filter((e) => e.int8 > e.bound).length} over their int8 bound`,
    );
    const rungs = new Map<string, QuantizeOptions | undefined>([['float32', undefined]]);
    const seen = new Set<string>();
    for (const r of FAST_RUNGS) {
      const q = rungOptions(r, errors);
      const key = JSON.stringify(q);
      if (seen.has(key)) {
        notes.push(`${r.id}: the same layers as a rung before it (not measured again)`);
        continue;
      }
      seen.add(key);
      const point = measure(r.id, q, undefined);
      if (point.gatePassed) rungs.set(r.id, q);
    }

    /** The vocab result of each measured combination with a vocabulary point. */
    const vocabOf = new Map<PlanFastPoint, () => VocabResult>();
    const vocabSize = dec.vocabSize;
    if (!vocabSize && (request.calibrate || request.shortlist))
      throw new PlancError('PLANC_E302', 'the fast search needs the vocabulary size (vocab_size in config.json)');
    // the shortlist given: one point, on every rung that held
    if (request.shortlist) {
      progress?.start(`reading shortlist ${request.shortlist.file}`);
      const header = shortlistVocab(request.shortlist, setup.tokenizer, vocabSize!, specialIdsOf(dec));
      for (const [rung, q] of rungs) {
        const point = measure(rung, q, { kind: 'shortlist', header });
        vocabOf.set(point, () => ({
          rewrite: { method: 'shortlist' },
          header: {
            ...header,
            choice: `the shortlist with ${rung} products, chosen by the fast search (its measurements: the plan's fast record)`,
          },
        }));
      }
    }

    // (3) the clusters grid on float32 products, emulated
    let screen: PlanVocabPoint[] = [];
    if (!request.calibrate) {
      notes.push(
        'no calibration text (fast.calibrate): no clusters point was measured; clusters are never calibrated on the evaluation text, which would bias the gate',
      );
    } else {
      const spec = {
        method: 'auto' as const,
        clusters: request.clusters ?? [...AUTO_CLUSTERS],
        topK: request.topK ?? [...AUTO_TOPK],
      };
      progress?.start('building a calibration plan (hidden state exposed)');
      const kMax = Math.max(...spec.topK);
      const exposed = exposedPlan(model, topk, kMax, rules, setup);
      open(exposed.plan);
      const auto = autoSetup(
        exposed,
        tok,
        rules,
        specialIdsOf(dec),
        vocabSize!,
        kMax,
        request.calibrate,
        request.evalSrc,
        evalSrc,
        g.evalRef,
        setup,
      );
      const { points, bleuFull } = measureClusters(spec, auto);
      close(exposed.plan);
      screen = points.map((m) => m.point);
      const screened = points.filter((m) => m.point.gatePassed).sort((a, b) => a.point.cost - b.point.cost);
      notes.push(
        `clusters: ${points.length} R × K points screened on float32 products (emulated, batch-1 masks); ${screened.length} hold the gate there and were measured on the rungs, at batch 1: ${screened.map((m) => `R${m.point.clusters} K${m.point.topK}`).join(', ') || 'none'}`,
      );
      // (4) each rung that held, its points from the cheapest up, until one holds
      for (const [rung, q] of rungs) {
        for (const [i, m] of screened.entries()) {
          const point = measure(rung, q, { kind: 'clusters', m });
          vocabOf.set(point, () => ({
            rewrite: m.rewrite,
            // the grid is the fast record's screen (not repeated here as a --vocab auto curve)
            header: clustersHeader(
              auto,
              [],
              bleuFull,
              m,
              `R ${m.point.clusters} K ${m.point.topK} with ${rung} products, chosen by the fast search (its measurements: the plan's fast record)`,
            ),
          }));
          if (i + 1 === screened.length && !point.gatePassed) notes.push(`${rung}: no clusters point holds the gate`);
          if (point.gatePassed) {
            if (i + 1 < screened.length)
              notes.push(
                `${rung}: ${screened.length - i - 1} point(s) with more dot products a row than R${m.point.clusters} K${m.point.topK} not measured (the same precision doing more work)`,
              );
            break;
          }
        }
      }
    }

    // the choice: the fastest combination that holds the gate (float32 with the full projection always does)
    progress?.start(
      `timing the ${held.size} combinations that hold the gate: ${timed.length} sentences at batch ${batch}, ${TIME_ROUNDS} interleaved rounds`,
    );
    const timedPoints = [...held.keys()];
    const seconds = timeInterleaved([...held.values()], timed, rules, profile.maxTgtLen, batch);
    for (const [i, p] of timedPoints.entries()) p.seconds = seconds[i]!;
    const fp32Seconds = fp32Point.seconds;
    const best = timedPoints.reduce((a, b) => (b.seconds < a.seconds ? b : a));
    best.chosen = true;
    const m = measures.get(best);
    const bleuText =
      ref.bleu === undefined
        ? ''
        : `, BLEU ${best.bleu - ref.bleu >= 0 ? '+' : '−'}${Math.abs(best.bleu - ref.bleu).toFixed(2)} (${best.bleu.toFixed(2)} vs ${ref.bleu.toFixed(2)})`;
    const record: PlanFast = {
      evalSource: request.evalSrc,
      evalSentences: evalSrc.length,
      hasBleu: ref.bleu !== undefined,
      bleuFp32: ref.bleu ?? 0,
      gate: FAST_GATE_TEXT,
      calibrationFile: request.calibrate ?? '',
      timeBatch: batch,
      timeSentences: timed.length,
      fp32Seconds,
      curve,
      choice: `${fastPointName(best)}: ${pct(best.identicalSentences)} identical to the float32 plan on ${evalSrc.length} sentences of ${request.evalSrc}${bleuText}, ${(fp32Seconds / best.seconds).toFixed(2)}× the float32 plan's speed at batch ${batch} (${timed.length} sentences timed); the fastest of ${curve.filter((p) => p.gatePassed).length} of ${curve.length} combinations that hold the gate (${FAST_GATE_TEXT})`,
      notes: notes.join('\n'),
      screen,
    };
    const q = rungs.get(best.rung);
    let quantized: QuantizeResult | undefined;
    if (q) {
      const header = emptyQuantization(`fast: ${best.rung}`);
      setMeasure(header, m!, request.evalSrc);
      header.layers = layerRecords(errors, q);
      header.notes = `chosen by the fast search: ${FAST_RUNGS.find((r) => r.id === best.rung)!.name}`;
      quantized = { options: q, header };
    }
    return { quantized, vocab: vocabOf.get(best)?.(), record };
  } finally {
    for (const p of [...plans]) p.close();
  }
}
