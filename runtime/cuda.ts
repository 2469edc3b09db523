// The CUDA side of a Plan: a cuda plan's weights, arena and generated kernels on the GPU, one handle per program.
import { PlancError } from '../compiler/diagnostics.ts';
import type { CudaCall, PlanFile } from '../compiler/plan/types.ts';
import { encodeProgram } from './encode-program.ts';
import { kernelIds, type NativeAddon, type NativeArray, type NativeCudaPlan, type NativeCudaProgram } from './native.ts';

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

export class CudaBackend {
  private readonly plan: NativeCudaPlan;
  private readonly programs = new Map<string, NativeCudaProgram>();
  /** "NVIDIA H100 80GB HBM3 (sm_90)". */
  readonly device: string;
  /** Replay each program's launches as a CUDA graph while its shapes repeat (PLANC_CUDA_GRAPH=1; off until checked on a GPU). */
  useGraphs = process.env.PLANC_CUDA_GRAPH === '1';

  constructor(private readonly native: NativeAddon, file: PlanFile, source: string) {
    const h = file.header;
    const cuda = h.cuda!;
    const status = native.cudaStatus();
    if (!status.available) {
      throw new PlancError('PLANC_E403', `plan targets cuda (${h.target.archs.join(', ')}) but this machine cannot run it: ${status.reason}; run it on a machine with an NVIDIA GPU, or optimize a cpu plan`, { file: source });
    }
    const table = BigInt64Array.from(h.weights.flatMap((w) => [BigInt(w.offset), BigInt(w.length)]));
    this.plan = call(source, undefined, () => native.cudaPlanNew(file.blob, table, h.arena.bytes, cuda.fatbin, cuda.scratchBytes));
    this.device = native.cudaPlanDevice(this.plan);
    const entries = [...new Set(cuda.programs.flatMap((p) => p.calls.flatMap((c) => c.variants.map((v) => v.entry))))];
    const entryIndex = new Map(entries.map((e, i) => [e, i]));
    const ids = kernelIds();
    try {
      h.programs.forEach((p, i) => {
        const code = encodeProgram(p, h.weights.length, ids, source);
        const launches = encodeLaunches(cuda.programs[i]!.calls, entryIndex);
        const nodes = p.kernels.map((k) => k.node);
        this.programs.set(p.graph, call(source, p.graph, () => native.cudaProgramNew(this.plan, code, launches, entries, nodes)));
      });
    } catch (e) {
      this.close();
      throw e;
    }
  }

  run(source: string, graph: string, symbols: BigInt64Array, feeds: NativeArray[], outputs: NativeArray[]): void {
    const p = this.programs.get(graph)!;
    call(source, graph, () => this.native.cudaProgramRun(p, symbols, feeds, outputs, this.useGraphs));
  }

  close(): void {
    for (const p of this.programs.values()) this.native.cudaProgramFree(p);
    this.programs.clear();
    if (this.plan) this.native.cudaPlanFree(this.plan);
  }
}

function call<T>(file: string, graph: string | undefined, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof PlancError) throw e;
    throw new PlancError('PLANC_E406', (e as Error).message, { file, graph });
  }
}
