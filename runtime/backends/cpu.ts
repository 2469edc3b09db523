// The cpu backend: a plan's weights and arena in native memory, one decoded program per graph, run by the native executor.
import type { PlanFile } from '../../compiler/plan/types.ts';
import { nativeCall, nativeError, weightTable, type Backend } from '../backend.ts';
import { encodeProgram } from '../encode-program.ts';
import { kernelIds, type NativeAddon, type NativeArray, type NativePlan, type NativeProgram } from '../native.ts';


export class CpuBackend implements Backend {
  readonly kind = 'cpu';
  readonly device = 'cpu';
  private readonly plan: NativePlan;
  private readonly programs = new Map<string, NativeProgram>();

  constructor(private readonly native: NativeAddon, file: PlanFile, private readonly source: string) {
    const h = file.header;
    const table = weightTable(file);
    const ids = kernelIds();
    this.plan = nativeCall(source, undefined, () => native.planNew(file.blob, table, h.arena.bytes));
    try {
      for (const p of h.programs) {
        const code = encodeProgram(p, h.weights.length, ids, source);
        const handle = nativeCall(source, p.graph, () => native.programNew(this.plan, code));
        this.programs.set(p.graph, handle);
      }
    } catch (e) {
      this.close();
      throw e;
    }
  }

  runSync(graph: string, symbols: BigInt64Array, feeds: NativeArray[], outputs: NativeArray[]): void {
    const handle = this.programs.get(graph)!;
    nativeCall(this.source, graph, () => this.native.programRun(handle, symbols, feeds, outputs));
  }

  async run(graph: string, symbols: BigInt64Array, feeds: NativeArray[], outputs: NativeArray[]): Promise<void> {
    // the native async run works on copies of the feeds and writes in-place caches back when it resolves
    const handle = this.programs.get(graph)!;
    try {
      await this.native.programRunAsync(handle, symbols, feeds, outputs);
    } catch (e) {
      throw nativeError(e, this.source, graph);
    }
  }

  profile(graph: string, on?: boolean): Float64Array {
    return this.native.programProfile(this.programs.get(graph)!, on);
  }

  close(): void {
    for (const h of this.programs.values()) this.native.programFree(h);
    this.programs.clear();
    if (this.plan) this.native.planFree(this.plan);
  }
}
