// The self-attention caches of an in-place plan: one [rows, H, capacity, D] buffer per cache input, kept by the decoder.
import { CACHE_INPUT_PREFIX, PAST_LENGTH_INPUT } from '../../compiler/plan/io-names.ts';
import type { Plan } from '../plan.ts';
import type { RtTensor } from '../tensor.ts';


/** Whether the plan's decoder_with_past appends to caches in place (else it takes past and returns present tensors). */
export function hasInPlaceCache(plan: Plan): boolean {
  return plan.graphs.includes('decoder_with_past') && plan.inputs('decoder_with_past').some((i) => i.name === PAST_LENGTH_INPUT);
}

interface Cache {
  name: string;
  /** The present output of the first-step decoder graph that fills rows 0.. of this cache. */
  present: string;
  heads: number;
  headSize: number;
  buf: Float32Array;
  spare: Float32Array;
}

export class KVCaches {
  private readonly caches: Cache[];
  /** Rows (batch entries) in use. */
  rows = 0;
  /** Positions filled per row. */
  length = 0;

  constructor(plan: Plan, maxRows: number, readonly capacity: number) {
    this.caches = plan.inputs('decoder_with_past').filter((i) => i.name.startsWith(CACHE_INPUT_PREFIX)).map((i) => {
      const heads = Number(i.dims[1]), headSize = Number(i.dims[3]);
      const n = maxRows * heads * capacity * headSize;
      return { name: i.name, present: `present.${i.name.slice(CACHE_INPUT_PREFIX.length)}`, heads, headSize, buf: new Float32Array(n), spare: new Float32Array(n) };
    });
  }

  private rowSize(c: Cache): number { return c.heads * this.capacity * c.headSize; }

  /** Fills rows 0..S-1 of every cache from the first-step decoder's present outputs ([B, H, S, D]). */
  fill(outputs: Record<string, RtTensor>): void {
    for (const c of this.caches) {
      const p = outputs[c.present];
      if (!p) throw new Error(`internal: the first decoder step has no output '${c.present}'`);
      const [b, , s] = p.dims as [number, number, number];
      const src = p.data as Float32Array;
      const seg = s * c.headSize;
      for (let r = 0; r < b; r++) {
        for (let h = 0; h < c.heads; h++) c.buf.set(src.subarray((r * c.heads + h) * seg, (r * c.heads + h + 1) * seg), r * this.rowSize(c) + h * this.capacity * c.headSize);
      }
      this.rows = b;
      this.length = s;
    }
  }

  /** Row i continues old row from[i]: in place when rows only move down (batch shrinking), else through the spare. */
  select(from: number[]): void {
    if (from.length === this.rows && from.every((r, i) => r === i)) return;
    const down = from.every((r, i) => r >= i && (i === 0 || r > from[i - 1]!));
    for (const c of this.caches) {
      const row = this.rowSize(c), head = this.capacity * c.headSize, used = this.length * c.headSize;
      from.forEach((r, i) => {
        if (down && r === i) return;
        for (let h = 0; h < c.heads; h++) {
          const s = r * row + h * head;
          if (down) c.buf.copyWithin(i * row + h * head, s, s + used);
          else c.spare.set(c.buf.subarray(s, s + used), i * row + h * head);
        }
      });
      if (!down) [c.buf, c.spare] = [c.spare, c.buf];
    }
    this.rows = from.length;
  }

  /** The cache feeds and past length of the next step (views of the first `rows` rows). */
  feeds(): Record<string, RtTensor> {
    const out: Record<string, RtTensor> = {};
    for (const c of this.caches) {
      out[c.name] = { dtype: 'float32', dims: [this.rows, c.heads, this.capacity, c.headSize], data: c.buf.subarray(0, this.rows * this.rowSize(c)) };
    }
    out[PAST_LENGTH_INPUT] = { dtype: 'int64', dims: [], data: BigInt64Array.of(BigInt(this.length)) };
    return out;
  }
}
