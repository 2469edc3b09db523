// The runtime-backed quantize service of a compile: each layer's precision (auto: from its measured error and the
// accuracy gate) and the plan's quantization report, measured on plans built here with the plans' own kernels.
import { type OptionNamer, PlancError } from '../compiler/diagnostics.ts';
import type { Model } from '../compiler/ir.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import type { PlanQuantization, PlanVocab } from '../compiler/plan/types.ts';
import type { LayerPrecision } from '../compiler/quant/layers.ts';
import { readSentences } from '../compiler/vocab/header.ts';
import { buildPlan, decodingFacts } from '../codegen/build-plan.ts';
import { emptyQuantization } from '../compiler/plan/types.ts';
import type { PassContext, QuantizeOptions, QuantizeRequest, QuantizeResult } from '../passes/pass.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { conventionsOf, DecodingRules } from '../runtime/decode/conventions.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { loadTokenizer, type Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import {
  DEFAULT_GATE,
  fp32Reference,
  gatePassed,
  gateText,
  measureQuantized,
  type Fp32Reference,
  type GateMeasure,
} from './quantize-gate.ts';
import { INT8_ERROR_BOUND, layerErrors, type LayerError } from './quantize-sensitivity.ts';

const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : 0);
import { CALIBRATION_BATCH } from './vocab-calibrate.ts';
import type { CalibrationSetup } from './vocab-step.ts';

/**
 * auto's ladder, from fastest to most faithful; each rung is built and measured, the first that holds the gate is
 * kept. Per layer: `errors` are the measured int8 errors (rung 1 keeps layers over their bound in w8).
 */
export interface Rung {
  /** Short name (the --fast curve's rung). */
  id: string;
  name: string;
  layers: (e: LayerError) => LayerPrecision;
}
const isMatMul = (e: LayerError) => e.op !== 'planc.ProjectTopK' && e.op !== 'Gather';
export const LADDER: readonly Rung[] = [
  {
    id: 'int8-mixed',
    name: "int8, w8 where a layer's int8 error is over its bound",
    layers: (e) => (e.int8 > e.bound ? 'w8' : 'int8'),
  },
  { id: 'w8', name: 'w8 (int8 weights, float32 inputs) everywhere', layers: () => 'w8' },
  {
    id: 'int16',
    name: 'int16 products, int8 output layer rescored at 12 bits, 12-bit embeddings',
    layers: () => 'int16',
  },
  {
    id: 'int16-fp32out',
    name: 'int16 products, float32 output layer and embeddings',
    layers: (e) => (isMatMul(e) ? 'int16' : 'float32'),
  },
];

/** A rung's options over the measured layers (`forced`: per-layer precisions asked for, over the rung's). */
export const rungOptions = (
  r: Rung,
  errors: LayerError[],
  forced: Readonly<Record<string, LayerPrecision>> = {},
): QuantizeOptions => ({
  precision: 'int8',
  layers: { ...Object.fromEntries(errors.map((e) => [e.node, r.layers(e)])), ...forced },
});

/** What a measurement against float32 reads: the model's decoding facts and rules, its tokenizer, the text. */
export interface GateInputs {
  dec: ReturnType<typeof decodingFacts>;
  tok: Tokenizer;
  rules: DecodingRules;
  evalSrc?: string[];
  evalRef?: string[];
}

/** Loads the tokenizer and reads the evaluation text (and references, of the same length); `what` names the caller. */
export async function gateInputs(
  model: Model,
  setup: CalibrationSetup,
  evalSrcFile: string | undefined,
  evalRefFile: string | undefined,
  what: (opt: OptionNamer) => string,
): Promise<GateInputs> {
  if (!setup.tokenizer)
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${what(opt)} read text: they need the model's tokenizer (give ${opt('tokenizer')} FILE)`,
    );
  const dec = decodingFacts(model, setup.specialIds);
  const tok = await loadTokenizer(setup.tokenizer.bytes, setup.tokenizer.kind, undefined, dec.eosId);
  const rules = new DecodingRules(conventionsOf(dec));
  const evalSrc = evalSrcFile ? readSentences(evalSrcFile, 'evalSrc') : undefined;
  const evalRef = evalRefFile ? readSentences(evalRefFile, 'evalRef') : undefined;
  if (evalSrc && evalRef && evalSrc.length !== evalRef.length)
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${opt('evalSrc')} has ${evalSrc.length} sentences but ${opt('evalRef')} has ${evalRef.length}`,
    );
  return { dec, tok, rules, evalSrc, evalRef };
}

/**
 * A CPU plan of the model through the IR pipeline with these quantize options (none: float32); `vocab`: the plan's
 * vocab record (a shortlist plan's runtime reads its shortlist there).
 */
export function cpuPlan(
  model: Model,
  pipe: PassContext,
  setup: CalibrationSetup,
  quantize: QuantizeOptions | undefined,
  name: string,
  vocab?: PlanVocab,
): Plan {
  const optimized = runPipeline(model, { ...pipe, quantize, services: undefined });
  const built = buildPlan(optimized, {
    ...setup.profile,
    maxBatch: Math.max(setup.profile.maxBatch, CALIBRATION_BATCH),
    target: 'cpu',
    specialIds: setup.specialIds,
  });
  if (vocab) built.header.vocab = vocab;
  return loadPlanBytes(encodePlan(built.header, built.blob), name);
}

/** Each measured layer's precision under `options`, with its errors and why (the plan's quantization layers). */
export function layerRecords(
  errors: LayerError[],
  options: QuantizeOptions,
  forced: Readonly<Record<string, LayerPrecision>> = {},
): PlanQuantization['layers'] {
  return errors.map((e) => {
    const p = options.layers?.[e.node] ?? options.precision;
    return {
      graph: e.graph,
      node: e.node,
      op: e.op,
      precision: p,
      bytesBefore: 0,
      bytesAfter: 0,
      error: e.int8,
      reason:
        e.node in forced
          ? 'asked (--quantize-layers)'
          : p === 'int8'
            ? ''
            : `auto: ${p} (int8 error ${e.int8.toFixed(4)}, bound ${e.bound}, w8 error ${e.w8.toFixed(4)})`,
    };
  });
}

export function setMeasure(h: PlanQuantization, m: GateMeasure, src: string): void {
  Object.assign(h, {
    evalSource: src,
    evalSentences: m.evalSentences,
    identicalSentences: m.identicalSentences,
    top1Agreement: m.top1Agreement,
    hasBleu: m.bleu !== undefined,
    bleu: m.bleu ?? 0,
    bleuFp32: m.bleuFp32 ?? 0,
    gate: gateText(DEFAULT_GATE),
    gatePassed: gatePassed(m, DEFAULT_GATE),
  });
}

/**
 * Fixed modes: the mode (and per-layer choices) as asked, measured against float32 when --eval-src is given. auto:
 * every layer's int8 error measured on calibration data, then the LADDER's rungs built and measured on --eval-src
 * until one holds the gate (every rung reported in notes); when none does, the plan stays float32 and says so.
 */
export async function quantizeStep(
  model: Model,
  request: QuantizeRequest,
  pipe: PassContext,
  setup: CalibrationSetup,
): Promise<QuantizeResult> {
  const { progress, profile } = setup;
  const header = emptyQuantization(request.mode);
  const forced = request.layers ?? {};
  if (request.mode !== 'auto' && !request.evalSrc)
    return { options: { precision: request.mode, layers: forced }, header };
  const { dec, tok, rules, evalSrc, evalRef } = await gateInputs(
    model,
    setup,
    request.evalSrc,
    request.evalRef,
    (opt) => `${opt('quantize')} auto and ${opt('evalSrc')}`,
  );
  const calib = request.calibrate ? readSentences(request.calibrate, 'calibrate') : evalSrc;
  if (request.mode === 'auto' && !calib)
    throw new PlancError(
      'PLANC_E302',
      (opt) =>
        `${opt('quantize')} auto measures each layer on text: give ${opt('evalSrc')} FILE (or ${opt('calibrate')} FILE)`,
    );
  progress?.start('building the float32 plan');
  const fp32 = cpuPlan(model, pipe, setup, undefined, 'float32.plan');
  const plans: Plan[] = [fp32];
  try {
    let ref: Fp32Reference | undefined;
    if (evalSrc)
      ref = fp32Reference(fp32, tok, rules, evalSrc, evalRef, profile.maxSrcLen, profile.maxTgtLen, progress);
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
    progress?.start("measuring each layer's int8 error");
    const errors = layerErrors(model, pipe, fp32, tok, rules, calib!, profile, progress);
    const notes: string[] = [];
    const over = errors.filter((e) => e.int8 > e.bound);
    notes.push(
      `measured: ${errors.length} layers, int8 output error median ${median(errors.map((e) => e.int8)).toFixed(4)}, max ${Math.max(0, ...errors.map((e) => e.int8)).toFixed(4)}; ${over.length} over the bound ${INT8_ERROR_BOUND}${over.length ? ` (${over.map((e) => e.node).join(', ')})` : ''}`,
    );
    const mix = (r: Rung): QuantizeOptions => rungOptions(r, errors, forced);
    let options = mix(LADDER[0]!);
    if (ref) {
      let passed = false;
      for (const [i, rung] of LADDER.entries()) {
        options = mix(rung);
        const m = measure(options, `auto rung ${i + 1}`);
        setMeasure(header, m, request.evalSrc!);
        notes.push(
          `rung ${i + 1} (${rung.name}): identical ${(100 * m.identicalSentences).toFixed(1)}%, top-1 ${(100 * m.top1Agreement).toFixed(2)}%${m.bleu !== undefined ? `, BLEU ${m.bleu.toFixed(2)} vs float32 ${m.bleuFp32!.toFixed(2)}` : ''}: gate ${header.gatePassed ? 'holds, kept' : 'fails'}`,
        );
        if (header.gatePassed) {
          passed = true;
          break;
        }
      }
      if (!passed) {
        // no quantized mix holds the gate on this text: the plan stays float32, as the gate demands, and says so
        options = { precision: 'float32', layers: forced };
        Object.assign(header, { identicalSentences: 1, top1Agreement: 1, bleu: header.bleuFp32, gatePassed: true });
        notes.push(
          'no rung holds the gate: every layer kept float32 (quantize with an explicit mode to trade accuracy for speed)',
        );
      }
    } else {
      notes.push('no --eval-src: rung 1 taken on the measured errors alone, not checked end to end');
    }
    header.notes = notes.join('\n');
    header.layers = layerRecords(errors, options, forced);
    return { options, header };
  } finally {
    for (const p of plans) p.close();
  }
}
