// The --vocab step of `planc optimize`: shortlist or calibrated clusters → the pass options and the plan's vocab header.

import { PlancError } from '../compiler/diagnostics.ts';
import type { Model } from '../compiler/ir.ts';
import type { PlanVocab } from '../compiler/plan/types.ts';
import type { ProfileOptions } from '../codegen/profile.ts';
import type { VocabRewriteOptions } from '../passes/pass.ts';
import { conventionsOf, DecodingRules } from '../runtime/decode/conventions.ts';
import { kernelIds, nativeAvailable } from '../runtime/native.ts';
import { loadTokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { decodingFacts, type SpecialIds } from '../codegen/build-plan.ts';
import type { Progress } from './progress.ts';
import {
  buildClusters, calibrate, emptyVocab, evaluateQuality, exposePlan, outputLayer, readSentences, shortlistVocab, specialIdsOf, type VocabSpec,
} from './vocab.ts';

export { parseVocabSpec } from './vocab.ts';

export interface VocabOptimizeOptions {
  topk: number;
  decoding: SpecialIds;
  tokenizer?: { bytes: Uint8Array; kind: 'spm' | 'hf' };
  profile: ProfileOptions;
  calibrate?: string;
  evalSrc?: string;
  evalRef?: string;
  quiet: boolean;
  progress: Progress;
}

/** Whether the native runtime has the masked kernels (cluster_mask; project_topk's active input comes with it). */
export function nativeVocabKernels(): boolean {
  return nativeAvailable() && kernelIds().has('cluster_mask');
}

/**
 * Reads the shortlist or calibrates the clusters (on a CPU plan without the rewrite that exposes the hidden state),
 * then measures quality on --eval-src; returns the pass options and the plan's vocab header.
 */
export async function optimizeVocab(model: Model, spec: VocabSpec, o: VocabOptimizeOptions): Promise<{ rewrite: VocabRewriteOptions; header: PlanVocab }> {
  if (!o.tokenizer) throw new PlancError('PLANC_E301', '--vocab needs the model\'s tokenizer (it reads text and maps shortlist pieces): give --tokenizer FILE');
  const dec = decodingFacts(model, o.decoding);
  const vocabSize = dec.vocabSize;
  if (!vocabSize) throw new PlancError('PLANC_E301', '--vocab needs the vocabulary size (vocab_size in config.json)');
  const specials = specialIdsOf(dec);
  const tok = await loadTokenizer(o.tokenizer.bytes, o.tokenizer.kind, undefined, dec.eosId);
  const evalSrc = o.evalSrc ? readSentences(o.evalSrc, '--eval-src') : undefined;
  const evalRef = o.evalRef ? readSentences(o.evalRef, '--eval-ref') : undefined;
  if (evalSrc && evalRef && evalSrc.length !== evalRef.length) {
    throw new PlancError('PLANC_E301', `--eval-src has ${evalSrc.length} sentences but --eval-ref has ${evalRef.length}`);
  }
  const needPlan = spec.method === 'clusters' || evalSrc;
  o.progress.start('building a calibration plan (hidden state exposed)');
  // Calibration and evaluation decode as the runtime does (the plan's conventions): K allowed ids besides banned ones.
  const rules = needPlan ? new DecodingRules(conventionsOf(dec)) : undefined;
  const k = Math.max(o.topk, spec.method === 'clusters' ? spec.topK + rules!.maxBanned : 1);
  const exposed = needPlan ? exposePlan(model, { topk: k }, { target: 'cpu', ...o.profile, specialIds: o.decoding }) : undefined;
  o.progress.finish();
  try {
    let header: PlanVocab;
    let rewrite: VocabRewriteOptions;
    if (spec.method === 'shortlist') {
      o.progress.start(`reading shortlist ${spec.file}`);
      header = shortlistVocab(spec, o.tokenizer, vocabSize, specials);
      rewrite = { method: 'shortlist' };
      o.progress.finish();
    } else {
      const sentences = readSentences(o.calibrate!, '--calibrate');
      const cal = calibrate(exposed!.plan, tok, sentences, spec.topK, rules!, o.profile.maxSrcLen, o.profile.maxTgtLen, o.quiet);
      const c = buildClusters(cal, spec.clusters, spec.topK, vocabSize, specials, o.quiet);
      rewrite = c.rewrite;
      header = emptyVocab('clusters');
      Object.assign(header, {
        specialIds: specials, clusters: c.km.clusters, topK: spec.topK, calibrationFile: o.calibrate!, calibrationSentences: cal.sentences,
        calibrationStates: cal.states, kmeansIterations: c.km.iterations, kmeansConverged: c.km.converged, kmeansInertia: c.km.inertia,
        emptyClusters: c.km.emptyClusters, calibrationActiveMean: c.activeMean, adjustments: c.adjustments.join('; '),
      });
    }
    if (evalSrc && exposed) {
      const layer = outputLayer(exposed.optimized);
      const q = evaluateQuality(exposed.plan, tok, layer, rules!, evalSrc, evalRef,
        rewrite.method === 'clusters' ? { kind: 'clusters', c: rewrite } : { kind: 'shortlist', v: header },
        o.profile.maxSrcLen, o.profile.maxTgtLen, o.quiet);
      Object.assign(header, {
        evalSource: o.evalSrc!, evalSentences: q.evalSentences, activeMean: q.activeMean, activeMax: q.activeMax, top1Agreement: q.top1Agreement,
        identicalSentences: q.identicalSentences, hasBleu: q.bleu !== undefined, bleu: q.bleu ?? 0, bleuFull: q.bleuFull ?? 0, evalMode: 'emulated',
      });
    }
    return { rewrite, header };
  } finally {
    exposed?.plan.close();
  }
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The lines `planc optimize` prints about the vocab rewrite. */
export function formatVocabReport(v: PlanVocab): string[] {
  const lines = [v.method === 'shortlist'
    ? `vocab: shortlist ${v.shortlistFile} (${v.shortlistFormat}, first ${v.first}, best ${v.best}, ${v.offsets.length - 1} source ids, ${v.targets.length} entries)`
    : `vocab: clusters R ${v.clusters}, K ${v.topK}, calibrated on ${v.calibrationSentences} sentences of ${v.calibrationFile} (${v.calibrationStates} states; k-means ${v.kmeansIterations} iterations${v.kmeansConverged ? ', converged' : ''}, ${v.emptyClusters} empty clusters); calibration active fraction ${pct(v.calibrationActiveMean)}`];
  if (v.adjustments) lines.push(`  adjusted: ${v.adjustments}`);
  if (v.evalSentences) {
    lines.push(`  on ${v.evalSentences} held-out sentences (${v.evalSource}, ${v.evalMode}, batch-1 masks): active ${pct(v.activeMean)} mean, ${pct(v.activeMax)} max of the vocabulary per step; top-1 agreement ${pct(v.top1Agreement)}; identical ${pct(v.identicalSentences)}`
      + (v.hasBleu ? `; BLEU ${v.bleu.toFixed(2)} (full projection ${v.bleuFull.toFixed(2)})` : ''));
  } else lines.push('  quality: not measured (give --eval-src [--eval-ref] held-out text)');
  return lines;
}

/** `planc inspect --json`'s vocab entry. */
export function vocabInspect(v: PlanVocab): { method: string; activeMean: number; activeMax: number; top1Agreement: number; identicalSentences: number; bleu: number | null; bleuFull: number | null } {
  return {
    method: v.method, activeMean: v.activeMean, activeMax: v.activeMax, top1Agreement: v.top1Agreement, identicalSentences: v.identicalSentences,
    bleu: v.hasBleu ? v.bleu : null, bleuFull: v.hasBleu ? v.bleuFull : null,
  };
}


