// The target descriptions the program passes tune for: the CPU target, and the facts of each CUDA arch (SM count,
// shared memory) that codegen/cuda/rules.ts reads instead of constants.
import { PlancError } from '../compiler/diagnostics.ts';
import type { VariantSpec } from '../compiler/kernel-schema.ts';

/**
 * The CPU target. A cpu plan runs on any machine the native addon builds for (portable x86-64-v2 by default): what a
 * CPU has (AVX-512, the core count) and whether the build links OpenBLAS are detected by the runtime, never assumed
 * by the plan. So the plan records choices only: select-variants fixes a variant into a call only when it is the
 * one `auto` takes on every machine, and a variant with `needs` is only ever there because the caller asked for it
 * (the runtime refuses the plan where the need is not met).
 */
export const CPU_TARGET = {
  kind: 'cpu',
  /** The instruction set the native build assumes (native/CMakeLists.txt); anything beyond is detected at run time. */
  baseline: 'x86-64-v2',
} as const;

/** Whether every machine and build runs a CPU variant (no `needs`): the only ones a plan may carry unasked. */
export const runsEverywhere = (v: VariantSpec): boolean => v.needs === undefined;

/** The hardware facts of one CUDA arch, from its reference GPU (NVIDIA's published specifications). */
export interface CudaArch {
  /** sm_XY. */
  readonly arch: string;
  /** The GPU the facts are of (an arch spans parts with other SM counts, e.g. H100 PCIe has 114). */
  readonly gpu: string;
  /** Streaming multiprocessors. */
  readonly sms: number;
  /** Shared memory one SM has, and the most one block may use (opt-in above 48 KiB). */
  readonly sharedPerSmBytes: number;
  readonly sharedPerBlockBytes: number;
  /** Resident threads per SM. */
  readonly maxThreadsPerSm: number;
}

const KIB = 1024;

/** The archs planc knows, oldest first (sm_80 is the oldest its kernels build for: TF32 tensor cores). */
export const CUDA_ARCHS: readonly CudaArch[] = [
  {
    arch: 'sm_80',
    gpu: 'A100 SXM4',
    sms: 108,
    sharedPerSmBytes: 164 * KIB,
    sharedPerBlockBytes: 163 * KIB,
    maxThreadsPerSm: 2048,
  },
  {
    arch: 'sm_86',
    gpu: 'A10',
    sms: 72,
    sharedPerSmBytes: 100 * KIB,
    sharedPerBlockBytes: 99 * KIB,
    maxThreadsPerSm: 1536,
  },
  {
    arch: 'sm_89',
    gpu: 'L4',
    sms: 58,
    sharedPerSmBytes: 100 * KIB,
    sharedPerBlockBytes: 99 * KIB,
    maxThreadsPerSm: 1536,
  },
  {
    arch: 'sm_90',
    gpu: 'H100 SXM5',
    sms: 132,
    sharedPerSmBytes: 228 * KIB,
    sharedPerBlockBytes: 227 * KIB,
    maxThreadsPerSm: 2048,
  },
  {
    arch: 'sm_100',
    gpu: 'B200',
    sms: 148,
    sharedPerSmBytes: 228 * KIB,
    sharedPerBlockBytes: 227 * KIB,
    maxThreadsPerSm: 2048,
  },
];

const archNumber = (arch: string): number => {
  const m = /^sm_(\d+)a?$/.exec(arch);
  if (!m) throw new PlancError('PLANC_E302', `'${arch}' is not an sm arch (e.g. sm_80, sm_90)`);
  return Number(m[1]);
};

/**
 * The facts of one arch: its own entry, or for an arch between (or past) the entries the nearest listed one below it
 * (sm_87 → sm_86, sm_120 → sm_100); sm_90a is sm_90.
 */
export function cudaArch(arch: string): CudaArch {
  const n = archNumber(arch);
  const below = CUDA_ARCHS.filter((a) => archNumber(a.arch) <= n);
  const facts = below[below.length - 1];
  if (!facts) throw new PlancError('PLANC_E302', `${arch}: planc's CUDA kernels need sm_80 or newer`);
  return facts;
}

/**
 * The arch a plan compiled for `archs` is tuned for: the newest. One .cu serves every arch of the plan, and what the
 * rules tune with these facts (split-K's block count) changes speed only, never results; so the plan is tuned for the
 * newest arch (the deployment target, whose PTX newer GPUs also JIT), and older archs run the same launches, at
 * most a fraction of a wave fuller or emptier than theirs would be. The default [sm_80, sm_90] is tuned for the H100.
 */
export function cudaTuningArch(archs: readonly string[]): CudaArch {
  if (archs.length === 0) throw new PlancError('PLANC_E302', 'a cuda target needs at least one arch');
  const newest = [...archs].sort((a, b) => archNumber(a) - archNumber(b))[archs.length - 1]!;
  return cudaArch(newest);
}
