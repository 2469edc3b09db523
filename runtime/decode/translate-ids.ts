// translateIds: source id sequences in, translations (ids, optional scores and alternatives) out, over a Plan.
import { PlancError } from '../../compiler/diagnostics.ts';
import { TOPK_IDS_OUTPUT } from '../../compiler/plan/io-names.ts';
import type { Plan } from '../plan.ts';
import { beamBatch } from './beam.ts';
import { checkSourceLengths, makeBatches, runBatches } from './batching.ts';
import { greedyBatch, type Hypothesis } from './greedy.ts';
import type { DecodeIds } from './step-runner.ts';
import { maxLengthFor, penalized, validateDecodingOptions, type DecodingOptions } from './options.ts';

export interface TranslationResult {
  /** Output ids without the start token and without the eos. */
  ids: number[];
  /** Length-penalized log-prob (see DecodingOptions.lengthPenalty), when returnScores. */
  score?: number;
  /** The best returnAlternatives hypotheses, the best first (so alternatives[0] is this result), when asked. */
  alternatives?: { ids: number[]; score: number }[];
}

/** Throws a PlancError naming the first sentence that is not an array of integer ids in [0, vocabSize). */
export function validateIds(ids: unknown, vocabSize: number): asserts ids is number[][] {
  if (!Array.isArray(ids)) throw new PlancError('PLANC_E405', 'sources must be an array of id arrays');
  ids.forEach((s: unknown, i) => {
    if (!Array.isArray(s)) throw new PlancError('PLANC_E405', `sentence ${i} is not an array of ids`);
    s.forEach((v: unknown, j) => {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || (vocabSize > 0 && v >= vocabSize)) {
        throw new PlancError('PLANC_E405', `sentence ${i} holds id ${String(v)} at position ${j}; ids must be integers in [0, ${vocabSize || 'vocabSize'})`);
      }
    });
  });
}

/** The plan's start/eos/pad ids, or a PlancError when the plan does not record them. */
export function decodeIds(plan: Plan): DecodeIds {
  const { decoderStartId, eosId, padId } = plan.header.decoding;
  if (decoderStartId === undefined || eosId === undefined) {
    throw new PlancError('PLANC_E405', `plan ${plan.source} records no decoderStartId/eosId; it cannot be decoded`);
  }
  return { startId: decoderStartId, eosId, padId: padId ?? eosId };
}

/** Fails before decoding when beam search needs more candidates per step than a top-k plan keeps (2 × beam). */
function checkTopk(plan: Plan, beamSize: number): void {
  if (beamSize === 1 || !plan.graphs.includes('decoder_with_past')) return;
  const ids = plan.outputs('decoder_with_past').find((o) => o.name === TOPK_IDS_OUTPUT);
  const k = ids ? Number(ids.dims[ids.dims.length - 1]) : Infinity;
  if (2 * beamSize > k) {
    throw new PlancError('PLANC_E405', `beamSize ${beamSize} needs the ${2 * beamSize} best tokens per step but plan ${plan.source} keeps ${k}; optimize with --topk ${2 * beamSize} or more`);
  }
}

/** Sources as the model takes them: ending with eos (appended when missing). */
function withEos(ids: number[][], eosId: number): number[][] {
  return ids.map((s) => (s.length > 0 && s[s.length - 1] === eosId ? s : [...s, eosId]));
}

/** Hypotheses (best first) → a result with the options' extras. */
function toResult(hyps: Hypothesis[], o: DecodingOptions): TranslationResult {
  const best = hyps[0]!;
  const r: TranslationResult = { ids: best.ids };
  if (o.returnScores) r.score = penalized(best.logProb, best.length, o.lengthPenalty);
  if (o.returnAlternatives > 0) {
    r.alternatives = hyps.slice(0, o.returnAlternatives).map((h) => ({ ids: h.ids, score: penalized(h.logProb, h.length, o.lengthPenalty) }));
  }
  return r;
}

/**
 * Translates source id sequences (each ending with the eos, which is appended when missing) with greedy decoding
 * (beamSize 1) or beam search, in batches sorted by length, and returns results in the input order.
 */
export async function translateIds(plan: Plan, ids: number[][], options: Partial<DecodingOptions> = {}): Promise<TranslationResult[]> {
  const o = validateDecodingOptions(options);
  const dec = plan.header.decoding;
  const prof = plan.header.profile;
  validateIds(ids, dec.vocabSize ?? 0);
  const d = decodeIds(plan);
  checkTopk(plan, o.beamSize);
  const sources = withEos(ids, d.eosId);
  checkSourceLengths(sources, prof.maxSrcLen);
  if (sources.length === 0) return [];
  const batches = makeBatches(sources.map((s) => s.length), o, prof.maxBatch);
  return runBatches(sources, batches, (batch) => {
    const caps = batch.map((s) => maxLengthFor(o, s.length, prof.maxTgtLen));
    if (o.beamSize === 1) return greedyBatch(plan, batch, caps, d, o.returnScores).map((h) => toResult([h], o));
    return beamBatch(plan, batch, caps, d, o.beamSize, o.lengthPenalty).map((hs) => toResult(hs, o));
  });
}
