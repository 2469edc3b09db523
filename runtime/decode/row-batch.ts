// A decoding batch that rows join and leave at any step: each row keeps its own cached length (the plan's
// decoder_with_past_rows graph), so a new sentence never waits for the running ones to finish (planc serve).
import { PlancError } from '../../compiler/diagnostics.ts';
import {
  PAST_LENGTH_INPUT,
  POSITIONS_GRAPH,
  ROW_PAST_LENGTHS_INPUT,
  ROW_POSITION_PREFIX,
  ROWS_STEP_GRAPH,
  STEP_INPUT,
  VOCAB_ACTIVE_INPUT,
} from '../../compiler/plan/io-names.ts';
import type { Plan } from '../plan.ts';
import {
  bigInt64Of,
  dtypeBytes,
  type FeedTensor,
  type Resident,
  type RtData,
  type RtDType,
  type RtTensor,
} from '../tensor.ts';
import { alignRegion } from './kv-cache.ts';
import { Spans } from './row-spans.ts';
import { int64 } from './source-feeds.ts';
import type { StepRunner } from './step-runner.ts';

/** Whether the plan lets rows join a running batch: it has the per-row step and positions graphs and no per-batch vocab feed. */
export function canJoinRows(plan: Plan): boolean {
  const graphs = plan.graphs;
  return (
    graphs.includes(ROWS_STEP_GRAPH) &&
    graphs.includes(POSITIONS_GRAPH) &&
    !plan.inputs(ROWS_STEP_GRAPH).some((i) => i.name === VOCAB_ACTIVE_INPUT)
  );
}

/** A per-row tensor of the encoder side ([rows, heads, S, inner]; the mask is [rows, S]: heads 1, inner 1). */
interface SourceRegion {
  name: string;
  dtype: RtDType;
  heads: number;
  inner: number;
  offset: number;
  flat: boolean;
}
/** A self-attention cache region [maxRows, heads, capacity, headSize]. */
interface CacheRegion {
  name: string;
  dtype: RtDType;
  heads: number;
  headSize: number;
  offset: number;
}

export class RowBatch {
  /** Rows decoding now (rows 0..rows-1 of every region). */
  rows = 0;
  /** Positions each row has cached. */
  private past: number[] = [];
  /** The encoder length the source regions are laid out for (rows with shorter sources are zero-padded, mask 0). */
  private smax = 0;
  /** Each row's source length (its positions of the source regions; the rest are zero). */
  private srcLen: number[] = [];
  private source?: Resident;
  /** Zeros that joins copy past a joiner's own source positions (zerosOf). */
  private zeros?: Resident;
  private sourceRegions: SourceRegion[] = [];
  private readonly cache: Resident;
  private readonly cacheRegions: CacheRegion[];
  /** row_position.K values per past length (they depend on it alone), from the positions graph. */
  private readonly positions = new Map<number, Record<string, RtTensor>>();
  private readonly positionInputs: { name: string; rank: number }[];
  private closed = false;
  /** The last step's outputs (rows 0..rows-1). */
  out: Record<string, RtTensor> = {};

  /** maxRows: the most rows at once (≤ the plan's maxBatch); capacity: the most positions a row caches. */
  constructor(
    private readonly plan: Plan,
    readonly maxRows: number,
    readonly capacity: number,
  ) {
    if (!canJoinRows(plan))
      throw new PlancError(
        'PLANC_E405',
        `this plan has no '${ROWS_STEP_GRAPH}' graph (rows cannot join a running batch); optimize it again with this planc`,
      );
    const inputs = plan.inputs(ROWS_STEP_GRAPH);
    let offset = 0;
    this.cacheRegions = inputs
      .filter((i) => i.name.startsWith('kv_cache.'))
      .map((i) => {
        const r = {
          name: i.name,
          dtype: i.dtype as RtDType,
          heads: Number(i.dims[1]),
          headSize: Number(i.dims[3]),
          offset,
        };
        offset += alignRegion(maxRows * r.heads * capacity * r.headSize * dtypeBytes(r.dtype));
        return r;
      });
    this.cache = plan.residentNew(Math.max(offset, 1));
    this.positionInputs = inputs
      .filter((i) => i.name.startsWith(ROW_POSITION_PREFIX))
      .map((i) => ({ name: i.name, rank: i.dims.length }));
  }

  /** The encoder length the source regions are laid out for now: the longest live row's source, or more (at most twice). */
  get sourceLength(): number {
    return this.smax;
  }

  /** Positions cached by row r. */
  pastOf(r: number): number {
    return this.past[r]!;
  }

  /**
   * Rows `from` of a runner that has run its encoder and first decoder step or decoder_cross_kv (and nothing since) join as rows
   * rows..rows+from.length-1, in that order: their encoder mask and K/V and their cached positions are copied in. The
   * runner is left as it was (its other rows may join later). `lengths[j]` (default: the runner's encoder length) is
   * joiner j's source length: only those positions are copied, and the batch is laid out for its longest live source,
   * so a step's cross-attention runs over that, not over the longest source a start or the batch ever held.
   */
  join(runner: StepRunner, from: number[], lengths?: number[]): void {
    this.live();
    const k = from.length;
    const state = runner.joinState();
    if (!state) throw new PlancError('PLANC_E405', 'join: the plan has no in-place caches');
    if (this.rows + k > this.maxRows)
      throw new PlancError('PLANC_E405', `join: ${this.rows} rows + ${k} exceed the ${this.maxRows} this batch holds`);
    const bad = from.findIndex(
      (r, i) => !Number.isInteger(r) || r < 0 || r >= state.source.rows || from.indexOf(r) !== i,
    );
    if (bad >= 0)
      throw new PlancError(
        'PLANC_E405',
        `join: row ${from[bad]} is not a distinct row of the runner's ${state.source.rows}`,
      );
    const src = state.source.layout();
    const len = runner.length;
    if (len > this.capacity)
      throw new PlancError('PLANC_E405', `join: rows of ${len} cached positions exceed the capacity ${this.capacity}`);
    const s = src.regions[0]!.rowDims[0]!; // the runner's encoder length (the mask is [rows, S])
    const own = from.map((_, j) => lengths?.[j] ?? s);
    if (own.some((n) => !Number.isInteger(n) || n < 1 || n > s))
      throw new PlancError('PLANC_E405', `join: source lengths [${own.join(', ')}] must be in [1, ${s}]`);
    // the encoder side: lay it out for the longest live source (grown for the joiners; shrunk when the batch is empty
    // and the joiners are much shorter), zero the joiners' rows, copy their own positions
    const needed = Math.max(...own, ...this.srcLen);
    if (!this.source) {
      const flat = (r: { rowDims: number[] }) => r.rowDims.length === 1;
      this.sourceRegions = src.regions.map((r) => ({
        name: r.name,
        dtype: r.dtype,
        flat: flat(r),
        heads: flat(r) ? 1 : r.rowDims[0]!,
        inner: flat(r) ? 1 : r.rowDims[2]!,
        offset: 0,
      }));
    }
    if (!this.source || needed > this.smax || (this.rows === 0 && 2 * needed <= this.smax)) this.relayout(needed);
    const perRow = src.regions.reduce((n, r) => n + (r.rowDims.length === 1 ? 1 : r.rowDims[0]!), 0);
    const spans = new Spans(k * perRow);
    const tails = new Spans(k * perRow);
    let tailBytes = 0;
    src.regions.forEach((r, ri) => {
      const dst = this.sourceRegions[ri]!;
      if (r.name !== dst.name)
        throw new Error(`internal: source region ${ri} is '${r.name}' in the runner, '${dst.name}' here`);
      const posBytes = dst.inner * dtypeBytes(dst.dtype);
      const dstRow = dst.heads * this.smax * posBytes;
      for (let j = 0; j < k; j++) {
        const n = own[j]!;
        for (let h = 0; h < dst.heads; h++) {
          const at = dst.offset + (this.rows + j) * dstRow + h * this.smax * posBytes;
          spans.push(r.offset + from[j]! * r.rowBytes + h * s * posBytes, at, n * posBytes);
          if (n < this.smax) tails.push(0, at + n * posBytes, (this.smax - n) * posBytes);
        }
      }
      tailBytes = Math.max(tailBytes, this.smax * posBytes);
    });
    this.plan.residentCopy(src.buf, this.source!, spans.array);
    // what departed rows left past each joiner's own positions: zeros (mask 0, K/V 0)
    if (tails.count > 0) this.plan.residentCopy(this.zerosOf(tailBytes), this.source!, tails.array);
    // the self-attention caches: positions 0..len-1 of each joiner
    const caches = state.caches.layout();
    const cspans = new Spans(k * this.cacheRegions.reduce((n, c) => n + c.heads, 0));
    caches.caches.forEach((c, ci) => {
      const dst = this.cacheRegions[ci]!;
      if (c.name !== dst.name)
        throw new Error(`internal: cache ${ci} is '${c.name}' in the runner, '${dst.name}' here`);
      const pos = c.headSize * dtypeBytes(c.dtype);
      for (let j = 0; j < k; j++) {
        for (let h = 0; h < c.heads; h++) {
          cspans.push(
            c.offset + (from[j]! * c.heads + h) * state.caches.capacity * pos,
            dst.offset + ((this.rows + j) * dst.heads + h) * this.capacity * pos,
            len * pos,
          );
        }
      }
    });
    this.plan.residentCopy(caches.buf, this.cache, cspans.array);
    for (let j = 0; j < k; j++) {
      this.past.push(len);
      this.srcLen.push(own[j]!);
    }
    this.rows += k;
  }

  /** A resident buffer of at least `bytes` zeros (made zeroed by residentNew, never written). */
  private zerosOf(bytes: number): Resident {
    if (!this.zeros || this.zeros.bytes < bytes) {
      if (this.zeros) this.plan.residentFree(this.zeros);
      this.zeros = this.plan.residentNew(bytes);
    }
    return this.zeros;
  }

  /** Lays the encoder side out for sources of up to `smax` positions, keeping each live row's own positions (the rest zero). */
  private relayout(smax: number): void {
    let offset = 0;
    const next = this.sourceRegions.map((r) => {
      const out = { ...r, offset };
      offset += alignRegion(this.maxRows * r.heads * smax * r.inner * dtypeBytes(r.dtype));
      return out;
    });
    const buf = this.plan.residentNew(offset); // zeroed (Plan.residentNew)
    if (this.source && this.rows > 0) {
      const spans = new Spans(this.rows * next.reduce((n, r) => n + r.heads, 0));
      next.forEach((r, ri) => {
        const old = this.sourceRegions[ri]!;
        const posBytes = r.inner * dtypeBytes(r.dtype);
        for (let row = 0; row < this.rows; row++) {
          for (let h = 0; h < r.heads; h++)
            spans.push(
              old.offset + (row * r.heads + h) * this.smax * posBytes,
              r.offset + (row * r.heads + h) * smax * posBytes,
              this.srcLen[row]! * posBytes,
            );
        }
      });
      this.plan.residentCopy(this.source, buf, spans.array);
    }
    if (this.source) this.plan.residentFree(this.source);
    this.source = buf;
    this.sourceRegions = next;
    this.smax = smax;
  }

  /**
   * Keeps rows `keep` (the others leave): row i continues old row keep[i], which is i (the row stays) or a row at or
   * past keep.length (moved from the tail into a leaving row's place: one copy per leaving row, not a shift of every
   * row after it). Rows are independent, so their order is free.
   */
  leave(keep: number[]): void {
    this.live();
    const seen = new Set<number>();
    for (const [i, r] of keep.entries()) {
      if (!Number.isInteger(r) || r < 0 || r >= this.rows || seen.has(r) || (r !== i && r < keep.length)) {
        throw new PlancError(
          'PLANC_E405',
          `leave: rows [${keep.join(', ')}]: each must be its own index or a row at or past ${keep.length}, distinct, within [0, ${this.rows})`,
        );
      }
      seen.add(r);
    }
    if (keep.length === this.rows) return;
    const src = new Spans(keep.length * this.sourceRegions.length);
    const kv = new Spans(keep.length * this.cacheRegions.reduce((n, c) => n + c.heads, 0));
    keep.forEach((r, i) => {
      if (r === i) return;
      for (const s of this.sourceRegions) {
        const row = s.heads * this.smax * s.inner * dtypeBytes(s.dtype);
        src.push(s.offset + r * row, s.offset + i * row, row);
      }
      for (const c of this.cacheRegions) {
        const pos = c.headSize * dtypeBytes(c.dtype);
        for (let h = 0; h < c.heads; h++)
          kv.push(
            c.offset + (r * c.heads + h) * this.capacity * pos,
            c.offset + (i * c.heads + h) * this.capacity * pos,
            this.past[r]! * pos,
          );
      }
    });
    // a moved row comes from past the kept count into a leaving row's place: no copy overwrites a row still to be read
    if (src.count > 0) this.plan.residentCopy(this.source!, this.source!, src.array);
    if (kv.count > 0) this.plan.residentCopy(this.cache, this.cache, kv.array);
    this.past = keep.map((r) => this.past[r]!);
    this.srcLen = keep.map((r) => this.srcLen[r]!);
    this.rows = keep.length;
    // the longest source left: a batch laid out for twice that is laid out again (every step reads smax positions a row)
    const longest = Math.max(0, ...this.srcLen);
    if (this.rows > 0 && 2 * longest <= this.smax) this.relayout(longest);
  }

  /** One step: row r takes token tokens[r] at its own position; each row's cached length grows by one. */
  step(tokens: number[]): void {
    const feeds = this.stepFeeds(tokens);
    if (feeds) this.stepped(this.plan.runSync(ROWS_STEP_GRAPH, feeds));
  }

  /**
   * step() on the runtime's worker thread: the event loop stays free while the decoder runs (a server hears its
   * sockets meanwhile). Nothing may touch this batch until it resolves.
   */
  async stepAsync(tokens: number[]): Promise<void> {
    const feeds = this.stepFeeds(tokens);
    if (feeds) this.stepped(await this.plan.run(ROWS_STEP_GRAPH, feeds));
  }

  /** The rows graph's feeds for one step (undefined with no rows); checks the tokens and the capacity. */
  private stepFeeds(tokens: number[]): Record<string, FeedTensor> | undefined {
    this.live();
    if (tokens.length !== this.rows)
      throw new PlancError('PLANC_E405', `step: ${tokens.length} tokens for ${this.rows} rows`);
    if (this.rows === 0) return undefined;
    const longest = Math.max(...this.past);
    if (longest + 1 > this.capacity)
      throw new PlancError(
        'PLANC_E405',
        `step: a row has ${longest} cached positions; the capacity is ${this.capacity}`,
      );
    const feeds: Record<string, FeedTensor> = {
      [STEP_INPUT]: int64(this.rows, 1, tokens),
      [PAST_LENGTH_INPUT]: { dtype: 'int64', dims: [], data: BigInt64Array.of(BigInt(longest)) },
      [ROW_PAST_LENGTHS_INPUT]: {
        dtype: 'int64',
        dims: [this.rows],
        data: bigInt64Of(this.past),
      },
      ...this.positionFeeds(),
    };
    for (const s of this.sourceRegions) {
      feeds[s.name] = {
        dtype: s.dtype,
        dims: s.flat ? [this.rows, this.smax] : [this.rows, s.heads, this.smax, s.inner],
        resident: this.source!,
        offset: s.offset,
      };
    }
    for (const c of this.cacheRegions)
      feeds[c.name] = {
        dtype: c.dtype,
        dims: [this.rows, c.heads, this.capacity, c.headSize],
        resident: this.cache,
        offset: c.offset,
      };
    return feeds;
  }

  /** Takes a step's outputs: each row has cached one more position. */
  private stepped(out: Record<string, RtTensor>): void {
    this.out = out;
    for (let r = 0; r < this.rows; r++) this.past[r]!++;
  }

  /** row_position.K feeds: each row's values for its own past length, stacked. */
  private positionFeeds(): Record<string, RtTensor> {
    const out: Record<string, RtTensor> = {};
    if (this.positionInputs.length === 0) return out;
    const per = this.past.map((p) => this.positionsAt(p));
    for (const { name, rank } of this.positionInputs) {
      const first = per[0]![name]!;
      const n = first.data.length;
      const Ctor = first.data.constructor as { new (n: number): RtData };
      const data = new Ctor(n * this.rows) as Float32Array;
      per.forEach((v, r) => data.set(v[name]!.data as Float32Array, r * n));
      const dims = rank === first.dims.length ? [this.rows, ...first.dims.slice(1)] : [this.rows, ...first.dims];
      out[name] = { dtype: first.dtype, dims, data };
    }
    return out;
  }

  /** The positions graph's outputs at past length p (at batch 1), computed once per p. */
  private positionsAt(p: number): Record<string, RtTensor> {
    let v = this.positions.get(p);
    if (v) return v;
    const feeds: Record<string, RtTensor> = {};
    for (const i of this.plan.inputs(POSITIONS_GRAPH)) {
      if (i.name === PAST_LENGTH_INPUT) {
        feeds[i.name] = { dtype: 'int64', dims: [], data: BigInt64Array.of(BigInt(p)) };
        continue;
      }
      // read through Shape only: zeros, every symbolic dim 1 (batch 1, one step token)
      const dims = i.dims.map((d) => (/^\d+$/.test(d) ? Number(d) : 1));
      const n = dims.reduce((a, b) => a * b, 1);
      const dtype = i.dtype as RtDType;
      feeds[i.name] = {
        dtype,
        dims,
        data: dtype === 'int64' ? new BigInt64Array(n) : dtype === 'int32' ? new Int32Array(n) : new Float32Array(n),
      } as RtTensor;
    }
    v = this.plan.runSync(POSITIONS_GRAPH, feeds);
    this.positions.set(p, v);
    return v;
  }

  /** Frees the batch's buffers; the batch is done. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.plan.residentFree(this.cache);
    if (this.source) this.plan.residentFree(this.source);
    if (this.zeros) this.plan.residentFree(this.zeros);
  }

  private live(): void {
    if (this.closed) throw new PlancError('PLANC_E412', 'this RowBatch was closed');
  }
}
