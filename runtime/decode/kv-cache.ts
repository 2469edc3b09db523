// The self-attention caches of an in-place plan: one [rows, H, capacity, D] region per cache input in a resident
// buffer of the plan (device memory on cuda), filled and reordered by native span copies, never copied to JS.
import { PlancError } from '../../compiler/diagnostics.ts';
import { CACHE_INPUT_PREFIX, PAST_LENGTH_INPUT } from '../../compiler/plan/io-names.ts';
import type { Plan } from '../plan.ts';
import { dtypeBytes, type FeedTensor, type Resident, type ResidentTensor, type RtDType } from '../tensor.ts';
import { checkSelection, keepsRows, moveRows, movesDown, Spans } from './row-spans.ts';

/** Whether the plan's decoder_with_past appends to caches in place (else it takes past and returns present tensors). */
export function hasInPlaceCache(plan: Plan): boolean {
  return (
    plan.graphs.includes('decoder_with_past') &&
    plan.inputs('decoder_with_past').some((i) => i.name === PAST_LENGTH_INPUT)
  );
}

/** Regions of resident buffers start at multiples of this (any dtype's alignment, and a GPU-friendly one). */
export const REGION_ALIGN = 256;

export const alignRegion = (bytes: number): number => Math.ceil(bytes / REGION_ALIGN) * REGION_ALIGN;

export interface Cache {
  name: string;
  /** The present output of the first-step decoder graph that fills rows 0.. of this cache. */
  present: string;
  dtype: RtDType;
  heads: number;
  headSize: number;
  /** Byte offset of this cache's region in `buf` and `spare`. */
  offset: number;
}

export class KVCaches {
  private readonly caches: Cache[];
  /** Every cache's region; `spare` has the same layout (gathers go through it, and the first step's present rows). */
  private buf: Resident;
  private spare: Resident;
  /** Rows (batch entries) in use. */
  rows = 0;
  /** Positions filled per row. */
  length = 0;

  /** take: where the two buffers come from (a batch's lease of the plan's buffer pool). */
  constructor(
    private readonly plan: Plan,
    readonly maxRows: number,
    readonly capacity: number,
    take: (bytes: number) => Resident,
  ) {
    let offset = 0;
    this.caches = plan
      .inputs('decoder_with_past')
      .filter((i) => i.name.startsWith(CACHE_INPUT_PREFIX))
      .map((i) => {
        const c: Cache = {
          name: i.name,
          present: `present.${i.name.slice(CACHE_INPUT_PREFIX.length)}`,
          dtype: i.dtype as RtDType,
          heads: Number(i.dims[1]),
          headSize: Number(i.dims[3]),
          offset,
        };
        offset += alignRegion(maxRows * c.heads * capacity * c.headSize * dtypeBytes(c.dtype));
        return c;
      });
    this.buf = take(offset);
    this.spare = take(offset);
  }

  /** Heads of all caches together (spans per row). */
  private get heads(): number {
    return this.caches.reduce((n, c) => n + c.heads, 0);
  }

  /** Bytes of one position of one head, of one head's capacity, and of one row. */
  private sizes(c: Cache) {
    const pos = c.headSize * dtypeBytes(c.dtype);
    return { pos, head: this.capacity * pos, row: c.heads * this.capacity * pos };
  }

  /** Where the first decoder step writes its present.* self-attention outputs ([b, H, s, D] each): the spare's regions. */
  presentSlots(b: number, s: number): Record<string, ResidentTensor> {
    return Object.fromEntries(
      this.caches.map((c) => [
        c.present,
        { dtype: c.dtype, dims: [b, c.heads, s, c.headSize], resident: this.spare, offset: c.offset },
      ]),
    );
  }

  /** Fills positions 0..s-1 of rows 0..b-1 of every cache from the present rows the first step wrote at presentSlots(b, s). */
  fill(b: number, s: number): void {
    if (b > this.maxRows || s > this.capacity)
      throw new PlancError(
        'PLANC_E405',
        `the first decoder step has ${b} rows of ${s} positions; the caches hold ${this.maxRows} rows of ${this.capacity}`,
      );
    const spans = new Spans(b * this.heads);
    for (const c of this.caches) {
      const z = this.sizes(c);
      for (let r = 0; r < b; r++) {
        for (let h = 0; h < c.heads; h++)
          spans.push(c.offset + (r * c.heads + h) * s * z.pos, c.offset + r * z.row + h * z.head, s * z.pos);
      }
    }
    this.plan.residentCopy(this.spare, this.buf, spans.array);
    this.rows = b;
    this.length = s;
  }

  /** Row i continues old row from[i]: in place when rows only move down (batch shrinking), else through the spare. */
  select(from: number[]): void {
    if (keepsRows(from, this.rows)) return;
    checkSelection(from, this.rows, this.maxRows);
    const down = movesDown(from);
    const spans = new Spans(from.length * this.heads);
    for (const c of this.caches) {
      const z = this.sizes(c);
      const used = this.length * z.pos;
      from.forEach((r, i) => {
        if (down && r === i) return;
        for (let h = 0; h < c.heads; h++)
          spans.push(c.offset + r * z.row + h * z.head, c.offset + i * z.row + h * z.head, used);
      });
    }
    [this.buf, this.spare] = moveRows(this.plan, this.buf, this.spare, spans, down);
    this.rows = from.length;
  }

  /** Rolls the filled length back to len ≤ length; the positions beyond are overwritten by the next step. */
  truncate(len: number): void {
    if (!Number.isInteger(len) || len < 0 || len > this.length)
      throw new PlancError(
        'PLANC_E405',
        `truncate: length ${len} must be an integer in [0, ${this.length}] (the positions cached)`,
      );
    this.length = len;
  }

  /** Where the caches live: the buffer and each cache's region ([maxRows, H, capacity, D] at its offset). */
  layout(): { buf: Resident; caches: readonly Readonly<Cache>[] } {
    return { buf: this.buf, caches: this.caches };
  }

  /** The cache feeds and past length of the next step (the first `rows` rows of each region). */
  feeds(): Record<string, FeedTensor> {
    const out: Record<string, FeedTensor> = {};
    for (const c of this.caches) {
      out[c.name] = {
        dtype: c.dtype,
        dims: [this.rows, c.heads, this.capacity, c.headSize],
        resident: this.buf,
        offset: c.offset,
      };
    }
    out[PAST_LENGTH_INPUT] = { dtype: 'int64', dims: [], data: BigInt64Array.of(BigInt(this.length)) };
    return out;
  }
}
