// TopK: the k largest (or smallest) elements along an axis with their int64 indices; ties keep the lower index first.
import type { NumArray } from '../../compiler/dtype.ts';
import { unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { fromF64, knownInts, prodRange, requireNumeric } from './math-common.ts';
import type { OpContext, OpHandler } from './types.ts';
import { axisOf, intsOf, need } from './util.ts';

/** True when value a (index ia) ranks before value b (index ib). NaN ranks as the largest value. */
function before(a: number, ia: number, b: number, ib: number, largest: boolean): boolean {
  if (a !== b) {
    if (a !== a) return largest;
    if (b !== b) return !largest;
    return largest ? a > b : a < b;
  }
  return ia < ib;
}

/** Top-k positions of one fiber (values at base + i*stride, i < len), best first. */
function topOfFiber(x: NumArray, base: number, stride: number, len: number, k: number, largest: boolean): number[] {
  if (k * 8 < len) {
    // Small k: keep a sorted buffer of the best k, inserting by binary search.
    const best: number[] = [];
    for (let i = 0; i < len; i++) {
      const v = x[base + i * stride];
      if (best.length === k) {
        const w = best[k - 1];
        if (!before(v, i, x[base + w * stride], w, largest)) continue;
        best.pop();
      }
      let lo = 0,
        hi = best.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        const m = best[mid];
        if (before(x[base + m * stride], m, v, i, largest)) lo = mid + 1;
        else hi = mid;
      }
      best.splice(lo, 0, i);
    }
    return best;
  }
  const idx = Array.from({ length: len }, (_, i) => i);
  idx.sort((i, j) => (before(x[base + i * stride], i, x[base + j * stride], j, largest) ? -1 : 1));
  return idx.slice(0, k);
}

/** k from the attribute (opset < 10) or the 1-element input. */
function evalK(ctx: OpContext, kT: Tensor | undefined): number {
  if (ctx.opset < 10) return ctx.int('k');
  if (kT === undefined) ctx.fail('input K is required');
  const ks = intsOf(kT);
  if (ks.length !== 1) ctx.fail(`K must hold one element, got ${ks.length}`);
  return ks[0];
}

const topK: OpHandler = {
  op: 'TopK',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireNumeric(ctx, x.dtype, 'X');
    if (x.shape === undefined)
      return [
        { dtype: x.dtype, shape: undefined },
        { dtype: 'int64', shape: undefined },
      ];
    const axis = axisOf(ctx, ctx.int('axis', -1), x.shape.length);
    let k: Dim;
    if (ctx.opset < 10) k = ctx.int('k');
    else {
      const kIn = need(ctx, inputs, 1);
      if (kIn.dtype !== 'int64') ctx.fail(`K must be int64, got ${kIn.dtype}`);
      const ks = knownInts(kIn);
      k = ks !== undefined ? ks[0] : kIn.sym !== undefined && kIn.sym.length === 1 ? kIn.sym[0] : unknownDim();
    }
    const d = x.shape[axis];
    if (typeof k === 'number') {
      if (k < 0) ctx.fail(`k must be non-negative, got ${k}`);
      if (typeof d === 'number' && k > d) ctx.fail(`k = ${k} exceeds dimension ${d} of axis ${axis}`);
    }
    const shape = x.shape.map((s, i) => (i === axis ? k : s));
    return [
      { dtype: x.dtype, shape },
      { dtype: 'int64', shape: [...shape] },
    ];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireNumeric(ctx, x.dtype, 'X');
    const axis = axisOf(ctx, ctx.int('axis', -1), x.rank);
    const k = evalK(ctx, inputs[1]);
    const len = x.dims[axis];
    if (k < 0 || k > len) ctx.fail(`k = ${k} is out of range for dimension ${len} of axis ${axis}`);
    const largest = ctx.opset < 11 || ctx.int('largest', 1) !== 0;
    const outer = prodRange(x.dims, 0, axis),
      inner = prodRange(x.dims, axis + 1, x.rank);
    const outDims = x.dims.map((d, i) => (i === axis ? k : d));
    const values = new Float64Array(outer * k * inner),
      indices = new Float64Array(outer * k * inner);
    const xv = x.nums;
    for (let o = 0; o < outer; o++) {
      for (let q = 0; q < inner; q++) {
        const base = o * len * inner + q;
        const top = topOfFiber(xv, base, inner, len, k, largest);
        for (let t = 0; t < k; t++) {
          const dst = o * k * inner + t * inner + q;
          values[dst] = xv[base + top[t] * inner];
          indices[dst] = top[t];
        }
      }
    }
    return [fromF64(x.dtype, outDims, values), new Tensor('int64', outDims, indices)];
  },
};

export const TOPK_OPS: OpHandler[] = [topK];
