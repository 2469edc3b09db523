// Movement operators that pick or place elements by index: Gather, GatherElements, GatherND, ScatterND, ScatterElements, Scatter.
import { allocData } from '../../compiler/dtype.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import { converter, sizeOf, stridesOf, Tensor } from '../../compiler/tensor.ts';
import type { InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { axisOf, need } from './util.ts';
import {
  cloneData,
  copyRun,
  needIndexType,
  numsOf,
  offsetsFromMaps,
  stridedMap,
  symOf,
  unifyDim,
} from './movement-common.ts';

type Elems = { [i: number]: number | string; length: number };

/** An index checked against an axis of size n and made non-negative; fails when out of range. */
function normIndex(ctx: OpContext, i: number, n: number): number {
  if (i < -n || i >= n) ctx.fail(`index ${i} is out of range for an axis of size ${n}`);
  return i < 0 ? i + n : i;
}

// ---------- Gather ----------

/** Gather along an axis with already-normalized indices; the index tensor's dims replace the axis. */
export function gatherAxis(x: Tensor, axis: number, idx: ArrayLike<number>, idxDims: readonly number[]): Tensor {
  const dims = [...x.dims.slice(0, axis), ...idxDims, ...x.dims.slice(axis + 1)];
  const outer = sizeOf(x.dims.slice(0, axis));
  const n = x.dims[axis]!;
  const inner = sizeOf(x.dims.slice(axis + 1));
  const m = idx.length;
  const out = allocData(x.dtype, sizeOf(dims));
  for (let o = 0; o < outer; o++) {
    for (let k = 0; k < m; k++) copyRun(out, (o * m + k) * inner, x.data, (o * n + idx[k]!) * inner, inner);
  }
  return new Tensor(x.dtype, dims, out);
}

const Gather: OpHandler = {
  op: 'Gather',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const ind = need(ctx, inputs, 1);
    needIndexType(ctx, ind.dtype, 'indices');
    if (x.shape === undefined || ind.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
    const axis = axisOf(ctx, ctx.int('axis', 0), x.shape.length);
    const shape = [...x.shape.slice(0, axis), ...ind.shape, ...x.shape.slice(axis + 1)];
    const out: InferOutput = { dtype: x.dtype, shape };
    const xsym = x.shape.length === 1 ? symOf(x) : undefined;
    const picks = numsOf(ind);
    const n = x.shape[axis]!;
    if (picks !== undefined && typeof n === 'number') for (const i of picks) normIndex(ctx, i, n);
    if (xsym !== undefined && picks !== undefined && ind.shape.length <= 1) {
      out.sym = picks.map((i) => xsym[normIndex(ctx, i, xsym.length)]!);
    }
    return [out];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const ind = need(ctx, inputs, 1);
    if (x.rank === 0) ctx.fail('data must have rank at least 1');
    const axis = axisOf(ctx, ctx.int('axis', 0), x.rank);
    const n = x.dims[axis]!;
    const src = ind.nums;
    const idx = new Int32Array(src.length);
    for (let k = 0; k < src.length; k++) idx[k] = normIndex(ctx, src[k]!, n);
    return [gatherAxis(x, axis, idx, ind.dims)];
  },
};

// ---------- GatherElements ----------

/** Flat offsets into data (dims) of every position of indices (idxDims), with the `axis` coordinate left out. */
function baseOffsets(dims: readonly number[], idxDims: readonly number[], axis: number): Int32Array {
  const st = stridesOf(dims);
  const maps = idxDims.map((len, a) => (a === axis ? new Int32Array(len) : stridedMap(len, 0, 1, st[a]!)));
  return offsetsFromMaps(idxDims, maps);
}

function checkElementsShapes(ctx: OpContext, data: readonly number[], ind: readonly number[]): void {
  if (ind.length !== data.length) ctx.fail(`indices rank ${ind.length} differs from data rank ${data.length}`);
}

const GatherElements: OpHandler = {
  op: 'GatherElements',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const ind = need(ctx, inputs, 1);
    needIndexType(ctx, ind.dtype, 'indices');
    if (x.shape !== undefined && ind.shape !== undefined) {
      if (x.shape.length !== ind.shape.length)
        ctx.fail(`indices rank ${ind.shape.length} differs from data rank ${x.shape.length}`);
      axisOf(ctx, ctx.int('axis', 0), x.shape.length);
    }
    return [{ dtype: x.dtype, shape: ind.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const ind = need(ctx, inputs, 1);
    checkElementsShapes(ctx, x.dims, ind.dims);
    const axis = axisOf(ctx, ctx.int('axis', 0), x.rank);
    const base = baseOffsets(x.dims, ind.dims, axis);
    const n = x.dims[axis]!;
    const st = stridesOf(x.dims)[axis]!;
    const src = ind.nums;
    const out = allocData(x.dtype, ind.size);
    const o = out as Elems;
    const s = x.data as Elems;
    for (let i = 0; i < src.length; i++) o[i] = s[base[i]! + normIndex(ctx, src[i]!, n) * st]!;
    return [new Tensor(x.dtype, ind.dims, out)];
  },
};

// ---------- GatherND ----------

const GatherND: OpHandler = {
  op: 'GatherND',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const ind = need(ctx, inputs, 1);
    if (ind.dtype !== 'int64') ctx.fail(`indices must be int64, got ${ind.dtype}`);
    const b = ctx.int('batch_dims', 0);
    if (x.shape === undefined || ind.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
    const q = ind.shape.length;
    if (q < 1) ctx.fail('indices must have rank at least 1');
    if (b < 0 || b >= Math.min(q, x.shape.length)) ctx.fail(`batch_dims ${b} is out of range`);
    const last = ind.shape[q - 1]!;
    for (let i = 0; i < b; i++) unifyDim(ctx, x.shape[i]!, ind.shape[i]!, `batch dim ${i} differs`);
    if (typeof last !== 'number') return [{ dtype: x.dtype, shape: undefined }];
    if (last > x.shape.length - b)
      ctx.fail(`indices' last dim ${last} exceeds data rank ${x.shape.length} minus batch_dims ${b}`);
    return [{ dtype: x.dtype, shape: [...ind.shape.slice(0, q - 1), ...x.shape.slice(b + last)] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const ind = need(ctx, inputs, 1);
    const b = ctx.int('batch_dims', 0);
    const q = ind.rank;
    if (q < 1) ctx.fail('indices must have rank at least 1');
    if (b < 0 || b >= Math.min(q, x.rank)) ctx.fail(`batch_dims ${b} is out of range`);
    for (let i = 0; i < b; i++)
      if (x.dims[i] !== ind.dims[i]) ctx.fail(`batch dim ${i} differs: ${x.dims[i]} vs ${ind.dims[i]}`);
    const last = ind.dims[q - 1]!;
    if (last > x.rank - b) ctx.fail(`indices' last dim ${last} exceeds data rank ${x.rank} minus batch_dims ${b}`);
    const dims = [...ind.dims.slice(0, q - 1), ...x.dims.slice(b + last)];
    const st = stridesOf(x.dims);
    const inner = sizeOf(x.dims.slice(b + last));
    const batches = sizeOf(x.dims.slice(0, b));
    const batchStride = b === 0 ? 0 : st[b - 1]!;
    const perBatch = sizeOf(ind.dims.slice(b, q - 1));
    const src = ind.nums;
    const out = allocData(x.dtype, sizeOf(dims));
    let k = 0;
    for (let bi = 0; bi < batches; bi++) {
      for (let t = 0; t < perBatch; t++, k++) {
        let off = bi * batchStride;
        for (let j = 0; j < last; j++) off += normIndex(ctx, src[k * last + j]!, x.dims[b + j]!) * st[b + j]!;
        copyRun(out, k * inner, x.data, off, inner);
      }
    }
    return [new Tensor(x.dtype, dims, out)];
  },
};

// ---------- Scatter ----------

type Reduce = (a: number, b: number) => number;

function reduction(ctx: OpContext): Reduce | undefined {
  const r = ctx.string('reduction', 'none');
  switch (r) {
    case 'none':
      return undefined;
    case 'add':
      return (a, b) => a + b;
    case 'mul':
      return (a, b) => a * b;
    case 'max':
      if (ctx.opset >= 18) return (a, b) => Math.max(a, b);
      break;
    case 'min':
      if (ctx.opset >= 18) return (a, b) => Math.min(a, b);
      break;
  }
  ctx.fail(`unsupported reduction '${r}'`);
}

/** Writes update u into out[i], combining with the current value under a reduction. */
function put(
  out: Elems,
  i: number,
  u: number | string,
  red: Reduce | undefined,
  conv: ((x: number) => number) | undefined,
): void {
  if (red === undefined) {
    out[i] = u;
    return;
  }
  const v = red(out[i] as number, u as number);
  out[i] = conv ? conv(v) : v;
}

function inferScatter(ctx: OpContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const x = need(ctx, inputs, 0);
  const ind = need(ctx, inputs, 1);
  const upd = need(ctx, inputs, 2);
  needIndexType(ctx, ind.dtype, 'indices');
  if (upd.dtype !== x.dtype) ctx.fail(`updates are ${upd.dtype}, data is ${x.dtype}`);
  reduction(ctx);
  return [{ dtype: x.dtype, shape: x.shape }];
}

const ScatterND: OpHandler = {
  op: 'ScatterND',
  infer(ctx, inputs) {
    const outs = inferScatter(ctx, inputs);
    const x = inputs[0]!;
    const ind = inputs[1]!;
    const upd = inputs[2]!;
    if (x.shape !== undefined && ind.shape !== undefined && upd.shape !== undefined) {
      const q = ind.shape.length;
      const k = ind.shape[q - 1];
      if (typeof k === 'number') {
        if (k > x.shape.length) ctx.fail(`indices' last dim ${k} exceeds data rank ${x.shape.length}`);
        const want: Dim[] = [...ind.shape.slice(0, q - 1), ...x.shape.slice(k)];
        if (want.length !== upd.shape.length) ctx.fail(`updates rank ${upd.shape.length}, expected ${want.length}`);
        want.forEach((d, i) => unifyDim(ctx, d, upd.shape![i]!, `updates dim ${i} differs`));
      }
    }
    return outs;
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const ind = need(ctx, inputs, 1);
    const upd = need(ctx, inputs, 2);
    const red = reduction(ctx);
    const q = ind.rank;
    const k = ind.dims[q - 1]!;
    if (k > x.rank) ctx.fail(`indices' last dim ${k} exceeds data rank ${x.rank}`);
    const want = [...ind.dims.slice(0, q - 1), ...x.dims.slice(k)];
    if (want.length !== upd.rank || want.some((d, i) => d !== upd.dims[i]))
      ctx.fail(`updates shape [${upd.dims}], expected [${want}]`);
    const st = stridesOf(x.dims);
    const inner = sizeOf(x.dims.slice(k));
    const n = sizeOf(ind.dims.slice(0, q - 1));
    const src = ind.nums;
    const data = cloneData(x);
    const o = data as Elems;
    const u = upd.data as Elems;
    const conv = converter(x.dtype);
    for (let t = 0; t < n; t++) {
      let off = 0;
      for (let j = 0; j < k; j++) off += normIndex(ctx, src[t * k + j]!, x.dims[j]!) * st[j]!;
      for (let e = 0; e < inner; e++) put(o, off + e, u[t * inner + e]!, red, conv);
    }
    return [new Tensor(x.dtype, x.dims, data)];
  },
};

function inferScatterElements(ctx: OpContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const outs = inferScatter(ctx, inputs);
  const x = inputs[0]!;
  const ind = inputs[1]!;
  const upd = inputs[2]!;
  if (x.shape !== undefined) axisOf(ctx, ctx.int('axis', 0), x.shape.length);
  if (x.shape !== undefined && ind.shape !== undefined && x.shape.length !== ind.shape.length) {
    ctx.fail(`indices rank ${ind.shape.length} differs from data rank ${x.shape.length}`);
  }
  if (ind.shape !== undefined && upd.shape !== undefined) {
    if (ind.shape.length !== upd.shape.length)
      ctx.fail(`updates rank ${upd.shape.length} differs from indices rank ${ind.shape.length}`);
    ind.shape.forEach((d, i) => unifyDim(ctx, d, upd.shape![i]!, `updates dim ${i} differs from indices`));
  }
  return outs;
}

function evalScatterElements(ctx: OpContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const x = need(ctx, inputs, 0);
  const ind = need(ctx, inputs, 1);
  const upd = need(ctx, inputs, 2);
  const red = reduction(ctx);
  checkElementsShapes(ctx, x.dims, ind.dims);
  if (upd.rank !== ind.rank || upd.dims.some((d, i) => d !== ind.dims[i]))
    ctx.fail(`updates shape [${upd.dims}] differs from indices [${ind.dims}]`);
  const axis = axisOf(ctx, ctx.int('axis', 0), x.rank);
  const base = baseOffsets(x.dims, ind.dims, axis);
  const n = x.dims[axis]!;
  const st = stridesOf(x.dims)[axis]!;
  const src = ind.nums;
  const data = cloneData(x);
  const o = data as Elems;
  const u = upd.data as Elems;
  const conv = converter(x.dtype);
  for (let i = 0; i < src.length; i++) put(o, base[i]! + normIndex(ctx, src[i]!, n) * st, u[i]!, red, conv);
  return [new Tensor(x.dtype, x.dims, data)];
}

const ScatterElements: OpHandler = { op: 'ScatterElements', infer: inferScatterElements, eval: evalScatterElements };
/** The deprecated name of ScatterElements (opsets 9 and 10). */
const Scatter: OpHandler = { op: 'Scatter', until: 11, infer: inferScatterElements, eval: evalScatterElements };

export const MOVEMENT_GATHER_OPS: OpHandler[] = [Gather, GatherElements, GatherND, ScatterND, ScatterElements, Scatter];
