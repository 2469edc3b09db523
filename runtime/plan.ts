// The Node API: loadPlan(path) → a Plan whose run(graph, feeds) executes one program in the native runtime.
import * as fs from 'node:fs';
import { type OptionNamer, PlancError, type Text } from '../compiler/diagnostics.ts';
import { fail } from '../compiler/diagnostics-catalog.ts';
import { decodePlan, readPlanFile } from '../compiler/plan/format.ts';
import { exprText, exprValue } from '../compiler/plan/expr.ts';
import { STEP_TOKENS_SYMBOL } from '../compiler/plan/io-names.ts';
import type { PlanFile, PlanHeader, PlanProgram } from '../compiler/plan/types.ts';
import type { DecodingOptions } from './decode/options.ts';
import { translateIds, type TranslationResult } from './decode/translate-ids.ts';
import type { Backend } from './backend.ts';
import { checkFeedValues, checkNotEmpty } from './feeds-check.ts';
import { openBackend } from './backends/index.ts';
import { translate, type TranslateOptions } from './translate.ts';
import { native, type NativeAddon, type NativeArray, type NativeBuffer } from './native.ts';
import {
  allocOutputTensor,
  arrayNameOf,
  bigInt64Of,
  DTYPE_OF_CODE,
  dtypeBytes,
  isResidentTensor,
  type FeedTensor,
  type Resident,
  type ResidentTensor,
  type RtData,
  type RtTensor,
} from './tensor.ts';

/** What outputShapes reads of a feed: its dims, and the data of an int64 feed giving a symbol by value. */
export interface ShapeFeed {
  dims: number[];
  data?: unknown;
  resident?: unknown;
}

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
    if (e instanceof PlancError) throw e; // e.g. a bad PLANC_NUM_THREADS
    throw new PlancError('PLANC_E406', (e as Error).message);
  }
}

export class Plan {
  readonly header: PlanHeader;
  /** The target side (runtime/backends/): loads the programs and weights, runs them; chosen once from the plan's target. */
  private readonly backend: Backend;
  private readonly programs = new Map<string, PlanProgram>();
  private queue: Promise<unknown> = Promise.resolve();
  private readonly ioInfos = new Map<string, IOInfo[]>();
  private closed = false;

  constructor(
    file: PlanFile,
    readonly source: string,
  ) {
    this.header = file.header;
    this.backend = openBackend(addon(), file, source);
    for (const p of file.header.programs) this.programs.set(p.graph, p);
  }

  /** What runs the plan: "cpu", or the GPU's name and arch. */
  get device(): string {
    return this.backend.device;
  }

  get graphs(): string[] {
    return [...this.programs.keys()];
  }

  /** Inputs of a graph with their dtypes and symbolic dims. */
  inputs(graph: string): IOInfo[] {
    return this.io(graph, 'inputs');
  }
  outputs(graph: string): IOInfo[] {
    return this.io(graph, 'outputs');
  }

  /** Computed once per graph (decoders ask for every batch); copies, so callers may change them. */
  private io(graph: string, which: 'inputs' | 'outputs'): IOInfo[] {
    const p = this.program(graph);
    const key = `${which} ${graph}`;
    let infos = this.ioInfos.get(key);
    if (!infos) {
      infos = p[which].map((io) => {
        const t = p.tensors[io.tensor]!;
        return { name: io.name, dtype: DTYPE_OF_CODE[t.dtype]!, dims: t.dims.map((e) => exprText(p, e)) };
      });
      this.ioInfos.set(key, infos);
    }
    return infos.map((i) => ({ ...i, dims: [...i.dims] }));
  }

  private program(graph: string): PlanProgram {
    if (this.closed) fail('closed', { what: 'plan' });
    const l = this.programs.get(graph);
    if (!l)
      throw new PlancError('PLANC_E405', `plan has no graph '${graph}' (it has ${this.graphs.join(', ')})`, {
        file: this.source,
      });
    return l;
  }

  /**
   * Runs a graph on the native runtime; runs of one plan are serialized (they share its arena). A feed may be a
   * ResidentTensor (a view of one of this plan's resident buffers, checked like an array: dtype, dims, bytes inside the
   * buffer); `into` names outputs to write into resident buffers instead of new arrays (they are not in the result).
   */
  run(
    graph: string,
    feeds: Record<string, FeedTensor>,
    into?: Record<string, ResidentTensor>,
  ): Promise<Record<string, RtTensor>> {
    const job = this.queue.then(async () => {
      const { symbols, feedData, outData, outputs } = this.prepare(graph, feeds, into);
      await this.backend.run(graph, symbols, feedData, outData);
      return outputs;
    });
    this.queue = job.catch(() => undefined);
    return job;
  }

  /** The same as run, blocking the event loop (lowest overhead, for benchmarks and scripts). */
  runSync(
    graph: string,
    feeds: Record<string, FeedTensor>,
    into?: Record<string, ResidentTensor>,
  ): Record<string, RtTensor> {
    const { symbols, feedData, outData, outputs } = this.prepare(graph, feeds, into);
    this.backend.runSync(graph, symbols, feedData, outData);
    return outputs;
  }

  /**
   * The dims every output of a graph has for these feeds: only their dims are read, and the data of the int64 feeds
   * that give a symbol by value (feeds need no data otherwise, and are not checked).
   */
  outputShapes(graph: string, feeds: Record<string, ShapeFeed>): Record<string, number[]> {
    const p = this.program(graph);
    const bad = (msg: Text): never => {
      throw new PlancError('PLANC_E405', msg, { file: this.source, graph });
    };
    const values = this.symbolValues(p, feeds, bad);
    return Object.fromEntries(
      p.outputs.map((io) => {
        const dims = p.tensors[io.tensor]!.dims.map((e) => exprValue(p, e, values));
        if (dims.some((d) => d < 0))
          bad(
            `output '${io.name}' has dims [${p.tensors[io.tensor]!.dims.map((e) => exprText(p, e))}], which these feeds do not determine`,
          );
        return [io.name, dims];
      }),
    );
  }

  /** Symbol values bound by the feeds (-1 where none binds one). */
  private symbolValues(p: PlanProgram, feeds: Record<string, ShapeFeed>, bad: (m: Text) => never): number[] {
    const values = new Array<number>(p.symbols.length).fill(-1);
    p.symbols.forEach((s, k) => {
      const name = p.inputs[s.input]!.name;
      const f = feeds[name];
      if (!f) return;
      if (!s.fromValue) {
        if (Array.isArray(f.dims) && s.axis < f.dims.length) values[k] = f.dims[s.axis]!;
      } else if (f.data instanceof BigInt64Array) {
        if (s.axis >= f.data.length) return;
        const v = Number(f.data[s.axis]!);
        if (!Number.isSafeInteger(v) || v < 0) bad(`feed '${name}' holds ${s.name} = ${v}; it must be a length ≥ 0`);
        values[k] = v;
      } else if (f.resident !== undefined) {
        bad(`feed '${name}' gives ${s.name} by its value, so it must be a BigInt64Array, not a resident buffer`);
      }
    });
    return values;
  }

  /** A resident tensor's bytes as a native view, checked: this plan's buffer, dtype-aligned offset, bytes inside it. */
  private residentView(what: string, t: ResidentTensor, bad: (m: string) => never): NativeBuffer {
    const r = t.resident;
    if (r.owner !== this) bad(`${what} is a resident buffer of another plan`);
    const size = dtypeBytes(t.dtype);
    const bytes = t.dims.reduce((a, b) => a * b, 1) * size;
    if (!Number.isSafeInteger(t.offset) || t.offset < 0 || t.offset % size !== 0)
      bad(`${what} has offset ${t.offset}; it must be a multiple of ${size} bytes ≥ 0`);
    if (t.offset + bytes > r.bytes)
      bad(`${what} needs bytes [${t.offset}, ${t.offset + bytes}) of its resident buffer, which holds ${r.bytes}`);
    return { resident: r.handle, offset: t.offset, bytes };
  }

  /** Checks feeds against the program, binds the symbols, allocates the outputs (or checks their resident views). */
  private prepare(graph: string, feeds: Record<string, FeedTensor>, into?: Record<string, ResidentTensor>) {
    const p = this.program(graph);
    const where = { file: this.source, graph };
    const bad = (msg: Text): never => {
      throw new PlancError('PLANC_E405', msg, where);
    };
    for (const name of Object.keys(feeds))
      if (!p.inputs.some((i) => i.name === name))
        bad(`unknown feed '${name}'; graph '${graph}' takes ${p.inputs.map((i) => i.name).join(', ')}`);
    const values = this.symbolValues(p, feeds, bad);
    const feedData = p.inputs.map((io): NativeBuffer => {
      const f = feeds[io.name];
      const t = p.tensors[io.tensor]!;
      const dtype = DTYPE_OF_CODE[t.dtype]!;
      if (!f) return bad(`missing feed '${io.name}' (${dtype}[${t.dims.map((e) => exprText(p, e)).join(',')}])`);
      if (f.dtype !== dtype) bad(`feed '${io.name}' is ${f.dtype}, the plan wants ${dtype}`);
      if (!Array.isArray(f.dims) || f.dims.some((d) => !Number.isSafeInteger(d) || d < 0))
        bad(`feed '${io.name}' has bad dims`);
      if (f.dims.length !== t.dims.length)
        bad(
          `feed '${io.name}' has rank ${f.dims.length} ([${f.dims}]), the plan wants [${t.dims.map((e) => exprText(p, e)).join(',')}]`,
        );
      checkNotEmpty(io.name, f.dims, () => t.dims.map((e) => exprText(p, e)), bad);
      const resident = isResidentTensor(f);
      if (
        !resident &&
        !(f.data instanceof (globalThis as unknown as Record<string, { new (): object }>)[arrayNameOf(dtype)]!)
      )
        bad(`feed '${io.name}' data must be a ${arrayNameOf(dtype)}`);
      t.dims.forEach((e, axis) => {
        const want = exprValue(p, e, values);
        if (want !== f.dims[axis])
          bad(`feed '${io.name}' has dims [${f.dims}], but dim ${axis} must be ${exprText(p, e)} = ${want} here`);
      });
      if (resident) return this.residentView(`feed '${io.name}'`, f, bad);
      if (f.data.length !== f.dims.reduce((a, b) => a * b, 1))
        bad(`feed '${io.name}' has ${f.data.length} elements for dims [${f.dims}]`);
      return f.data;
    });
    p.symbols.forEach((s, k) => {
      const max = this.header.profile.symbolMax[s.name];
      if (max !== undefined && values[k]! > max) {
        const how = (opt: OptionNamer) =>
          s.name === STEP_TOKENS_SYMBOL
            ? `${opt('stepTokens')} N`
            : `a larger ${opt('maxBatch')}/${opt('maxSrcLen')}/${opt('maxTgtLen')} or ${opt('maxDim')} ${s.name}=N`;
        bad(
          (opt) =>
            `feed '${p.inputs[s.input]!.name}' has ${s.name} = ${values[k]}, over the plan's maximum ${max} (optimize with ${how(opt)})`,
        );
      }
    });
    this.checkTokenIds(p, feeds, bad);
    for (const name of Object.keys(into ?? {}))
      if (!p.outputs.some((o) => o.name === name))
        bad(
          `unknown output '${name}' to write into a resident buffer; graph '${graph}' gives ${p.outputs.map((o) => o.name).join(', ')}`,
        );
    const outputs: Record<string, RtTensor> = {};
    const outData = p.outputs.map((io): NativeBuffer => {
      const t = p.tensors[io.tensor]!;
      const dtype = DTYPE_OF_CODE[t.dtype]!;
      const dims = t.dims.map((e) => exprValue(p, e, values));
      const r = into?.[io.name];
      if (!r) return (outputs[io.name] = allocOutputTensor(dtype, dims)).data;
      if (r.dtype !== dtype) bad(`output '${io.name}' is ${dtype}, but its resident tensor says ${r.dtype}`);
      if (!Array.isArray(r.dims) || r.dims.join() !== dims.join())
        bad(`output '${io.name}' has dims [${dims}] here, but its resident tensor says [${r.dims}]`);
      return this.residentView(`output '${io.name}'`, r, bad);
    });
    return { symbols: bigInt64Of(values), feedData, outData, outputs };
  }

  /**
   * Token ids inside the vocabulary (an HRT plan's: its embedding rows, with [BOS_k] and [MASK]), attention masks of 0
   * and 1 (runtime/feeds-check.ts); resident feeds are not read.
   */
  private checkTokenIds(p: PlanProgram, feeds: Record<string, FeedTensor>, bad: (m: string) => never): void {
    const vocab = this.header.decoding.hrt?.inputVocabSize ?? this.header.decoding.vocabSize;
    for (const io of p.inputs) {
      const f = feeds[io.name]!;
      if (isResidentTensor(f)) continue;
      checkFeedValues(io.name, f.data as ArrayLike<number | bigint>, vocab, bad);
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

  /** A zeroed resident buffer of `bytes` owned by this plan (host memory on cpu, device memory on cuda). */
  residentNew(bytes: number): Resident {
    this.open();
    if (!Number.isSafeInteger(bytes) || bytes < 0)
      throw new PlancError('PLANC_E405', `resident buffer size ${bytes} must be an integer ≥ 0`, { file: this.source });
    return { handle: this.backend.residentNew(bytes), bytes, owner: this };
  }

  /** Frees a resident buffer now (a run holding it frees it when it ends); freeing twice does nothing. */
  residentFree(r: Resident): void {
    if (this.closed) return;
    this.own(r);
    this.backend.residentFree(r.handle);
  }

  /**
   * Copies spans of bytes, (src offset, dst offset, bytes) triples, from one resident buffer to another (or the same),
   * natively (cuda: on the device). Spans apply in order, so a span may read what an earlier one wrote; one span's own
   * source and destination may not overlap. Every span is checked before any byte moves.
   */
  residentCopy(src: Resident, dst: Resident, spans: Float64Array | number[]): void {
    this.open();
    this.own(src);
    this.own(dst);
    this.backend.residentCopy(src.handle, dst.handle, spans instanceof Float64Array ? spans : Float64Array.from(spans));
  }

  /** Host bytes of `data` into a resident buffer at byte `offset`. */
  residentWrite(r: Resident, offset: number, data: RtData): void {
    this.open();
    this.own(r);
    this.backend.residentWrite(r.handle, offset, data as NativeArray);
  }

  /** A resident buffer's bytes at byte `offset` into `data` (its whole length). */
  residentRead(r: Resident, offset: number, data: RtData): void {
    this.open();
    this.own(r);
    this.backend.residentRead(r.handle, offset, data as NativeArray);
  }

  private open(): void {
    if (this.closed) fail('closed', { what: 'plan' });
  }

  private own(r: Resident): void {
    if (r?.owner !== this)
      throw new PlancError(
        'PLANC_E405',
        'a resident buffer of another plan (each plan uses only the buffers it made)',
        { file: this.source },
      );
  }

  /** Frees the native plan and programs. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.backend.close();
  }
}

/** Loads a plan file (validated) into the native runtime; a missing file or a folder is PLANC_E006 naming it. */
export async function loadPlan(path: string): Promise<Plan> {
  if (typeof path !== 'string' || path === '')
    throw new PlancError(
      'PLANC_E006',
      `loadPlan wants a plan file's path, got ${JSON.stringify(path) ?? String(path)}`,
    );
  if (fs.existsSync(path) && fs.statSync(path).isDirectory())
    throw new PlancError(
      'PLANC_E006',
      `${path} is a folder, not a plan file (planc optimize MODEL -o PLAN writes one)`,
      { file: path },
    );
  return new Plan(readPlanFile(path), path);
}

/** Loads a plan from bytes already in memory. */
export function loadPlanBytes(bytes: Uint8Array, name = '<plan>'): Plan {
  return new Plan(decodePlan(bytes, name), name);
}
