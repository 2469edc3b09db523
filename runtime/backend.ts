// The Backend interface behind a Plan: what one target (cpu, cuda) does for a loaded plan — load, run, profile, state, close.
import { PlancError } from '../compiler/diagnostics.ts';
import type { PlanFile } from '../compiler/plan/types.ts';
import type { NativeAddon, NativeArray, NativeBuffer, NativeResident } from './native.ts';

/**
 * One plan instance on one target. The Plan validates feeds, binds symbols and allocates outputs; the backend only
 * loads the programs and weights (in its constructor, from the plan file) and runs them by graph name.
 *
 * Resident buffers (native/src/resident.h): memory the plan owns between runs (cpu: 64-byte aligned host memory; cuda:
 * device memory), made by residentNew and freed by residentFree, by garbage collection of the handle, or by close. Any
 * feed or output of a run may be a view of one ({ resident, offset, bytes }) instead of a TypedArray: feeds are used in
 * place (cuda: never uploaded), outputs are copied there (cuda: device to device). residentCopy moves spans between
 * them natively (cuda: on the device), so KV caches and encoder outputs never cross to the host between steps.
 *
 * State: a graph's STATE inputs (in-place KV caches, TENSOR_KIND.STATE) are written in place: in a resident view
 * directly, in a caller-owned TypedArray as the kernels wrote them once a run returns or resolves (cpu: no copies;
 * cuda: uploaded and copied back).
 */
export interface Backend {
  /** The plan target this backend runs. */
  readonly kind: 'cpu' | 'cuda';
  /** What runs the plan: "cpu", or the GPU ("NVIDIA H100 80GB HBM3 (sm_90)"). */
  readonly device: string;
  /** Runs a graph on the calling thread: symbol values, feeds in input order, outputs filled in output order. */
  runSync(graph: string, symbols: BigInt64Array, feeds: NativeBuffer[], outputs: NativeBuffer[]): void;
  /** The same, off the main thread where the backend can; the caller serializes runs of one plan. */
  run(graph: string, symbols: BigInt64Array, feeds: NativeBuffer[], outputs: NativeBuffer[]): Promise<void>;
  /** A zeroed resident buffer of `bytes` owned by this plan. */
  residentNew(bytes: number): NativeResident;
  residentFree(resident: NativeResident): void;
  /** Spans (src offset, dst offset, bytes) from src to dst in order, natively (see NativeAddon.residentCopy). */
  residentCopy(src: NativeResident, dst: NativeResident, spans: Float64Array): void;
  residentWrite(resident: NativeResident, offset: number, data: NativeArray): void;
  residentRead(resident: NativeResident, offset: number, data: NativeArray): void;
  /** Per-kernel time sums in ns (`on` given: turns timing on/off and resets); a PlancError where unsupported. */
  profile(graph: string, on?: boolean): Float64Array;
  /** Frees what load allocated and every resident buffer still alive; the backend is not used afterwards. */
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

/**
 * The resident buffers one backend made (allocated by `alloc`, its target's residentNew): the shared half of the
 * Backend resident methods, which close() frees together. Handles are held weakly, so an unreferenced buffer is still
 * freed by garbage collection.
 */
export class Residents {
  private readonly live = new Set<WeakRef<NativeResident>>();
  private readonly refs = new WeakMap<NativeResident, WeakRef<NativeResident>>();
  private readonly gone = new FinalizationRegistry<WeakRef<NativeResident>>((ref) => this.live.delete(ref));

  constructor(
    private readonly native: NativeAddon,
    private readonly source: string,
    private readonly alloc: (bytes: number) => NativeResident,
  ) {}

  make(bytes: number): NativeResident {
    const h = nativeCall(this.source, undefined, () => this.alloc(bytes));
    const ref = new WeakRef(h);
    this.live.add(ref);
    this.refs.set(h, ref);
    this.gone.register(h, ref, ref);
    return h;
  }

  free(h: NativeResident): void {
    const ref = this.refs.get(h);
    if (ref) {
      this.live.delete(ref);
      this.gone.unregister(ref);
    }
    nativeCall(this.source, undefined, () => this.native.residentFree(h));
  }

  copy(src: NativeResident, dst: NativeResident, spans: Float64Array): void {
    nativeCall(this.source, undefined, () => this.native.residentCopy(src, dst, spans));
  }

  write(h: NativeResident, offset: number, data: NativeArray): void {
    nativeCall(this.source, undefined, () => this.native.residentWrite(h, offset, data));
  }

  read(h: NativeResident, offset: number, data: NativeArray): void {
    nativeCall(this.source, undefined, () => this.native.residentRead(h, offset, data));
  }

  /** Frees every buffer still alive (the backend's close). */
  freeAll(): void {
    for (const ref of this.live) {
      const h = ref.deref();
      if (h) this.native.residentFree(h);
    }
    this.live.clear();
  }
}
