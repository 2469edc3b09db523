// The optimize pipeline: model → (lower each graph, plan its memory) → plan header and weight blob.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BYTES, ONNX_CODE } from '../compiler/dtype.ts';
import type { Model } from '../compiler/ir.ts';
import { toRaw } from '../compiler/onnx/tensor-proto.ts';
import { align } from '../compiler/plan/format.ts';
import { Diagnostics, PlancError } from '../compiler/diagnostics.ts';
import { PLAN_FORMAT_VERSION, type PlanDecoding, type PlanHeader, type PlanProgram, type PlanWeight } from '../compiler/plan/types.ts';
import { isSym } from '../compiler/symbolic.ts';
import { buildCuda } from './cuda/build.ts';
import { DEFAULT_ARCHS } from './cuda/nvcc.ts';
import { lowerGraph, PlanWeights } from './lower.ts';
import { symbolBounds, type ProfileOptions } from './profile.ts';
import { planMemory, type MemoryReport } from './memory-plan.ts';

export const PLANC_VERSION = '0.1.0';

export interface BuildOptions extends ProfileOptions {
  target: 'cpu' | 'cuda';
  /** cuda: the sm archs to compile for (default sm_80, sm_90). */
  archs?: string[];
  /** Called at each step with a short message (the CLI shows progress). */
  onProgress?: (step: string) => void;
  /** Creation options recorded in the plan. */
  options?: Record<string, string>;
  /** The tokenizer file to embed in the plan (`planc optimize` finds it in the model folder). */
  tokenizer?: { bytes: Uint8Array; kind: 'spm' | 'hf' };
  /** Special token ids that override the model's config.json / generation_config.json. */
  specialIds?: SpecialIds;
}

export interface SpecialIds { decoderStartId?: number; eosId?: number; padId?: number; unkId?: number }

export interface GraphReport extends MemoryReport { graph: string; kernels: number; tensors: number }

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

export function buildPlan(model: Model, opts: BuildOptions): BuiltPlan {
  const d = decodingFacts(model, opts.specialIds);
  const symbolMax = symbolBounds(inputSymbols(model), opts);
  const weights = new PlanWeights(model);
  const programs: PlanProgram[] = [];
  const reports: GraphReport[] = [];
  const problems = new Diagnostics();
  for (const [name, g] of model.graphs) {
    opts.onProgress?.(`lowering ${name}`);
    const p = lowerGraph(model, g, weights, { symbolMax }, problems);
    if (!problems.ok) continue;
    opts.onProgress?.(`planning memory of ${name}`);
    const mem = planMemory(p);
    programs.push(p);
    reports.push({ graph: name, kernels: p.kernels.length, tensors: p.tensors.length, ...mem });
  }
  if (!problems.ok) throw loweringFailure(problems);
  const cuda = opts.target === 'cuda'
    ? buildCuda(programs, opts.archs ?? DEFAULT_ARCHS, { banner: `planc ${PLANC_VERSION} CUDA kernels`, onProgress: opts.onProgress })
    : undefined;
  opts.onProgress?.('packing weights');
  let size = 0;
  const planWeights: PlanWeight[] = weights.list.map(({ id, tensor }) => {
    const offset = align(size);
    const length = tensor.size * BYTES[tensor.dtype];
    size = offset + length;
    return { id, dtype: ONNX_CODE[tensor.dtype], dims: [...tensor.dims], offset, length };
  });
  const blob = new Uint8Array(size);
  weights.list.forEach(({ tensor }, i) => blob.set(toRaw(tensor), planWeights[i]!.offset));
  const header: PlanHeader = {
    plancVersion: PLANC_VERSION,
    formatVersion: PLAN_FORMAT_VERSION,
    target: { kind: opts.target, archs: cuda?.archs ?? [] },
    toolchain: { node: process.version, nvcc: cuda?.cuda.nvccVersion ?? '', driver: '' },
    sourceHash: sourceHash(model),
    profile: { maxBatch: opts.maxBatch, maxSrcLen: opts.maxSrcLen, maxTgtLen: opts.maxTgtLen, symbolMax },
    weights: planWeights,
    programs,
    arena: { bytes: Math.max(0, ...programs.map((p) => p.arenaBytes)), persistentBytes: 0 },
    options: opts.options ?? {},
    decoding: { ...d },
    tuning: [],
    blobBytes: blob.length,
    blobCrc32: 0,
    created: new Date().toISOString(),
    tokenizer: opts.tokenizer?.bytes ?? new Uint8Array(0),
    tokenizerKind: opts.tokenizer?.kind ?? '',
    ...(cuda ? { cuda: cuda.cuda } : {}),
  };
  return { header, blob, reports };
}

/** One error naming every node the target cannot lower (op, node name, graph), with the first problem's code. */
function loweringFailure(problems: Diagnostics): PlancError {
  const lines = problems.errors.map((e) => `${e.where.op ?? '?'} '${e.where.node ?? '?'}' in graph ${e.where.graph ?? '?'}: ${e.message.replace(/^PLANC_E\d+: /, '').replace(/ \[[^\]]*\]$/, '')}`);
  if (lines.length === 1) return problems.errors[0]!;
  return new PlancError(problems.errors[0]!.code, `${lines.length} nodes cannot be lowered:\n  ${lines.join('\n  ')}`, { stage: 'lowering' });
}

/** The model's decoding facts with the given special ids applied; a seq2seq model must end up with start, eos and pad ids. */
export function decodingFacts(model: Model, ids: SpecialIds = {}): PlanDecoding {
  const d: PlanDecoding = { ...model.decoding };
  for (const k of ['decoderStartId', 'eosId', 'padId', 'unkId'] as const) if (ids[k] !== undefined) d[k] = ids[k];
  if (ids.eosId !== undefined) d.eosIds = [ids.eosId];
  if (model.graphs.has('decoder_with_past')) checkSeq2SeqIds(model, d);
  return d;
}

const REQUIRED_IDS = [
  ['decoderStartId', 'decoder_start_token_id', '--decoder-start-id'],
  ['eosId', 'eos_token_id', '--eos-id'],
  ['padId', 'pad_token_id', '--pad-id'],
] as const;

function checkSeq2SeqIds(model: Model, d: PlanDecoding): void {
  const missing = REQUIRED_IDS.filter(([k]) => d[k] === undefined);
  if (missing.length === 0) return;
  const first = Object.values(model.sources)[0];
  const file = first ? path.dirname(first) : '';
  throw new PlancError('PLANC_E011',
    `cannot determine the ${missing.map(([, key]) => key).join(', ')} of this seq2seq model (not in config.json or generation_config.json): `
    + `give ${missing.map(([, , flag]) => `${flag} N`).join(' ')} to planc optimize`, { file });
}

/** sha256 over the source .onnx files and the ids of the distinct weights (which hash their bytes). */
function sourceHash(model: Model): string {
  const h = createHash('sha256');
  for (const f of Object.values(model.sources).sort()) if (fs.existsSync(f)) h.update(fs.readFileSync(f));
  for (const id of [...model.weights.keys()].sort()) h.update(id);
  return h.digest('hex');
}
