// Whether a call can sample (doSample): with which strategy, and on a top-k plan with which top_k, before decoding starts.
import { type OptionNamer, PlancError } from '../../compiler/diagnostics.ts';
import { TOPK_IDS_OUTPUT } from '../../compiler/plan/io-names.ts';
import type { Plan } from '../plan.ts';
import type { DecodingRules } from './conventions.ts';
import { badOption, type DecodingOptions } from './options.ts';

/** The k of a planc.ProjectTopK plan (its decoder step keeps only each row's k best tokens); undefined: it keeps the logits. */
export function planTopk(plan: Plan): number | undefined {
  if (!plan.graphs.includes('decoder_with_past')) return undefined;
  const ids = plan.outputs('decoder_with_past').find((x) => x.name === TOPK_IDS_OUTPUT);
  return ids ? Number(ids.dims[ids.dims.length - 1]) : undefined;
}

/**
 * The k a top-k plan needs to sample with top_k exactly: the top_k best allowed tokens (up to maxBanned of a row's best
 * may be banned) and one more below them, which shows that no token the plan left out ties with the last kept one
 * (TopKLogitsWarper keeps every tie). Infinity for top_k 0 (the whole vocabulary).
 */
export function samplingTopkNeeded(topK: number, rules: DecodingRules): number {
  return topK > 0 ? topK + rules.maxBanned + 1 : Infinity;
}

/**
 * A PlancError (PLANC_E411, naming the option) when doSample cannot run: beam sampling (beamSize > 1) is not
 * implemented, the Jacobi strategies decode greedy's output only, and a top-k plan samples exactly only with
 * 1 ≤ topK ≤ k - maxBanned - 1 (sampling from a truncated distribution is refused, never done silently).
 */
export function checkSampling(plan: Plan, o: DecodingOptions, rules: DecodingRules, strategy: string): void {
  if (!o.doSample) return;
  if (strategy === 'beam') {
    throw new PlancError(
      'PLANC_E411',
      (opt) =>
        `bad decoding option: doSample with beamSize ${o.beamSize} is generate()'s beam sampling, which planc does not implement; sample with beamSize 1 (${opt('beamSize')} 1: generate()'s sample mode) or decode with doSample false`,
      {},
      {
        option: 'doSample',
        value: true,
        expected: `false with beamSize ${o.beamSize}: beam sampling (generate()'s do_sample with num_beams > 1) is not implemented; sample with beamSize 1`,
      },
    );
  }
  if (strategy !== 'greedy') {
    throw new PlancError(
      'PLANC_E411',
      `bad decoding option: doSample works with strategy greedy (generate()'s sample mode), not '${strategy}', whose output is greedy's`,
      {},
      { option: 'doSample', value: true, expected: `false with strategy '${strategy}'` },
    );
  }
  const k = planTopk(plan);
  if (k === undefined) return;
  const max = k - rules.maxBanned - 1;
  const need = samplingTopkNeeded(Math.max(1, o.topK), rules);
  const fix = (opt: OptionNamer) =>
    `optimize with ${opt('topk')} ${need} or more, or ${opt('topk')} 0 to keep the logits`;
  if (max < 1) {
    badOption(
      'doSample',
      true,
      (opt) =>
        `false with plan ${plan.source}: it keeps only its ${k} best tokens per step and up to ${rules.maxBanned} of them may be banned, too few to sample exactly with any top_k; ${fix(opt)}`,
    );
  }
  if (o.topK === 0) {
    badOption(
      'topK',
      0,
      (opt) =>
        `in [1, ${max}] with plan ${plan.source}: top_k 0 samples from the whole vocabulary, but the plan keeps only its ${k} best tokens per step (a truncated distribution would not be generate()'s); set a top_k or optimize with ${opt('topk')} 0 to keep the logits`,
    );
  }
  if (o.topK > max) {
    badOption(
      'topK',
      o.topK,
      (opt) =>
        `at most ${max} with plan ${plan.source}: it keeps only its ${k} best tokens per step, and sampling with top_k ${o.topK} needs ${samplingTopkNeeded(o.topK, rules)} (the top_k best${rules.maxBanned ? `, ${rules.maxBanned} that may be banned` : ''} and one below to rule out ties); ${fix(opt)}`,
    );
  }
}
