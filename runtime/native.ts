// Typed loader of the native addon (a local build in native/build, else the package's prebuilt binary) and typed wrappers of its functions.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PlancError } from '../compiler/diagnostics.ts';
import { defaultThreads } from './threads.ts';

/** The package root: this file is runtime/native.ts in a checkout, dist/runtime/native.js when compiled. */
const PACKAGE_ROOT = (() => {
  const up = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  return path.basename(up) === 'dist' && fs.existsSync(path.join(up, '..', 'package.json')) ? path.dirname(up) : up;
})();

/** Where `npm run build:native` (or the install script's build) puts the addon. */
export const NATIVE_BUILD_PATH = path.join(PACKAGE_ROOT, 'native', 'build', 'Release', 'planc_native.node');
/** The portable binary a published package ships for this platform (scripts/pack-prebuilt.mjs puts it there). */
export const NATIVE_PREBUILT_PATH = path.join(
  PACKAGE_ROOT,
  'prebuilds',
  `${process.platform}-${process.arch}`,
  'planc_native.node',
);

/**
 * The addon this process loads: PLANC_NATIVE_ADDON when set (e.g. a test build), else a local build, else the
 * prebuilt binary (the local build's path when there is neither).
 */
export const NATIVE_ADDON_PATH =
  process.env.PLANC_NATIVE_ADDON ||
  [NATIVE_BUILD_PATH, NATIVE_PREBUILT_PATH].find((p) => fs.existsSync(p)) ||
  NATIVE_BUILD_PATH;

let buildId: string | undefined;
/**
 * Which build of the addon this process loads: the first 12 hex digits of its file's SHA-256 ('none' when there is no
 * file). Kernels change between builds of one planc version; what was measured with one build is not another's.
 */
export function nativeBuildId(): string {
  buildId ??= fs.existsSync(NATIVE_ADDON_PATH)
    ? createHash('sha256').update(fs.readFileSync(NATIVE_ADDON_PATH)).digest('hex').slice(0, 12)
    : 'none';
  return buildId;
}

/** What builds the addon here: the build script in a checkout, the install script in an installed package. */
function buildAdvice(): string {
  const checkout = fs.existsSync(path.join(PACKAGE_ROOT, 'runtime', 'native.ts'));
  const command = checkout
    ? 'npm run build:native'
    : `node ${path.join(PACKAGE_ROOT, 'scripts', 'install-native.mjs')}`;
  return (
    `run \`${command}\` (it needs cmake and g++, and libopenblas-dev for fast matrix products; ` +
    'Debian: apt-get install cmake g++ libopenblas-dev)'
  );
}

/** Any TypedArray: feeds and outputs are raw bytes to the native side (only their byte length is checked). */
export type NativeArray =
  | Int8Array
  | Uint8Array
  | Uint8ClampedArray
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

declare const residentBrand: unique symbol;
/** A resident buffer (native/src/resident.h): memory a loaded plan owns between runs; host memory on cpu, device memory on cuda. */
export type NativeResident = { readonly [residentBrand]: true };

/** Bytes [offset, offset + bytes) of a resident buffer, given to a run in place of a feed or output TypedArray. */
export interface NativeResidentView {
  resident: NativeResident;
  offset: number;
  bytes: number;
}

/** A run's feed or output: a TypedArray, or a view of a resident buffer of the same plan. */
export type NativeBuffer = NativeArray | NativeResidentView;

/** A feed or output as the addon takes it: a TypedArray or a resident handle (its range in the run's views). */
export type NativeRunArg = NativeArray | NativeResident;

/**
 * The buffers of a run as the addon takes them: resident views become their handles, and their (offset, bytes) go in
 * `views`, two words per feed then per output (undefined when there is none, the common host-only case).
 */
export function packRun(
  feeds: NativeBuffer[],
  outputs: NativeBuffer[],
): { feeds: NativeRunArg[]; outputs: NativeRunArg[]; views?: Float64Array } {
  const isView = (b: NativeBuffer): b is NativeResidentView =>
    (b as NativeResidentView | undefined)?.resident !== undefined;
  // anything but two arrays goes to the addon as it is: the addon's own checks name the bad argument
  if (!Array.isArray(feeds) || !Array.isArray(outputs) || (!feeds.some(isView) && !outputs.some(isView))) {
    return { feeds: feeds as NativeArray[], outputs: outputs as NativeArray[] };
  }
  const views = new Float64Array(2 * (feeds.length + outputs.length));
  const pack = (list: NativeBuffer[], first: number) =>
    list.map((b, i) => {
      if (!isView(b)) return b;
      views[2 * (first + i)] = b.offset;
      views[2 * (first + i) + 1] = b.bytes;
      return b.resident;
    });
  return { feeds: pack(feeds, 0), outputs: pack(outputs, feeds.length), views };
}

/** The instruction-set levels the CPU kernels dispatch to at run time, each including the ones before it. */
export const ISA_LEVELS = ['baseline', 'avx2', 'avx512', 'avx512vnni', 'amx'] as const;
export type IsaLevel = (typeof ISA_LEVELS)[number];

export interface NativeInfo {
  /** Threads of the kernel thread pool (and of OpenBLAS when linked). */
  threads: number;
  blas: 'openblas' | 'builtin';
  /** SIMD level the addon was compiled for, and what this CPU has (and `PLANC_ISA <level>` when a cap is set). */
  simd: string;
  /**
   * The run-time dispatch: the highest level this CPU (and OS) supports, the cap the environment variable PLANC_ISA
   * set when the addon loaded (null: none), and the lower of the two, which the kernels use.
   */
  isa: { machine: IsaLevel; cap: IsaLevel | null; effective: IsaLevel };
  /** Per kernel with variants (matmul, qmatmul, project_topk, ...): the variants this machine runs (auto first). */
  variants: Record<string, string[]>;
  /** Per kernel with variants: the others, each with why this machine (or PLANC_ISA) does not run it. */
  variantsUnavailable: Record<string, Record<string, string>>;
}

export interface CudaStatus {
  available: boolean;
  reason: string;
}

export interface NativeProgramInfo {
  symbols: number;
  inputs: number;
  outputs: number;
  kernels: number;
}

declare const planBrand: unique symbol;
declare const programBrand: unique symbol;
/** A plan's native state (weights and arena); free with planFree or leave it to the garbage collector. */
export type NativePlan = { readonly [planBrand]: true };
/** A decoded program of a plan; free with programFree or leave it to the garbage collector. */
export type NativeProgram = { readonly [programBrand]: true };

declare const cudaPlanBrand: unique symbol;
declare const cudaProgramBrand: unique symbol;
/** A plan loaded on the GPU (weights, arena, kernels); free with cudaPlanFree. */
export type NativeCudaPlan = { readonly [cudaPlanBrand]: true };
export type NativeCudaProgram = { readonly [cudaProgramBrand]: true };

/** The addon's exports, exactly. */
export interface NativeAddon {
  kernelNames(): string[];
  info(): NativeInfo;
  cudaStatus(): CudaStatus;
  setThreads(n: number): void;
  planNew(blob: Uint8Array, weights: BigInt64Array, arenaBytes: number): NativePlan;
  planFree(plan: NativePlan): void;
  programNew(plan: NativePlan, code: BigInt64Array): NativeProgram;
  programFree(program: NativeProgram): void;
  programInfo(program: NativeProgram): NativeProgramInfo;
  /** Turns per-kernel timing on or off (resetting the sums) when `on` is given; returns the sums in ns. */
  programProfile(program: NativeProgram, on?: boolean): Float64Array;
  /** Feeds and outputs are TypedArrays or resident handles, whose (offset, bytes) `views` gives (see packRun). */
  programRun(
    program: NativeProgram,
    symbols: BigInt64Array,
    feeds: NativeRunArg[],
    outputs: NativeRunArg[],
    views?: Float64Array,
  ): void;
  /** Resident feeds are used in place (not copied) and held until the run resolves. */
  programRunAsync(
    program: NativeProgram,
    symbols: BigInt64Array,
    feeds: NativeRunArg[],
    outputs: NativeRunArg[],
    views?: Float64Array,
  ): Promise<void>;
  /** A zeroed, 64-byte aligned host resident buffer of a cpu plan. */
  residentNew(plan: NativePlan, bytes: number): NativeResident;
  /** A zeroed device resident buffer of a cuda plan (cuMemAlloc). */
  cudaResidentNew(plan: NativeCudaPlan, bytes: number): NativeResident;
  /** Frees the buffer (once a run holding it ends); a second free does nothing, any other use then throws. */
  residentFree(resident: NativeResident): void;
  /**
   * Copies spans, (src offset, dst offset, bytes) triples, from src to dst (the same plan's; may be one buffer), in
   * order; every span is checked to lie inside its buffer before any byte moves, and a span may not overlap itself.
   */
  residentCopy(src: NativeResident, dst: NativeResident, spans: Float64Array): void;
  /** Host bytes into the buffer at offset. */
  residentWrite(resident: NativeResident, offset: number, data: NativeArray): void;
  /** The buffer's bytes at offset into data (its whole length). */
  residentRead(resident: NativeResident, offset: number, data: NativeArray): void;
  /**
   * k-means assignment (native/src/cpu/kmeans.cc) on the kernel thread pool: for x [n, d] and centroids c [r, d]
   * (row-major), outAssign[i] = argmin_j ‖c_j‖² − 2 x_i·c_j (ties: the lowest j) and outDist[i] = ‖x_i − c_outAssign[i]‖²
   * (≥ 0). cnorm [r] = ‖c_j‖² (null: computed). Arrays may be longer than n·d, r·d, r, n; shorter ones throw.
   */
  kmeansAssign(
    x: Float32Array,
    n: number,
    d: number,
    c: Float32Array,
    r: number,
    cnorm: Float32Array | null,
    outAssign: Int32Array,
    outDist: Float32Array | null,
  ): void;
  /** CUDA (native/src/cuda/launch.h): a plan on device 0; fails with the driver call and result when there is no GPU. */
  cudaPlanNew(
    blob: Uint8Array,
    weights: BigInt64Array,
    arenaBytes: number,
    fatbin: Uint8Array,
    scratchBytes: number,
  ): NativeCudaPlan;
  cudaPlanFree(plan: NativeCudaPlan): void;
  cudaPlanDevice(plan: NativeCudaPlan): string;
  /** launches: per call n_variants, then per variant entry index, block, max_rows, n_grid, n_grid × (operand, from, to, div, mul). */
  cudaProgramNew(
    plan: NativeCudaPlan,
    code: BigInt64Array,
    launches: BigInt64Array,
    entries: string[],
    nodes: string[],
  ): NativeCudaProgram;
  cudaProgramFree(program: NativeCudaProgram): void;
  /** A synchronous run: feeds uploaded, kernels launched (or a captured CUDA graph replayed), outputs and STATE feeds copied back. */
  cudaProgramRun(
    program: NativeCudaProgram,
    symbols: BigInt64Array,
    feeds: NativeRunArg[],
    outputs: NativeRunArg[],
    views?: Float64Array,
    graph?: boolean,
  ): void;
}

/** Thrown when the addon is not built or cannot be loaded. */
export class NativeUnavailableError extends Error {
  override name = 'NativeUnavailableError';
}

let addon: NativeAddon | undefined;
let loadFailure: Error | undefined;

/**
 * OpenBLAS 0.3.21 (Debian 12) does not recognize recent AVX-512 CPUs (AMD Zen 4, newer Xeons) and falls back to its
 * AVX2 kernels, half as fast; its SkylakeX kernels run correctly on any CPU with AVX-512 F/BW/VL/DQ. Under a PLANC_ISA
 * cap below avx512, OpenBLAS is capped alike: Haswell's kernels (AVX2) for avx2, Nehalem's (SSE4.2) for baseline.
 * Chosen before the library loads, only when the user has not chosen.
 */
function pickBlasCore(): void {
  if (process.env.OPENBLAS_CORETYPE || process.platform !== 'linux') return;
  const cap = process.env.PLANC_ISA;
  try {
    const flags = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.split(/\s+/) ?? [];
    const avx2 = ['avx2', 'fma'].every((f) => flags.includes(f));
    const avx512 = avx2 && ['avx512f', 'avx512bw', 'avx512vl', 'avx512dq'].every((f) => flags.includes(f));
    if (cap === 'baseline') process.env.OPENBLAS_CORETYPE = 'NEHALEM';
    else if (cap === 'avx2' && avx512) process.env.OPENBLAS_CORETYPE = 'HASWELL';
    else if (avx512 && cap !== 'avx2') process.env.OPENBLAS_CORETYPE = 'SKYLAKEX';
  } catch {
    // no /proc/cpuinfo: leave OpenBLAS's own detection
  }
}

function load(): NativeAddon {
  pickBlasCore();
  if (!fs.existsSync(NATIVE_ADDON_PATH)) {
    throw new NativeUnavailableError(
      `the planc native addon is not built (${NATIVE_ADDON_PATH} is missing): ${buildAdvice()}`,
    );
  }
  try {
    return createRequire(import.meta.url)(NATIVE_ADDON_PATH) as NativeAddon;
  } catch (e) {
    // the addon refuses to load under a PLANC_ISA that is not a level (its message names the variable and the levels):
    // a usage error, as a bad PLANC_NUM_THREADS is
    if (/^PLANC_ISA=/.test((e as Error).message)) throw new PlancError('PLANC_E302', (e as Error).message);
    const missingLib = /lib(openblas|gfortran)[^:]*: cannot open shared object/.test((e as Error).message);
    throw new NativeUnavailableError(
      `the planc native addon at ${NATIVE_ADDON_PATH} does not load (${(e as Error).message}): ` +
        (missingLib
          ? `install the library it links (Debian: apt-get install libopenblas0) or build the addon here: ${buildAdvice()}`
          : `build it here: ${buildAdvice()}`),
    );
  }
}

/**
 * The addon, loaded once; throws NativeUnavailableError (with what to run) when it is not built, a PlancError
 * (PLANC_E302) when PLANC_ISA is not a level.
 */
export function native(): NativeAddon {
  if (addon) return addon;
  if (loadFailure) throw loadFailure;
  let loaded: NativeAddon;
  try {
    loaded = load();
  } catch (e) {
    loadFailure = e as Error;
    throw loadFailure;
  }
  // the pool's default size honours PLANC_NUM_THREADS, CPU affinity and cgroup quotas (the addon alone counts all CPUs)
  const threads = defaultThreads();
  if (loaded.info().threads !== threads) loaded.setThreads(threads);
  addon = loaded;
  return addon;
}

/** Whether the addon loads here (never throws). */
export function nativeAvailable(): boolean {
  try {
    native();
    return true;
  } catch {
    return false;
  }
}

/** The kernel table in id order. */
export function kernelNames(): string[] {
  return native().kernelNames();
}

let ids: Map<string, number> | undefined;

/** Kernel name → id (its position in the table); the plan stores names, programs use ids. */
export function kernelIds(): ReadonlyMap<string, number> {
  if (ids) return ids;
  const m = new Map<string, number>();
  kernelNames().forEach((name, id) => {
    if (m.has(name)) throw new Error(`native kernel table lists ${name} twice (ids ${m.get(name)} and ${id})`);
    m.set(name, id);
  });
  ids = m;
  return m;
}

export function nativeInfo(): NativeInfo {
  return native().info();
}

export function cudaStatus(): CudaStatus {
  return native().cudaStatus();
}

/** Recreates the kernel thread pool with n threads (waits for a run in progress to end). */
export function setThreads(n: number): void {
  native().setThreads(n);
}

/**
 * Copies each weight, given as [offset, length] pairs into blob, into native memory and allocates a zeroed arena
 * of arenaBytes shared by all the plan's programs.
 */
export function planNew(blob: Uint8Array, weights: BigInt64Array, arenaBytes: number): NativePlan {
  return native().planNew(blob, weights, arenaBytes);
}

export function planFree(plan: NativePlan): void {
  native().planFree(plan);
}

/** Decodes program code (native/PROGRAM.md) for a plan, checking every word. */
export function programNew(plan: NativePlan, code: BigInt64Array): NativeProgram {
  return native().programNew(plan, code);
}

export function programFree(program: NativeProgram): void {
  native().programFree(program);
}

export function programInfo(program: NativeProgram): NativeProgramInfo {
  return native().programInfo(program);
}

/** One run on this thread: symbol values, feeds in input order, outputs filled in output order (arrays or resident views). */
export function programRun(
  program: NativeProgram,
  symbols: BigInt64Array,
  feeds: NativeBuffer[],
  outputs: NativeBuffer[],
): void {
  const r = packRun(feeds, outputs);
  native().programRun(program, symbols, r.feeds, r.outputs, r.views);
}

/**
 * One run on a worker thread; TypedArray feeds are copied when it starts (resident views are used in place), outputs
 * are filled when it resolves. A plan runs one program at a time (its programs share the arena): a second run of the
 * same plan, or a resident buffer operation on it, meanwhile is rejected.
 */
export function programRunAsync(
  program: NativeProgram,
  symbols: BigInt64Array,
  feeds: NativeBuffer[],
  outputs: NativeBuffer[],
): Promise<void> {
  const r = packRun(feeds, outputs);
  return native().programRunAsync(program, symbols, r.feeds, r.outputs, r.views);
}
