// Matrix products: MatMul (numpy semantics), Gemm and MatMulInteger, on a blocked i/k/j float64 kernel.
import { INT_RANGE, type DType, type NumArray } from '../../compiler/dtype.ts';
import { dimStr, type Dim } from '../../compiler/symbolic.ts';
import { broadcastDims, broadcastIndex, sizeOf, type Tensor } from '../../compiler/tensor.ts';
import { broadcastsTo, fromF64, requireNumeric, requireSameDtype, rint, roundTo } from './math-common.ts';
import type { InferOutput, OpContext, OpHandler } from './types.ts';
import { broadcastShapes, need } from './util.ts';

/** Columns per block: a [K, JB] slab of B stays in cache while the rows of A pass over it. */
const JB = 1024;

/**
 * out[m,n] += a[m,k] · b[k,n] for row-major slices starting at the given offsets, accumulating in float64.
 * Loop order: column block / i (4 rows at a time, sharing each load of B) / k (unrolled by 4) / j.
 */
export function matmulInto(
  a: NumArray,
  aOff: number,
  b: NumArray,
  bOff: number,
  m: number,
  k: number,
  n: number,
  out: Float64Array,
  oOff: number,
): void {
  for (let j0 = 0; j0 < n; j0 += JB) {
    const j1 = Math.min(n, j0 + JB);
    let i = 0;
    for (; i + 4 <= m; i += 4) fourRows(a, aOff + i * k, b, bOff, k, n, out, oOff + i * n, j0, j1);
    for (; i < m; i++) oneRow(a, aOff + i * k, b, bOff, k, n, out, oOff + i * n, j0, j1);
  }
}

/** Rows r..r+3 of the product over columns [j0, j1): a0..a3 start at aRow (+k each), outputs at oRow (+n each). */
function fourRows(
  a: NumArray,
  aRow: number,
  b: NumArray,
  bOff: number,
  k: number,
  n: number,
  out: Float64Array,
  oRow: number,
  j0: number,
  j1: number,
): void {
  const r1 = aRow + k,
    r2 = r1 + k,
    r3 = r2 + k;
  const o1 = oRow + n,
    o2 = o1 + n,
    o3 = o2 + n;
  let p = 0;
  for (; p + 4 <= k; p += 4) {
    const a00 = a[aRow + p],
      a01 = a[aRow + p + 1],
      a02 = a[aRow + p + 2],
      a03 = a[aRow + p + 3];
    const a10 = a[r1 + p],
      a11 = a[r1 + p + 1],
      a12 = a[r1 + p + 2],
      a13 = a[r1 + p + 3];
    const a20 = a[r2 + p],
      a21 = a[r2 + p + 1],
      a22 = a[r2 + p + 2],
      a23 = a[r2 + p + 3];
    const a30 = a[r3 + p],
      a31 = a[r3 + p + 1],
      a32 = a[r3 + p + 2],
      a33 = a[r3 + p + 3];
    const b0 = bOff + p * n,
      b1 = b0 + n,
      b2 = b1 + n,
      b3 = b2 + n;
    for (let j = j0; j < j1; j++) {
      const x0 = b[b0 + j],
        x1 = b[b1 + j],
        x2 = b[b2 + j],
        x3 = b[b3 + j];
      out[oRow + j] += a00 * x0 + a01 * x1 + a02 * x2 + a03 * x3;
      out[o1 + j] += a10 * x0 + a11 * x1 + a12 * x2 + a13 * x3;
      out[o2 + j] += a20 * x0 + a21 * x1 + a22 * x2 + a23 * x3;
      out[o3 + j] += a30 * x0 + a31 * x1 + a32 * x2 + a33 * x3;
    }
  }
  for (; p < k; p++) {
    const a0 = a[aRow + p],
      a1 = a[r1 + p],
      a2 = a[r2 + p],
      a3 = a[r3 + p];
    const bp = bOff + p * n;
    for (let j = j0; j < j1; j++) {
      const x = b[bp + j];
      out[oRow + j] += a0 * x;
      out[o1 + j] += a1 * x;
      out[o2 + j] += a2 * x;
      out[o3 + j] += a3 * x;
    }
  }
}

/** One row of the product over columns [j0, j1). */
function oneRow(
  a: NumArray,
  aRow: number,
  b: NumArray,
  bOff: number,
  k: number,
  n: number,
  out: Float64Array,
  oRow: number,
  j0: number,
  j1: number,
): void {
  let p = 0;
  for (; p + 4 <= k; p += 4) {
    const a0 = a[aRow + p],
      a1 = a[aRow + p + 1],
      a2 = a[aRow + p + 2],
      a3 = a[aRow + p + 3];
    const b0 = bOff + p * n,
      b1 = b0 + n,
      b2 = b1 + n,
      b3 = b2 + n;
    for (let j = j0; j < j1; j++) out[oRow + j] += a0 * b[b0 + j] + a1 * b[b1 + j] + a2 * b[b2 + j] + a3 * b[b3 + j];
  }
  for (; p < k; p++) {
    const av = a[aRow + p];
    const bp = bOff + p * n;
    for (let j = j0; j < j1; j++) out[oRow + j] += av * b[bp + j];
  }
}

/** Result of a batched product: output dims and float64 values. */
interface Product {
  dims: number[];
  data: Float64Array;
}

/** numpy matmul of concrete arrays: 1-D promotion, broadcast batch dims. */
export function batchedMatmul(
  ctx: OpContext,
  aDims: readonly number[],
  a: NumArray,
  bDims: readonly number[],
  b: NumArray,
): Product {
  if (aDims.length === 0 || bDims.length === 0) ctx.fail('MatMul inputs must have rank ≥ 1');
  const a2 = aDims.length === 1 ? [1, aDims[0]] : aDims;
  const b2 = bDims.length === 1 ? [bDims[0], 1] : bDims;
  const m = a2[a2.length - 2],
    k = a2[a2.length - 1];
  const kb = b2[b2.length - 2],
    n = b2[b2.length - 1];
  if (k !== kb) ctx.fail(`inner dimensions differ: [${aDims}] x [${bDims}]`);
  const aBatch = a2.slice(0, -2),
    bBatch = b2.slice(0, -2);
  let batch: number[];
  try {
    batch = broadcastDims(aBatch, bBatch);
  } catch {
    ctx.fail(`batch dimensions do not broadcast: [${aDims}] x [${bDims}]`);
  }
  const outDims = [...batch];
  if (aDims.length > 1) outDims.push(m);
  if (bDims.length > 1) outDims.push(n);
  const nb = sizeOf(batch);
  const out = new Float64Array(nb * m * n);
  if (bBatch.every((d) => d === 1) && aBatch.length === batch.length && aBatch.every((d, i) => d === batch[i])) {
    // B is one matrix and A is not broadcast: fold A's batch into its rows.
    matmulInto(a, 0, b, 0, nb * m, k, n, out, 0);
  } else {
    const ai = broadcastIndex(aBatch, batch),
      bi = broadcastIndex(bBatch, batch);
    for (let t = 0; t < nb; t++) {
      const at = ai ? ai[t] : t,
        bt = bi ? bi[t] : t;
      matmulInto(a, at * m * k, b, bt * k * n, m, k, n, out, t * m * n);
    }
  }
  return { dims: outDims, data: out };
}

/** Inferred numpy-matmul shape, failing when the inner dims are two different numbers. */
function matmulShape(ctx: OpContext, as: Dim[] | undefined, bs: Dim[] | undefined): Dim[] | undefined {
  if (as === undefined || bs === undefined) return undefined;
  if (as.length === 0 || bs.length === 0) ctx.fail('MatMul inputs must have rank ≥ 1');
  const a2 = as.length === 1 ? [1, as[0]] : as;
  const b2 = bs.length === 1 ? [bs[0], 1] : bs;
  const k = a2[a2.length - 1],
    kb = b2[b2.length - 2];
  if (typeof k === 'number' && typeof kb === 'number' && k !== kb) {
    ctx.fail(`inner dimensions differ: ${dimStr(k)} vs ${dimStr(kb)}`);
  }
  const batch = broadcastShapes(ctx, [a2.slice(0, -2), b2.slice(0, -2)]);
  if (batch === undefined) return undefined;
  const out = [...batch];
  if (as.length > 1) out.push(a2[a2.length - 2]);
  if (bs.length > 1) out.push(b2[b2.length - 1]);
  return out;
}

const matMul: OpHandler = {
  op: 'MatMul',
  infer(ctx, inputs) {
    const a = need(ctx, inputs, 0),
      b = need(ctx, inputs, 1);
    requireNumeric(ctx, a.dtype, 'A');
    requireSameDtype(ctx, a.dtype, b.dtype, 'B');
    return [{ dtype: a.dtype, shape: matmulShape(ctx, a.shape, b.shape) }];
  },
  eval(ctx, inputs) {
    const a = need(ctx, inputs, 0),
      b = need(ctx, inputs, 1);
    requireNumeric(ctx, a.dtype, 'A');
    requireSameDtype(ctx, a.dtype, b.dtype, 'B');
    const p = batchedMatmul(ctx, a.dims, a.nums, b.dims, b.nums);
    return [fromF64(a.dtype, p.dims, p.data)];
  },
};

/** A row-major [r,c] matrix as float64, transposed to [c,r] when asked. */
function matrixF64(src: NumArray, r: number, c: number, transpose: boolean): NumArray {
  if (!transpose) return src;
  const t = new Float64Array(r * c);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) t[j * r + i] = src[i * c + j];
  return t;
}

/** Fails unless a concrete or symbolic C shape broadcasts unidirectionally to [M,N]. */
function checkGemmC(ctx: OpContext, cs: readonly Dim[], m: Dim, n: Dim): void {
  if (cs.length > 2) ctx.fail(`C must have rank ≤ 2, got ${cs.length}`);
  const target = [m, n].slice(2 - cs.length);
  cs.forEach((d, i) => {
    const t = target[i];
    if (typeof d === 'number' && typeof t === 'number' && d !== 1 && d !== t) {
      ctx.fail(`C of shape [${cs.map(dimStr)}] does not broadcast to [${dimStr(m)},${dimStr(n)}]`);
    }
  });
}

function gemmDims<D extends Dim>(ctx: OpContext, as: readonly D[], bs: readonly D[]): [D, D, D, D] {
  if (as.length !== 2 || bs.length !== 2) ctx.fail(`Gemm needs 2-D A and B, got ranks ${as.length} and ${bs.length}`);
  const transA = ctx.int('transA', 0) !== 0,
    transB = ctx.int('transB', 0) !== 0;
  const [m, k]: D[] = transA ? [as[1], as[0]] : [as[0], as[1]];
  const [kb, n]: D[] = transB ? [bs[1], bs[0]] : [bs[0], bs[1]];
  return [m, k, kb, n];
}

const gemm: OpHandler = {
  op: 'Gemm',
  infer(ctx, inputs) {
    const a = need(ctx, inputs, 0),
      b = need(ctx, inputs, 1),
      c = inputs[2];
    requireNumeric(ctx, a.dtype, 'A');
    requireSameDtype(ctx, a.dtype, b.dtype, 'B');
    if (c !== undefined) requireSameDtype(ctx, a.dtype, c.dtype, 'C');
    else if (ctx.opset < 11) ctx.fail('input C is required before opset 11');
    if (a.shape === undefined || b.shape === undefined) {
      if (a.shape !== undefined && a.shape.length !== 2) ctx.fail(`Gemm needs 2-D A, got rank ${a.shape.length}`);
      if (b.shape !== undefined && b.shape.length !== 2) ctx.fail(`Gemm needs 2-D B, got rank ${b.shape.length}`);
      return [{ dtype: a.dtype, shape: undefined }];
    }
    const [m, k, kb, n] = gemmDims(ctx, a.shape, b.shape);
    if (typeof k === 'number' && typeof kb === 'number' && k !== kb) ctx.fail(`inner dimensions differ: ${k} vs ${kb}`);
    if (c?.shape !== undefined) checkGemmC(ctx, c.shape, m, n);
    const out: InferOutput = { dtype: a.dtype, shape: [m, n] };
    return [out];
  },
  eval(ctx, inputs) {
    const a = need(ctx, inputs, 0),
      b = need(ctx, inputs, 1),
      c = inputs[2];
    requireNumeric(ctx, a.dtype, 'A');
    requireSameDtype(ctx, a.dtype, b.dtype, 'B');
    const [m, k, kb, n] = gemmDims(ctx, a.dims, b.dims);
    if (k !== kb) ctx.fail(`inner dimensions differ: ${k} vs ${kb}`);
    const alpha = ctx.float('alpha', 1),
      beta = ctx.float('beta', 1);
    const am = matrixF64(a.nums, a.dims[0], a.dims[1], ctx.int('transA', 0) !== 0);
    const bm = matrixF64(b.nums, b.dims[0], b.dims[1], ctx.int('transB', 0) !== 0);
    const out = new Float64Array(m * n);
    matmulInto(am, 0, bm, 0, m, k, n, out, 0);
    if (alpha !== 1) for (let i = 0; i < out.length; i++) out[i] *= alpha;
    if (c !== undefined && beta !== 0) {
      checkGemmC(ctx, c.dims, m, n);
      const ci = broadcastIndex(c.dims, [m, n]);
      const cv = c.nums;
      for (let i = 0; i < out.length; i++) out[i] += beta * cv[ci ? ci[i] : i];
    }
    return [fromF64(a.dtype, [m, n], out)];
  },
};

const INT8S: readonly DType[] = ['int8', 'uint8'];

/** x - zero point as float64, the zero point broadcast numpy-style (a 1-D per-row zero point of A is made [M,1]). */
function subtractZeroPoint(ctx: OpContext, x: Tensor, zp: Tensor | undefined, perRow: boolean): Float64Array {
  const out = Float64Array.from(x.nums);
  if (zp === undefined) return out;
  if (zp.dtype !== x.dtype) ctx.fail(`zero point dtype ${zp.dtype} does not match ${x.dtype}`);
  let zdims = zp.dims;
  if (perRow && zdims.length === 1 && zp.size > 1 && x.rank >= 2) zdims = [zp.size, 1];
  if (!broadcastsTo(zdims, x.dims)) ctx.fail(`zero point of shape [${zp.dims}] does not fit input [${x.dims}]`);
  const idx = broadcastIndex(zdims, x.dims);
  const z = zp.nums;
  for (let i = 0; i < out.length; i++) out[i] -= z[idx ? idx[i] : i];
  return out;
}

const matMulInteger: OpHandler = {
  op: 'MatMulInteger',
  infer(ctx, inputs) {
    const a = need(ctx, inputs, 0),
      b = need(ctx, inputs, 1);
    if (!INT8S.includes(a.dtype) || !INT8S.includes(b.dtype))
      ctx.fail(`inputs must be int8 or uint8, got ${a.dtype} and ${b.dtype}`);
    if (inputs[2] && inputs[2].dtype !== a.dtype)
      ctx.fail(`a_zero_point dtype ${inputs[2].dtype} does not match ${a.dtype}`);
    if (inputs[3] && inputs[3].dtype !== b.dtype)
      ctx.fail(`b_zero_point dtype ${inputs[3].dtype} does not match ${b.dtype}`);
    return [{ dtype: 'int32', shape: matmulShape(ctx, a.shape, b.shape) }];
  },
  eval(ctx, inputs) {
    const a = need(ctx, inputs, 0),
      b = need(ctx, inputs, 1);
    if (!INT8S.includes(a.dtype) || !INT8S.includes(b.dtype))
      ctx.fail(`inputs must be int8 or uint8, got ${a.dtype} and ${b.dtype}`);
    const av = subtractZeroPoint(ctx, a, inputs[2], true);
    const bv = subtractZeroPoint(ctx, b, inputs[3], false);
    const p = batchedMatmul(ctx, a.dims, av, b.dims, bv);
    return [fromF64('int32', p.dims, p.data)];
  },
};

/** Fails unless a scale or zero point holds one value or `n` values (per row of A / per column of B). */
function checkQParam(ctx: OpContext, t: Tensor, n: number, what: string): void {
  if (t.size !== 1 && (t.rank !== 1 || t.size !== n))
    ctx.fail(`${what} of shape [${t.dims}] must hold 1 or ${n} values`);
}

const qLinearMatMul: OpHandler = {
  op: 'QLinearMatMul',
  since: 10,
  infer(ctx, inputs) {
    const a = need(ctx, inputs, 0),
      b = need(ctx, inputs, 3),
      yzp = need(ctx, inputs, 7);
    if (!INT8S.includes(a.dtype) || !INT8S.includes(b.dtype))
      ctx.fail(`inputs must be int8 or uint8, got ${a.dtype} and ${b.dtype}`);
    if (!INT8S.includes(yzp.dtype)) ctx.fail(`y_zero_point must be int8 or uint8, got ${yzp.dtype}`);
    return [{ dtype: yzp.dtype, shape: matmulShape(ctx, a.shape, b.shape) }];
  },
  eval(ctx, inputs) {
    const [a, as, azp, b, bs, bzp, ys, yzp] = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => need(ctx, inputs, i));
    if (!INT8S.includes(a.dtype) || !INT8S.includes(b.dtype))
      ctx.fail(`inputs must be int8 or uint8, got ${a.dtype} and ${b.dtype}`);
    if (!INT8S.includes(yzp.dtype)) ctx.fail(`y_zero_point must be int8 or uint8, got ${yzp.dtype}`);
    if (a.rank < 2 || b.rank < 2) ctx.fail('QLinearMatMul needs inputs of rank ≥ 2');
    const m = a.dims[a.rank - 2],
      n = b.dims[b.rank - 1];
    checkQParam(ctx, as, m, 'a_scale');
    checkQParam(ctx, bs, n, 'b_scale');
    checkQParam(ctx, ys, 1, 'y_scale');
    checkQParam(ctx, yzp, 1, 'y_zero_point');
    const p = batchedMatmul(
      ctx,
      a.dims,
      subtractZeroPoint(ctx, a, azp, true),
      b.dims,
      subtractZeroPoint(ctx, b, bzp, false),
    );
    // As the reference: the multiplier a_scale * b_scale / y_scale in the scales' precision, the rest in float64.
    const r = roundTo(as.dtype);
    const asv = as.nums,
      bsv = bs.nums,
      y0 = ys.nums[0],
      z0 = yzp.nums[0];
    const [lo, hi] = INT_RANGE[yzp.dtype]!;
    const out = p.data;
    for (let e = 0; e < out.length; e++) {
      const j = e % n,
        i = Math.floor(e / n) % m;
      const mult = r(r(asv[asv.length === 1 ? 0 : i] * bsv[bsv.length === 1 ? 0 : j]) / y0);
      const q = rint(out[e] * mult + z0);
      out[e] = q < lo ? lo : q > hi ? hi : q;
    }
    return [fromF64(yzp.dtype, p.dims, out)];
  },
};

export const MATMUL_OPS: OpHandler[] = [matMul, gemm, matMulInteger, qLinearMatMul];
