// Linear quantization: QuantizeLinear, DequantizeLinear (per-tensor, per-axis, blocked) and DynamicQuantizeLinear.
import { INT_RANGE, isFloat, type DType } from '../../compiler/dtype.ts';
import { Tensor, stridesOf } from '../../compiler/tensor.ts';
import { dtypeAttr, rint, roundTo } from './math-common.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { axisOf, need } from './util.ts';

const QUANT_TYPES: readonly DType[] = ['uint8', 'int8', 'uint16', 'int16'];
const DEQUANT_TYPES: readonly DType[] = ['uint8', 'int8', 'uint16', 'int16', 'int32'];

/**
 * For each element of x, the index of its scale / zero point: undefined for one shared value; per-axis for a 1-D
 * parameter along `axis`; blocked when block_size > 0 (parameter of x's rank, `axis` divided into blocks).
 */
function paramIndex(ctx: OpContext, p: Tensor, dims: readonly number[], blockSize: number): Int32Array | undefined {
  if (p.size === 1 && p.rank <= 1) return undefined;
  const rank = dims.length;
  const axis = axisOf(ctx, ctx.int('axis', 1), rank);
  const n = dims.reduce((a, b) => a * b, 1);
  const idx = new Int32Array(n);
  if (blockSize <= 0) {
    if (p.rank !== 1 || p.size !== dims[axis])
      ctx.fail(`scale of shape [${p.dims}] does not fit axis ${axis} of input [${dims}]`);
    const inner = stridesOf(dims)[axis],
      len = dims[axis];
    for (let i = 0; i < n; i++) idx[i] = Math.floor(i / inner) % len;
    return idx;
  }
  const fits =
    p.rank === rank && p.dims.every((d, i) => (i === axis ? d === Math.ceil(dims[i] / blockSize) : d === dims[i]));
  if (!fits)
    ctx.fail(
      `blocked scale of shape [${p.dims}] does not fit input [${dims}] with block_size ${blockSize} on axis ${axis}`,
    );
  const pst = stridesOf(p.dims);
  const ctr = new Array<number>(rank).fill(0);
  for (let i = 0; i < n; i++) {
    let off = 0;
    for (let d = 0; d < rank; d++) off += (d === axis ? Math.floor(ctr[d] / blockSize) : ctr[d]) * pst[d];
    idx[i] = off;
    for (let d = rank - 1; d >= 0; d--) {
      if (++ctr[d] < dims[d]) break;
      ctr[d] = 0;
    }
  }
  return idx;
}

function blockSizeOf(ctx: OpContext): number {
  const b = ctx.opset >= 21 ? ctx.int('block_size', 0) : 0;
  if (b < 0) ctx.fail(`block_size must be ≥ 0, got ${b}`);
  return b;
}

/** The quantized dtype: the zero point's, else output_dtype (opset 21+), else uint8. */
function quantDtype(ctx: OpContext, zp: DType | undefined): DType {
  const code = ctx.opset >= 21 ? ctx.int('output_dtype', 0) : 0;
  const attr = code !== 0 ? dtypeAttr(ctx, code, 'output_dtype') : undefined;
  if (zp !== undefined && attr !== undefined && zp !== attr)
    ctx.fail(`output_dtype ${attr} does not match zero point dtype ${zp}`);
  const d = zp ?? attr ?? 'uint8';
  if (!QUANT_TYPES.includes(d)) ctx.fail(`cannot quantize to ${d}`);
  return d;
}

/** numpy's result dtype of x / scale (or the precision attribute's). */
function divisionDtype(ctx: OpContext, x: DType, scale: DType): DType {
  const code = ctx.opset >= 23 ? ctx.int('precision', 0) : 0;
  if (code !== 0) return dtypeAttr(ctx, code, 'precision');
  if (x === 'float64' || scale === 'float64' || !isFloat(x)) return 'float64';
  return x === scale ? x : 'float32';
}

function checkScale(ctx: OpContext, scale: InferInput | Tensor, zp: InferInput | Tensor | undefined): void {
  if (!isFloat(scale.dtype)) ctx.fail(`scale must be a float tensor, got ${scale.dtype}`);
  if (zp instanceof Tensor && scale instanceof Tensor && (zp.size !== scale.size || zp.rank !== scale.rank)) {
    ctx.fail(`zero point shape [${zp.dims}] differs from scale shape [${scale.dims}]`);
  }
}

const quantizeLinear: OpHandler = {
  op: 'QuantizeLinear',
  since: 10,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1),
      zp = inputs[2];
    if (!isFloat(x.dtype) && x.dtype !== 'int32') ctx.fail(`x must be float or int32, got ${x.dtype}`);
    checkScale(ctx, scale, zp);
    return [{ dtype: quantDtype(ctx, zp?.dtype), shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1),
      zp = inputs[2];
    if (!isFloat(x.dtype) && x.dtype !== 'int32') ctx.fail(`x must be float or int32, got ${x.dtype}`);
    checkScale(ctx, scale, zp);
    const out = quantDtype(ctx, zp?.dtype);
    const [lo, hi] = INT_RANGE[out]!;
    const bs = blockSizeOf(ctx);
    const idx = paramIndex(ctx, scale, x.dims, bs);
    const round = roundTo(divisionDtype(ctx, x.dtype, scale.dtype));
    const xv = x.nums,
      sv = scale.nums,
      zv = zp?.nums;
    const y = new Float64Array(x.size);
    for (let i = 0; i < y.length; i++) {
      const p = idx ? idx[i] : 0;
      const q = rint(round(xv[i] / sv[p])) + (zv ? zv[p] : 0);
      y[i] = q !== q ? lo : q < lo ? lo : q > hi ? hi : q;
    }
    return [Tensor.fromNumbers(out, x.dims, y)];
  },
};

/** The dequantized dtype: output_dtype (opset 23+), else the scale's. */
function dequantDtype(ctx: OpContext, scale: DType): DType {
  const code = ctx.opset >= 23 ? ctx.int('output_dtype', 0) : 0;
  const d = code !== 0 ? dtypeAttr(ctx, code, 'output_dtype') : scale;
  if (!isFloat(d)) ctx.fail(`cannot dequantize to ${d}`);
  return d;
}

function checkDequantInput(ctx: OpContext, x: DType, zp: DType | undefined): void {
  if (!DEQUANT_TYPES.includes(x)) ctx.fail(`cannot dequantize ${x}`);
  if (zp !== undefined && zp !== x) ctx.fail(`zero point dtype ${zp} does not match x dtype ${x}`);
}

const dequantizeLinear: OpHandler = {
  op: 'DequantizeLinear',
  since: 10,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1),
      zp = inputs[2];
    checkDequantInput(ctx, x.dtype, zp?.dtype);
    checkScale(ctx, scale, zp);
    return [{ dtype: dequantDtype(ctx, scale.dtype), shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1),
      zp = inputs[2];
    checkDequantInput(ctx, x.dtype, zp?.dtype);
    checkScale(ctx, scale, zp);
    const out = dequantDtype(ctx, scale.dtype);
    const idx = paramIndex(ctx, scale, x.dims, blockSizeOf(ctx));
    // As the reference: x - zero point in float32, times the scale in float32 (float64 for a float64 scale).
    const prod = roundTo(scale.dtype === 'float64' ? 'float64' : 'float32');
    const xv = x.nums,
      sv = scale.nums,
      zv = zp?.nums;
    const y = new Float64Array(x.size);
    for (let i = 0; i < y.length; i++) {
      const p = idx ? idx[i] : 0;
      const dx = Math.fround(Math.fround(xv[i]) - (zv ? zv[p] : 0));
      y[i] = prod(dx * sv[p]);
    }
    return [Tensor.fromNumbers(out, x.dims, y)];
  },
};

const dynamicQuantizeLinear: OpHandler = {
  op: 'DynamicQuantizeLinear',
  since: 11,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.dtype !== 'float32') ctx.fail(`x must be float32, got ${x.dtype}`);
    return [
      { dtype: 'uint8', shape: x.shape },
      { dtype: 'float32', shape: [] },
      { dtype: 'uint8', shape: [] },
    ];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.dtype !== 'float32') ctx.fail(`x must be float32, got ${x.dtype}`);
    const f = Math.fround,
      xv = x.nums;
    let max = 0,
      min = 0;
    for (let i = 0; i < xv.length; i++) {
      if (xv[i] > max) max = xv[i];
      if (xv[i] < min) min = xv[i];
    }
    const scale = max === min ? 1 : f(f(max - min) / 255);
    const zp = rint(Math.max(0, Math.min(255, f(0 - f(min / scale)))));
    const y = new Float64Array(xv.length);
    for (let i = 0; i < y.length; i++) y[i] = Math.max(0, Math.min(255, rint(f(xv[i] / scale)) + zp));
    return [Tensor.fromNumbers('uint8', x.dims, y), Tensor.scalar('float32', scale), Tensor.scalar('uint8', zp)];
  },
};

export const QUANT_OPS: OpHandler[] = [quantizeLinear, dequantizeLinear, dynamicQuantizeLinear];
