// The Node API: loadPlan(path) → a Plan whose run(graph, feeds) executes one program in the native runtime.
import { PlancError } from '../compiler/diagnostics.ts';
import { decodePlan, readPlanFile } from '../compiler/plan/format.ts';
import type { PlanFile, PlanHeader, PlanProgram } from '../compiler/plan/types.ts';
import type { DecodingOptions } from './decode/options.ts';
import { translateIds, type TranslationResult } from './decode/translate-ids.ts';
import type { Backend } from './backend.ts';
import { openBackend } from './backends/index.ts';
import { translate, type TranslateOptions } from './translate.ts';
import { native, type NativeAddon } from './native.ts';
import { allocOutputTensor, arrayNameOf, DTYPE_OF_CODE, type RtTensor } from './tensor.ts';

export interface IOInfo {
  name: string;
  dtype: string;
  /** Dims as text: numbers or symbol expressions. */
  dims: string[];
}

/** The addon, or a PlancError saying how to build it. */
function addon(): NativeAddon {
  try {
    return native();
  } catch (e) {
    throw new PlancError('PLANC_E406', (e as Error).message);
  }
}

export class Plan {
  readonly header: PlanHeader;
  /** The target side (runtime/backends/): loads the programs and weights, runs them; chosen once from the plan's target. */
  private readonly backend: Backend;
  private readonly programs = new Map<string, PlanProgram>();
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(file: PlanFile, readonly source: string) {
    this.header = file.header;
    this.backend = openBackend(addon(), file, source);
    for (const p of file.header.programs) this.programs.set(p.graph, p);
  }

  /** What runs the plan: "cpu", or the GPU's name and arch. */
  get device(): string { return this.backend.device; }

  get graphs(): string[] { return [...this.programs.keys()]; }

  /** Inputs of a graph with their dtypes and symbolic dims. */
  inputs(graph: string): IOInfo[] { return this.io(graph, 'inputs'); }
  outputs(graph: string): IOInfo[] { return this.io(graph, 'outputs'); }

  private io(graph: string, which: 'inputs' | 'outputs'): IOInfo[] {
    const p = this.program(graph);
    return p[which].map((io) => {
      const t = p.tensors[io.tensor]!;
      return { name: io.name, dtype: DTYPE_OF_CODE[t.dtype]!, dims: t.dims.map((e) => exprText(p, e)) };
    });
  }

  private program(graph: string): PlanProgram {
    if (this.closed) throw new PlancError('PLANC_E405', 'this plan was closed');
    const l = this.programs.get(graph);
    if (!l) throw new PlancError('PLANC_E405', `plan has no graph '${graph}' (it has ${this.graphs.join(', ')})`, { file: this.source });
    return l;
  }

  /** Runs a graph on the native runtime; runs of one plan are serialized (they share its arena). */
  run(graph: string, feeds: Record<string, RtTensor>): Promise<Record<string, RtTensor>> {
    const job = this.queue.then(async () => {
      const { symbols, feedData, outputs } = this.prepare(graph, feeds);
      await this.backend.run(graph, symbols, feedData, Object.values(outputs).map((t) => t.data));
      return outputs;
    });
    this.queue = job.catch(() => undefined);
    return job;
  }

  /** The same as run, blocking the event loop (lowest overhead, for benchmarks and scripts). */
  runSync(graph: string, feeds: Record<string, RtTensor>): Record<string, RtTensor> {
    const { symbols, feedData, outputs } = this.prepare(graph, feeds);
    this.backend.runSync(graph, symbols, feedData, Object.values(outputs).map((t) => t.data));
    return outputs;
  }

  /** Checks feeds against the program, binds the symbols, allocates the outputs. */
  private prepare(graph: string, feeds: Record<string, RtTensor>) {
    const p = this.program(graph);
    const where = { file: this.source, graph };
    const bad = (msg: string): never => { throw new PlancError('PLANC_E405', msg, where); };
    for (const name of Object.keys(feeds)) if (!p.inputs.some((i) => i.name === name)) bad(`unknown feed '${name}'; graph '${graph}' takes ${p.inputs.map((i) => i.name).join(', ')}`);
    const values = new Array<number>(p.symbols.length).fill(-1);
    p.symbols.forEach((s, k) => {
      const f = feeds[p.inputs[s.input]!.name];
      if (!f) return;
      if (!s.fromValue) {
        if (Array.isArray(f.dims) && s.axis < f.dims.length) values[k] = f.dims[s.axis]!;
      } else if (f.data instanceof BigInt64Array && s.axis < f.data.length) {
        const v = Number(f.data[s.axis]!);
        if (!Number.isSafeInteger(v) || v < 0) bad(`feed '${p.inputs[s.input]!.name}' holds ${s.name} = ${v}; it must be a length ≥ 0`);
        values[k] = v;
      }
    });
    const feedData = p.inputs.map((io) => {
      const f = feeds[io.name];
      const t = p.tensors[io.tensor]!;
      const dtype = DTYPE_OF_CODE[t.dtype]!;
      if (!f) return bad(`missing feed '${io.name}' (${dtype}[${t.dims.map((e) => exprText(p, e)).join(',')}])`);
      if (f.dtype !== dtype) bad(`feed '${io.name}' is ${f.dtype}, the plan wants ${dtype}`);
      if (!Array.isArray(f.dims) || f.dims.some((d) => !Number.isSafeInteger(d) || d < 0)) bad(`feed '${io.name}' has bad dims`);
      if (f.dims.length !== t.dims.length) bad(`feed '${io.name}' has rank ${f.dims.length} ([${f.dims}]), the plan wants [${t.dims.map((e) => exprText(p, e)).join(',')}]`);
      if (!(f.data instanceof (globalThis as unknown as Record<string, { new (): object }>)[arrayNameOf(dtype)]!)) bad(`feed '${io.name}' data must be a ${arrayNameOf(dtype)}`);
      t.dims.forEach((e, axis) => {
        const want = evalExpr(p, e, values);
        if (want !== f.dims[axis]) bad(`feed '${io.name}' has dims [${f.dims}], but dim ${axis} must be ${exprText(p, e)} = ${want} here`);
      });
      if (f.data.length !== f.dims.reduce((a, b) => a * b, 1)) bad(`feed '${io.name}' has ${f.data.length} elements for dims [${f.dims}]`);
      return f.data;
    });
    p.symbols.forEach((s, k) => {
      const max = this.header.profile.symbolMax[s.name];
      if (max !== undefined && values[k]! > max) {
        bad(`feed '${p.inputs[s.input]!.name}' has ${s.name} = ${values[k]}, over the plan's maximum ${max} (optimize with a larger --max-batch/--max-src-len/--max-tgt-len or --max-dim ${s.name}=N)`);
      }
    });
    this.checkTokenIds(p, feeds, bad);
    const outputs: Record<string, RtTensor> = {};
    for (const io of p.outputs) {
      const t = p.tensors[io.tensor]!;
      outputs[io.name] = allocOutputTensor(DTYPE_OF_CODE[t.dtype]!, t.dims.map((e) => evalExpr(p, e, values)));
    }
    return { symbols: BigInt64Array.from(values, (v) => BigInt(v)), feedData, outputs };
  }

  /** Token ids must lie inside the vocabulary (the embedding gather checks again natively). */
  private checkTokenIds(p: PlanProgram, feeds: Record<string, RtTensor>, bad: (m: string) => never): void {
    const vocab = this.header.decoding.vocabSize;
    if (!vocab) return;
    for (const io of p.inputs) {
      if (!/input_ids/.test(io.name)) continue;
      const f = feeds[io.name]!;
      const d = f.data as ArrayLike<number | bigint>;
      for (let i = 0; i < d.length; i++) {
        const v = Number(d[i]);
        if (!(v >= 0 && v < vocab)) bad(`feed '${io.name}' holds token id ${v} at ${i}, outside the vocabulary [0, ${vocab})`);
      }
    }
  }

  /** Translates texts with the plan's embedded tokenizer; results in input order (see translateStream for streaming). */
  translate(texts: string[] | AsyncIterable<string>, options?: TranslateOptions): Promise<string[]> {
    return translate(this, texts, options);
  }

  /** Translates source id sequences (greedy or beam, see DecodingOptions); results in input order. */
  translateIds(ids: number[][], options?: Partial<DecodingOptions>): Promise<TranslationResult[]> {
    return translateIds(this, ids, options);
  }

  /** Per-kernel timing: `profile(graph, true)` starts (and resets) it; `profile(graph)` returns the sums so far. */
  profile(graph: string, on?: boolean): { kernel: string; node: string; ms: number }[] {
    const program = this.program(graph);
    const ns = this.backend.profile(graph, on);
    return program.kernels.map((k, i) => ({ kernel: k.name, node: k.node, ms: (ns[i] ?? 0) / 1e6 }));
  }

  /** Frees the native plan and programs. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.backend.close();
  }
}

function evalExpr(p: PlanProgram, e: number, values: number[]): number {
  let s = 0;
  for (const t of p.exprs[e]!.terms) {
    let x = t.coeff;
    for (const f of t.factors) x *= values[f]!;
    s += x;
  }
  return s;
}

function exprText(p: PlanProgram, e: number): string {
  const terms = p.exprs[e]!.terms;
  if (terms.length === 0) return '0';
  return terms.map((t) => [t.coeff === 1 && t.factors.length ? '' : String(t.coeff), ...t.factors.map((f) => p.symbols[f]!.name)].filter((x) => x).join('*')).join('+').replace(/\+-/g, '-');
}

/** Loads a plan file (validated) into the native runtime. */
export async function loadPlan(path: string): Promise<Plan> {
  return new Plan(readPlanFile(path), path);
}

/** Loads a plan from bytes already in memory. */
export function loadPlanBytes(bytes: Uint8Array, name = '<plan>'): Plan {
  return new Plan(decodePlan(bytes, name), name);
}
