// The cpu backend: a plan's weights and arena in native memory, one decoded program per graph, run by the native executor.
import type { PlanFile } from '../../compiler/plan/types.ts';
import { nativeCall, nativeError, Residents, weightTable, type Backend } from '../backend.ts';
import { encodeProgram } from '../encode-program.ts';
import {
  kernelIds,
  packRun,
  type NativeAddon,
  type NativeArray,
  type NativeBuffer,
  type NativeResident,
  type NativePlan,
  type NativeProgram,
} from '../native.ts';

export class CpuBackend implements Backend {
  readonly kind = 'cpu';
  readonly device = 'cpu';
  private readonly plan: NativePlan;
  private readonly programs = new Map<string, NativeProgram>();
  private readonly residents: Residents;

  constructor(
    private readonly native: NativeAddon,
    file: PlanFile,
    private readonly source: string,
  ) {
    const h = file.header;
    const table = weightTable(file);
    const ids = kernelIds();
    this.plan = nativeCall(source, undefined, () => native.planNew(file.blob, table, h.arena.bytes));
    this.residents = new Residents(native, source, (bytes) => native.residentNew(this.plan, bytes));
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

  runSync(graph: string, symbols: BigInt64Array, feeds: NativeBuffer[], outputs: NativeBuffer[]): void {
    const handle = this.programs.get(graph)!;
    const r = packRun(feeds, outputs);
    nativeCall(this.source, graph, () => this.native.programRun(handle, symbols, r.feeds, r.outputs, r.views));
  }

  async run(graph: string, symbols: BigInt64Array, feeds: NativeBuffer[], outputs: NativeBuffer[]): Promise<void> {
    // the native async run works on copies of TypedArray feeds (resident ones in place) and writes in-place caches back
    // when it resolves
    const handle = this.programs.get(graph)!;
    const r = packRun(feeds, outputs);
    try {
      await this.native.programRunAsync(handle, symbols, r.feeds, r.outputs, r.views);
    } catch (e) {
      throw nativeError(e, this.source, graph);
    }
  }

  profile(graph: string, on?: boolean): Float64Array {
    return this.native.programProfile(this.programs.get(graph)!, on);
  }

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
    for (const h of this.programs.values()) this.native.programFree(h);
    this.programs.clear();
    if (this.plan) this.native.planFree(this.plan);
  }
}
