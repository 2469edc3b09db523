// Reductions (ReduceSum/Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp) and ArgMax/ArgMin.
import { INT_RANGE, isFloat, type DType, type NumArray } from '../../compiler/dtype.ts';
import { unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { stridesOf, Tensor } from '../../compiler/tensor.ts';
import { fromF64, knownInts, normAxes, prodRange, reducedShape, requireNumeric } from './math-common.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { axisOf, intsOf, need } from './util.ts';

type Kind = 'sum' | 'mean' | 'max' | 'min' | 'prod' | 'l1' | 'l2' | 'sumsquare' | 'logsum' | 'logsumexp';

/** For each input element, the flat index of the output element it reduces into. */
export function reduceMap(dims: readonly number[], axes: readonly number[]): { outDims: number[]; map: Int32Array } {
  const outDims = dims.map((d, i) => (axes.includes(i) ? 1 : d));
  const ost = stridesOf(outDims).map((s, i) => (axes.includes(i) ? 0 : s));
  const n = prodRange(dims, 0, dims.length);
  const map = new Int32Array(n);
  const r = dims.length;
  const ctr = new Array<number>(r).fill(0);
  let o = 0;
  for (let k = 0; k < n; k++) {
    map[k] = o;
    for (let i = r - 1; i >= 0; i--) {
      ctr[i]++;
      o += ost[i];
      if (ctr[i] < dims[i]) break;
      o -= ost[i] * dims[i];
      ctr[i] = 0;
    }
  }
  return { outDims, map };
}

/** The value a reduction gives over an empty set (and its starting accumulator). */
function identity(kind: Kind, dtype: DType): number {
  switch (kind) {
    case 'max':
      return dtype === 'bool' ? 0 : isFloat(dtype) ? -Infinity : INT_RANGE[dtype]![0];
    case 'min':
      return dtype === 'bool' ? 1 : isFloat(dtype) ? Infinity : INT_RANGE[dtype]![1];
    case 'prod':
      return 1;
    default:
      return 0;
  }
}

/** Reduces x over the (normalized, sorted, non-empty) axes; returns float64 results in keepdims layout. */
function reduce(
  kind: Kind,
  x: NumArray,
  dtype: DType,
  dims: readonly number[],
  axes: readonly number[],
): { outDims: number[]; out: Float64Array } {
  const { outDims, map } = reduceMap(dims, axes);
  const outSize = prodRange(outDims, 0, outDims.length);
  const out = new Float64Array(outSize).fill(identity(kind, dtype));
  const n = x.length;
  switch (kind) {
    case 'sum':
    case 'mean':
    case 'logsum':
      for (let i = 0; i < n; i++) out[map[i]] += x[i];
      break;
    case 'l1':
      for (let i = 0; i < n; i++) out[map[i]] += Math.abs(x[i]);
      break;
    case 'l2':
    case 'sumsquare':
      for (let i = 0; i < n; i++) out[map[i]] += x[i] * x[i];
      break;
    case 'prod':
      for (let i = 0; i < n; i++) out[map[i]] *= x[i];
      break;
    case 'max':
      for (let i = 0; i < n; i++) {
        const v = x[i],
          o = map[i];
        if (v > out[o] || v !== v) out[o] = v;
      }
      break;
    case 'min':
      for (let i = 0; i < n; i++) {
        const v = x[i],
          o = map[i];
        if (v < out[o] || v !== v) out[o] = v;
      }
      break;
    case 'logsumexp': {
      const max = new Float64Array(outSize).fill(-Infinity);
      for (let i = 0; i < n; i++) {
        const v = x[i],
          o = map[i];
        if (v > max[o] || v !== v) max[o] = v;
      }
      for (let i = 0; i < n; i++) {
        const m = max[map[i]];
        out[map[i]] += Math.exp(m === -Infinity || m === Infinity ? x[i] : x[i] - m);
      }
      for (let o = 0; o < outSize; o++) {
        const m = max[o];
        out[o] = (m === -Infinity || m === Infinity ? 0 : m) + Math.log(out[o]);
      }
      break;
    }
  }
  const count = outSize === 0 ? 0 : n / outSize;
  if (kind === 'mean') for (let o = 0; o < outSize; o++) out[o] /= count;
  else if (kind === 'l2') for (let o = 0; o < outSize; o++) out[o] = Math.sqrt(out[o]);
  else if (kind === 'logsum') for (let o = 0; o < outSize; o++) out[o] = Math.log(out[o]);
  return { outDims, out };
}

/** Axes of a reduction node: undefined = reduce all; 'noop' = identity (empty axes with noop_with_empty_axes). */
function evalAxes(ctx: OpContext, axesInput: boolean, axesT: Tensor | undefined, rank: number): number[] | 'noop' {
  const axes = axesInput ? (axesT === undefined ? [] : intsOf(axesT)) : ctx.ints('axes', []);
  if (axes.length === 0) {
    if (axesInput && ctx.int('noop_with_empty_axes', 0) !== 0) return 'noop';
    return Array.from({ length: rank }, (_, i) => i);
  }
  return normAxes(ctx, axes, rank);
}

/** Axes known at inference time, as evalAxes gives them; undefined when the axes input is not known. */
function inferAxes(
  ctx: OpContext,
  axesInput: boolean,
  a: InferInput | undefined,
  rank: number,
): number[] | 'noop' | undefined {
  let axes: number[] | undefined;
  if (!axesInput) axes = ctx.ints('axes', []);
  else if (a === undefined) axes = [];
  else if (a.shape !== undefined && a.shape.length === 1 && a.shape[0] === 0) axes = [];
  else axes = knownInts(a);
  if (axes === undefined) return undefined;
  if (axes.length === 0) {
    if (axesInput && ctx.int('noop_with_empty_axes', 0) !== 0) return 'noop';
    return Array.from({ length: rank }, (_, i) => i);
  }
  return normAxes(ctx, axes, rank);
}

function checkDtype(ctx: OpContext, kind: Kind, dtype: DType): void {
  if (dtype === 'bool' && (kind === 'max' || kind === 'min')) return;
  requireNumeric(ctx, dtype, 'data');
}

function reduceHandler(
  op: string,
  kind: Kind,
  since: number,
  until: number | undefined,
  axesInput: boolean,
): OpHandler {
  return {
    op,
    since,
    until,
    infer(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      checkDtype(ctx, kind, x.dtype);
      const keep = ctx.int('keepdims', 1) !== 0;
      if (axesInput && inputs[1] !== undefined && inputs[1].dtype !== 'int64')
        ctx.fail(`axes must be int64, got ${inputs[1].dtype}`);
      if (x.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
      const axes = inferAxes(ctx, axesInput, inputs[1], x.shape.length);
      if (axes === 'noop') return [{ dtype: x.dtype, shape: x.shape }];
      if (axes === undefined) {
        const shape: Dim[] | undefined = keep ? x.shape.map((d) => (d === 1 ? 1 : unknownDim())) : undefined;
        return [{ dtype: x.dtype, shape }];
      }
      return [{ dtype: x.dtype, shape: reducedShape(x.shape, axes, keep) }];
    },
    eval(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      checkDtype(ctx, kind, x.dtype);
      const keep = ctx.int('keepdims', 1) !== 0;
      const axes = evalAxes(ctx, axesInput, inputs[1], x.rank);
      if (axes === 'noop') return [x];
      const r = reduce(kind, x.nums, x.dtype, x.dims, axes);
      return [fromF64(x.dtype, reducedShape(x.dims, axes, keep), r.out)];
    },
  };
}

/** The attribute-axes handler before `switchAt` and the input-axes handler from it. */
function reduceOp(op: string, kind: Kind, switchAt: number): OpHandler[] {
  return [reduceHandler(op, kind, 1, switchAt, false), reduceHandler(op, kind, switchAt, undefined, true)];
}

/** Index of the max (or min) of each fiber along `axis`; first occurrence unless selectLast. NaN counts as extreme. */
function argReduce(
  x: NumArray,
  dims: readonly number[],
  axis: number,
  isMax: boolean,
  selectLast: boolean,
): Float64Array {
  const outer = prodRange(dims, 0, axis),
    len = dims[axis],
    inner = prodRange(dims, axis + 1, dims.length);
  const out = new Float64Array(outer * inner);
  for (let o = 0; o < outer; o++) {
    for (let q = 0; q < inner; q++) {
      const base = o * len * inner + q;
      let best = x[base],
        arg = 0;
      for (let i = 1; i < len; i++) {
        const v = x[base + i * inner];
        let better: boolean;
        if (selectLast) better = v !== v || (best === best && (isMax ? v >= best : v <= best));
        else better = best === best && (v !== v || (isMax ? v > best : v < best));
        if (better) {
          best = v;
          arg = i;
        }
      }
      out[o * inner + q] = arg;
    }
  }
  return out;
}

function argHandler(op: string, isMax: boolean): OpHandler {
  return {
    op,
    infer(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      checkDtype(ctx, 'max', x.dtype);
      if (x.shape === undefined) return [{ dtype: 'int64', shape: undefined }];
      const axis = axisOf(ctx, ctx.int('axis', 0), x.shape.length);
      return [{ dtype: 'int64', shape: reducedShape(x.shape, [axis], ctx.int('keepdims', 1) !== 0) }];
    },
    eval(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      checkDtype(ctx, 'max', x.dtype);
      const axis = axisOf(ctx, ctx.int('axis', 0), x.rank);
      if (x.dims[axis] === 0) ctx.fail(`cannot take ${op} over an empty axis ${axis}`);
      const selectLast = ctx.opset >= 12 && ctx.int('select_last_index', 0) !== 0;
      const out = argReduce(x.nums, x.dims, axis, isMax, selectLast);
      return [new Tensor('int64', reducedShape(x.dims, [axis], ctx.int('keepdims', 1) !== 0), out)];
    },
  };
}

export const REDUCE_OPS: OpHandler[] = [
  ...reduceOp('ReduceSum', 'sum', 13),
  ...reduceOp('ReduceMean', 'mean', 18),
  ...reduceOp('ReduceMax', 'max', 18),
  ...reduceOp('ReduceMin', 'min', 18),
  ...reduceOp('ReduceProd', 'prod', 18),
  ...reduceOp('ReduceL1', 'l1', 18),
  ...reduceOp('ReduceL2', 'l2', 18),
  ...reduceOp('ReduceSumSquare', 'sumsquare', 18),
  ...reduceOp('ReduceLogSum', 'logsum', 18),
  ...reduceOp('ReduceLogSumExp', 'logsumexp', 18),
  argHandler('ArgMax', true),
  argHandler('ArgMin', false),
];
