// The runtime-backed quantize service of a compile: each layer's precision (auto: from its measured error and the
// accuracy gate) and the plan's quantization report, measured on plans built here with the plans' own kernels.
import { PlancError } from '../compiler/diagnostics.ts';
import type { Model } from '../compiler/ir.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import type { PlanQuantization } from '../compiler/plan/types.ts';
import type { LayerPrecision } from '../compiler/quant/layers.ts';
import { readSentences } from '../compiler/vocab/header.ts';
import { buildPlan, decodingFacts } from '../codegen/build-plan.ts';
import type { PassContext, QuantizeOptions, QuantizeRequest, QuantizeResult } from '../passes/pass.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { conventionsOf, DecodingRules } from '../runtime/decode/conventions.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { loadTokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { DEFAULT_GATE, fp32Reference, gatePassed, gateText, measureQuantized, type Fp32Reference, type GateMeasure } from './quantize-gate.ts';
import { layerErrors, type LayerError } from './quantize-sensitivity.ts';
import { CALIBRATION_BATCH } from './vocab-calibrate.ts';
import type { CalibrationSetup } from './vocab-step.ts';

/** The precision auto gives a layer whose int8 error breaks the gate, tried in this order. */
const FALLBACKS: LayerPrecision[] = ['w8', 'float32'];
/** Auto's rounds: each raises the worst remaining layers (by measured error) one step. */
const MAX_ROUNDS = 4;

export function emptyQuantization(mode: string): PlanQuantization {
  return {
    mode, layers: [], weightBytesFp32: 0, weightBytes: 0, evalSource: '', evalSentences: 0, identicalSentences: 0, top1Agreement: 0,
    hasBleu: false, bleu: 0, bleuFp32: 0, gate: '', gatePassed: false, notes: '',
  };
}

/** A CPU plan of the model through the IR pipeline with these quantize options (none: float32). */
function cpuPlan(model: Model, pipe: PassContext, setup: CalibrationSetup, quantize: QuantizeOptions | undefined, name: string): Plan {
  const optimized = runPipeline(model, { ...pipe, quantize, services: undefined });
  const built = buildPlan(optimized, { ...setup.profile, maxBatch: Math.max(setup.profile.maxBatch, CALIBRATION_BATCH), target: 'cpu', specialIds: setup.specialIds });
  return loadPlanBytes(encodePlan(built.header, built.blob), name);
}

/** The layer map of auto: int8 everywhere but where measured errors or earlier rounds raised a layer. */
function autoLayers(errors: LayerError[], raised: Map<string, LayerPrecision>, forced: Readonly<Record<string, LayerPrecision>>): Record<string, LayerPrecision> {
  const layers: Record<string, LayerPrecision> = {};
  for (const e of errors) layers[e.node] = raised.get(e.node) ?? 'int8';
  return { ...layers, ...forced };
}

function setMeasure(h: PlanQuantization, m: GateMeasure, src: string): void {
  Object.assign(h, {
    evalSource: src, evalSentences: m.evalSentences, identicalSentences: m.identicalSentences, top1Agreement: m.top1Agreement,
    hasBleu: m.bleu !== undefined, bleu: m.bleu ?? 0, bleuFp32: m.bleuFp32 ?? 0, gate: gateText(DEFAULT_GATE), gatePassed: gatePassed(m, DEFAULT_GATE),
  });
}

/**
 * Fixed modes: the mode (and per-layer choices) as asked, measured against float32 when --eval-src is given. auto:
 * every layer's int8 error measured on calibration data; layers over the error bound start in w8; then, with
 * --eval-src, rounds that raise the worst remaining layers until the gate holds (each round reported in notes).
 */
export async function quantizeStep(model: Model, request: QuantizeRequest, pipe: PassContext, setup: CalibrationSetup): Promise<QuantizeResult> {
  const { progress, profile } = setup;
  const header = emptyQuantization(request.mode);
  const forced = request.layers ?? {};
  if (request.mode !== 'auto' && !request.evalSrc) return { options: { precision: request.mode, layers: forced }, header };
  if (!setup.tokenizer) throw new PlancError('PLANC_E301', '--quantize auto and --eval-src read text: they need the model\'s tokenizer (give --tokenizer FILE)');
  const dec = decodingFacts(model, setup.specialIds);
  const tok = await loadTokenizer(setup.tokenizer.bytes, setup.tokenizer.kind, undefined, dec.eosId);
  const rules = new DecodingRules(conventionsOf(dec));
  const evalSrc = request.evalSrc ? readSentences(request.evalSrc, '--eval-src') : undefined;
  const evalRef = request.evalRef ? readSentences(request.evalRef, '--eval-ref') : undefined;
  if (evalSrc && evalRef && evalSrc.length !== evalRef.length) throw new PlancError('PLANC_E301', `--eval-src has ${evalSrc.length} sentences but --eval-ref has ${evalRef.length}`);
  const calib = request.calibrate ? readSentences(request.calibrate, '--calibrate') : evalSrc;
  if (request.mode === 'auto' && !calib) throw new PlancError('PLANC_E301', '--quantize auto measures each layer on text: give --eval-src FILE (or --calibrate FILE)');
  progress?.start('building the float32 plan');
  const fp32 = cpuPlan(model, pipe, setup, undefined, 'float32.plan');
  const plans: Plan[] = [fp32];
  try {
    let ref: Fp32Reference | undefined;
    if (evalSrc) ref = fp32Reference(fp32, tok, rules, evalSrc, evalRef, profile.maxSrcLen, profile.maxTgtLen, progress);
    const measure = (options: QuantizeOptions, what: string): GateMeasure => {
      progress?.start(`building the ${what} plan`);
      const q = cpuPlan(model, pipe, setup, options, `${what}.plan`);
      plans.push(q);
      const m = measureQuantized(q, ref!, tok, rules, dec.eosId ?? 0, profile.maxTgtLen, progress);
      q.close();
      plans.pop();
      return m;
    };
    if (request.mode !== 'auto') {
      const options = { precision: request.mode, layers: forced };
      setMeasure(header, measure(options, request.mode), request.evalSrc!);
      return { options, header };
    }
    progress?.start('measuring each layer\'s int8 error');
    const errors = layerErrors(model, pipe, fp32, tok, rules, calib!, profile, progress);
    const raised = new Map<string, LayerPrecision>();
    const notes: string[] = [];
    for (const e of errors) {
      if (e.int8 > e.bound) {
        raised.set(e.node, 'w8');
        notes.push(`${e.node}: w8, its int8 error ${e.int8.toFixed(4)} is over ${e.bound} (w8: ${e.w8.toFixed(4)})`);
      }
    }
    let options: QuantizeOptions = { precision: 'int8', layers: autoLayers(errors, raised, forced) };
    if (ref) {
      const worst = [...errors].sort((a, b) => b.int8 - a.int8);
      for (let round = 1; ; round++) {
        const m = measure(options, `auto round ${round}`);
        setMeasure(header, m, request.evalSrc!);
        notes.push(`round ${round}: ${raised.size} layer(s) raised; identical ${(100 * m.identicalSentences).toFixed(1)}%, top-1 ${(100 * m.top1Agreement).toFixed(2)}%${m.bleu !== undefined ? `, BLEU ${m.bleu.toFixed(2)} vs ${m.bleuFp32!.toFixed(2)}` : ''}${header.gatePassed ? ': gate holds' : ''}`);
        if (header.gatePassed || round >= MAX_ROUNDS) break;
        // raise the worst quarter of the layers still at their lowest precision, one step each
        const next = worst.filter((e) => (raised.get(e.node) ?? 'int8') !== 'float32' && !(e.node in forced));
        if (!next.length) break;
        for (const e of next.slice(0, Math.max(1, Math.ceil(next.length / 4)))) {
          const now = raised.get(e.node);
          const to = now === undefined ? FALLBACKS[0]! : FALLBACKS[FALLBACKS.indexOf(now) + 1] ?? 'float32';
          raised.set(e.node, to);
          notes.push(`${e.node}: ${to} in round ${round + 1} (int8 error ${e.int8.toFixed(4)}, among the worst left)`);
        }
        options = { precision: 'int8', layers: autoLayers(errors, raised, forced) };
      }
    }
    header.notes = notes.join('\n');
    header.layers = errors.map((e) => ({
      graph: e.graph, node: e.node, op: e.op, precision: options.layers?.[e.node] ?? 'int8', bytesBefore: 0, bytesAfter: 0, error: e.int8,
      reason: raised.has(e.node) ? `int8 error ${e.int8.toFixed(4)} (bound ${e.bound})` : '',
    }));
    return { options, header };
  } finally {
    for (const p of plans) p.close();
  }
}
