// The compile driver: IR passes, then program passes, with the same dump/verify hooks, and the services passes reach.
// Why optimize/: the driver fills PassContext with runtime-backed services, and compiler/, passes/, codegen/ may not import runtime/.
import type { Model } from '../compiler/ir.ts';
import type { PlanFast, PlanFile, PlanQuantization, PlanVocab } from '../compiler/plan/types.ts';
import { isHalf, type LayerPrecision } from '../compiler/quant/layers.ts';
import { PlancError } from '../compiler/diagnostics.ts';
import { fail } from '../compiler/diagnostics-catalog.ts';
import { NAT_GRAPH, NAT_LENGTH_SYMBOL } from '../compiler/plan/io-names.ts';
import { verifyModel } from '../model/verify.ts';
import { buildPlan, checkSeq2SeqOutputs, type BuildOptions, type BuiltPlan } from '../codegen/build-plan.ts';
import { PROGRAM_PASSES } from '../codegen/program-passes.ts';
import type { PassContext, PassServices, QuantizeRequest, VocabRequest } from '../passes/pass.ts';
import { PIPELINE, runPipeline } from '../passes/pipeline.ts';
import { defaultStepTokens } from '../passes/step-tokens.ts';
import { chooseTopk } from './topk.ts';
import { type FastRequest, fastSearch } from './fast.ts';
import { quantizeStep } from './quantize-step.ts';
import { calibrateVocab } from './vocab-step.ts';
import { tunePlan, type TuneRequest, type TuneSummary } from './tune.ts';

export interface CompileOptions extends Omit<BuildOptions, 'onProgress'> {
  /** IR passes to skip, by name ('fuse' skips every fusion). */
  disable?: string[];
  /** k of planc.ProjectTopK: N ≥ 1, 0 keeps the logits; by default what the model's beams need (optimize/topk.ts). */
  topk?: number;
  /** The decoder step's most new tokens (passes/step-tokens.ts). */
  stepTokens?: PassContext['stepTokens'];
  /** The vocabulary rewrite to calibrate and apply (the calibrate service runs it). */
  vocab?: Omit<VocabRequest, 'topk'>;
  /** Quantization of the products over constant weights (the quantize service chooses and measures). */
  quantize?: QuantizeRequest;
  /**
   * One gated search over quantization rungs × vocabulary points (optimize/fast.ts): the fastest combination that holds
   * the accuracy gate against the float32 plan is the plan. Excludes `vocab` and `quantize`; cpu plans only.
   */
  fast?: FastRequest;
  /** Tune the built cpu plan's kernel variants on this machine (the tune service; optimize/tune.ts). */
  tune?: TuneRequest;
  explain?: PassContext['explain'];
  /** Dump after this IR or program pass ('all': after every one); `what` says which list it belongs to. */
  dumpAfter?: string;
  onDump?: (pass: string, text: string, what: 'IR' | 'programs') => void;
}

/**
 * The pass services, and the driver's own step after the program passes (no pass calls it, so it is not a pass
 * service): --tune, each cpu kernel call's variants measured on this machine in the built plan (or read from the
 * tuning cache), the chosen variant set in the call and every decision in header.tuning (optimize/tune.ts). The plan
 * is changed in place.
 */
export interface CompileServices extends PassServices {
  tune?: (plan: PlanFile) => Promise<TuneSummary>;
}

export interface Compiled extends BuiltPlan {
  /** The k of planc.ProjectTopK the plan got (undefined: logits kept). */
  topk?: number;
  /** The decoder was sized for the first decoding step only (decoder_sequence_length ≤ 1; the default for seq2seq models). */
  firstStepOnly: boolean;
  vocab?: PlanVocab;
  quantization?: PlanQuantization;
  /** The fast search's curve and choice. */
  fast?: PlanFast;
  /** What --tune did (cache hits, misses, stale and foreign entries, choices changed, rollbacks). */
  tuning?: TuneSummary;
}

/** The names --dump-after accepts: every IR pass, every program pass, and 'all'; fails listing both lists. */
export function checkDumpAfter(name: string | undefined): void {
  if (
    name === undefined ||
    name === 'all' ||
    PIPELINE.some((p) => p.name === name) ||
    PROGRAM_PASSES.some((p) => p.name === name)
  )
    return;
  fail('optionProblem', {
    option: 'dumpAfter',
    value: name,
    why: `no such pass (IR passes: ${PIPELINE.map((p) => p.name).join(', ')}; program passes: ${PROGRAM_PASSES.map((p) => p.name).join(', ')}; or all)`,
  });
}

/**
 * Compiles an imported model into a plan: verify, the vocabulary step (calibrate service) when asked, the IR passes
 * (passes/pipeline.ts PIPELINE), then the program passes (codegen/program-passes.ts PROGRAM_PASSES). Services the
 * caller does not give are backed by the runtime here; progress goes to `services.progress` only.
 */
export async function compile(
  model: Model,
  options: CompileOptions,
  services: CompileServices = {},
): Promise<Compiled> {
  checkDumpAfter(options.dumpAfter);
  const { progress } = services;
  // Decoding runs the first-step decoder on the start token only; sizing it for whole target prefixes would make its
  // logits ([batch, max-tgt-len, vocab]) the largest tensor of the plan. maxDims.decoder_sequence_length allows more.
  const maxDims = { ...options.maxDims };
  const firstStepOnly = model.graphs.has('decoder_with_past') && maxDims.decoder_sequence_length === undefined;
  if (firstStepOnly) maxDims.decoder_sequence_length = 1;
  // HRT's Skip-CMLM pass reads k · ceil(maxLen / k) tokens: up to the target cap plus the largest chunk less one
  const hrt = model.decoding.hrt;
  if (hrt && model.graphs.has(NAT_GRAPH))
    maxDims[NAT_LENGTH_SYMBOL] ??= options.maxTgtLen + Math.max(...hrt.chunkSizes) - 1;
  const profile = { maxBatch: options.maxBatch, maxSrcLen: options.maxSrcLen, maxTgtLen: options.maxTgtLen, maxDims };
  progress?.start('verifying');
  verifyModel(model, { types: false });
  checkSeq2SeqOutputs(model);
  checkQuantizeTarget(options);
  const topk = chooseTopk(model, options.specialIds, options.topk);
  if (options.vocab && topk === undefined)
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${opt('vocab')} rewrites planc.ProjectTopK: it needs ${opt('topk')} N (N ≥ 1)`,
    );
  const setup = { profile, specialIds: options.specialIds, tokenizer: options.tokenizer, progress };
  const passServices: PassServices = {
    progress,
    calibrate: services.calibrate ?? ((m, request) => calibrateVocab(m, request, setup)),
    quantize: services.quantize ?? ((m, request, pipe) => quantizeStep(m, request, pipe, setup)),
  };
  const tune =
    services.tune ??
    (async (plan: PlanFile) => tunePlan(plan, { forced: options.variants, ...options.tune }, progress));
  const { onDump, dumpAfter } = options;
  const calibrated =
    options.vocab && !options.fast
      ? await passServices.calibrate!(model, { ...options.vocab, topk: topk! })
      : undefined;
  const passesAndBuild = async (stepTokens: PassContext) => {
    const pipe: PassContext & { disable: string[] } = { disable: options.disable ?? [], topk, ...stepTokens };
    const fast = options.fast ? await fastSearch(model, options.fast, pipe, topk ?? 0, setup) : undefined;
    const vocab = fast ? fast.vocab : calibrated;
    pipe.vocab = vocab?.rewrite;
    const quantized = fast
      ? fast.quantized
      : options.quantize
        ? await passServices.quantize!(model, options.quantize, pipe)
        : undefined;
    const optimized = runPipeline(model, {
      ...pipe,
      quantize: quantized?.options,
      explain: options.explain,
      services: passServices,
      dumpAfter,
      onPass: (name) => progress?.start(`pass ${name}`),
      onDump: onDump && ((name, text) => onDump(name, text, 'IR')),
    });
    const built = buildPlan(
      optimized,
      {
        target: options.target,
        archs: options.archs,
        ...profile,
        specialIds: options.specialIds,
        tokenizer: options.tokenizer,
        variants: options.variants,
        options: { ...options.options, profile: JSON.stringify(profile) },
        onProgress: (step) => progress?.start(step),
      },
      { dumpAfter, onDump: onDump && ((name, text) => onDump(name, text, 'programs')) },
    );
    return { fast, vocab, quantized, built };
  };
  // the default multi-token step is a default: a model whose passes or lowering fail with it gets one token
  const stepDefault = options.stepTokens === undefined ? defaultStepTokens(options.target, options.disable) : undefined;
  let attempt: Awaited<ReturnType<typeof passesAndBuild>>;
  try {
    attempt = await passesAndBuild(
      stepDefault ? { stepTokens: stepDefault, stepTokensDefault: true } : { stepTokens: options.stepTokens },
    );
  } catch (e) {
    if (!stepDefault || !(e instanceof PlancError)) throw e;
    options.explain?.('step-tokens', '', `the default of ${stepDefault} step tokens is not taken: ${e.message}`);
    attempt = await passesAndBuild({});
  }
  const { fast, vocab, quantized, built } = attempt;
  if (vocab) built.header.vocab = vocab.header;
  if (fast) built.header.fast = fast.record;
  if (quantized) built.header.quantization = mergeQuantization(built.header.quantization, quantized.header);
  const q = built.header.quantization;
  if (q && options.target === 'cpu' && q.layers.some((l) => isHalf(l.precision as LayerPrecision)))
    q.notes = [q.notes, CPU_HALF_NOTE].filter((x) => x).join('\n');
  const tuning = options.tune ? await tune(built) : undefined;
  return {
    ...built,
    topk,
    firstStepOnly,
    vocab: vocab?.header,
    quantization: built.header.quantization,
    ...(fast ? { fast: fast.record } : {}),
    ...(tuning ? { tuning } : {}),
  };
}

/** The --quantize precisions the CUDA kernels have (the cpu has every one; a layer may also stay float32). */
const CUDA_PRECISIONS: readonly string[] = ['w8', 'fp16', 'bf16'];
const CUDA_WHY =
  'the CUDA products are int8 weight-only (w8: float32 inputs) or on tensor cores in fp16 / bf16; int8 / int16 inputs and auto (whose ladder is int8 / int16) run on the CPU only';

/** What a cpu plan of a half precision says about itself (the stated fallback: it runs, as the reference). */
const CPU_HALF_NOTE =
  "fp16 / bf16 on the cpu: the reference path (each weight widened to float32 on every call, the other operand rounded to the weight's dtype), slower than float32: the CUDA tensor cores are where these precisions pay; on the cpu use int8, w8 or int16 for speed";

/**
 * Refuses a quantize mode or per-layer precision the CUDA kernels do not have, naming it and why; and fast with vocab
 * or quantize (it chooses both) or for a target other than cpu.
 */
function checkQuantizeTarget(options: CompileOptions): void {
  if (options.fast) {
    const other = options.vocab ? 'vocab' : options.quantize ? 'quantize' : undefined;
    if (other)
      throw new PlancError(
        'PLANC_E302',
        (opt) => `${opt('fast')} chooses the quantization and the vocabulary itself: it excludes ${opt(other)}`,
      );
    if (options.target !== 'cpu')
      throw new PlancError(
        'PLANC_E302',
        (opt) => `${opt('fast')} measures cpu plans: its int8 / int16 rungs run on the CPU only (${opt('target')} cpu)`,
      );
  }
  const q = options.quantize;
  if (!q || options.target !== 'cuda') return;
  if (!CUDA_PRECISIONS.includes(q.mode))
    throw new PlancError('PLANC_E302', (opt) => `${opt('quantize')} ${q.mode} ${opt('target')} cuda: ${CUDA_WHY}`);
  const bad = Object.entries(q.layers ?? {}).find(([, p]) => p !== 'float32' && !CUDA_PRECISIONS.includes(p));
  if (bad)
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${opt('quantizeLayers')} ${bad[0]}=${bad[1]} ${opt('target')} cuda: ${CUDA_WHY}`,
      {
        node: bad[0],
      },
    );
}

/** The pass's record of the plan's layers (codegen/pack.ts) with the quantize step's mode, measurements and reasons. */
function mergeQuantization(packed: PlanQuantization | undefined, step: PlanQuantization): PlanQuantization {
  if (!packed) return step;
  const measured = new Map(step.layers.map((l) => [`${l.graph}\u0000${l.node}`, l]));
  const layers = packed.layers.map((l) => {
    const m = measured.get(`${l.graph}\u0000${l.node}`);
    return m ? { ...l, error: m.error, reason: m.reason } : l;
  });
  // layers auto kept in float32 are not in the pass's record: list them with their measurements
  for (const m of step.layers) if (m.precision === 'float32') layers.push(m);
  return { ...step, layers, weightBytesFp32: packed.weightBytesFp32, weightBytes: packed.weightBytes };
}
