// Resize (opsets 10, 11, 13, 18, 19: nearest/linear/cubic, every coordinate mode, antialias, axes, aspect policy) and Upsample (7, 9).
import { dimMul, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { fromF64, knownInts, normAxes } from './math-common.ts';
import type { InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

type Mode = 'nearest' | 'linear' | 'cubic';

/** How one Resize node interpolates (attributes, with the opset's defaults). */
interface Plan {
  mode: Mode;
  coord: string;
  nearestMode: string;
  cubicA: number;
  excludeOutside: boolean;
  extrapolation: number;
  antialias: boolean;
}

const COORD_MODES = [
  'half_pixel',
  'half_pixel_symmetric',
  'pytorch_half_pixel',
  'align_corners',
  'asymmetric',
  'tf_crop_and_resize',
  'tf_half_pixel_for_nn',
];
const NEAREST_MODES = ['round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil'];

function modeOf(ctx: OpContext): Mode {
  const m = ctx.string('mode', 'nearest');
  if (m === 'nearest' || m === 'linear' || m === 'cubic') return m;
  if (m === 'bilinear' && ctx.opset < 10) return 'linear'; // Upsample-7 accepted 'bilinear'
  return ctx.fail(`mode must be nearest, linear or cubic, got '${m}'`);
}

/** Resize-11+ attributes; Resize-10 and Upsample use asymmetric coordinates and the legacy nearest rule. */
function planOf(ctx: OpContext, legacy: boolean): Plan {
  const mode = modeOf(ctx);
  if (legacy) {
    if (mode === 'cubic') ctx.fail('mode cubic needs opset 11');
    return {
      mode,
      coord: 'asymmetric',
      nearestMode: 'legacy',
      cubicA: -0.75,
      excludeOutside: false,
      extrapolation: 0,
      antialias: false,
    };
  }
  const coord = ctx.string('coordinate_transformation_mode', 'half_pixel');
  if (
    !COORD_MODES.includes(coord) ||
    (coord === 'tf_half_pixel_for_nn' && ctx.opset >= 13) ||
    (coord === 'half_pixel_symmetric' && ctx.opset < 19)
  ) {
    ctx.fail(`coordinate_transformation_mode '${coord}' is not valid at opset ${ctx.opset}`);
  }
  const nearestMode = ctx.string('nearest_mode', 'round_prefer_floor');
  if (!NEAREST_MODES.includes(nearestMode)) ctx.fail(`nearest_mode '${nearestMode}' is not valid`);
  const antialias = ctx.opset >= 18 && ctx.int('antialias', 0) !== 0;
  if (antialias && mode === 'nearest') ctx.fail('antialias is not supported with mode nearest');
  return {
    mode,
    coord,
    nearestMode,
    antialias,
    cubicA: ctx.float('cubic_coeff_a', -0.75),
    excludeOutside: ctx.int('exclude_outside', 0) !== 0,
    extrapolation: ctx.float('extrapolation_value', 0),
  };
}

// ---- coefficients (onnx reference op_resize.py) ----

function nearestCoeffs(ratio: number, mode: string): number[] {
  if (Number.isInteger(ratio)) return [0, 1];
  switch (mode) {
    case 'round_prefer_floor':
      return ratio <= 0.5 ? [1, 0] : [0, 1];
    case 'round_prefer_ceil':
      return ratio < 0.5 ? [1, 0] : [0, 1];
    case 'floor':
      return [1, 0];
    default:
      return [0, 1];
  }
}

function cubicCoeffs(r: number, a: number): number[] {
  const s = 1 - r;
  return [
    ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
    ((a + 2) * r - (a + 3)) * r * r + 1,
    ((a + 2) * s - (a + 3)) * s * s + 1,
    ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a,
  ];
}

function cubicKernel(x: number, a: number): number {
  x = Math.abs(x);
  const x2 = x * x;
  const x3 = x * x2;
  if (x <= 1) return (a + 2) * x3 - (a + 3) * x2 + 1;
  if (x < 2) return a * x3 - 5 * a * x2 + 8 * a * x - 4 * a;
  return 0;
}

function cubicCoeffsAntialias(r: number, scale: number, a: number): number[] {
  scale = Math.min(scale, 1);
  const start = Math.floor(-2 / scale) + 1;
  const c: number[] = [];
  for (let i = start; i < 2 - start; i++) c.push(cubicKernel(scale * (i - r), a));
  return normalized(c);
}

function linearCoeffsAntialias(r: number, scale: number): number[] {
  scale = Math.min(scale, 1);
  const start = Math.floor(-1 / scale) + 1;
  const footprint = 2 - 2 * start;
  const c: number[] = [];
  for (let i = start; i < start + footprint; i++) c.push(Math.min(1, Math.max(0, 1 - Math.abs((i - r) * scale))));
  return normalized(c);
}

function normalized(c: number[]): number[] {
  let s = 0;
  for (const v of c) s += v;
  return c.map((v) => v / s);
}

function coeffsOf(p: Plan, ratio: number, scale: number): number[] {
  if (p.mode === 'nearest') return nearestCoeffs(ratio, p.nearestMode);
  if (p.mode === 'linear') return p.antialias ? linearCoeffsAntialias(ratio, scale) : [1 - ratio, ratio];
  return p.antialias ? cubicCoeffsAntialias(ratio, scale, p.cubicA) : cubicCoeffs(ratio, p.cubicA);
}

// ---- per-axis taps ----

/** For each output index along one axis: n source indices (edge-clamped) and weights, or the extrapolation flag. */
interface Taps {
  n: number;
  idx: Int32Array;
  w: Float64Array;
  extrap: Uint8Array;
}

/** The source coordinate of output index x, or undefined when tf_crop_and_resize falls outside the input. */
function sourceCoord(
  p: Plan,
  x: number,
  inLen: number,
  outLen: number,
  scale: number,
  roi0: number,
  roi1: number,
): number | undefined {
  const outWidth = scale * inLen;
  switch (p.coord) {
    case 'align_corners':
      return outWidth === 1 ? 0 : (x * (inLen - 1)) / (outWidth - 1);
    case 'asymmetric':
      return x / scale;
    case 'tf_half_pixel_for_nn':
      return (x + 0.5) / scale;
    case 'pytorch_half_pixel':
      return outWidth === 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case 'half_pixel_symmetric': {
      const adjustment = outLen / outWidth;
      const offset = (inLen / 2) * (1 - adjustment);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case 'tf_crop_and_resize': {
      let v = outWidth === 1 ? ((roi1 - roi0) * (inLen - 1)) / 2 : (x * (roi1 - roi0) * (inLen - 1)) / (outWidth - 1);
      v += roi0 * (inLen - 1);
      return v < 0 || v > inLen - 1 ? undefined : v;
    }
    default:
      return (x + 0.5) / scale - 0.5; // half_pixel
  }
}

function axisTaps(p: Plan, inLen: number, outLen: number, scale: number, roi0: number, roi1: number): Taps {
  let n = 0;
  let idx = new Int32Array(0);
  let w = new Float64Array(0);
  const extrap = new Uint8Array(outLen);
  for (let x = 0; x < outLen; x++) {
    const src = sourceCoord(p, x, inLen, outLen, scale, roi0, roi1);
    let coeffs: number[];
    let start: number;
    if (src === undefined) {
      extrap[x] = 1;
      continue;
    }
    if (p.nearestMode === 'legacy' && p.mode === 'nearest') {
      coeffs = [1];
      start = scale < 1 ? Math.ceil(src) : Math.trunc(src);
    } else {
      const fl = Math.floor(src);
      const ratio = Number.isInteger(src) ? 1 : src - fl;
      const i0 = Number.isInteger(src) ? src - 1 : fl;
      coeffs = coeffsOf(p, ratio, scale);
      const half = Math.ceil(coeffs.length / 2);
      start = Math.min(Math.max(i0 - (coeffs.length / 2 - 1), -half), inLen + half - coeffs.length);
    }
    if (n === 0) {
      n = coeffs.length;
      idx = new Int32Array(outLen * n);
      w = new Float64Array(outLen * n);
    }
    if (p.excludeOutside) {
      let s = 0;
      coeffs = coeffs.map((c, k) => (start + k < 0 || start + k >= inLen ? 0 : c));
      for (const c of coeffs) s += c;
      coeffs = coeffs.map((c) => c / s);
    }
    for (let k = 0; k < n; k++) {
      idx[x * n + k] = Math.min(Math.max(start + k, 0), inLen - 1);
      w[x * n + k] = coeffs[k]!;
    }
  }
  return { n, idx, w, extrap };
}

/** Resamples one axis of a float64 buffer of `dims` to `outLen`. */
function resampleAxis(
  src: Float64Array,
  dims: number[],
  axis: number,
  outLen: number,
  t: Taps,
  extrapolation: number,
): Float64Array {
  let outer = 1;
  for (let i = 0; i < axis; i++) outer *= dims[i]!;
  let inner = 1;
  for (let i = axis + 1; i < dims.length; i++) inner *= dims[i]!;
  const inLen = dims[axis]!;
  const out = new Float64Array(outer * outLen * inner);
  for (let o = 0; o < outer; o++) {
    const sBase = o * inLen * inner;
    const dBase = o * outLen * inner;
    for (let x = 0; x < outLen; x++) {
      const d = dBase + x * inner;
      if (t.extrap[x]) {
        out.fill(extrapolation, d, d + inner);
        continue;
      }
      for (let q = 0; q < inner; q++) {
        let acc = 0;
        for (let k = 0; k < t.n; k++) acc += t.w[x * t.n + k]! * src[sBase + t.idx[x * t.n + k]! * inner + q]!;
        out[d + q] = acc;
      }
    }
  }
  return out;
}

/** Resizes x along `axes` to outDims with per-dim scales and roi (start, end per dim). */
function resize(
  x: Tensor,
  p: Plan,
  axes: number[],
  scales: number[],
  outDims: number[],
  roi: [number, number][],
): Tensor {
  let buf: Float64Array = Float64Array.from(x.nums);
  const dims = [...x.dims];
  for (let i = axes.length - 1; i >= 0; i--) {
    const a = axes[i]!;
    const taps = axisTaps(p, dims[a]!, outDims[a]!, scales[a]!, roi[a]![0], roi[a]![1]);
    buf = resampleAxis(buf, dims, a, outDims[a]!, taps, p.extrapolation);
    dims[a] = outDims[a]!;
  }
  return fromF64(x.dtype, dims, buf);
}

// ---- Resize-11+ inputs: roi, scales or sizes, axes, keep_aspect_ratio_policy ----

function axesAttr(ctx: OpContext, rank: number): number[] {
  if (ctx.opset < 18 || !ctx.has('axes')) return Array.from({ length: rank }, (_, i) => i);
  const raw = ctx.ints('axes');
  const axes = raw.map((a) => (a < 0 ? a + rank : a));
  normAxes(ctx, raw, rank); // validates range and repeats
  return axes;
}

function present(t: Tensor | undefined): t is Tensor {
  return t !== undefined && t.size > 0;
}

/** Output dims and per-dim scales from scales or sizes (with the aspect-ratio policy). */
function targetOf(
  ctx: OpContext,
  inDims: readonly number[],
  axes: number[],
  scalesT: Tensor | undefined,
  sizesT: Tensor | undefined,
): { scales: number[]; out: number[] } {
  const rank = inDims.length;
  const scales = new Array<number>(rank).fill(1);
  const out = [...inDims];
  if (present(scalesT) && present(sizesT)) ctx.fail('only one of scales and sizes may be given');
  if (present(sizesT)) {
    if (sizesT.size !== axes.length) ctx.fail(`sizes has ${sizesT.size} elements, expected ${axes.length}`);
    const sizes = Array.from(sizesT.nums, Number);
    axes.forEach((a, i) => {
      scales[a] = sizes[i]! / inDims[a]!;
      out[a] = sizes[i]!;
    });
    const policy = ctx.opset >= 18 ? ctx.string('keep_aspect_ratio_policy', 'stretch') : 'stretch';
    if (policy !== 'stretch') {
      if (policy !== 'not_larger' && policy !== 'not_smaller')
        ctx.fail(`keep_aspect_ratio_policy '${policy}' is not valid`);
      const chosen = axes.map((a) => scales[a]!);
      const s = policy === 'not_larger' ? Math.min(...chosen) : Math.max(...chosen);
      for (const a of axes) {
        scales[a] = s;
        out[a] = Math.trunc(s * inDims[a]! + 0.5);
      }
    }
  } else if (present(scalesT)) {
    if (scalesT.size !== axes.length) ctx.fail(`scales has ${scalesT.size} elements, expected ${axes.length}`);
    axes.forEach((a, i) => {
      const s = scalesT.nums[i]!;
      if (!(s > 0)) ctx.fail(`scale ${s} must be positive`);
      scales[a] = s;
      out[a] = Math.floor(s * inDims[a]!);
    });
  } else ctx.fail('one of scales and sizes must be given');
  return { scales, out };
}

function roiOf(
  ctx: OpContext,
  rank: number,
  axes: number[],
  roiT: Tensor | undefined,
  coord: string,
): [number, number][] {
  const roi: [number, number][] = Array.from({ length: rank }, () => [0, 1]);
  if (coord !== 'tf_crop_and_resize') return roi;
  if (!present(roiT)) ctx.fail('tf_crop_and_resize needs roi');
  if (roiT.size !== 2 * axes.length) ctx.fail(`roi has ${roiT.size} elements, expected ${2 * axes.length}`);
  axes.forEach((a, i) => {
    roi[a] = [roiT.nums[i]!, roiT.nums[axes.length + i]!];
  });
  return roi;
}

function checkData(ctx: OpContext, dtype: string): void {
  if (dtype === 'string' || dtype === 'bool') ctx.fail(`input must be numeric, got ${dtype}`);
}

/** Output shape when scales or sizes are known; unknown dims otherwise. */
function inferResize(
  ctx: OpContext,
  x: InferInput,
  scalesF: InferInput | undefined,
  sizesF: InferInput | undefined,
  scalesAttr?: number[],
): InferOutput {
  checkData(ctx, x.dtype);
  if (!x.shape) return { dtype: x.dtype };
  const rank = x.shape.length;
  const axes = axesAttr(ctx, rank);
  const shape: Dim[] = [...x.shape];
  const sizes = sizesF?.value?.size === 0 ? undefined : knownInts(sizesF);
  const scales = scalesAttr ?? (scalesF?.value && scalesF.value.size > 0 ? Array.from(scalesF.value.nums) : undefined);
  const policy = ctx.opset >= 18 ? ctx.string('keep_aspect_ratio_policy', 'stretch') : 'stretch';
  const sizeDims: Dim[] | undefined = sizesF?.value?.size === 0 ? undefined : (sizesF?.sym ?? sizes);
  if (sizeDims && sizeDims.length === axes.length && policy === 'stretch') {
    axes.forEach((a, i) => (shape[a] = sizeDims[i]!));
  } else if (scales && scales.length === axes.length) {
    axes.forEach((a, i) => {
      const d = shape[a]!;
      const s = scales[i]!;
      shape[a] = typeof d === 'number' ? Math.floor(s * d) : Number.isInteger(s) ? dimMul(d, s) : unknownDim();
    });
  } else if (sizes && sizes.length === axes.length && x.shape.every((d) => typeof d === 'number')) {
    return {
      dtype: x.dtype,
      shape: targetOf(ctx, x.shape as number[], axes, undefined, Tensor.fromNumbers('int64', [sizes.length], sizes))
        .out,
    };
  } else {
    for (const a of axes) shape[a] = unknownDim();
  }
  return { dtype: x.dtype, shape };
}

function resizeHandler(since: number, until: number | undefined): OpHandler {
  return {
    op: 'Resize',
    since,
    until,
    infer(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      planOf(ctx, false);
      return [inferResize(ctx, x, inputs[2], inputs[3])];
    },
    eval(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      checkData(ctx, x.dtype);
      const p = planOf(ctx, false);
      const axes = axesAttr(ctx, x.rank);
      const { scales, out } = targetOf(ctx, x.dims, axes, inputs[2], inputs[3]);
      const roi = roiOf(ctx, x.rank, axes, inputs[1], p.coord);
      return [resize(x, p, axes, scales, out, roi)];
    },
  };
}

// ---- Resize-10 and Upsample: scales only, asymmetric coordinates ----

function legacyScales(ctx: OpContext, t: Tensor | undefined, rank: number): number[] {
  const scales =
    ctx.opset < 9 && ctx.node.op === 'Upsample'
      ? ctx.floats('scales')
      : t
        ? Array.from(t.nums)
        : ctx.fail('scales input is required');
  if (scales.length !== rank) ctx.fail(`scales has ${scales.length} elements, expected rank ${rank}`);
  if (scales.some((s) => !(s > 0))) ctx.fail(`scales must be positive, got [${scales}]`);
  return scales;
}

function legacyHandler(op: string, since: number, until: number | undefined): OpHandler {
  return {
    op,
    since,
    until,
    infer(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      planOf(ctx, true);
      const attrScales = op === 'Upsample' && ctx.opset < 9 ? ctx.floats('scales') : undefined;
      if (attrScales && x.shape && attrScales.length !== x.shape.length)
        ctx.fail(`scales has ${attrScales.length} elements, expected rank ${x.shape.length}`);
      return [inferResize(ctx, x, inputs[1], undefined, attrScales)];
    },
    eval(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      checkData(ctx, x.dtype);
      const p = planOf(ctx, true);
      const scales = legacyScales(ctx, inputs[1], x.rank);
      const out = x.dims.map((d, i) => Math.floor(d * scales[i]!));
      const axes = Array.from({ length: x.rank }, (_, i) => i);
      const roi = axes.map((): [number, number] => [0, 1]);
      return [resize(x, p, axes, scales, out, roi)];
    },
  };
}

export const RESIZE_OPS: OpHandler[] = [
  legacyHandler('Upsample', 7, 10),
  legacyHandler('Resize', 10, 11),
  resizeHandler(11, undefined),
];
