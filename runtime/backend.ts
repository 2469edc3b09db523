// The Backend interface behind a Plan: what one target (cpu, cuda) does for a loaded plan — load, run, profile, state, close.
import { PlancError } from '../compiler/diagnostics.ts';
import type { PlanFile } from '../compiler/plan/types.ts';
import type { NativeAddon, NativeArray } from './native.ts';

/**
 * One plan instance on one target. The Plan validates feeds, binds symbols and allocates outputs; the backend only
 * loads the programs and weights (in its constructor, from the plan file) and runs them by graph name.
 *
 * State: a graph's STATE inputs (in-place KV caches, TENSOR_KIND.STATE) are caller-owned arrays passed among the
 * feeds; a backend accepts them and leaves them updated, as the graph's kernels wrote them, when a run returns or
 * resolves (cpu: written in place, no copies; cuda: uploaded and copied back). No backend owns state between runs yet.
 */
export interface Backend {
  /** The plan target this backend runs. */
  readonly kind: 'cpu' | 'cuda';
  /** What runs the plan: "cpu", or the GPU ("NVIDIA H100 80GB HBM3 (sm_90)"). */
  readonly device: string;
  /** Runs a graph on the calling thread: symbol values, feeds in input order, outputs filled in output order. */
  runSync(graph: string, symbols: BigInt64Array, feeds: NativeArray[], outputs: NativeArray[]): void;
  /** The same, off the main thread where the backend can; the caller serializes runs of one plan. */
  run(graph: string, symbols: BigInt64Array, feeds: NativeArray[], outputs: NativeArray[]): Promise<void>;
  /** Per-kernel time sums in ns (`on` given: turns timing on/off and resets); a PlancError where unsupported. */
  profile(graph: string, on?: boolean): Float64Array;
  /** Frees what load allocated; the backend is not used afterwards. */
  close(): void;
}

/** Loads a plan file onto a target (weights, arena, every program); throws a PlancError naming the plan on failure. */
export type BackendLoader = (native: NativeAddon, file: PlanFile, source: string) => Backend;

/** A native error as a PlancError naming the plan and graph (kernel errors already name the kernel). */
export function nativeError(e: unknown, file: string, graph?: string): PlancError {
  if (e instanceof PlancError) return e;
  return new PlancError('PLANC_E406', (e as Error).message, { file, graph });
}

/** Calls into the addon, turning its errors into nativeError. */
export function nativeCall<T>(file: string, graph: string | undefined, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw nativeError(e, file, graph);
  }
}

/** The weight table for planNew/cudaPlanNew: [offset, length] pairs into the plan blob. */
export function weightTable(file: PlanFile): BigInt64Array {
  return BigInt64Array.from(file.header.weights.flatMap((w) => [BigInt(w.offset), BigInt(w.length)]));
}
