// The plan as plain data (the protobuf header of compiler/plan/plan.proto, decoded with int64 as numbers).
import type { DecodingFacts, MemoizedNode } from '../ir.ts';
import type { QuantizedLayer } from '../quant/layers.ts';
/** 3: the decoding conventions (eos list, forced bos/eos, suppressed and bad words, num_beams, max_new_tokens). */
export const PLAN_FORMAT_VERSION = 3;

export interface PlanTarget {
  kind: 'cpu' | 'cuda';
  archs: string[];
}
export interface PlanToolchain {
  node: string;
  nvcc: string;
  driver: string;
}
export interface PlanProfile {
  maxBatch: number;
  maxSrcLen: number;
  maxTgtLen: number;
  symbolMax: Record<string, number>;
}
export interface PlanWeight {
  id: string;
  dtype: number;
  dims: number[];
  offset: number;
  length: number;
}
export interface PlanTerm {
  coeff: number;
  factors: number[];
}
export interface PlanExpr {
  terms: PlanTerm[];
}

/** STATE: a graph input whose feed buffer kernels write in place (a KV cache the caller keeps between runs). */
export const TENSOR_KIND = { ARENA: 0, WEIGHT: 1, INPUT: 2, ALIAS: 3, STATE: 4 } as const;
export type TensorKind = (typeof TENSOR_KIND)[keyof typeof TENSOR_KIND];

export interface PlanTensor {
  name: string;
  kind: TensorKind;
  dtype: number;
  /** Expression indices, one per dim. */
  dims: number[];
  offset: number;
  slotBytes: number;
  ref: number;
}

export interface PlanKernel {
  name: string;
  inputs: number[];
  outputs: number[];
  iargs: number[];
  fargs: number[];
  node: string;
  origin: string[];
  /**
   * The variant it runs (compiler/kernel-schema.ts KernelSpec.variants), chosen by the select-variants program pass:
   * cpu plans name one for every kernel that has variants ('auto': the kernel decides at run time). Absent or '':
   * the kernel's default (auto, or its only implementation), as in plans made before variants were recorded.
   */
  variant?: string;
}

/** A runtime symbol: dim `axis` of graph input `input`, or (fromValue) its element `axis` (an int64 length input). */
export interface PlanSymbol {
  name: string;
  input: number;
  axis: number;
  fromValue: boolean;
}
export interface PlanIO {
  name: string;
  tensor: number;
}

export interface PlanProgram {
  graph: string;
  symbols: PlanSymbol[];
  exprs: PlanExpr[];
  tensors: PlanTensor[];
  kernels: PlanKernel[];
  inputs: PlanIO[];
  outputs: PlanIO[];
  arenaBytes: number;
  arenaLowerBound: number;
  tensorBytesSum: number;
  /** Counts of the planc ops the passes produced in this graph (e.g. planc.FusedMatMul). */
  fusedOps: Record<string, number>;
}

/** The model's decoding ids and limits, as the plan records them. */
export type PlanDecoding = DecodingFacts;

/** One grid dimension: ceil(mul × Π dims[from..to) of operand / div); operands are the call's inputs, then outputs. */
export interface CudaGrid {
  operand: number;
  from: number;
  to: number;
  div: number;
  mul: number;
}
export interface CudaLaunch {
  entry: string;
  block: number;
  maxRows: number;
  grid: CudaGrid[];
}
export interface CudaCall {
  variants: CudaLaunch[];
}
export interface CudaKernelStats {
  name: string;
  arch: string;
  registers: number;
  spillBytes: number;
  sharedBytes: number;
  stackBytes: number;
}

/** A cuda plan's generated code (compiler/plan/plan.proto CudaCode). */
export interface PlanCuda {
  fatbin: Uint8Array;
  source: string;
  nvccVersion: string;
  kernels: CudaKernelStats[];
  /** Per program (same order as PlanHeader.programs): the launch of each kernel call. */
  programs: { calls: CudaCall[] }[];
  scratchBytes: number;
}

export interface PlanHeader {
  plancVersion: string;
  formatVersion: number;
  target: PlanTarget;
  toolchain: PlanToolchain;
  sourceHash: string;
  profile: PlanProfile;
  weights: PlanWeight[];
  programs: PlanProgram[];
  arena: { bytes: number; persistentBytes: number };
  options: Record<string, string>;
  decoding: PlanDecoding;
  tuning: PlanTuningDecision[];
  blobBytes: number;
  blobCrc32: number;
  created: string;
  /** The tokenizer file's bytes (empty: the plan has none; then only token ids can be translated). */
  tokenizer: Uint8Array;
  tokenizerKind: '' | 'spm' | 'hf';
  /** cuda plans only: the generated kernels. */
  cuda?: PlanCuda;
  /** Plans made with `planc optimize --vocab`: the vocabulary rewrite (compiler/plan/plan.proto Vocab). */
  vocab?: PlanVocab;
  /** Plans made with `planc optimize --quantize` (compiler/plan/plan.proto Quantization). */
  quantization?: PlanQuantization;
  /** Nodes computed at optimize time (passes/memoize.ts). */
  memoized?: MemoizedNode[];
  /** Plans made with `planc optimize --fast`: the search's curve and choice (compiler/plan/plan.proto Fast). */
  fast?: PlanFast;
}

/** --fast's search: every rung × vocabulary point measured against the float32 full-vocabulary plan (plan.proto Fast). */
export interface PlanFast {
  evalSource: string;
  evalSentences: number;
  hasBleu: boolean;
  bleuFp32: number;
  gate: string;
  /** The clusters' calibration text ('': no vocabulary points were measured). */
  calibrationFile: string;
  timeBatch: number;
  timeSentences: number;
  /** The float32 full-projection plan's time on the timed sentences. */
  fp32Seconds: number;
  /** Every combination measured, in the order measured. */
  curve: PlanFastPoint[];
  choice: string;
  notes: string;
  /** The clusters grid screened on float32 products (emulated, batch-1 masks), as --vocab auto measures it. */
  screen: PlanVocabPoint[];
}

/** One measured combination of --fast (plan.proto FastPoint); clusters 0 and no shortlist: the full projection. */
export interface PlanFastPoint {
  rung: string;
  clusters: number;
  topK: number;
  shortlist: boolean;
  identicalSentences: number;
  top1Agreement: number;
  bleu: number;
  gatePassed: boolean;
  /** Seconds for the timed sentences; 0: not timed (the gate failed). */
  seconds: number;
  chosen: boolean;
}

/** One tuning decision (compiler/plan/plan.proto TuningDecision); reason and alternatives: cpu plans tuned by optimize/tune.ts. */
export interface PlanTuningDecision {
  key: string;
  choice: string;
  micros: number;
  reason?: string;
  alternatives?: { variant: string; micros: number; spread: number; note: string }[];
}

/** One product's precision in a quantized plan. */
export interface PlanQuantizedLayer extends Omit<QuantizedLayer, 'weight' | 'derived'> {
  /** Relative error of its output on calibration data; -1 when not measured. */
  error: number;
  /** Why it has this precision ('' when it is what was asked). */
  reason: string;
}

/** The quantization of a plan and its accuracy gate (compiler/plan/plan.proto Quantization). */
export interface PlanQuantization {
  mode: string;
  layers: PlanQuantizedLayer[];
  weightBytesFp32: number;
  weightBytes: number;
  evalSource: string;
  evalSentences: number;
  identicalSentences: number;
  top1Agreement: number;
  hasBleu: boolean;
  bleu: number;
  bleuFp32: number;
  gate: string;
  gatePassed: boolean;
  notes: string;
}

/** A plan's quantization record with nothing measured yet (mode as asked). */
export function emptyQuantization(mode: string): PlanQuantization {
  return {
    mode,
    layers: [],
    weightBytesFp32: 0,
    weightBytes: 0,
    evalSource: '',
    evalSentences: 0,
    identicalSentences: 0,
    top1Agreement: 0,
    hasBleu: false,
    bleu: 0,
    bleuFp32: 0,
    gate: '',
    gatePassed: false,
    notes: '',
  };
}

/** A --fast combination's name: its rung and vocabulary point. */
export const fastPointName = (p: PlanFastPoint) =>
  `${p.rung} + ${p.shortlist ? 'shortlist' : p.clusters ? `clusters R${p.clusters} K${p.topK}` : 'full projection'}`;

/** The vocabulary rewrite of a plan: the shortlist the runtime needs, or the clusters' options; the quality report. */
export interface PlanVocab {
  method: 'shortlist' | 'clusters';
  shortlistFile: string;
  shortlistFormat: string;
  /** Shortlist CSR over source ids, frequent ids, first/best; empty for clusters. probs empty = none. */
  offsets: number[];
  targets: number[];
  probs: number[];
  frequent: number[];
  first: number;
  best: number;
  specialIds: number[];
  clusters: number;
  topK: number;
  calibrationFile: string;
  calibrationSentences: number;
  calibrationStates: number;
  kmeansIterations: number;
  kmeansConverged: boolean;
  kmeansInertia: number;
  emptyClusters: number;
  calibrationActiveMean: number;
  adjustments: string;
  evalSource: string;
  evalSentences: number;
  activeMean: number;
  activeMax: number;
  top1Agreement: number;
  identicalSentences: number;
  hasBleu: boolean;
  bleu: number;
  bleuFull: number;
  evalMode: string;
  includeSource: boolean;
  /** --vocab auto: every R × K point measured (the quality/speed curve) and why the plan's point was chosen. */
  curve: PlanVocabPoint[];
  choice: string;
}

/** One measured point of --vocab auto (plan.proto VocabPoint). */
export interface PlanVocabPoint {
  clusters: number;
  topK: number;
  activeMean: number;
  activeMax: number;
  top1Agreement: number;
  identicalSentences: number;
  bleu: number;
  gatePassed: boolean;
  /** Dot products of length D per decoder row: R centroids + the mean active ids. */
  cost: number;
}

/** A plan in memory: its header and the blob region holding the weights. */
export interface PlanFile {
  header: PlanHeader;
  blob: Uint8Array;
}
