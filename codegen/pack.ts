// The pack step of the plan build: the weights into one aligned blob, and the plan header around the programs.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { fail } from '../compiler/diagnostics-catalog.ts';
import { BYTES, ONNX_CODE } from '../compiler/dtype.ts';
import type { Model } from '../compiler/ir.ts';
import { toRaw } from '../model/onnx/tensor-proto.ts';
import { align } from '../compiler/plan/format.ts';
import {
  emptyQuantization,
  PLAN_FORMAT_VERSION,
  type PlanHeader,
  type PlanQuantization,
  type PlanWeight,
} from '../compiler/plan/types.ts';
import type { QuantizedLayer } from '../compiler/quant/layers.ts';
import type { ProgramState } from './program-state.ts';
import { plancVersion } from '../compiler/version.ts';

/** planc's version (package.json), recorded in every plan. */
export const PLANC_VERSION = plancVersion();

/** The header and blob of a state whose programs are lowered, placed and (cuda) compiled. */
export function packPlan(s: ProgramState): { header: PlanHeader; blob: Uint8Array } {
  let size = 0;
  const planWeights: PlanWeight[] = s.weights.list.map(({ id, tensor }) => {
    const offset = align(size);
    const length = tensor.size * BYTES[tensor.dtype];
    size = offset + length;
    return { id, dtype: ONNX_CODE[tensor.dtype], dims: [...tensor.dims], offset, length };
  });
  const blob = new Uint8Array(size);
  s.weights.list.forEach(({ tensor }, i) => blob.set(toRaw(tensor), planWeights[i]!.offset));
  const { options: o, cuda } = s;
  const header: PlanHeader = {
    plancVersion: PLANC_VERSION,
    formatVersion: PLAN_FORMAT_VERSION,
    target: { kind: o.target, archs: cuda?.archs ?? [] },
    toolchain: { node: process.version, nvcc: cuda?.cuda.nvccVersion ?? '', driver: '' },
    sourceHash: sourceHash(s.model),
    profile: { maxBatch: o.maxBatch, maxSrcLen: o.maxSrcLen, maxTgtLen: o.maxTgtLen, symbolMax: s.symbolMax },
    weights: planWeights,
    programs: s.programs,
    arena: { bytes: Math.max(0, ...s.programs.map((p) => p.arenaBytes)), persistentBytes: 0 },
    options: o.options ?? {},
    decoding: { ...s.decoding },
    tuning: s.tuning,
    blobBytes: blob.length,
    blobCrc32: 0,
    created: createdStamp(),
    tokenizer: o.tokenizer?.bytes ?? new Uint8Array(0),
    tokenizerKind: o.tokenizer?.kind ?? '',
    ...(cuda ? { cuda: cuda.cuda } : {}),
    ...(s.model.memoized?.length ? { memoized: s.model.memoized } : {}),
    ...(s.model.quantized ? { quantization: quantizationRecord(s.model.quantized, s.model, planWeights) } : {}),
  };
  return { header, blob };
}

/**
 * The quantize pass's layers as the plan records them, with the plan's weight bytes and what they would be in float32
 * (the weights that are no quantized form, plus each quantized weight's float32 source once). The gate's fields are
 * filled by the compile driver.
 */
function quantizationRecord(layers: QuantizedLayer[], model: Model, weights: PlanWeight[]): PlanQuantization {
  const derived = new Set(layers.flatMap((l) => l.derived));
  const fp32 = new Map<string, number>();
  for (const w of weights) if (!derived.has(w.id)) fp32.set(w.id, w.length);
  for (const l of layers) fp32.set(l.weight, model.weights.get(l.weight)!.bytes);
  return {
    ...emptyQuantization(''),
    layers: layers.map(({ weight: _, derived: __, ...l }) => ({ ...l, error: -1, reason: '' })),
    weightBytesFp32: [...fp32.values()].reduce((a, b) => a + b, 0),
    weightBytes: weights.reduce((a, w) => a + w.length, 0),
  };
}

/**
 * When the plan was made: SOURCE_DATE_EPOCH (seconds) when set, else '' — reproducible builds: the same inputs give a
 * byte-identical plan, so no wall-clock time goes in unasked.
 */
export function createdStamp(env: NodeJS.ProcessEnv = process.env): string {
  const epoch = env.SOURCE_DATE_EPOCH;
  if (epoch === undefined || epoch === '') return '';
  const s = Number(epoch);
  if (!Number.isSafeInteger(s) || s < 0)
    fail('badEnvironment', { variable: 'SOURCE_DATE_EPOCH', value: epoch, expected: 'whole seconds since 1970' });
  return new Date(s * 1000).toISOString();
}

/** sha256 over the source .onnx files and the ids of the distinct weights (which hash their bytes). */
function sourceHash(model: Model): string {
  const h = createHash('sha256');
  for (const f of Object.values(model.sources).sort()) if (fs.existsSync(f)) h.update(fs.readFileSync(f));
  for (const id of [...model.weights.keys()].sort()) h.update(id);
  return h.digest('hex');
}
