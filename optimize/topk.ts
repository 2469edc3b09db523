// The k of planc.ProjectTopK a plan gets: the one asked for, or by default what keeps the model's beams exact.
import { PlancError } from '../compiler/diagnostics.ts';
import type { Model } from '../compiler/ir.ts';
import { decodingFacts, type SpecialIds } from '../codegen/build-plan.ts';
import { TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { conventionsOf, DecodingRules } from '../runtime/decode/conventions.ts';
import { samplingTopkNeeded } from '../runtime/decode/sampling-check.ts';

/**
 * k of planc.ProjectTopK: `requested` (N ≥ 1), 0 keeps the full logits output (undefined). By default translation
 * models (those with a decoder_with_past graph) get the k that keeps beams up to max(TRANSLATE_TOPK / 2, num_beams)
 * exact under their generation config (candidates + tokens it may ban at a step, min_length's eos included), and
 * with do_sample its top_k (default 50) too (runtime/decode/sampling-check.ts); models with a repetition_penalty or
 * do_sample with top_k 0, and other models, keep their logits.
 */
export function chooseTopk(
  model: Model,
  ids: SpecialIds | undefined,
  requested: number | undefined,
): number | undefined {
  if (requested !== undefined && (!Number.isInteger(requested) || requested < 0))
    throw new PlancError(
      'PLANC_E302',
      (opt) => `${opt('topk')} must be an integer ≥ 0 (0 keeps the logits), got ${requested}`,
    );
  if (requested === 0) return undefined;
  if (!model.graphs.has('decoder_with_past')) return requested;
  const d = decodingFacts(model, ids);
  const rules = new DecodingRules(conventionsOf(d));
  // a repetition_penalty can lift a token from outside any k (and greedy applies it to the logits): keep the logits
  if (requested === undefined && rules.penalty !== 1) return undefined;
  if (requested === undefined && d.doSample && (d.topK ?? 50) === 0) return undefined;
  if (requested === undefined) {
    const beams = rules.topkNeeded(Math.max(TRANSLATE_TOPK / 2, d.numBeams ?? 1));
    return d.doSample ? Math.max(beams, samplingTopkNeeded(d.topK ?? 50, rules)) : beams;
  }
  const greedy = rules.topkNeeded(1);
  if (requested < greedy)
    throw new PlancError(
      'PLANC_E302',
      (opt) =>
        `${opt('topk')} ${requested} cannot decode this model exactly: up to ${rules.maxBanned} of a step's best tokens may be banned (suppress_tokens, bad_words_ids), so even greedy decoding needs ${opt('topk')} ${greedy} or more`,
    );
  return requested;
}
