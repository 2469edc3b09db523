// Less common conv-family operators: QLinearConv, DeformConv (2-D), MaxUnpool and CausalConvWithState.
import { converter, Tensor } from '../../compiler/tensor.ts';
import { dimAdd, dimMul, shapeStr, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { convForQuantized, convOutputShape } from './conv-conv.ts';
import { effectiveKernel, needFloat, outSize, readWindow } from './conv-common.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { intsOf, need } from './util.ts';

// ---- QLinearConv ----

/** Round half to even, as numpy's round. */
function roundHalfEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

function inferQLinearConv(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 3);
  need(ctx, inputs, 1);
  need(ctx, inputs, 4);
  need(ctx, inputs, 6);
  if (x.dtype !== 'int8' && x.dtype !== 'uint8') ctx.fail(`x must be int8 or uint8, got ${x.dtype}`);
  if (w.dtype !== 'int8' && w.dtype !== 'uint8') ctx.fail(`w must be int8 or uint8, got ${w.dtype}`);
  const yz = inputs[7];
  if (inputs[8] && inputs[8].dtype !== 'int32') ctx.fail(`B must be int32, got ${inputs[8].dtype}`);
  return [{ dtype: yz ? yz.dtype : x.dtype, shape: convOutputShape(ctx, x.shape, w.shape) }];
}

function evalQLinearConv(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const x = need(ctx, inputs, 0),
    xs = need(ctx, inputs, 1),
    xz = inputs[2];
  const w = need(ctx, inputs, 3),
    ws = need(ctx, inputs, 4),
    wz = inputs[5];
  const ys = need(ctx, inputs, 6),
    yz = inputs[7],
    b = inputs[8];
  if (x.dtype !== 'int8' && x.dtype !== 'uint8') ctx.fail(`x must be int8 or uint8, got ${x.dtype}`);
  if (w.dtype !== 'int8' && w.dtype !== 'uint8') ctx.fail(`w must be int8 or uint8, got ${w.dtype}`);
  const m = w.dims[0]!;
  if (xs.size !== 1 || ys.size !== 1 || (xz && xz.size !== 1) || (yz && yz.size !== 1))
    ctx.fail('x and y scales and zero points must be scalars');
  if (ws.size !== 1 && ws.size !== m) ctx.fail(`w_scale must be a scalar or have ${m} elements, got [${ws.dims}]`);
  if (b && b.dtype !== 'int32') ctx.fail(`B must be int32, got ${b.dtype}`);
  const { acc, dims } = convForQuantized(ctx, x, w, xz ? xz.nums[0]! : 0, wz?.nums, b?.nums);
  const outType = yz ? yz.dtype : x.dtype;
  const [lo, hi] = outType === 'int8' ? [-128, 127] : [0, 255];
  const zero = yz ? yz.nums[0]! : 0;
  const plane = acc.length / (dims[0]! * m);
  const out = new Float64Array(acc.length);
  for (let i = 0; i < acc.length; i++) {
    const oc = Math.floor(i / plane) % m;
    const scale = Math.fround(Math.fround(xs.nums[0]! * ws.nums[ws.size === 1 ? 0 : oc]!) / ys.nums[0]!);
    out[i] = roundHalfEven(Math.min(hi, Math.max(lo, acc[i]! * scale + zero)));
  }
  return [Tensor.fromNumbers(outType, dims, out)];
}

// ---- DeformConv (2-D) ----

function inferDeformConv(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1),
    off = need(ctx, inputs, 2);
  needFloat(ctx, x.dtype, 'X');
  for (const [i, name] of [
    [1, 'W'],
    [2, 'offset'],
    [3, 'B'],
    [4, 'mask'],
  ] as const) {
    const t = inputs[i];
    if (t && t.dtype !== x.dtype) ctx.fail(`${name} must be ${x.dtype}, got ${t.dtype}`);
  }
  if (x.shape && x.shape.length !== 4) ctx.fail(`only 2-D DeformConv is supported, X is ${shapeStr(x.shape)}`);
  const m: Dim = w.shape ? w.shape[0]! : unknownDim();
  if (!x.shape) return [{ dtype: x.dtype }];
  if (off.shape?.length === 4) return [{ dtype: x.dtype, shape: [x.shape[0]!, m, off.shape[2]!, off.shape[3]!] }];
  return [{ dtype: x.dtype, shape: convOutputShape(ctx, x.shape, w.shape) }];
}

/** Bilinear sample of one plane at real coordinates (h, w); taps outside the plane read as zero. */
function bilinear(x: ArrayLike<number>, base: number, H: number, W: number, h: number, w: number): number {
  const h0 = Math.floor(h),
    w0 = Math.floor(w);
  const dh = h - h0,
    dw = w - w0;
  let v = 0;
  for (let a = 0; a < 2; a++) {
    const hh = h0 + a;
    if (hh < 0 || hh >= H) continue;
    const fh = a === 0 ? 1 - dh : dh;
    for (let c = 0; c < 2; c++) {
      const ww = w0 + c;
      if (ww < 0 || ww >= W) continue;
      v += fh * (c === 0 ? 1 - dw : dw) * x[base + hh * W + ww]!;
    }
  }
  return v;
}

function evalDeformConv(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1),
    off = need(ctx, inputs, 2),
    b = inputs[3],
    mask = inputs[4];
  needFloat(ctx, x.dtype, 'X');
  if (x.rank !== 4 || w.rank !== 4 || off.rank !== 4)
    ctx.fail(`only 2-D DeformConv is supported, got X [${x.dims}], W [${w.dims}], offset [${off.dims}]`);
  const [N, C, H, W] = x.dims as [number, number, number, number];
  const [M, Cg, KH, KW] = w.dims as [number, number, number, number];
  const group = ctx.int('group', 1),
    og = ctx.int('offset_group', 1);
  if (group < 1 || C !== Cg * group || M % group !== 0)
    ctx.fail(`X [${x.dims}] and W [${w.dims}] do not match group ${group}`);
  if (og < 1 || C % og !== 0) ctx.fail(`X's ${C} channels are not divisible by offset_group ${og}`);
  const win = readWindow(ctx, 2, [KH, KW]);
  if (win.autoPad !== 'NOTSET') ctx.fail('DeformConv does not take auto_pad');
  const OH = outSize(H, win, 0),
    OW = outSize(W, win, 1);
  if (off.dims.join(',') !== [N, og * KH * KW * 2, OH, OW].join(','))
    ctx.fail(`offset must be [${N},${og * KH * KW * 2},${OH},${OW}], got [${off.dims}]`);
  if (mask && mask.dims.join(',') !== [N, og * KH * KW, OH, OW].join(','))
    ctx.fail(`mask must be [${N},${og * KH * KW},${OH},${OW}], got [${mask.dims}]`);
  if (b && (b.rank !== 1 || b.dims[0] !== M)) ctx.fail(`B must be [${M}], got [${b.dims}]`);
  const mg = M / group,
    cPerOg = C / og,
    plane = OH * OW;
  const xd = x.nums,
    wd = w.nums,
    od = off.nums,
    md = mask?.nums;
  const y = new Float64Array(N * M * plane);
  for (let n = 0; n < N; n++) {
    for (let oc = 0; oc < M; oc++) {
      const g = Math.floor(oc / mg);
      for (let oh = 0; oh < OH; oh++) {
        for (let ow = 0; ow < OW; ow++) {
          let acc = b ? b.nums[oc]! : 0;
          for (let ci = 0; ci < Cg; ci++) {
            const ic = g * Cg + ci;
            const o = Math.floor(ic / cPerOg);
            const xBase = (n * C + ic) * H * W;
            for (let kh = 0; kh < KH; kh++) {
              for (let kw = 0; kw < KW; kw++) {
                const k = (o * KH + kh) * KW + kw;
                const dh = od[(n * og * KH * KW + k) * 2 * plane + oh * OW + ow]!;
                const dw = od[((n * og * KH * KW + k) * 2 + 1) * plane + oh * OW + ow]!;
                const hp = oh * win.strides[0]! - win.pads[0]! + kh * win.dilations[0]! + dh;
                const wp = ow * win.strides[1]! - win.pads[1]! + kw * win.dilations[1]! + dw;
                const mk = md ? md[(n * og * KH * KW + k) * plane + oh * OW + ow]! : 1;
                acc += bilinear(xd, xBase, H, W, hp, wp) * wd[((oc * Cg + ci) * KH + kh) * KW + kw]! * mk;
              }
            }
          }
          y[(n * M + oc) * plane + oh * OW + ow] = acc;
        }
      }
    }
  }
  return [Tensor.fromNumbers(x.dtype, [N, M, OH, OW], y)];
}

// ---- MaxUnpool ----

/** The unpooled spatial size MaxUnpool infers from the pooling window: (in-1)*s - pads + k. */
function unpooledSizes(ctx: OpContext, inS: readonly number[]): number[] {
  const win = readWindow(ctx, inS.length);
  const n = inS.length;
  return inS.map(
    (d, i) => (d - 1) * win.strides[i]! - win.pads[i]! - win.pads[i + n]! + effectiveKernel(win.kernel[i]!, 1),
  );
}

function inferMaxUnpool(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const x = need(ctx, inputs, 0),
    idx = need(ctx, inputs, 1),
    os = inputs[2];
  needFloat(ctx, x.dtype, 'X');
  if (idx.dtype !== 'int64') ctx.fail(`I must be int64, got ${idx.dtype}`);
  if (os?.sym) return [{ dtype: x.dtype, shape: [...os.sym] }];
  if (os?.value) return [{ dtype: x.dtype, shape: intsOf(os.value) }];
  if (os) return [{ dtype: x.dtype, shape: x.shape?.map(() => unknownDim()) }];
  if (!x.shape) return [{ dtype: x.dtype }];
  const spatial = x.shape.slice(2);
  if (spatial.every((d): d is number => typeof d === 'number'))
    return [{ dtype: x.dtype, shape: [x.shape[0]!, x.shape[1]!, ...unpooledSizes(ctx, spatial)] }];
  const win = readWindow(ctx, spatial.length);
  const n = spatial.length;
  const sizes = spatial.map((d, i) =>
    dimAdd(dimMul(d, win.strides[i]!), win.kernel[i]! - win.strides[i]! - win.pads[i]! - win.pads[i + n]!),
  );
  return [{ dtype: x.dtype, shape: [x.shape[0]!, x.shape[1]!, ...sizes] }];
}

function evalMaxUnpool(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const x = need(ctx, inputs, 0),
    idx = need(ctx, inputs, 1),
    os = inputs[2];
  needFloat(ctx, x.dtype, 'X');
  if (x.rank < 3) ctx.fail(`X must have rank >= 3, got [${x.dims}]`);
  if (idx.dims.join(',') !== x.dims.join(',')) ctx.fail(`I [${idx.dims}] must have X's shape [${x.dims}]`);
  const inferred = [x.dims[0]!, x.dims[1]!, ...unpooledSizes(ctx, x.dims.slice(2))];
  const outDims = os ? intsOf(os) : inferred;
  if (outDims.length !== x.rank) ctx.fail(`output_shape must have ${x.rank} values, got [${outDims}]`);
  if (outDims.some((d, i) => d < inferred[i]!))
    ctx.fail(`output_shape [${outDims}] is smaller than the unpooled shape [${inferred}]`);
  const total = inferred.reduce((a, c) => a * c, 1);
  const flat = new Float64Array(total);
  for (let i = 0; i < x.size; i++) {
    const j = idx.nums[i]!;
    if (j < 0 || j >= total) ctx.fail(`index ${j} is outside the unpooled tensor of ${total} elements`);
    flat[j] = x.nums[i]!;
  }
  return [Tensor.fromNumbers(x.dtype, outDims, embedTopLeft(flat, inferred, outDims))];
}

/** Places a row-major tensor of `inner` dims at the origin of a zero tensor of `outer` dims. */
function embedTopLeft(src: Float64Array, inner: number[], outer: number[]): Float64Array {
  const out = new Float64Array(outer.reduce((a, c) => a * c, 1));
  const r = inner.length;
  const last = inner[r - 1]!;
  const rows = src.length / Math.max(last, 1);
  for (let row = 0; row < rows; row++) {
    let rem = row,
      dst = 0,
      mul = outer[r - 1]!;
    for (let a = r - 2; a >= 0; a--) {
      const c = rem % inner[a]!;
      rem = Math.floor(rem / inner[a]!);
      dst += c * mul;
      mul *= outer[a]!;
    }
    for (let e = 0; e < last; e++) out[dst + e] = src[row * last + e]!;
  }
  return out;
}

// ---- CausalConvWithState ----

function readActivation(ctx: OpContext): string {
  const a = ctx.string('activation', 'none');
  if (a !== 'none' && a !== 'silu' && a !== 'swish') ctx.fail(`activation must be none, silu or swish, got '${a}'`);
  return a;
}

function inferCausalConv(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  readActivation(ctx);
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1);
  needFloat(ctx, x.dtype, 'input');
  for (const [i, name] of [
    [1, 'weight'],
    [2, 'bias'],
    [3, 'past_state'],
  ] as const) {
    const t = inputs[i];
    if (t && t.dtype !== x.dtype) ctx.fail(`${name} must be ${x.dtype}, got ${t.dtype}`);
  }
  if (x.shape && x.shape.length !== 3) ctx.fail(`input must be [batch, channels, length], got ${shapeStr(x.shape)}`);
  if (w.shape && w.shape.length !== 3) ctx.fail(`weight must be [channels, 1, k], got ${shapeStr(w.shape)}`);
  const state: Dim = w.shape ? dimAdd(w.shape[2]!, -1) : unknownDim();
  return [
    { dtype: x.dtype, shape: x.shape },
    { dtype: x.dtype, shape: x.shape ? [x.shape[0]!, x.shape[1]!, state] : undefined },
  ].slice(0, Math.max(1, ctx.node.outputs.length));
}

function evalCausalConv(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const act = readActivation(ctx);
  const x = need(ctx, inputs, 0),
    w = need(ctx, inputs, 1),
    b = inputs[2],
    past = inputs[3];
  needFloat(ctx, x.dtype, 'input');
  if (x.rank !== 3 || w.rank !== 3) ctx.fail(`input and weight must be 3-D, got [${x.dims}] and [${w.dims}]`);
  const [B, C, L] = x.dims as [number, number, number];
  const k = w.dims[2]!;
  if (w.dims[0] !== C || w.dims[1] !== 1 || k < 1) ctx.fail(`weight must be [${C}, 1, k], got [${w.dims}]`);
  if (b && (b.rank !== 1 || b.dims[0] !== C)) ctx.fail(`bias must be [${C}], got [${b.dims}]`);
  if (past && past.dims.join(',') !== [B, C, k - 1].join(','))
    ctx.fail(`past_state must be [${B},${C},${k - 1}], got [${past.dims}]`);
  const round = converter(x.dtype) ?? ((v: number) => v);
  const padLen = L + k - 1;
  const padded = new Float64Array(padLen);
  const out = new Float64Array(x.size);
  const state = new Float64Array(B * C * (k - 1));
  for (let bi = 0; bi < B; bi++) {
    for (let c = 0; c < C; c++) {
      const row = bi * C + c;
      for (let j = 0; j < k - 1; j++) padded[j] = past ? past.nums[row * (k - 1) + j]! : 0;
      for (let t = 0; t < L; t++) padded[k - 1 + t] = x.nums[row * L + t]!;
      for (let t = 0; t < L; t++) {
        let acc = b ? b.nums[c]! : 0;
        for (let j = 0; j < k; j++) acc += w.nums[c * k + j]! * padded[t + j]!;
        const v = round(x.dtype === 'float32' ? Math.fround(acc) : acc);
        out[row * L + t] = act === 'none' ? v : v / (1 + Math.exp(-v));
      }
      for (let j = 0; j < k - 1; j++) state[row * (k - 1) + j] = padded[L + j]!;
    }
  }
  const outs = [Tensor.fromNumbers(x.dtype, x.dims, out), Tensor.fromNumbers(x.dtype, [B, C, k - 1], state)];
  return outs.slice(0, Math.max(1, ctx.node.outputs.length));
}

export const CONV_EXTRA_OPS: OpHandler[] = [
  { op: 'QLinearConv', since: 10, infer: inferQLinearConv, eval: evalQLinearConv },
  { op: 'DeformConv', since: 19, infer: inferDeformConv, eval: evalDeformConv },
  { op: 'MaxUnpool', since: 9, infer: inferMaxUnpool, eval: evalMaxUnpool },
  { op: 'CausalConvWithState', since: 27, infer: inferCausalConv, eval: evalCausalConv },
];
