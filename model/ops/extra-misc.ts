// Assorted tensor operators: CenterCropPad, BitCast, Det, LRN, SwiGLU and TensorScatter (KV-cache writes).
import { allocData, BYTES, type DType, type NumArray } from '../../compiler/dtype.ts';
import { bf16BitsToNumber, f16BitsToNumber, numberToBf16Bits, numberToF16Bits } from '../../compiler/float16.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import { broadcastDims, broadcastIndex, sizeOf, Tensor } from '../../compiler/tensor.ts';
import { dtypeAttr, fromF64, knownInts, requireFloat } from './math-common.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { axisOf, broadcastShapes, need, same } from './util.ts';

// ---- CenterCropPad ----

function cropAxes(ctx: OpContext, rank: number, n: number): number[] {
  const raw = ctx.ints(
    'axes',
    Array.from({ length: rank }, (_, i) => i),
  );
  const axes = raw.map((a) => axisOf(ctx, a, rank));
  if (new Set(axes).size !== axes.length) ctx.fail(`axes [${raw}] repeat an axis`);
  if (axes.length !== n) ctx.fail(`shape has ${n} elements but there are ${axes.length} axes`);
  return axes;
}

const CENTER_CROP_PAD: OpHandler = {
  op: 'CenterCropPad',
  since: 18,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const shape = need(ctx, inputs, 1);
    if (shape.dtype !== 'int32' && shape.dtype !== 'int64')
      ctx.fail(`shape must be int32 or int64, got ${shape.dtype}`);
    const target: Dim[] | undefined = shape.sym ?? knownInts(shape);
    if (!x.shape) return [{ dtype: x.dtype }];
    if (!target) return [{ dtype: x.dtype, shape: undefined }];
    const out = [...x.shape];
    cropAxes(ctx, x.shape.length, target.length).forEach((a, i) => (out[a] = target[i]!));
    return [{ dtype: x.dtype, shape: out }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const target = Array.from(need(ctx, inputs, 1).nums, Number);
    const axes = cropAxes(ctx, x.rank, target.length);
    const outDims = [...x.dims];
    axes.forEach((a, i) => {
      if (target[i]! < 0) ctx.fail(`shape ${target[i]} must not be negative`);
      outDims[a] = target[i]!;
    });
    // per dim: source start (crop) and destination start (pad), and the copied length
    const srcStart = x.dims.map((d, i) => (d > outDims[i]! ? Math.floor((d - outDims[i]!) / 2) : 0));
    const dstStart = x.dims.map((d, i) => (outDims[i]! > d ? Math.floor((outDims[i]! - d) / 2) : 0));
    const len = x.dims.map((d, i) => Math.min(d, outDims[i]!));
    const out = Tensor.zeros(x.dtype, outDims);
    copyBlock(x, out, srcStart, dstStart, len);
    return [out];
  },
};

/** Copies the block of size len from src at srcStart into dst at dstStart. */
function copyBlock(src: Tensor, dst: Tensor, srcStart: number[], dstStart: number[], len: number[]): void {
  const r = src.rank;
  if (len.some((l) => l <= 0)) return;
  const sStr = strides(src.dims);
  const dStr = strides(dst.dims);
  const idx = new Array<number>(r).fill(0);
  const total = len.reduce((a, b) => a * b, 1);
  const s = src.data;
  const d = dst.data;
  for (let k = 0; k < total; k++) {
    let so = 0,
      dOff = 0;
    for (let i = 0; i < r; i++) {
      so += (srcStart[i]! + idx[i]!) * sStr[i]!;
      dOff += (dstStart[i]! + idx[i]!) * dStr[i]!;
    }
    d[dOff] = s[so]!;
    for (let i = r - 1; i >= 0; i--) {
      if (++idx[i]! < len[i]!) break;
      idx[i] = 0;
    }
  }
}

function strides(dims: readonly number[]): number[] {
  const s = new Array<number>(dims.length);
  for (let i = dims.length - 1, acc = 1; i >= 0; i--) {
    s[i] = acc;
    acc *= dims[i]!;
  }
  return s;
}

// ---- BitCast: reinterprets each element's bytes as another type of the same width ----

function writeElem(dv: DataView, off: number, dtype: DType, v: number): void {
  switch (dtype) {
    case 'float32':
      dv.setFloat32(off, v, true);
      break;
    case 'float64':
      dv.setFloat64(off, v, true);
      break;
    case 'float16':
      dv.setUint16(off, numberToF16Bits(v), true);
      break;
    case 'bfloat16':
      dv.setUint16(off, numberToBf16Bits(v), true);
      break;
    case 'int8':
      dv.setInt8(off, v);
      break;
    case 'uint8':
    case 'bool':
      dv.setUint8(off, v);
      break;
    case 'int16':
      dv.setInt16(off, v, true);
      break;
    case 'uint16':
      dv.setUint16(off, v, true);
      break;
    case 'int32':
      dv.setInt32(off, v, true);
      break;
    case 'uint32':
      dv.setUint32(off, v, true);
      break;
    case 'int64':
      dv.setBigInt64(off, BigInt.asIntN(64, BigInt(Math.trunc(v))), true);
      break;
    case 'uint64':
      dv.setBigUint64(off, BigInt.asUintN(64, BigInt(Math.trunc(v))), true);
      break;
    default:
      throw new Error(`internal: bitcast of ${dtype}`);
  }
}

function readElem(dv: DataView, off: number, dtype: DType): number {
  switch (dtype) {
    case 'float32':
      return dv.getFloat32(off, true);
    case 'float64':
      return dv.getFloat64(off, true);
    case 'float16':
      return f16BitsToNumber(dv.getUint16(off, true));
    case 'bfloat16':
      return bf16BitsToNumber(dv.getUint16(off, true));
    case 'int8':
      return dv.getInt8(off);
    case 'uint8':
      return dv.getUint8(off);
    case 'bool':
      return dv.getUint8(off) !== 0 ? 1 : 0;
    case 'int16':
      return dv.getInt16(off, true);
    case 'uint16':
      return dv.getUint16(off, true);
    case 'int32':
      return dv.getInt32(off, true);
    case 'uint32':
      return dv.getUint32(off, true);
    case 'int64':
      return Number(dv.getBigInt64(off, true));
    case 'uint64':
      return Number(dv.getBigUint64(off, true));
    default:
      throw new Error(`internal: bitcast of ${dtype}`);
  }
}

function bitcastTarget(ctx: OpContext, from: DType): DType {
  const to = dtypeAttr(ctx, ctx.int('to'), 'to');
  if (from === 'string' || to === 'string') ctx.fail('BitCast does not apply to strings');
  if (BYTES[from] !== BYTES[to])
    ctx.fail(`BitCast needs equal widths: ${from} is ${BYTES[from] * 8} bits, ${to} is ${BYTES[to] * 8}`);
  return to;
}

const BIT_CAST: OpHandler = {
  op: 'BitCast',
  since: 26,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    return [{ dtype: bitcastTarget(ctx, x.dtype), shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const to = bitcastTarget(ctx, x.dtype);
    const w = BYTES[to];
    const dv = new DataView(new ArrayBuffer(w));
    const src = x.nums;
    const out = allocData(to, x.size) as NumArray;
    for (let i = 0; i < x.size; i++) {
      writeElem(dv, 0, x.dtype, src[i]!);
      out[i] = readElem(dv, 0, to);
    }
    return [new Tensor(to, x.dims, out)];
  },
};

// ---- Det: determinant of [..., M, M] by LU with partial pivoting ----

function det(a: Float64Array, n: number): number {
  let d = 1;
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(a[r * n + c]!) > Math.abs(a[p * n + c]!)) p = r;
    if (a[p * n + c] === 0) return 0;
    if (p !== c) {
      for (let k = 0; k < n; k++) {
        const t = a[c * n + k]!;
        a[c * n + k] = a[p * n + k]!;
        a[p * n + k] = t;
      }
      d = -d;
    }
    const piv = a[c * n + c]!;
    d *= piv;
    for (let r = c + 1; r < n; r++) {
      const f = a[r * n + c]! / piv;
      if (f === 0) continue;
      for (let k = c; k < n; k++) a[r * n + k] -= f * a[c * n + k]!;
    }
  }
  return d;
}

const DET: OpHandler = {
  op: 'Det',
  since: 11,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    if (!x.shape) return [{ dtype: x.dtype }];
    if (x.shape.length < 2) ctx.fail(`input must have rank >= 2, got ${x.shape.length}`);
    const [m, n] = x.shape.slice(-2);
    if (typeof m === 'number' && typeof n === 'number' && m !== n) ctx.fail(`matrices must be square, got ${m}x${n}`);
    return [{ dtype: x.dtype, shape: x.shape.slice(0, -2) }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    if (x.rank < 2 || x.dims[x.rank - 1] !== x.dims[x.rank - 2])
      ctx.fail(`input must be [..., M, M], got dims [${x.dims}]`);
    const n = x.dims[x.rank - 1]!;
    const batch = n === 0 ? 0 : x.size / (n * n);
    const outDims = x.dims.slice(0, -2);
    const out = new Float64Array(outDims.reduce((a, b) => a * b, 1));
    if (n === 0) out.fill(1);
    for (let b = 0; b < batch; b++) out[b] = det(Float64Array.from(x.nums.subarray(b * n * n, (b + 1) * n * n)), n);
    return [fromF64(x.dtype, outDims, out)];
  },
};

// ---- LRN: local response normalization across channels ----

const LRN: OpHandler = {
  op: 'LRN',
  since: 1,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    if (x.shape && x.shape.length < 2) ctx.fail(`input must have rank >= 2, got ${x.shape.length}`);
    ctx.int('size');
    return [same(x)];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    if (x.rank < 2) ctx.fail(`input must have rank >= 2, got dims [${x.dims}]`);
    const size = ctx.int('size');
    if (size < 1) ctx.fail(`size must be positive, got ${size}`);
    const alpha = ctx.float('alpha', 0.0001);
    const beta = ctx.float('beta', 0.75);
    const bias = ctx.float('bias', 1);
    const [n, c] = [x.dims[0]!, x.dims[1]!];
    const inner = x.size / Math.max(1, n * c);
    const c1 = Math.floor((size - 1) / 2);
    const c2 = Math.ceil((size - 1) / 2) + 1;
    const v = x.nums;
    const out = new Float64Array(x.size);
    for (let b = 0; b < n; b++) {
      for (let ch = 0; ch < c; ch++) {
        const lo = Math.max(0, ch - c1);
        const hi = Math.min(c, ch + c2);
        for (let q = 0; q < inner; q++) {
          let sq = 0;
          for (let k = lo; k < hi; k++) {
            const e = v[(b * c + k) * inner + q]!;
            sq += e * e;
          }
          const i = (b * c + ch) * inner + q;
          out[i] = v[i]! / (bias + (alpha / size) * sq) ** beta;
        }
      }
    }
    return [fromF64(x.dtype, x.dims, out)];
  },
};

// ---- SwiGLU: a * sigmoid(alpha * a) * b ----

const SWIGLU: OpHandler = {
  op: 'SwiGLU',
  since: 1,
  infer(ctx, inputs) {
    const a = need(ctx, inputs, 0);
    const b = need(ctx, inputs, 1);
    requireFloat(ctx, a.dtype);
    if (b.dtype !== a.dtype) ctx.fail(`b dtype ${b.dtype} does not match a ${a.dtype}`);
    return [{ dtype: a.dtype, shape: broadcastShapes(ctx, [a.shape, b.shape]) }];
  },
  eval(ctx, inputs) {
    const a = need(ctx, inputs, 0);
    const b = need(ctx, inputs, 1);
    requireFloat(ctx, a.dtype);
    if (b.dtype !== a.dtype) ctx.fail(`b dtype ${b.dtype} does not match a ${a.dtype}`);
    const alpha = ctx.float('alpha', 1);
    let dims: number[];
    try {
      dims = broadcastDims(a.dims, b.dims);
    } catch {
      return ctx.fail(`a dims [${a.dims}] and b dims [${b.dims}] do not broadcast`);
    }
    const ai = broadcastIndex(a.dims, dims);
    const bi = broadcastIndex(b.dims, dims);
    const av = a.nums;
    const bv = b.nums;
    const out = new Float64Array(sizeOf(dims));
    for (let i = 0; i < out.length; i++) {
      const x = av[ai ? ai[i]! : i]!;
      out[i] = x * (1 / (1 + Math.exp(-alpha * x))) * bv[bi ? bi[i]! : i]!;
    }
    return [fromF64(a.dtype, dims, out)];
  },
};

// ---- TensorScatter: writes update into past_cache along the sequence axis at per-batch write indices ----

function scatterAxis(ctx: OpContext, rank: number): number {
  const axis = axisOf(ctx, ctx.int('axis', -2), rank);
  if (axis === 0) ctx.fail('axis must not be the batch axis 0');
  return axis;
}

function scatterMode(ctx: OpContext): 'linear' | 'circular' {
  const m = ctx.string('mode', 'linear');
  if (m !== 'linear' && m !== 'circular') ctx.fail(`mode must be linear or circular, got '${m}'`);
  return m;
}

const TENSOR_SCATTER: OpHandler = {
  op: 'TensorScatter',
  since: 24,
  infer(ctx, inputs) {
    const past = need(ctx, inputs, 0);
    const update: InferInput = need(ctx, inputs, 1);
    scatterMode(ctx);
    if (update.dtype !== past.dtype) ctx.fail(`update dtype ${update.dtype} does not match past_cache ${past.dtype}`);
    const idx = inputs[2];
    if (idx && idx.dtype !== 'int64') ctx.fail(`write_indices must be int64, got ${idx.dtype}`);
    if (past.shape && update.shape && past.shape.length !== update.shape.length)
      ctx.fail(`update rank ${update.shape.length} differs from past_cache rank ${past.shape.length}`);
    if (past.shape) scatterAxis(ctx, past.shape.length);
    return [same(past)];
  },
  eval(ctx, inputs) {
    const past = need(ctx, inputs, 0);
    const update = need(ctx, inputs, 1);
    const mode = scatterMode(ctx);
    if (past.rank !== update.rank) ctx.fail(`update rank ${update.rank} differs from past_cache rank ${past.rank}`);
    const axis = scatterAxis(ctx, past.rank);
    past.dims.forEach((d, i) => {
      const u = update.dims[i]!;
      if (i === axis ? u > d : u !== d)
        ctx.fail(`update dims [${update.dims}] do not fit past_cache dims [${past.dims}]`);
    });
    const batch = past.dims[0]!;
    const w = inputs[2] ? Array.from(inputs[2].nums, Number) : new Array<number>(batch).fill(0);
    if (w.length !== batch) ctx.fail(`write_indices has ${w.length} elements, expected batch ${batch}`);
    const maxLen = past.dims[axis]!;
    const seqLen = update.dims[axis]!;
    let outer = 1;
    for (let i = 1; i < axis; i++) outer *= past.dims[i]!;
    let inner = 1;
    for (let i = axis + 1; i < past.rank; i++) inner *= past.dims[i]!;
    const out = new Tensor(past.dtype, past.dims, (past.data as NumArray).slice());
    const dst = out.data;
    const src = update.data;
    for (let b = 0; b < batch; b++) {
      for (let o = 0; o < outer; o++) {
        const po = (b * outer + o) * maxLen;
        const uo = (b * outer + o) * seqLen;
        for (let s = 0; s < seqLen; s++) {
          let pos = w[b]! + s;
          if (mode === 'circular') pos = ((pos % maxLen) + maxLen) % maxLen;
          else if (pos < 0 || pos >= maxLen)
            ctx.fail(`write position ${pos} is out of range [0, ${maxLen}) in batch ${b}`);
          for (let q = 0; q < inner; q++) dst[(po + pos) * inner + q] = src[(uo + s) * inner + q]!;
        }
      }
    }
    return [out];
  },
};

export const MISC_OPS: OpHandler[] = [CENTER_CROP_PAD, BIT_CAST, DET, LRN, SWIGLU, TENSOR_SCATTER];
