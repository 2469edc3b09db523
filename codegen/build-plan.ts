// The plan build: an optimized model → (the program passes: lower, select variants, plan memory, CUDA, pack) → plan.
import * as path from 'node:path';
import type { Model } from '../compiler/ir.ts';
import { PlancError } from '../compiler/diagnostics.ts';
import type { PlanDecoding, PlanHeader } from '../compiler/plan/types.ts';
import { isSym } from '../compiler/symbolic.ts';
import { PlanWeights } from './lower.ts';
import { symbolBounds } from './profile.ts';
import type { PassHooks } from '../passes/pipeline.ts';
import { runProgramPasses } from './program-passes.ts';
import type { BuildOptions, GraphReport, ProgramState, SpecialIds } from './program-state.ts';

export type { BuildOptions, GraphReport, SpecialIds } from './program-state.ts';

export interface BuiltPlan {
  header: PlanHeader;
  blob: Uint8Array;
  reports: GraphReport[];
}

/** Plain symbols of the graphs' declared input shapes (batch_size, encoder_sequence_length, ...). */
export function inputSymbols(model: Model): Set<string> {
  const names = new Set<string>();
  for (const g of model.graphs.values()) {
    for (const i of g.inputs) {
      const t = g.values.get(i)?.type;
      // dims, and the symbols a length input's value holds (past_sequence_length of an in-place cache)
      for (const d of [...(t?.shape ?? []), ...(t?.sym ?? [])]) {
        if (isSym(d)) for (const k of d.terms.keys()) if (k) k.split('*').forEach((s) => names.add(s));
      }
    }
  }
  return names;
}

/** The state the program passes start from; the decoding ids and the symbols' bounds are checked here, before lowering. */
export function programState(model: Model, opts: BuildOptions): ProgramState {
  const d = decodingFacts(model, opts.specialIds);
  const symbolMax = symbolBounds(inputSymbols(model), { ...opts, stepTokens: d.stepTokens });
  return {
    model,
    options: opts,
    decoding: d,
    symbolMax,
    weights: new PlanWeights(model),
    programs: [],
    tuning: [],
    memoryPlanned: false,
    reports: [],
  };
}

/** Runs the program passes (codegen/program-passes.ts) over an optimized model: its plan header, weight blob and reports. */
export function buildPlan(model: Model, opts: BuildOptions, hooks?: PassHooks): BuiltPlan {
  const s = runProgramPasses(programState(model, opts), hooks);
  return { header: s.header!, blob: s.blob!, reports: s.reports };
}

/** The model's decoding facts with the given special ids applied; a seq2seq model must end up with start, eos and pad ids. */
export function decodingFacts(model: Model, ids: SpecialIds = {}): PlanDecoding {
  const d: PlanDecoding = { ...model.decoding };
  for (const k of ['decoderStartId', 'eosId', 'padId', 'unkId'] as const) if (ids[k] !== undefined) d[k] = ids[k];
  if (ids.eosId !== undefined) d.eosIds = [ids.eosId];
  if (model.graphs.has('decoder_with_past')) {
    checkSeq2SeqIds(model, d);
    checkIdsInVocab(model, d, ids);
  }
  return d;
}

/** The outputs decoding reads from each graph of a seq2seq export (runtime/decode: the encoder state, the next-token scores). */
export const SEQ2SEQ_OUTPUTS: Record<string, string> = {
  encoder: 'last_hidden_state',
  decoder: 'logits',
  decoder_with_past: 'logits',
};

/**
 * A seq2seq model (encoder + decoder_with_past) must give the outputs decoding reads: without them it would compile
 * and then fail every sentence. Refused naming the graph, its file and the missing output.
 */
export function checkSeq2SeqOutputs(model: Model): void {
  if (!model.graphs.has('decoder_with_past')) return;
  for (const [g, out] of Object.entries(SEQ2SEQ_OUTPUTS)) {
    const graph = model.graphs.get(g);
    if (!graph)
      throw new PlancError('PLANC_E009', `a seq2seq model needs a '${g}' graph, which decoding runs`, {
        file: model.sources[g] ?? Object.values(model.sources)[0],
      });
    if (!graph.outputs.includes(out)) {
      throw new PlancError(
        'PLANC_E009',
        `graph '${g}' has no output '${out}', which decoding reads (its outputs: ${graph.outputs.join(', ') || 'none'}); export the model with its standard output names`,
        { file: model.sources[g], graph: g },
      );
    }
  }
}

/** The vocabulary size: config.json's vocab_size, else the last dim of decoder_with_past's logits when fixed. */
function vocabOf(model: Model, d: PlanDecoding): number | undefined {
  if (d.vocabSize !== undefined) return d.vocabSize;
  const shape = model.graphs.get('decoder_with_past')?.values.get('logits')?.type?.shape;
  const last = shape?.[shape.length - 1];
  return typeof last === 'number' && last > 0 ? last : undefined;
}

/** Special ids must lie in the vocabulary: one from an option names the option, one from the model's config the file. */
function checkIdsInVocab(model: Model, d: PlanDecoding, given: SpecialIds): void {
  const vocab = vocabOf(model, d);
  if (vocab === undefined) return;
  const first = Object.values(model.sources)[0];
  const dir = first ? path.dirname(first) : '';
  const options = ['decoderStartId', 'eosId', 'padId', 'unkId'];
  const check = (key: string, v: number | undefined) => {
    if (v === undefined || (Number.isInteger(v) && v >= 0 && v < vocab)) return;
    if (options.includes(key) && given[key as keyof SpecialIds] === v)
      throw new PlancError('PLANC_E302', (opt) => `${opt(key)} ${v} is outside the model's vocabulary [0, ${vocab})`, {
        file: dir,
      });
    throw new PlancError(
      'PLANC_E008',
      `the model's ${key} ${v} (config.json / generation_config.json) is outside its vocabulary [0, ${vocab})`,
      { file: dir },
    );
  };
  for (const k of ['decoderStartId', 'eosId', 'padId', 'unkId', 'bosId', 'forcedBosId', 'forcedEosId'] as const)
    check(k, d[k]);
  for (const k of ['eosIds', 'suppressTokens', 'beginSuppressTokens'] as const)
    for (const v of d[k] ?? []) check(k === 'eosIds' ? 'eosId' : k, v);
}

const REQUIRED_IDS = [
  ['decoderStartId', 'decoder_start_token_id'],
  ['eosId', 'eos_token_id'],
  ['padId', 'pad_token_id'],
] as const;

function checkSeq2SeqIds(model: Model, d: PlanDecoding): void {
  const missing = REQUIRED_IDS.filter(([k]) => d[k] === undefined);
  if (missing.length === 0) return;
  const first = Object.values(model.sources)[0];
  const file = first ? path.dirname(first) : '';
  throw new PlancError(
    'PLANC_E011',
    (opt) =>
      `cannot determine the ${missing.map(([, key]) => key).join(', ')} of this seq2seq model (not in config.json or generation_config.json): ` +
      `give ${missing.map(([option]) => `${opt(option)} N`).join(' ')}`,
    { file },
  );
}
