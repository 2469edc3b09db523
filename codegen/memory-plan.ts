// Memory planner: liveness over a program's kernels, in-place reuse, best-fit offsets in one arena, and the report.
import { PlancError } from '../compiler/diagnostics.ts';
import { TENSOR_KIND, type PlanProgram } from '../compiler/plan/types.ts';
import { MAX_PLAN_BYTES } from './profile.ts';

/** Kernels whose output may share its input's bytes (each element is read before it is written, at the same index). */
const IN_PLACE = new Set([
  'add',
  'sub',
  'mul',
  'div',
  'pow',
  'max',
  'min',
  'relu',
  'neg',
  'abs',
  'exp',
  'log',
  'sqrt',
  'reciprocal',
  'tanh',
  'sigmoid',
  'erf',
  'floor',
  'ceil',
  'round',
  'sin',
  'cos',
  'sign',
  'softplus',
  'gelu',
  'leaky_relu',
  'elu',
  'hard_sigmoid',
  'clip',
]);

const ALIGN = 64;
const up = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

interface Buffer {
  members: number[];
  bytes: number;
  start: number;
  end: number;
  offset: number;
}

type Order = (x: Buffer, y: Buffer) => number;

/** Placement orders tried: largest first; longest-lived first; largest area (bytes × lifetime) first; earliest first. */
const ORDERS: Order[] = [
  (x, y) => y.bytes - x.bytes || x.start - y.start,
  (x, y) => y.end - y.start - (x.end - x.start) || y.bytes - x.bytes,
  (x, y) => y.bytes * (y.end - y.start + 1) - x.bytes * (x.end - x.start + 1) || x.start - y.start,
  (x, y) => x.start - y.start || y.bytes - x.bytes,
];

/** Places buffers in the given order at best-fit offsets; returns the arena size. */
function place(order: Buffer[]): number {
  const placed: Buffer[] = [];
  let arena = 0;
  for (const b of order) {
    const busy = placed.filter((o) => o.start <= b.end && b.start <= o.end).sort((x, y) => x.offset - y.offset);
    let best = -1;
    let bestGap = Infinity;
    let cursor = 0;
    for (const o of busy) {
      const gap = o.offset - cursor;
      if (gap >= b.bytes && gap < bestGap) {
        best = cursor;
        bestGap = gap;
      }
      cursor = Math.max(cursor, o.offset + o.bytes);
    }
    b.offset = best >= 0 ? best : cursor;
    placed.push(b);
    arena = Math.max(arena, b.offset + b.bytes);
  }
  return arena;
}

export interface MemoryReport {
  arenaBytes: number;
  lowerBound: number;
  tensorBytesSum: number;
  inPlace: number;
}

/** Assigns arena offsets to a program's ARENA tensors (in place) and returns the report. */
export function planMemory(p: PlanProgram): MemoryReport {
  const root = (t: number): number => {
    let x = t;
    while (p.tensors[x]!.kind === TENSOR_KIND.ALIAS) x = p.tensors[x]!.ref;
    return x;
  };
  const n = p.kernels.length;
  const def = new Map<number, number>();
  const last = new Map<number, number>();
  p.kernels.forEach((k, i) => {
    for (const t of k.outputs) {
      const r = root(t);
      if (!def.has(r)) def.set(r, i);
      last.set(r, Math.max(last.get(r) ?? i, i));
    }
    for (const t of k.inputs)
      if (t >= 0) {
        const r = root(t);
        last.set(r, Math.max(last.get(r) ?? i, i));
      }
  });
  const outputs = new Set(p.outputs.map((o) => root(o.tensor)));
  for (const r of outputs) last.set(r, n);

  // One buffer per arena tensor, then in-place merges: output joins its dying, same-size input's buffer.
  const bufOf = new Map<number, Buffer>();
  let tensorBytesSum = 0;
  p.tensors.forEach((t, i) => {
    if (t.kind !== TENSOR_KIND.ARENA) return;
    tensorBytesSum += t.slotBytes;
    const start = def.get(i) ?? 0;
    bufOf.set(i, { members: [i], bytes: up(t.slotBytes), start, end: last.get(i) ?? start, offset: 0 });
  });
  let inPlace = 0;
  p.kernels.forEach((k, i) => {
    if (!IN_PLACE.has(k.name) || k.outputs.length !== 1) return;
    const out = root(k.outputs[0]!);
    const ob = bufOf.get(out);
    if (ob?.members.length !== 1 || outputs.has(out)) return;
    for (const t of k.inputs) {
      if (t < 0) continue;
      const r = root(t);
      const ib = bufOf.get(r);
      if (!ib || ib === ob || outputs.has(r) || ib.end !== i || p.tensors[r]!.slotBytes !== p.tensors[out]!.slotBytes)
        continue;
      if (p.tensors[t]!.dims.join() !== p.tensors[k.outputs[0]!]!.dims.join()) continue; // the shared input must not be broadcast
      ib.members.push(out);
      ib.end = ob.end;
      bufOf.set(out, ib);
      inPlace++;
      break;
    }
  });
  const buffers = [...new Set(bufOf.values())];

  // Lower bound: the peak over time of the bytes of live buffers.
  const delta = new Array<number>(n + 2).fill(0);
  for (const b of buffers) {
    delta[b.start]! += b.bytes;
    delta[b.end + 1]! -= b.bytes;
  }
  let live = 0;
  let lowerBound = 0;
  for (const d of delta) {
    live += d;
    lowerBound = Math.max(lowerBound, live);
  }

  // Greedy placement, each buffer into the best-fitting gap among the buffers alive at the same time, tried in a few
  // orders (no single order is best for every graph); the smallest arena wins.
  let arenaBytes = Infinity;
  let best: number[] = [];
  for (const order of ORDERS) {
    const size = place([...buffers].sort(order));
    if (size < arenaBytes) {
      arenaBytes = size;
      best = buffers.map((b) => b.offset);
    }
    if (arenaBytes === lowerBound) break;
  }
  buffers.forEach((b, i) => {
    b.offset = best[i]!;
  });
  if (buffers.length === 0) arenaBytes = 0;
  for (const b of buffers) for (const t of b.members) p.tensors[t]!.offset = b.offset;
  if (arenaBytes > MAX_PLAN_BYTES) {
    throw new PlancError(
      'PLANC_E404',
      (opt) =>
        `program '${p.graph}' needs an arena of ${arenaBytes} bytes at the profile's bounds, more than a plan can address (${MAX_PLAN_BYTES} bytes): lower ${opt('maxBatch')}, ${opt('maxSrcLen')}, ${opt('maxTgtLen')} or ${opt('maxDim')}`,
      { graph: p.graph, stage: 'memory planning' },
    );
  }
  p.arenaBytes = arenaBytes;
  p.arenaLowerBound = lowerBound;
  p.tensorBytesSum = tensorBytesSum;
  return { arenaBytes, lowerBound, tensorBytesSum, inPlace };
}
