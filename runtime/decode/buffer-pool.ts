// Resident buffers the decoding batches of one plan reuse: a batch takes what it needs and gives it back when its
// runner is released (or garbage-collected), so the next batch writes warm memory instead of fresh pages.
import type { Plan } from '../plan.ts';
import type { Resident } from '../tensor.ts';

/** Free buffers kept per plan (one batch takes five: caches and spare, sources and spare, fixed inputs). */
const KEEP = 5;

export class BufferPool {
  private readonly free: Resident[] = [];

  constructor(private readonly plan: Plan) {}

  /**
   * A buffer of at least `bytes` (contents undefined: decoding writes every byte it reads): the smallest free one that
   * fits and is not over twice as large, else a new one.
   */
  take(bytes: number): Resident {
    let best = -1;
    this.free.forEach((r, i) => {
      if (r.bytes >= bytes && r.bytes <= 2 * bytes + 65536 && (best < 0 || r.bytes < this.free[best]!.bytes)) best = i;
    });
    return best >= 0 ? this.free.splice(best, 1)[0]! : this.plan.residentNew(bytes);
  }

  /** Buffers back for reuse; beyond KEEP, the oldest are freed. */
  give(buffers: readonly Resident[]): void {
    this.free.push(...buffers);
    while (this.free.length > KEEP) this.plan.residentFree(this.free.shift()!);
  }
}

const pools = new WeakMap<Plan, BufferPool>();

export function bufferPool(plan: Plan): BufferPool {
  let p = pools.get(plan);
  if (!p) pools.set(plan, (p = new BufferPool(plan)));
  return p;
}

/** The buffers one batch took: given back once, by give() or when `owner` is garbage-collected. */
export class Lease {
  private readonly taken: Resident[] = [];
  private done = false;
  private static readonly collected = new FinalizationRegistry<{ pool: BufferPool; taken: Resident[] }>(
    ({ pool, taken }) => pool.give(taken),
  );

  constructor(
    private readonly pool: BufferPool,
    owner: object,
  ) {
    Lease.collected.register(owner, { pool, taken: this.taken }, this);
  }

  take(bytes: number): Resident {
    const r = this.pool.take(bytes);
    this.taken.push(r);
    return r;
  }

  give(): void {
    if (this.done) return;
    this.done = true;
    Lease.collected.unregister(this);
    this.pool.give(this.taken);
  }
}
