// The runtime-backed calibrate service of a compile: --vocab's shortlist or calibrated clusters, and the quality report.
import { PlancError } from '../compiler/diagnostics.ts';
import type { Model } from '../compiler/ir.ts';
import type { PlanVocab } from '../compiler/plan/types.ts';
import { emptyVocab, readSentences, shortlistVocab, specialIdsOf } from '../compiler/vocab/header.ts';
import { decodingFacts, type SpecialIds } from '../codegen/build-plan.ts';
import type { ProfileOptions } from '../codegen/profile.ts';
import type { ProgressReporter, VocabRequest, VocabResult, VocabRewriteOptions } from '../passes/pass.ts';
import { conventionsOf, DecodingRules } from '../runtime/decode/conventions.ts';
import type { Plan } from '../runtime/plan.ts';
import { loadTokenizer, type Tokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { buildClusters, calibrate, exposePlan } from './vocab-calibrate.ts';
import { type AutoSetup, autoClusters } from './vocab-auto.ts';
import { evaluateQuality, outputLayer } from './vocab-evaluate.ts';

/** What the calibration plan is built with: the user's profile and ids, and the tokenizer that reads the text. */
export interface CalibrationSetup {
  profile: ProfileOptions;
  specialIds?: SpecialIds;
  tokenizer?: { bytes: Uint8Array; kind: 'spm' | 'hf' };
  progress?: ProgressReporter;
}

/**
 * The calibration plan: a float32 CPU plan exposing the output layer's hidden state, its planc.ProjectTopK keeping
 * enough ids for the plan's `topk` and for `kIds` allowed ids besides the banned ones (calibration and evaluation decode
 * as the runtime does, with the plan's conventions).
 */
export function exposedPlan(
  model: Model,
  topk: number,
  kIds: number,
  rules: DecodingRules,
  setup: CalibrationSetup,
): { plan: Plan; optimized: Model } {
  const k = Math.max(topk, kIds ? kIds + rules.maxBanned : 1);
  return exposePlan(model, { topk: k }, { target: 'cpu', ...setup.profile, specialIds: setup.specialIds });
}

/**
 * What the clusters grid is measured with: one calibration (greedy decoding of the calibration file on the exposed
 * plan, the top `kMax` ids of every state kept) and the held-out text.
 */
export function autoSetup(
  exposed: { plan: Plan; optimized: Model },
  tok: Tokenizer,
  rules: DecodingRules,
  specials: number[],
  vocabSize: number,
  kMax: number,
  calibrationFile: string,
  evalSource: string,
  evalSrc: string[],
  evalRef: string[] | undefined,
  setup: CalibrationSetup,
): AutoSetup {
  const { profile, progress } = setup;
  const sentences = readSentences(calibrationFile, 'calibrate');
  const cal = calibrate(exposed.plan, tok, sentences, kMax, rules, profile.maxSrcLen, profile.maxTgtLen, progress);
  return {
    cal,
    calibrationFile,
    plan: exposed.plan,
    tok,
    layer: outputLayer(exposed.optimized),
    rules,
    evalSrc,
    evalRef,
    evalSource,
    specials,
    vocabSize,
    maxSrcLen: profile.maxSrcLen,
    maxTgtLen: profile.maxTgtLen,
    progress,
  };
}

/**
 * Reads the shortlist or calibrates the clusters (on a CPU plan without the rewrite that exposes the hidden state),
 * then measures quality on the held-out text; returns the pass options and the plan's vocab header.
 */
export async function calibrateVocab(
  model: Model,
  request: VocabRequest,
  setup: CalibrationSetup,
): Promise<VocabResult> {
  const { spec } = request;
  const { profile, progress } = setup;
  if (!setup.tokenizer)
    throw new PlancError(
      'PLANC_E302',
      (opt) =>
        `${opt('vocab')} needs the model's tokenizer (it reads text and maps shortlist pieces): give ${opt('tokenizer')} FILE`,
    );
  const dec = decodingFacts(model, setup.specialIds);
  const vocabSize = dec.vocabSize;
  if (!vocabSize)
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${opt('vocab')} needs the vocabulary size (vocab_size in config.json)`,
    );
  const specials = specialIdsOf(dec);
  const tok = await loadTokenizer(setup.tokenizer.bytes, setup.tokenizer.kind, undefined, dec.eosId);
  const evalSrc = request.evalSrc ? readSentences(request.evalSrc, 'evalSrc') : undefined;
  const evalRef = request.evalRef ? readSentences(request.evalRef, 'evalRef') : undefined;
  if (evalSrc && evalRef && evalSrc.length !== evalRef.length) {
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${opt('evalSrc')} has ${evalSrc.length} sentences but ${opt('evalRef')} has ${evalRef.length}`,
    );
  }
  if (spec.method === 'auto' && (request.calibrate === undefined || !evalSrc)) {
    throw new PlancError(
      'PLANC_E302',
      (opt) =>
        `${opt('vocab')} auto measures R × K points under the accuracy gate: it needs ${opt('calibrate')} SOURCE_TEXT and ${opt('evalSrc')} HELD_OUT_TEXT (${opt('evalRef')} for BLEU)`,
    );
  }
  const needPlan = spec.method !== 'shortlist' || evalSrc;
  progress?.start('building a calibration plan (hidden state exposed)');
  // Calibration and evaluation decode as the runtime does (the plan's conventions): K allowed ids besides banned ones.
  const rules = needPlan ? new DecodingRules(conventionsOf(dec)) : undefined;
  const kIds = spec.method === 'clusters' ? spec.topK : spec.method === 'auto' ? Math.max(...spec.topK) : 0;
  const exposed = needPlan ? exposedPlan(model, request.topk, kIds, rules!, setup) : undefined;
  progress?.finish();
  try {
    let header: PlanVocab;
    let rewrite: VocabRewriteOptions;
    if (spec.method === 'auto')
      return autoClusters(
        spec,
        autoSetup(
          exposed!,
          tok,
          rules!,
          specials,
          vocabSize,
          kIds,
          request.calibrate!,
          request.evalSrc!,
          evalSrc!,
          evalRef,
          setup,
        ),
      );
    if (spec.method === 'shortlist') {
      progress?.start(`reading shortlist ${spec.file}`);
      header = shortlistVocab(spec, setup.tokenizer, vocabSize, specials);
      rewrite = { method: 'shortlist' };
      progress?.finish();
    } else {
      if (request.calibrate === undefined)
        throw new PlancError(
          'PLANC_E302',
          (opt) =>
            `${opt('vocab')} clusters=R,K needs ${opt('calibrate')} SOURCE_TEXT (source sentences, one per line)`,
        );
      const sentences = readSentences(request.calibrate, 'calibrate');
      const cal = calibrate(
        exposed!.plan,
        tok,
        sentences,
        spec.topK,
        rules!,
        profile.maxSrcLen,
        profile.maxTgtLen,
        progress,
      );
      const c = buildClusters(cal, spec.clusters, spec.topK, vocabSize, specials, progress);
      rewrite = c.rewrite;
      header = emptyVocab('clusters');
      Object.assign(header, {
        specialIds: specials,
        clusters: c.km.clusters,
        topK: spec.topK,
        calibrationFile: request.calibrate,
        calibrationSentences: cal.sentences,
        calibrationStates: cal.states,
        kmeansIterations: c.km.iterations,
        kmeansConverged: c.km.converged,
        kmeansInertia: c.km.inertia,
        emptyClusters: c.km.emptyClusters,
        calibrationActiveMean: c.activeMean,
        adjustments: c.adjustments.join('; '),
      });
    }
    if (evalSrc && exposed) {
      const layer = outputLayer(exposed.optimized);
      const q = evaluateQuality(
        exposed.plan,
        tok,
        layer,
        rules!,
        evalSrc,
        evalRef,
        rewrite.method === 'clusters' ? { kind: 'clusters', c: rewrite } : { kind: 'shortlist', v: header },
        profile.maxSrcLen,
        profile.maxTgtLen,
        progress,
      );
      Object.assign(header, {
        evalSource: request.evalSrc!,
        evalSentences: q.evalSentences,
        activeMean: q.activeMean,
        activeMax: q.activeMax,
        top1Agreement: q.top1Agreement,
        identicalSentences: q.identicalSentences,
        hasBleu: q.bleu !== undefined,
        bleu: q.bleu ?? 0,
        bleuFull: q.bleuFull ?? 0,
        evalMode: 'emulated',
      });
    }
    return { rewrite, header };
  } finally {
    exposed?.plan.close();
  }
}
