// The cuda backend: a cuda plan's weights, arena and generated kernels on the GPU, one launch program per graph.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { CudaCall, PlanFile } from '../../compiler/plan/types.ts';
import { nativeCall, Residents, weightTable, type Backend } from '../backend.ts';
import { encodeProgram } from '../encode-program.ts';
import { enableSim, simImage, simSelected } from './cudasim.ts';
import {
  kernelIds,
  packRun,
  type NativeAddon,
  type NativeArray,
  type NativeBuffer,
  type NativeResident,
  type NativeCudaPlan,
  type NativeCudaProgram,
} from '../native.ts';

/** The launch words of a program's calls (native/src/cuda/launch.h cuda_program_new). */
export function encodeLaunches(calls: CudaCall[], entryIndex: ReadonlyMap<string, number>): BigInt64Array {
  const w: number[] = [];
  for (const c of calls) {
    w.push(c.variants.length);
    for (const v of c.variants) {
      w.push(entryIndex.get(v.entry)!, v.block, v.maxRows, v.grid.length);
      for (const g of v.grid) w.push(g.operand, g.from, g.to, g.div, g.mul);
    }
  }
  return BigInt64Array.from(w, (x) => BigInt(x));
}

export class CudaBackend implements Backend {
  readonly kind = 'cuda';
  /** "NVIDIA H100 80GB HBM3 (sm_90)". */
  readonly device: string;
  /** Replay each program's launches as a CUDA graph while its shapes repeat (PLANC_CUDA_GRAPH=1; off until checked on a GPU). */
  useGraphs = process.env.PLANC_CUDA_GRAPH === '1';
  private readonly plan: NativeCudaPlan;
  private readonly programs = new Map<string, NativeCudaProgram>();
  private readonly residents: Residents;

  constructor(
    private readonly native: NativeAddon,
    file: PlanFile,
    private readonly source: string,
  ) {
    const h = file.header;
    const cuda = h.cuda!;
    const sim = simSelected();
    if (sim) enableSim();
    const status = native.cudaStatus();
    if (!status.available) {
      throw new PlancError(
        'PLANC_E403',
        `plan targets cuda (${h.target.archs.join(', ')}) but this machine cannot run it: ${status.reason}; run it on a machine with an NVIDIA GPU, or optimize a cpu plan`,
        { file: source },
      );
    }
    const table = weightTable(file);
    this.plan = nativeCall(source, undefined, () =>
      native.cudaPlanNew(file.blob, table, h.arena.bytes, sim ? simImage(cuda.source) : cuda.fatbin, cuda.scratchBytes),
    );
    this.device = native.cudaPlanDevice(this.plan);
    this.residents = new Residents(native, source, (bytes) => native.cudaResidentNew(this.plan, bytes));
    const entries = [...new Set(cuda.programs.flatMap((p) => p.calls.flatMap((c) => c.variants.map((v) => v.entry))))];
    const entryIndex = new Map(entries.map((e, i) => [e, i]));
    const ids = kernelIds();
    try {
      h.programs.forEach((p, i) => {
        const code = encodeProgram(p, h.weights.length, ids, source);
        const launches = encodeLaunches(cuda.programs[i]!.calls, entryIndex);
        const nodes = p.kernels.map((k) => k.node);
        this.programs.set(
          p.graph,
          nativeCall(source, p.graph, () => native.cudaProgramNew(this.plan, code, launches, entries, nodes)),
        );
      });
    } catch (e) {
      this.close();
      throw e;
    }
  }

  /**
   * TypedArray feeds uploaded (resident ones used in place on the device), kernels launched (or a captured CUDA graph
   * replayed), outputs copied to their arrays (resident ones device to device), TypedArray STATE feeds copied back.
   */
  runSync(graph: string, symbols: BigInt64Array, feeds: NativeBuffer[], outputs: NativeBuffer[]): void {
    const p = this.programs.get(graph)!;
    const r = packRun(feeds, outputs);
    nativeCall(this.source, graph, () =>
      this.native.cudaProgramRun(p, symbols, r.feeds, r.outputs, r.views, this.useGraphs),
    );
  }

  /** The addon has no asynchronous cuda run yet: the synchronous one (it waits for the GPU on the calling thread). */
  async run(graph: string, symbols: BigInt64Array, feeds: NativeBuffer[], outputs: NativeBuffer[]): Promise<void> {
    this.runSync(graph, symbols, feeds, outputs);
  }

  profile(graph: string): Float64Array {
    throw new PlancError('PLANC_E403', 'per-kernel profiles are not available for cuda plans yet', {
      file: this.source,
      graph,
    });
  }

  /** Device memory; copies run on the plan's stream, ordered before the next run. */
  residentNew(bytes: number): NativeResident {
    return this.residents.make(bytes);
  }
  residentFree(r: NativeResident): void {
    this.residents.free(r);
  }
  residentCopy(src: NativeResident, dst: NativeResident, spans: Float64Array): void {
    this.residents.copy(src, dst, spans);
  }
  residentWrite(r: NativeResident, offset: number, data: NativeArray): void {
    this.residents.write(r, offset, data);
  }
  residentRead(r: NativeResident, offset: number, data: NativeArray): void {
    this.residents.read(r, offset, data);
  }

  close(): void {
    this.residents?.freeAll();
    for (const p of this.programs.values()) this.native.cudaProgramFree(p);
    this.programs.clear();
    if (this.plan) this.native.cudaPlanFree(this.plan);
  }
}
