// Convolution operators: Conv, ConvTranspose and ConvInteger (direct loops over a canonical 3-D geometry).
import type { DType, NumArray } from '../../compiler/dtype.ts';
import { dimAdd, dimMul, shapeStr, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import {
  effectiveKernel,
  geo3,
  needFloat,
  outSize,
  outSizeDim,
  readWindow,
  resolvePads,
  type Geo3,
  type Window,
} from './conv-common.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

// ---- shared checks ----

/** The spatial kernel sizes W's shape implies, when they are all known numbers. */
function kernelFromWeights(w: readonly Dim[] | undefined): number[] | undefined {
  if (!w) return undefined;
  const k = w.slice(2);
  return k.every((d): d is number => typeof d === 'number') ? k : undefined;
}

function readGroup(ctx: OpContext): number {
  const g = ctx.int('group', 1);
  if (g < 1) ctx.fail(`group must be positive, got ${g}`);
  return g;
}

/** Rank checks shared by Conv-like inputs: X [N, C, spatial...], W [M or C, ..., kernel...]. */
function checkRanks(ctx: OpContext, x: readonly Dim[] | undefined, w: readonly Dim[] | undefined): number | undefined {
  if (x && x.length < 3) ctx.fail(`X must have rank >= 3 ([N, C, spatial...]), got ${shapeStr([...x])}`);
  if (w && w.length < 3) ctx.fail(`W must have rank >= 3, got ${shapeStr([...w])}`);
  if (x && w && x.length !== w.length)
    ctx.fail(`X ${shapeStr([...x])} and W ${shapeStr([...w])} must have the same rank`);
  return x ? x.length - 2 : w ? w.length - 2 : undefined;
}

function checkBias(ctx: OpContext, b: InferInput | Tensor | undefined, dtype: DType, m: Dim): void {
  if (!b) return;
  if (b.dtype !== dtype) ctx.fail(`B must be ${dtype}, got ${b.dtype}`);
  const s = b instanceof Tensor ? b.dims : b.shape;
  if (s && (s.length !== 1 || (typeof s[0] === 'number' && typeof m === 'number' && s[0] !== m)))
    ctx.fail(`B must be [${String(m)}], got ${shapeStr([...s])}`);
}

// ---- Conv ----

function inferConv(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1);
  needFloat(ctx, x.dtype, 'X');
  if (w.dtype !== x.dtype) ctx.fail(`W must be ${x.dtype}, got ${w.dtype}`);
  return [{ dtype: x.dtype, shape: convShape(ctx, x.shape, w.shape, inputs[2], x.dtype) }];
}

/** Output shape of Conv/ConvInteger: [N, M, out...]. */
function convShape(
  ctx: OpContext,
  x: Dim[] | undefined,
  w: Dim[] | undefined,
  b: InferInput | undefined,
  biasType: DType,
): Dim[] | undefined {
  const n = checkRanks(ctx, x, w);
  const group = readGroup(ctx);
  const m = w ? w[0]! : unknownDim();
  checkBias(ctx, b, biasType, m);
  if (x && w) checkChannels(ctx, x[1]!, w[1]!, m, group);
  if (!x || n === undefined) return undefined;
  const kernel = ctx.has('kernel_shape') ? undefined : kernelFromWeights(w);
  if (!ctx.has('kernel_shape') && !kernel) return [x[0]!, m, ...x.slice(2).map(() => unknownDim())];
  const win = readWindow(ctx, n, kernel);
  return [x[0]!, m, ...x.slice(2).map((d, i) => outSizeDim(d, win, i))];
}

/** Conv output shape without a bias check (QLinearConv, DeformConv). */
export function convOutputShape(ctx: OpContext, x: Dim[] | undefined, w: Dim[] | undefined): Dim[] | undefined {
  return convShape(ctx, x, w, undefined, 'int32');
}

function checkChannels(ctx: OpContext, c: Dim, wc: Dim, m: Dim, group: number): void {
  if (typeof c === 'number' && typeof wc === 'number' && c !== wc * group)
    ctx.fail(`X has ${c} channels but W expects ${wc} x group ${group}`);
  if (typeof m === 'number' && m % group !== 0)
    ctx.fail(`W's ${m} output channels are not divisible by group ${group}`);
}

/** Geometry of a forward convolution at run time. */
function convGeometry(ctx: OpContext, x: Tensor, w: Tensor): { geo: Geo3; group: number } {
  checkRanks(ctx, x.dims, w.dims);
  const group = readGroup(ctx);
  checkChannels(ctx, x.dims[1]!, w.dims[1]!, w.dims[0]!, group);
  const win = readWindow(ctx, x.rank - 2, w.dims.slice(2));
  if (win.kernel.some((k, i) => k !== w.dims[i + 2]))
    ctx.fail(`kernel_shape [${win.kernel}] does not match W [${w.dims}]`);
  const inS = x.dims.slice(2);
  const outS = inS.map((d, i) => outSize(d, win, i));
  return { geo: geo3(ctx, inS, win, outS, resolvePads(inS, win, outS)), group };
}

/**
 * Direct convolution: y[n, m, o] = bias[m] + Σ (x[n, c, o*s - p + k*d] - xZero) * (w[m, c, k] - wZero[m]).
 * Input positions outside X contribute nothing (zero padding after the zero-point shift).
 */
function convLoops(
  x: NumArray,
  xDims: readonly number[],
  w: NumArray,
  m: number,
  group: number,
  g: Geo3,
  bias: NumArray | undefined,
  xZero: number,
  wZero: ArrayLike<number> | undefined,
): Float64Array {
  const batch = xDims[0]!,
    c = xDims[1]!;
  const cg = c / group,
    mg = m / group;
  const [ID, IH, IW] = g.inS,
    [OD, OH, OW] = g.outS,
    [KD, KH, KW] = g.k;
  const inPlane = ID * IH * IW,
    outPlane = OD * OH * OW,
    kSize = KD * KH * KW;
  const y = new Float64Array(batch * m * outPlane);
  for (let n = 0; n < batch; n++) {
    for (let oc = 0; oc < m; oc++) {
      const grp = Math.floor(oc / mg);
      const b0 = bias ? bias[oc]! : 0;
      const wz = wZero ? (wZero.length === 1 ? wZero[0]! : wZero[oc]!) : 0;
      const yBase = (n * m + oc) * outPlane;
      for (let od = 0; od < OD; od++) {
        const d0 = od * g.s[0] - g.p[0];
        for (let oh = 0; oh < OH; oh++) {
          const h0 = oh * g.s[1] - g.p[1];
          for (let ow = 0; ow < OW; ow++) {
            const w0 = ow * g.s[2] - g.p[2];
            let acc = b0;
            for (let ci = 0; ci < cg; ci++) {
              const xBase = (n * c + grp * cg + ci) * inPlane;
              const wBase = (oc * cg + ci) * kSize;
              for (let kd = 0; kd < KD; kd++) {
                const id = d0 + kd * g.d[0];
                if (id < 0 || id >= ID) continue;
                for (let kh = 0; kh < KH; kh++) {
                  const ih = h0 + kh * g.d[1];
                  if (ih < 0 || ih >= IH) continue;
                  const xRow = xBase + (id * IH + ih) * IW;
                  const wRow = wBase + (kd * KH + kh) * KW;
                  for (let kw = 0; kw < KW; kw++) {
                    const iw = w0 + kw * g.d[2];
                    if (iw < 0 || iw >= IW) continue;
                    acc += (x[xRow + iw]! - xZero) * (w[wRow + kw]! - wz);
                  }
                }
              }
            }
            y[yBase + (od * OH + oh) * OW + ow] = acc;
          }
        }
      }
    }
  }
  return y;
}

function evalConv(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1),
    b = inputs[2];
  needFloat(ctx, x.dtype, 'X');
  if (w.dtype !== x.dtype) ctx.fail(`W must be ${x.dtype}, got ${w.dtype}`);
  checkBias(ctx, b, x.dtype, w.dims[0]!);
  const { geo, group } = convGeometry(ctx, x, w);
  const m = w.dims[0]!;
  const y = convLoops(x.nums, x.dims, w.nums, m, group, geo, b?.nums, 0, undefined);
  return [Tensor.fromNumbers(x.dtype, outDims(x.dims, m, x.rank - 2, geo), y)];
}

/** [N, M, spatial out...] from the canonical 3-D geometry. */
function outDims(xDims: readonly number[], m: number, n: number, g: Geo3): number[] {
  return [xDims[0]!, m, ...g.outS.slice(3 - n)];
}

// ---- ConvInteger ----

const INT8ISH: DType[] = ['int8', 'uint8'];

function inferConvInteger(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1);
  if (!INT8ISH.includes(x.dtype) || !INT8ISH.includes(w.dtype))
    ctx.fail(`x and w must be int8 or uint8, got ${x.dtype} and ${w.dtype}`);
  if (inputs[2] && inputs[2].dtype !== x.dtype) ctx.fail(`x_zero_point must be ${x.dtype}, got ${inputs[2].dtype}`);
  if (inputs[3] && inputs[3].dtype !== w.dtype) ctx.fail(`w_zero_point must be ${w.dtype}, got ${inputs[3].dtype}`);
  return [{ dtype: 'int32', shape: convShape(ctx, x.shape, w.shape, undefined, 'int32') }];
}

function evalConvInteger(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1),
    xz = inputs[2],
    wz = inputs[3];
  if (!INT8ISH.includes(x.dtype) || !INT8ISH.includes(w.dtype))
    ctx.fail(`x and w must be int8 or uint8, got ${x.dtype} and ${w.dtype}`);
  const m = w.dims[0]!;
  if (xz && xz.size !== 1) ctx.fail(`x_zero_point must be a scalar, got [${xz.dims}]`);
  if (wz && wz.size !== 1 && wz.size !== m)
    ctx.fail(`w_zero_point must be a scalar or have ${m} elements, got [${wz.dims}]`);
  const { geo, group } = convGeometry(ctx, x, w);
  const y = convLoops(x.nums, x.dims, w.nums, m, group, geo, undefined, xz ? xz.nums[0]! : 0, wz ? wz.nums : undefined);
  return [Tensor.fromNumbers('int32', outDims(x.dims, m, x.rank - 2, geo), y)];
}

/** Integer convolution with zero points and an optional int32 bias; returns the exact sums and output dims. */
export function convForQuantized(
  ctx: OpContext,
  x: Tensor,
  w: Tensor,
  xZero: number,
  wZero: NumArray | undefined,
  bias: NumArray | undefined,
): { acc: Float64Array; dims: number[] } {
  const m = w.dims[0]!;
  if (wZero && wZero.length !== 1 && wZero.length !== m)
    ctx.fail(`w_zero_point must be a scalar or have ${m} elements, got ${wZero.length}`);
  if (bias && bias.length !== m) ctx.fail(`B must have ${m} elements, got ${bias.length}`);
  const { geo, group } = convGeometry(ctx, x, w);
  return {
    acc: convLoops(x.nums, x.dims, w.nums, m, group, geo, bias, xZero, wZero),
    dims: outDims(x.dims, m, x.rank - 2, geo),
  };
}

// ---- ConvTranspose ----

/** Output spatial sizes and begin pads of a transposed convolution. */
interface TransposeGeometry {
  win: Window;
  outS: number[];
  begin: number[];
}

function readOutputPadding(ctx: OpContext, n: number): number[] {
  const op = ctx.ints('output_padding', []);
  if (op.length === 0) return new Array<number>(n).fill(0);
  if (op.length !== n) ctx.fail(`output_padding has ${op.length} values, expected ${n}`);
  return op;
}

/** output_shape may list only the spatial dims or the whole shape; returns the spatial part. */
function readOutputShape(ctx: OpContext, n: number): number[] | undefined {
  if (!ctx.has('output_shape')) return undefined;
  const os = ctx.ints('output_shape');
  if (os.length === n) return os;
  if (os.length === n + 2) return os.slice(2);
  return ctx.fail(`output_shape has ${os.length} values, expected ${n}`);
}

function transposeGeometry(ctx: OpContext, inS: number[], kernel: number[]): TransposeGeometry {
  const n = inS.length;
  const win = readWindow(ctx, n, kernel);
  const opad = readOutputPadding(ctx, n);
  const given = readOutputShape(ctx, n);
  const same = win.autoPad === 'SAME_UPPER' || win.autoPad === 'SAME_LOWER';
  const full = inS.map(
    (d, i) => win.strides[i]! * (d - 1) + opad[i]! + effectiveKernel(win.kernel[i]!, win.dilations[i]!),
  );
  if (same) {
    const outS = given ?? inS.map((d, i) => d * win.strides[i]!);
    const begin = full.map((f, i) => {
      const total = f - outS[i]!;
      const half = Math.floor(total / 2);
      return win.autoPad === 'SAME_UPPER' ? half : total - half;
    });
    return { win, outS, begin };
  }
  const begin = win.pads.slice(0, n);
  const outS = given ?? full.map((f, i) => f - win.pads[i]! - win.pads[i + n]!);
  return { win, outS, begin };
}

function inferConvTranspose(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1);
  needFloat(ctx, x.dtype, 'X');
  if (w.dtype !== x.dtype) ctx.fail(`W must be ${x.dtype}, got ${w.dtype}`);
  const n = checkRanks(ctx, x.shape, w.shape);
  const group = readGroup(ctx);
  const m: Dim = w.shape ? dimMul(w.shape[1]!, group) : unknownDim();
  checkBias(ctx, inputs[2], x.dtype, m);
  if (
    x.shape &&
    w.shape &&
    typeof x.shape[1] === 'number' &&
    typeof w.shape[0] === 'number' &&
    x.shape[1] !== w.shape[0]
  ) {
    ctx.fail(`X has ${x.shape[1]} channels but W has ${w.shape[0]}`);
  }
  if (!x.shape || n === undefined) return [{ dtype: x.dtype }];
  const kernel = ctx.has('kernel_shape') ? ctx.ints('kernel_shape') : kernelFromWeights(w.shape);
  const spatial = x.shape.slice(2);
  if (!kernel) return [{ dtype: x.dtype, shape: [x.shape[0]!, m, ...spatial.map(() => unknownDim())] }];
  if (spatial.every((d): d is number => typeof d === 'number')) {
    const tg = transposeGeometry(ctx, spatial, kernel);
    return [{ dtype: x.dtype, shape: [x.shape[0]!, m, ...tg.outS] }];
  }
  return [{ dtype: x.dtype, shape: [x.shape[0]!, m, ...symbolicTransposeOut(ctx, spatial, kernel)] }];
}

/** Transposed-conv output sizes for symbolic inputs. */
function symbolicTransposeOut(ctx: OpContext, spatial: Dim[], kernel: number[]): Dim[] {
  const n = spatial.length;
  const win = readWindow(ctx, n, kernel);
  const opad = readOutputPadding(ctx, n);
  const given = readOutputShape(ctx, n);
  if (given) return given;
  return spatial.map((d, i) => {
    const s = win.strides[i]!;
    if (win.autoPad === 'SAME_UPPER' || win.autoPad === 'SAME_LOWER') return dimMul(d, s);
    return dimAdd(
      dimMul(d, s),
      -s + opad[i]! + effectiveKernel(win.kernel[i]!, win.dilations[i]!) - win.pads[i]! - win.pads[i + n]!,
    );
  });
}

function evalConvTranspose(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1),
    b = inputs[2];
  needFloat(ctx, x.dtype, 'X');
  if (w.dtype !== x.dtype) ctx.fail(`W must be ${x.dtype}, got ${w.dtype}`);
  checkRanks(ctx, x.dims, w.dims);
  const group = readGroup(ctx);
  if (x.dims[1] !== w.dims[0]) ctx.fail(`X has ${x.dims[1]} channels but W has ${w.dims[0]}`);
  if (x.dims[1]! % group !== 0) ctx.fail(`X's ${x.dims[1]} channels are not divisible by group ${group}`);
  const m = w.dims[1]! * group;
  checkBias(ctx, b, x.dtype, m);
  const inS = x.dims.slice(2);
  const tg = transposeGeometry(ctx, inS, w.dims.slice(2));
  if (tg.win.kernel.some((k, i) => k !== w.dims[i + 2]))
    ctx.fail(`kernel_shape [${tg.win.kernel}] does not match W [${w.dims}]`);
  const geo = geo3(ctx, inS, tg.win, tg.outS, { begin: tg.begin, end: tg.begin.map(() => 0) });
  const y = transposeLoops(x.nums, x.dims, w.nums, m, group, geo, b?.nums);
  return [Tensor.fromNumbers(x.dtype, outDims(x.dims, m, x.rank - 2, geo), y)];
}

/** Scatter form: each input element adds x * w[c, m, k] at output position i*s - p + k*d. */
function transposeLoops(
  x: NumArray,
  xDims: readonly number[],
  w: NumArray,
  m: number,
  group: number,
  g: Geo3,
  bias: NumArray | undefined,
): Float64Array {
  const batch = xDims[0]!,
    c = xDims[1]!;
  const cg = c / group,
    mg = m / group;
  const [ID, IH, IW] = g.inS,
    [OD, OH, OW] = g.outS,
    [KD, KH, KW] = g.k;
  const inPlane = ID * IH * IW,
    outPlane = OD * OH * OW,
    kSize = KD * KH * KW;
  const y = new Float64Array(batch * m * outPlane);
  if (bias)
    for (let n = 0; n < batch; n++)
      for (let oc = 0; oc < m; oc++) y.fill(bias[oc]!, (n * m + oc) * outPlane, (n * m + oc + 1) * outPlane);
  for (let n = 0; n < batch; n++) {
    for (let ic = 0; ic < c; ic++) {
      const grp = Math.floor(ic / cg);
      const xBase = (n * c + ic) * inPlane;
      for (let id = 0; id < ID; id++) {
        for (let ih = 0; ih < IH; ih++) {
          for (let iw = 0; iw < IW; iw++) {
            const xv = x[xBase + (id * IH + ih) * IW + iw]!;
            for (let mi = 0; mi < mg; mi++) {
              const oc = grp * mg + mi;
              const yBase = (n * m + oc) * outPlane;
              const wBase = (ic * mg + mi) * kSize;
              for (let kd = 0; kd < KD; kd++) {
                const od = id * g.s[0] - g.p[0] + kd * g.d[0];
                if (od < 0 || od >= OD) continue;
                for (let kh = 0; kh < KH; kh++) {
                  const oh = ih * g.s[1] - g.p[1] + kh * g.d[1];
                  if (oh < 0 || oh >= OH) continue;
                  const yRow = yBase + (od * OH + oh) * OW;
                  const wRow = wBase + (kd * KH + kh) * KW;
                  for (let kw = 0; kw < KW; kw++) {
                    const ow = iw * g.s[2] - g.p[2] + kw * g.d[2];
                    if (ow < 0 || ow >= OW) continue;
                    y[yRow + ow] += xv * w[wRow + kw]!;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return y;
}

export const CONV_CONV_OPS: OpHandler[] = [
  { op: 'Conv', infer: inferConv, eval: evalConv },
  { op: 'ConvTranspose', infer: inferConvTranspose, eval: evalConvTranspose },
  { op: 'ConvInteger', since: 10, infer: inferConvInteger, eval: evalConvInteger },
];
