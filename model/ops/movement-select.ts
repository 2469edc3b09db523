// Movement operators with data-dependent or one-hot layouts: OneHot, Compress, NonZero, Unique.
import { allocData } from '../../compiler/dtype.ts';
import { unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { sizeOf, Tensor } from '../../compiler/tensor.ts';
import type { InferOutput, OpContext, OpHandler } from './types.ts';
import { axisOf, need } from './util.ts';
import { copyRun, needRank, symOf } from './movement-common.ts';
import { gatherAxis } from './movement-gather.ts';

type Elems = { [i: number]: number | string; length: number };

// ---------- OneHot ----------

/** OneHot's output axis for indices of rank r (the output has rank r + 1). */
function oneHotAxis(ctx: OpContext, r: number): number {
  const a0 = ctx.int('axis', -1);
  const a = a0 < 0 ? a0 + r + 1 : a0;
  if (a < 0 || a > r) ctx.fail(`axis ${a0} is out of range for output rank ${r + 1}`);
  return a;
}

const OneHot: OpHandler = {
  op: 'OneHot',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const d = need(ctx, inputs, 1);
    const v = need(ctx, inputs, 2);
    needRank(ctx, v.shape, 1, 'values');
    if (x.dtype === 'string' || d.dtype === 'string') ctx.fail('indices and depth must be numeric');
    if (x.shape === undefined) return [{ dtype: v.dtype, shape: undefined }];
    const axis = oneHotAxis(ctx, x.shape.length);
    const s = symOf(d);
    let depth: Dim = unknownDim();
    if (s !== undefined && s.length === 1) depth = s[0]!;
    else if (d.value !== undefined && d.value.size === 1) depth = Math.trunc(d.value.nums[0]!);
    if (typeof depth === 'number' && depth < 1) ctx.fail(`depth must be positive, got ${depth}`);
    return [{ dtype: v.dtype, shape: [...x.shape.slice(0, axis), depth, ...x.shape.slice(axis)] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const dt = need(ctx, inputs, 1);
    const v = need(ctx, inputs, 2);
    if (dt.size !== 1) ctx.fail('depth must have one element');
    if (v.size !== 2) ctx.fail(`values must have 2 elements, has ${v.size}`);
    const depth = Math.trunc(dt.nums[0]!);
    if (depth < 1) ctx.fail(`depth must be positive, got ${depth}`);
    const axis = oneHotAxis(ctx, x.rank);
    const dims = [...x.dims.slice(0, axis), depth, ...x.dims.slice(axis)];
    const outer = sizeOf(x.dims.slice(0, axis));
    const inner = sizeOf(x.dims.slice(axis));
    const vals = v.data as Elems;
    const out = allocData(v.dtype, sizeOf(dims));
    const o = out as Elems;
    for (let i = 0; i < o.length; i++) o[i] = vals[0]!;
    const src = x.nums;
    for (let a = 0; a < outer; a++) {
      for (let b = 0; b < inner; b++) {
        let k = Math.trunc(src[a * inner + b]!);
        if (k < 0) k += depth;
        if (k >= 0 && k < depth) o[(a * depth + k) * inner + b] = vals[1]!;
      }
    }
    return [new Tensor(v.dtype, dims, out)];
  },
};

// ---------- Compress ----------

function countTrue(t: Tensor): number {
  let n = 0;
  for (const b of t.nums) if (b) n++;
  return n;
}

const Compress: OpHandler = {
  op: 'Compress',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const c = need(ctx, inputs, 1);
    if (c.dtype !== 'bool') ctx.fail(`condition must be bool, got ${c.dtype}`);
    needRank(ctx, c.shape, 1, 'condition');
    const count: Dim = c.value !== undefined ? countTrue(c.value) : unknownDim();
    if (!ctx.has('axis')) return [{ dtype: x.dtype, shape: [count] }];
    if (x.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
    const axis = axisOf(ctx, ctx.int('axis'), x.shape.length);
    const shape = [...x.shape];
    shape[axis] = count;
    return [{ dtype: x.dtype, shape }];
  },
  eval(ctx, inputs) {
    const x0 = need(ctx, inputs, 0);
    const cond = need(ctx, inputs, 1).nums;
    const x = ctx.has('axis') ? x0 : x0.reshape([x0.size]);
    const axis = ctx.has('axis') ? axisOf(ctx, ctx.int('axis'), x.rank) : 0;
    const n = x.dims[axis]!;
    const keep: number[] = [];
    for (let i = 0; i < cond.length; i++) {
      if (!cond[i]) continue;
      if (i >= n) ctx.fail(`condition selects index ${i} beyond the axis size ${n}`);
      keep.push(i);
    }
    return [gatherAxis(x, axis, keep, [keep.length])];
  },
};

// ---------- NonZero ----------

const NonZero: OpHandler = {
  op: 'NonZero',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.dtype === 'string') ctx.fail('input must be numeric');
    const rank = x.shape === undefined ? unknownDim() : Math.max(1, x.shape.length);
    return [{ dtype: 'int64', shape: [rank, unknownDim()] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const dims = x.rank === 0 ? [1] : x.dims;
    const r = dims.length;
    const src = x.nums;
    const hits: number[] = [];
    for (let i = 0; i < src.length; i++) if (src[i] !== 0) hits.push(i);
    const out = new Float64Array(r * hits.length);
    hits.forEach((flat, k) => {
      let rem = flat;
      for (let a = r - 1; a >= 0; a--) {
        out[a * hits.length + k] = rem % dims[a]!;
        rem = Math.floor(rem / dims[a]!);
      }
    });
    return [new Tensor('int64', [r, hits.length], out)];
  },
};

// ---------- Unique ----------

/** Lexicographic order of two equal-length runs of elements. */
function compareRuns(d: Elems, a: number, b: number, len: number): number {
  for (let i = 0; i < len; i++) {
    const x = d[a + i]!;
    const y = d[b + i]!;
    if (x < y) return -1;
    if (x > y) return 1;
  }
  return 0;
}

interface UniqueResult {
  first: number[];
  inverse: number[];
  counts: number[];
}

/**
 * Unique items of `count` contiguous items of `len` elements each. Returns, in output order (sorted or first
 * occurrence), each unique item's first occurrence, and the inverse map and counts.
 */
function uniqueItems(d: Elems, count: number, len: number, sorted: boolean): UniqueResult {
  const keyOf = (i: number) => {
    const parts: string[] = [];
    for (let j = 0; j < len; j++) parts.push(String(d[i * len + j]));
    return parts.join('\u0000');
  };
  const byKey = new Map<string, number>();
  const first: number[] = [];
  const itemOf: number[] = [];
  for (let i = 0; i < count; i++) {
    const k = keyOf(i);
    let u = byKey.get(k);
    if (u === undefined) {
      u = first.length;
      byKey.set(k, u);
      first.push(i);
    }
    itemOf.push(u);
  }
  let order = first.map((_, u) => u);
  if (sorted) order = order.sort((p, q) => compareRuns(d, first[p]! * len, first[q]! * len, len));
  const rank = new Array<number>(order.length);
  order.forEach((u, pos) => {
    rank[u] = pos;
  });
  const counts = new Array<number>(order.length).fill(0);
  const inverse = itemOf.map((u) => rank[u]!);
  for (const p of inverse) counts[p]!++;
  return { first: order.map((u) => first[u]!), inverse, counts };
}

const Unique: OpHandler = {
  op: 'Unique',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const u = unknownDim();
    const nOut = ctx.node.outputs.length;
    let yShape: Dim[] | undefined = [u];
    let invLen: Dim = unknownDim();
    if (ctx.has('axis')) {
      if (x.shape === undefined) yShape = undefined;
      else {
        const axis = axisOf(ctx, ctx.int('axis'), x.shape.length);
        yShape = [...x.shape];
        yShape[axis] = u;
        invLen = x.shape[axis]!;
      }
    } else if (x.shape !== undefined)
      invLen = x.shape.reduce<Dim>(
        (a, b) => (typeof a === 'number' && typeof b === 'number' ? a * b : unknownDim()),
        1,
      );
    const outs: InferOutput[] = [
      { dtype: x.dtype, shape: yShape },
      { dtype: 'int64', shape: [u] },
      { dtype: 'int64', shape: [invLen] },
      { dtype: 'int64', shape: [u] },
    ];
    return outs.slice(0, nOut);
  },
  eval(ctx, inputs) {
    const x0 = need(ctx, inputs, 0);
    const sorted = ctx.int('sorted', 1) !== 0;
    const hasAxis = ctx.has('axis');
    const x = hasAxis ? x0 : x0.reshape([x0.size]);
    const axis = hasAxis ? axisOf(ctx, ctx.int('axis'), x.rank) : 0;
    const outer = sizeOf(x.dims.slice(0, axis));
    const n = x.dims[axis]!;
    const inner = sizeOf(x.dims.slice(axis + 1));
    // An item is the slice at one index of the axis; copy them so item i occupies [i*len, (i+1)*len).
    const flat = allocData(x.dtype, x.size);
    for (let i = 0; i < n; i++) {
      for (let o = 0; o < outer; o++) copyRun(flat, (i * outer + o) * inner, x.data, (o * n + i) * inner, inner);
    }
    const len = outer * inner;
    const r = uniqueItems(flat as Elems, n, len, sorted);
    const y = gatherAxis(x, axis, r.first, [r.first.length]);
    const i64 = (v: number[]) => Tensor.fromNumbers('int64', [v.length], v);
    return [y, i64(r.first), i64(r.inverse), i64(r.counts)].slice(0, ctx.node.outputs.length);
  },
};

export const MOVEMENT_SELECT_OPS: OpHandler[] = [OneHot, Compress, NonZero, Unique];
