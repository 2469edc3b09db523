// Signal processing: DFT (17: axis attribute; 20: axis input), STFT, the Hann/Hamming/Blackman windows and MelWeightMatrix.
import type { DType } from '../../compiler/dtype.ts';
import { dimAdd, dimDiv, dimMul, dimSub, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { fft32 } from './extra-fft32.ts';
import { dtypeAttr, fromF64, knownInts, requireFloat } from './math-common.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

// ---- core transforms on complex lines (re, im arrays) ----

/** Forward or inverse DFT of n points taken from (re, im) (zero-padded / truncated), naive O(n^2) in doubles. */
function dftLine(
  re: Float64Array,
  im: Float64Array,
  n: number,
  inverse: boolean,
  outRe: Float64Array,
  outIm: Float64Array,
  outLen: number,
): void {
  const len = Math.min(re.length, n);
  const sign = inverse ? 1 : -1;
  for (let k = 0; k < outLen; k++) {
    let sr = 0,
      si = 0;
    for (let t = 0; t < len; t++) {
      const ang = (sign * 2 * Math.PI * ((k * t) % n)) / n;
      const c = Math.cos(ang),
        s = Math.sin(ang);
      sr += re[t]! * c - im[t]! * s;
      si += re[t]! * s + im[t]! * c;
    }
    outRe[k] = inverse ? sr / n : sr;
    outIm[k] = inverse ? si / n : si;
  }
}

/**
 * A DFT line: for complex float32 input pocketfft's float32 passes (numpy's complex64 FFT, which the reference outputs
 * carry), else doubles (real input is transformed in double precision by the reference).
 */
function transformLine(
  dtype: DType,
  complex: boolean,
  re: Float64Array,
  im: Float64Array,
  n: number,
  inverse: boolean,
  outRe: Float64Array,
  outIm: Float64Array,
  outLen: number,
): void {
  const r = dtype === 'float32' && complex ? fft32(re, im, n, !inverse, inverse ? 1 / n : 1) : undefined;
  if (!r) {
    dftLine(re, im, n, inverse, outRe, outIm, outLen);
    return;
  }
  outRe.set(r.r.subarray(0, outLen));
  outIm.set(r.i.subarray(0, outLen));
}

/** Inverse of a one-sided (Hermitian) spectrum of n points: a real signal of n samples (numpy irfft). */
function irfftLine(re: Float64Array, im: Float64Array, n: number, out: Float64Array): void {
  const half = Math.floor(n / 2);
  const at = (k: number): [number, number] => (k < re.length ? [re[k]!, im[k]!] : [0, 0]);
  for (let t = 0; t < n; t++) {
    let s = at(0)[0];
    for (let k = 1; k <= half; k++) {
      const [r, i] = at(k);
      const ang = (2 * Math.PI * ((k * t) % n)) / n;
      if (n % 2 === 0 && k === half) s += r * Math.cos(ang);
      else s += 2 * (r * Math.cos(ang) - i * Math.sin(ang));
    }
    out[t] = s / n;
  }
}

// ---- DFT ----

interface DftArgs {
  axis: number;
  n: number;
  inverse: boolean;
  onesided: boolean;
}

function dftAxis(ctx: OpContext, rank: number, axisIn: number | undefined): number {
  const raw = ctx.opset >= 20 ? (axisIn ?? -2) : ctx.int('axis', 1);
  const a = raw < 0 ? raw + rank : raw;
  if (a < 0 || a > rank - 2)
    ctx.fail(`axis ${raw} is out of range for rank ${rank} (the last dim holds real/imaginary parts)`);
  return a;
}

function dft(ctx: OpContext, x: Tensor, args: DftArgs): Tensor {
  const { axis, n, inverse, onesided } = args;
  const comps = x.dims[x.rank - 1]!;
  if (comps !== 1 && comps !== 2) ctx.fail(`last dim must be 1 (real) or 2 (complex), got ${comps}`);
  const len = x.dims[axis]!;
  const irfft = inverse && onesided;
  const outLen = irfft ? n : onesided ? Math.floor(n / 2) + 1 : n;
  const outComps = irfft ? 1 : 2;
  const outDims = [...x.dims];
  outDims[axis] = outLen;
  outDims[x.rank - 1] = outComps;
  let outer = 1;
  for (let i = 0; i < axis; i++) outer *= x.dims[i]!;
  let inner = 1;
  for (let i = axis + 1; i < x.rank - 1; i++) inner *= x.dims[i]!;
  const v = x.nums;
  const out = new Float64Array(outer * outLen * inner * outComps);
  const re = new Float64Array(len),
    im = new Float64Array(len);
  const oRe = new Float64Array(outLen),
    oIm = new Float64Array(outLen);
  for (let o = 0; o < outer; o++) {
    for (let q = 0; q < inner; q++) {
      for (let t = 0; t < len; t++) {
        const i = ((o * len + t) * inner + q) * comps;
        re[t] = v[i]!;
        im[t] = comps === 2 ? v[i + 1]! : 0;
      }
      if (irfft) irfftLine(re, im, n, oRe);
      else transformLine(x.dtype, comps === 2, re, im, n, inverse, oRe, oIm, outLen);
      for (let k = 0; k < outLen; k++) {
        const d = ((o * outLen + k) * inner + q) * outComps;
        out[d] = oRe[k]!;
        if (outComps === 2) out[d + 1] = oIm[k]!;
      }
    }
  }
  return fromF64(x.dtype, outDims, out);
}

function scalarOf(ctx: OpContext, t: Tensor | undefined, what: string): number | undefined {
  if (t === undefined) return undefined;
  if (t.size !== 1) ctx.fail(`${what} must be a scalar, got dims [${t.dims}]`);
  return Number(t.nums[0]);
}

function knownScalar(x: InferInput | undefined): Dim | undefined {
  if (!x) return undefined;
  if (x.sym && x.sym.length === 1) return x.sym[0];
  return knownInts(x)?.[0];
}

const DFT: OpHandler = {
  op: 'DFT',
  since: 17,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    const lenIn = inputs[1];
    if (lenIn && lenIn.dtype !== 'int32' && lenIn.dtype !== 'int64')
      ctx.fail(`dft_length must be int32 or int64, got ${lenIn.dtype}`);
    if (!x.shape) return [{ dtype: x.dtype }];
    const rank = x.shape.length;
    if (rank < 2) ctx.fail(`input must have rank >= 2, got ${rank}`);
    const axisKnown = ctx.opset >= 20 && inputs[2] ? knownInts(inputs[2])?.[0] : undefined;
    if (ctx.opset >= 20 && inputs[2] && axisKnown === undefined)
      return [{ dtype: x.dtype, shape: x.shape.map(() => unknownDim()) }];
    const axis = dftAxis(ctx, rank, axisKnown);
    const inverse = ctx.int('inverse', 0) !== 0;
    const onesided = ctx.int('onesided', 0) !== 0;
    const shape = [...x.shape];
    let n: Dim = lenIn ? (knownScalar(lenIn) ?? unknownDim()) : shape[axis]!;
    if (inverse && onesided && !lenIn) n = dimMul(dimSub(shape[axis]!, 1), 2);
    shape[axis] = inverse && onesided ? n : onesided ? dimAdd(dimDiv(n, 2), 1) : n;
    shape[rank - 1] = inverse && onesided ? 1 : 2;
    return [{ dtype: x.dtype, shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    if (x.rank < 2) ctx.fail(`input must have rank >= 2, got dims [${x.dims}]`);
    const axis = dftAxis(ctx, x.rank, ctx.opset >= 20 ? scalarOf(ctx, inputs[2], 'axis') : undefined);
    const inverse = ctx.int('inverse', 0) !== 0;
    const onesided = ctx.int('onesided', 0) !== 0;
    const given = scalarOf(ctx, inputs[1], 'dft_length');
    const n = given ?? (inverse && onesided ? 2 * (x.dims[axis]! - 1) : x.dims[axis]!);
    if (n < 1) ctx.fail(`dft_length must be positive, got ${n}`);
    return [dft(ctx, x, { axis, n, inverse, onesided })];
  },
};

// ---- STFT ----

const STFT: OpHandler = {
  op: 'STFT',
  since: 17,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    const window = inputs[2];
    if (window && window.dtype !== x.dtype) ctx.fail(`window dtype ${window.dtype} does not match signal ${x.dtype}`);
    if (!x.shape) return [{ dtype: x.dtype }];
    if (x.shape.length !== 3) ctx.fail(`signal must be [batch, length, 1 or 2], got rank ${x.shape.length}`);
    const step = knownScalar(inputs[1]);
    const frame = knownScalar(inputs[3]) ?? window?.shape?.[0];
    const onesided = ctx.int('onesided', 1) !== 0;
    if (step === undefined || frame === undefined)
      return [{ dtype: x.dtype, shape: [x.shape[0]!, unknownDim(), unknownDim(), 2] }];
    const frames = dimAdd(dimDiv(dimSub(x.shape[1]!, frame), step), 1);
    return [{ dtype: x.dtype, shape: [x.shape[0]!, frames, onesided ? dimAdd(dimDiv(frame, 2), 1) : frame, 2] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    if (x.rank !== 3 || (x.dims[2] !== 1 && x.dims[2] !== 2))
      ctx.fail(`signal must be [batch, length, 1 or 2], got dims [${x.dims}]`);
    const step = scalarOf(ctx, need(ctx, inputs, 1), 'frame_step')!;
    const window = inputs[2];
    const frame = scalarOf(ctx, inputs[3], 'frame_length') ?? window?.dims[0] ?? x.dims[1]!;
    if (window && (window.rank !== 1 || window.dims[0] !== frame))
      ctx.fail(`window dims [${window.dims}] do not match frame_length ${frame}`);
    if (step < 1 || frame < 1 || frame > x.dims[1]!)
      ctx.fail(`frame_step ${step} / frame_length ${frame} do not fit signal length ${x.dims[1]}`);
    const onesided = ctx.int('onesided', 1) !== 0;
    const [batch, len, comps] = x.dims as [number, number, number];
    const frames = 1 + Math.floor((len - frame) / step);
    const bins = onesided ? Math.floor(frame / 2) + 1 : frame;
    const w = window?.nums;
    const v = x.nums;
    const out = new Float64Array(batch * frames * bins * 2);
    const re = new Float64Array(frame),
      im = new Float64Array(frame);
    const oRe = new Float64Array(bins),
      oIm = new Float64Array(bins);
    for (let b = 0; b < batch; b++) {
      for (let f = 0; f < frames; f++) {
        for (let t = 0; t < frame; t++) {
          const i = (b * len + f * step + t) * comps;
          const wt = w ? w[t]! : 1;
          re[t] = v[i]! * wt;
          im[t] = comps === 2 ? v[i + 1]! * wt : 0;
        }
        transformLine(x.dtype, comps === 2, re, im, frame, false, oRe, oIm, bins);
        for (let k = 0; k < bins; k++) {
          const d = ((b * frames + f) * bins + k) * 2;
          out[d] = oRe[k]!;
          out[d + 1] = oIm[k]!;
        }
      }
    }
    return [fromF64(x.dtype, [batch, frames, bins, 2], out)];
  },
};

// ---- windows ----

type WindowFn = (n: number, denom: number) => number;

const HANN: WindowFn = (n, d) => Math.sin((n * Math.PI) / d) ** 2;
const HAMMING: WindowFn = (n, d) => 25 / 46 - Math.cos((n * 2 * Math.PI) / d) * (1 - 25 / 46);
const BLACKMAN: WindowFn = (n, d) =>
  0.42 - 0.5 * Math.cos((n * 2 * Math.PI) / d) + 0.08 * Math.cos((n * 4 * Math.PI) / d);

function windowHandler(op: string, fn: WindowFn): OpHandler {
  const outType = (ctx: OpContext): DType => {
    const d = dtypeAttr(ctx, ctx.int('output_datatype', 1), 'output_datatype');
    if (d === 'string' || d === 'bool') ctx.fail(`output_datatype ${d} is not numeric`);
    return d;
  };
  return {
    op,
    since: 17,
    infer(ctx, inputs) {
      const size = need(ctx, inputs, 0);
      if (size.dtype !== 'int32' && size.dtype !== 'int64') ctx.fail(`size must be int32 or int64, got ${size.dtype}`);
      return [{ dtype: outType(ctx), shape: [knownScalar(size) ?? unknownDim()] }];
    },
    eval(ctx, inputs) {
      const size = scalarOf(ctx, need(ctx, inputs, 0), 'size')!;
      if (size < 0) ctx.fail(`size must not be negative, got ${size}`);
      const periodic = ctx.int('periodic', 1) !== 0;
      const denom = periodic ? size : size - 1;
      const out = new Float64Array(size);
      for (let n = 0; n < size; n++) out[n] = fn(n, denom);
      return [fromF64(outType(ctx), [size], out)];
    },
  };
}

// ---- MelWeightMatrix ----

function melMatrix(numMel: number, dftLen: number, rate: number, lower: number, upper: number): Float64Array {
  const nSpec = Math.floor(dftLen / 2) + 1;
  const lowMel = 2595 * Math.log10(1 + lower / 700);
  const highMel = 2595 * Math.log10(1 + upper / 700);
  const step = (highMel - lowMel) / (numMel + 2);
  const bins: number[] = [];
  for (let i = 0; i < numMel + 2; i++) {
    const hz = 700 * (10 ** ((i * step + lowMel) / 2595) - 1);
    bins.push(Math.trunc(Math.floor(((dftLen + 1) * hz) / rate)));
  }
  const out = new Float64Array(nSpec * numMel);
  const set = (j: number, i: number, v: number) => {
    if (j >= 0 && j < nSpec) out[j * numMel + i] = v;
  };
  for (let i = 0; i < numMel; i++) {
    const [lo, center, hi] = [bins[i]!, bins[i + 1]!, bins[i + 2]!];
    const up = center - lo;
    if (up === 0) set(center, i, 1);
    else for (let j = lo; j <= center; j++) set(j, i, (j - lo) / up);
    const down = hi - center;
    if (down > 0) for (let j = center; j < hi; j++) set(j, i, (hi - j) / down);
  }
  return out;
}

const MEL_WEIGHT_MATRIX: OpHandler = {
  op: 'MelWeightMatrix',
  since: 17,
  infer(ctx, inputs) {
    for (let i = 0; i < 5; i++) need(ctx, inputs, i);
    const dtype = dtypeAttr(ctx, ctx.int('output_datatype', 1), 'output_datatype');
    const mel = knownScalar(inputs[0]);
    const dftLen = knownScalar(inputs[1]);
    return [
      { dtype, shape: [dftLen === undefined ? unknownDim() : dimAdd(dimDiv(dftLen, 2), 1), mel ?? unknownDim()] },
    ];
  },
  eval(ctx, inputs) {
    const vals = [0, 1, 2, 3, 4].map((i) => scalarOf(ctx, need(ctx, inputs, i), `input ${i}`)!);
    const [numMel, dftLen, rate, lower, upper] = vals as [number, number, number, number, number];
    if (numMel < 1 || dftLen < 1 || rate <= 0)
      ctx.fail(`num_mel_bins ${numMel}, dft_length ${dftLen} and sample_rate ${rate} must be positive`);
    const dtype = dtypeAttr(ctx, ctx.int('output_datatype', 1), 'output_datatype');
    const nSpec = Math.floor(dftLen / 2) + 1;
    return [Tensor.fromNumbers(dtype, [nSpec, numMel], melMatrix(numMel, dftLen, rate, lower, upper))];
  },
};

export const SIGNAL_OPS: OpHandler[] = [
  DFT,
  STFT,
  MEL_WEIGHT_MATRIX,
  windowHandler('HannWindow', HANN),
  windowHandler('HammingWindow', HAMMING),
  windowHandler('BlackmanWindow', BLACKMAN),
];
