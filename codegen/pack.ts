// The pack step of the plan build: the weights into one aligned blob, and the plan header around the programs.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { BYTES, ONNX_CODE } from '../compiler/dtype.ts';
import type { Model } from '../compiler/ir.ts';
import { toRaw } from '../compiler/onnx/tensor-proto.ts';
import { align } from '../compiler/plan/format.ts';
import { PLAN_FORMAT_VERSION, type PlanHeader, type PlanWeight } from '../compiler/plan/types.ts';
import type { ProgramState } from './program-passes.ts';

export const PLANC_VERSION = '0.1.0';

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
    created: new Date().toISOString(),
    tokenizer: o.tokenizer?.bytes ?? new Uint8Array(0),
    tokenizerKind: o.tokenizer?.kind ?? '',
    ...(cuda ? { cuda: cuda.cuda } : {}),
  };
  return { header, blob };
}

/** sha256 over the source .onnx files and the ids of the distinct weights (which hash their bytes). */
function sourceHash(model: Model): string {
  const h = createHash('sha256');
  for (const f of Object.values(model.sources).sort()) if (fs.existsSync(f)) h.update(fs.readFileSync(f));
  for (const id of [...model.weights.keys()].sort()) h.update(id);
  return h.digest('hex');
}
