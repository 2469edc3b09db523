// The optimize pipeline: model → (lower each graph, plan its memory) → plan header and weight blob.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { BYTES, ONNX_CODE } from '../compiler/dtype.ts';
import type { Model } from '../compiler/ir.ts';
import { toRaw } from '../compiler/onnx/tensor-proto.ts';
import { align } from '../compiler/plan/format.ts';
import { PLAN_FORMAT_VERSION, type PlanHeader, type PlanProgram, type PlanWeight } from '../compiler/plan/types.ts';
import { isSym } from '../compiler/symbolic.ts';
import { lowerGraph, PlanWeights } from '../codegen/lower.ts';
import { symbolBounds, type ProfileOptions } from '../codegen/profile.ts';
import { planMemory, type MemoryReport } from '../passes/memory-plan.ts';

export const PLANC_VERSION = '0.1.0';

export interface BuildOptions extends ProfileOptions {
  target: 'cpu';
  /** Called at each step with a short message (the CLI shows progress). */
  onProgress?: (step: string) => void;
  /** Creation options recorded in the plan. */
  options?: Record<string, string>;
}

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
      for (const d of g.values.get(i)?.type?.shape ?? []) {
        if (isSym(d)) for (const k of d.terms.keys()) if (k) k.split('*').forEach((s) => names.add(s));
      }
    }
  }
  return names;
}

export function buildPlan(model: Model, opts: BuildOptions): BuiltPlan {
  const symbolMax = symbolBounds(inputSymbols(model), opts);
  const weights = new PlanWeights(model);
  const programs: PlanProgram[] = [];
  const reports: GraphReport[] = [];
  for (const [name, g] of model.graphs) {
    opts.onProgress?.(`lowering ${name}`);
    const p = lowerGraph(model, g, weights, { symbolMax });
    opts.onProgress?.(`planning memory of ${name}`);
    const mem = planMemory(p);
    programs.push(p);
    reports.push({ graph: name, kernels: p.kernels.length, tensors: p.tensors.length, ...mem });
  }
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
  const d = model.decoding;
  const header: PlanHeader = {
    plancVersion: PLANC_VERSION,
    formatVersion: PLAN_FORMAT_VERSION,
    target: { kind: opts.target, archs: [] },
    toolchain: { node: process.version, nvcc: '', driver: '' },
    sourceHash: sourceHash(model),
    profile: { maxBatch: opts.maxBatch, maxSrcLen: opts.maxSrcLen, maxTgtLen: opts.maxTgtLen, symbolMax },
    weights: planWeights,
    programs,
    arena: { bytes: Math.max(0, ...programs.map((p) => p.arenaBytes)), persistentBytes: 0 },
    options: opts.options ?? {},
    decoding: {
      decoderStartId: d.decoderStartId, eosId: d.eosId, padId: d.padId, unkId: d.unkId, bosId: d.bosId, vocabSize: d.vocabSize, maxLength: d.maxLength,
    },
    tuning: [],
    blobBytes: blob.length,
    blobCrc32: 0,
    created: new Date().toISOString(),
  };
  return { header, blob, reports };
}

/** sha256 over the source .onnx files and the ids of the distinct weights (which hash their bytes). */
function sourceHash(model: Model): string {
  const h = createHash('sha256');
  for (const f of Object.values(model.sources).sort()) if (fs.existsSync(f)) h.update(fs.readFileSync(f));
  for (const id of [...model.weights.keys()].sort()) h.update(id);
  return h.digest('hex');
}
