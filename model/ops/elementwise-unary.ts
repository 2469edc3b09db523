// Unary elementwise operators: math functions, activations, rounding, Clip, Shrink, IsNaN/IsInf, Not, BitwiseNot.
import { allocData, type DType, type NumArray } from '../../compiler/dtype.ts';
import { dimNeg, type Dim } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import {
  checkAccept,
  checkSameDtype,
  finish,
  isIntLike,
  required,
  symElems,
  symFits,
  type Accept,
} from './elementwise-common.ts';
import type { EvalContext, InferOutput, OpContext, OpHandler } from './types.ts';

type UnaryKernel = (x: NumArray, y: NumArray, ctx: EvalContext, dtype: DType) => void;

interface UnaryOpts {
  /** Output dtype when it is not the input's (IsNaN, IsInf: bool). */
  out?: DType;
  /** Rule for symbolic integer elements. */
  sym?: (d: Dim) => Dim | undefined;
  since?: number;
  until?: number;
}

function unary(op: string, accept: Accept, kernel: UnaryKernel, opts: UnaryOpts = {}): OpHandler {
  return {
    op,
    since: opts.since,
    until: opts.until,
    infer(ctx, inputs) {
      const x = required(ctx, inputs, 0);
      checkAccept(ctx, accept, x.dtype);
      const out: InferOutput = { dtype: opts.out ?? x.dtype, shape: x.shape };
      const rule = opts.sym;
      if (rule !== undefined && isIntLike(x.dtype) && symFits(x.shape)) {
        const s = symElems(x);
        const r = s?.map(rule);
        if (r?.every((d) => d !== undefined)) out.sym = r as Dim[];
      }
      return [out];
    },
    eval(ctx, inputs) {
      const x = required(ctx, inputs, 0);
      checkAccept(ctx, accept, x.dtype);
      const dtype = opts.out ?? x.dtype;
      const y = allocData(dtype, x.size) as NumArray;
      kernel(x.nums, y, ctx, x.dtype);
      return [finish(dtype, x.dims, y)];
    },
  };
}

const numberRule =
  (f: (v: number) => number) =>
  (d: Dim): Dim | undefined =>
    typeof d === 'number' ? f(d) : undefined;

// ---- special functions ----

const TWO_OVER_SQRT_PI = 1.1283791670955126;
const ONE_OVER_SQRT_PI = 0.5641895835477563;

/**
 * The error function to double precision, by a series: erf(x) = 2/√π·e^(−x²)·Σ 2ⁿx^(2n+1)/(1·3·…·(2n+1)) for
 * |x| < 2.5 (positive terms, no cancellation), else 1 − erfc(x) with erfc's continued fraction evaluated backwards.
 * Exact but slow (up to ~60 terms); used to build ERF_TABLE.
 */
export function erfSeries(x: number): number {
  if (x !== x) return NaN;
  const ax = Math.abs(x);
  if (ax >= 6) return x > 0 ? 1 : -1;
  let r: number;
  const x2 = ax * ax;
  if (ax < 2.5) {
    let term = ax;
    let sum = ax;
    for (let n = 1; term > sum * 1e-17; n++) {
      term *= (2 * x2) / (2 * n + 1);
      sum += term;
    }
    r = TWO_OVER_SQRT_PI * Math.exp(-x2) * sum;
  } else {
    // erfc(x) = e^(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))
    let f = ax;
    for (let k = 60; k >= 1; k--) f = ax + k / 2 / f;
    r = 1 - (ONE_OVER_SQRT_PI * Math.exp(-x2)) / f;
  }
  return x < 0 ? -r : r;
}

/** Taylor tables of erf on [0, 6] at steps of 1/ERF_STEPS: erf(x0 + h) = Σ_k c_k h^k, k ≤ ERF_ORDER. */
const ERF_STEPS = 64;
const ERF_ORDER = 8;
const ERF_TABLE = buildErfTable();

/** c_0 = erf(x0); c_k = erf⁽ᵏ⁾(x0)/k! with erf⁽ᵏ⁾(x) = 2/√π·(−1)^(k−1)·H_(k−1)(x)·e^(−x²) (Hermite polynomials). */
function buildErfTable(): Float64Array {
  const points = 6 * ERF_STEPS + 1;
  const t = new Float64Array(points * (ERF_ORDER + 1));
  for (let p = 0; p < points; p++) {
    const x0 = p / ERF_STEPS;
    const base = p * (ERF_ORDER + 1);
    t[base] = erfSeries(x0);
    const g = TWO_OVER_SQRT_PI * Math.exp(-x0 * x0);
    let hPrev = 0; // H_(n-1)
    let h = 1; // H_n, starting at n = 0
    let fact = 1;
    for (let k = 1; k <= ERF_ORDER; k++) {
      fact *= k;
      const n = k - 1;
      t[base + k] = ((n % 2 === 0 ? 1 : -1) * g * h) / fact;
      const next = 2 * x0 * h - 2 * n * hPrev;
      hPrev = h;
      h = next;
    }
  }
  return t;
}

/** The error function to double precision (table lookup and a degree-8 Taylor polynomial). */
export function erf(x: number): number {
  const ax = Math.abs(x);
  if (!(ax < 6)) return x !== x ? NaN : x > 0 ? 1 : -1;
  const p = Math.round(ax * ERF_STEPS);
  const h = ax - p / ERF_STEPS;
  const base = p * (ERF_ORDER + 1);
  let r = ERF_TABLE[base + ERF_ORDER]!;
  for (let k = ERF_ORDER - 1; k >= 0; k--) r = r * h + ERF_TABLE[base + k]!;
  return x < 0 ? -r : r;
}

/** Round half to even (numpy's round). */
export function roundHalfEven(x: number): number {
  const r = Math.round(x); // half up
  if (r - x === 0.5 && r % 2 !== 0) return r - 1;
  return r;
}

function sigmoid(v: number): number {
  if (v >= 0) return 1 / (1 + Math.exp(-v));
  const e = Math.exp(v);
  return e / (1 + e);
}

function softplus(v: number): number {
  return v > 0 ? v + Math.log1p(Math.exp(-v)) : Math.log1p(Math.exp(v));
}

// ---- kernels: one loop each so every loop stays monomorphic ----

const SQRT1_2 = Math.SQRT1_2;
const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);

function gelu(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const mode = ctx.string('approximate', 'none');
  if (mode === 'tanh') {
    for (let i = 0; i < x.length; i++) {
      const v = x[i]!;
      y[i] = 0.5 * v * (1 + Math.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)));
    }
  } else if (mode === 'none') {
    for (let i = 0; i < x.length; i++) {
      const v = x[i]!;
      y[i] = 0.5 * v * (1 + erf(v * SQRT1_2));
    }
  } else ctx.fail(`approximate must be 'none' or 'tanh', got '${mode}'`);
}

function elu(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const alpha = ctx.float('alpha', 1);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = v < 0 ? alpha * Math.expm1(v) : v;
  }
}

function celu(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const alpha = ctx.float('alpha', 1);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = v > 0 ? v : alpha * Math.expm1(v / alpha);
  }
}

function selu(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const alpha = ctx.float('alpha', 1.67326319217681884765625);
  const gamma = ctx.float('gamma', 1.05070102214813232421875);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = v > 0 ? gamma * v : gamma * alpha * Math.expm1(v);
  }
}

function leakyRelu(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const alpha = ctx.float('alpha', 0.01);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = v > 0 ? v : v * alpha;
  }
}

function thresholdedRelu(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const alpha = ctx.float('alpha', 1);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = v > alpha ? v : 0;
  }
}

function hardSigmoid(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const alpha = ctx.float('alpha', 0.2);
  const beta = ctx.float('beta', 0.5);
  for (let i = 0; i < x.length; i++) y[i] = Math.max(0, Math.min(1, alpha * x[i]! + beta));
}

function hardSwish(x: NumArray, y: NumArray): void {
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = v * Math.max(0, Math.min(1, v / 6 + 0.5));
  }
}

function swish(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const alpha = ctx.float('alpha', 1);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = v * sigmoid(alpha * v);
  }
}

function shrink(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const lambd = ctx.float('lambd', 0.5);
  const bias = ctx.float('bias', 0);
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = v < -lambd ? v + bias : v > lambd ? v - bias : 0;
  }
}

function isInf(x: NumArray, y: NumArray, ctx: EvalContext): void {
  const pos = ctx.int('detect_positive', 1) !== 0;
  const neg = ctx.int('detect_negative', 1) !== 0;
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    y[i] = (pos && v === Infinity) || (neg && v === -Infinity) ? 1 : 0;
  }
}

function bitwiseNot(x: NumArray, y: NumArray, _ctx: EvalContext, dtype: DType): void {
  if (dtype === 'int64') for (let i = 0; i < x.length; i++) y[i] = -x[i]! - 1;
  else if (dtype === 'uint64') for (let i = 0; i < x.length; i++) y[i] = 18446744073709551615 - x[i]!;
  else for (let i = 0; i < x.length; i++) y[i] = ~x[i]!; // the typed array keeps the low bits
}

// ---- Clip ----

function clipKernel(x: NumArray, y: NumArray, lo: number, hi: number): void {
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    const a = v < lo ? lo : v;
    y[i] = a > hi ? hi : a; // min(max(x, lo), hi): hi wins when lo > hi, as np.clip
  }
}

/** Clip before opset 11: bounds are float attributes. */
const CLIP_ATTRS: OpHandler = {
  op: 'Clip',
  until: 11,
  infer(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    checkAccept(ctx, 'numeric', x.dtype);
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    const y = allocData(x.dtype, x.size) as NumArray;
    clipKernel(x.nums, y, ctx.float('min', -Infinity), ctx.float('max', Infinity));
    return [finish(x.dtype, x.dims, y)];
  },
};

function boundOf(ctx: OpContext, t: Tensor | undefined, what: string, def: number): number {
  if (t === undefined) return def;
  if (t.size !== 1) ctx.fail(`${what} must be a scalar, got shape [${t.dims}]`);
  return t.nums[0]!;
}

/** Clip from opset 11: optional min and max scalar inputs. */
const CLIP_INPUTS: OpHandler = {
  op: 'Clip',
  since: 11,
  infer(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    checkAccept(ctx, 'numeric', x.dtype);
    for (const b of [inputs[1], inputs[2]]) if (b !== undefined) checkSameDtype(ctx, [x.dtype, b.dtype]);
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    checkAccept(ctx, 'numeric', x.dtype);
    for (const b of [inputs[1], inputs[2]]) if (b !== undefined) checkSameDtype(ctx, [x.dtype, b.dtype]);
    const lo = boundOf(ctx, inputs[1], 'min', -Infinity);
    const hi = boundOf(ctx, inputs[2], 'max', Infinity);
    const y = allocData(x.dtype, x.size) as NumArray;
    clipKernel(x.nums, y, lo, hi);
    return [finish(x.dtype, x.dims, y)];
  },
};

export const UNARY_OPS: OpHandler[] = [
  unary('Sqrt', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.sqrt(x[i]!);
  }),
  unary('Exp', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.exp(x[i]!);
  }),
  unary('Log', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.log(x[i]!);
  }),
  unary('Erf', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = erf(x[i]!);
  }),
  unary('Tanh', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.tanh(x[i]!);
  }),
  unary('Sigmoid', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = sigmoid(x[i]!);
  }),
  unary('Reciprocal', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = 1 / x[i]!;
  }),
  unary('Floor', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.floor(x[i]!);
  }),
  unary('Ceil', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.ceil(x[i]!);
  }),
  unary('Round', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = roundHalfEven(x[i]!);
  }),
  unary('Sin', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.sin(x[i]!);
  }),
  unary('Cos', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.cos(x[i]!);
  }),
  unary('Tan', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.tan(x[i]!);
  }),
  unary('Asin', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.asin(x[i]!);
  }),
  unary('Acos', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.acos(x[i]!);
  }),
  unary('Atan', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.atan(x[i]!);
  }),
  unary('Sinh', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.sinh(x[i]!);
  }),
  unary('Cosh', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.cosh(x[i]!);
  }),
  unary('Asinh', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.asinh(x[i]!);
  }),
  unary('Acosh', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.acosh(x[i]!);
  }),
  unary('Atanh', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = Math.atanh(x[i]!);
  }),
  unary('Softplus', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = softplus(x[i]!);
  }),
  unary('Softsign', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = x[i]! / (1 + Math.abs(x[i]!));
  }),
  unary('Mish', 'float', (x, y) => {
    for (let i = 0; i < x.length; i++) y[i] = x[i]! * Math.tanh(softplus(x[i]!));
  }),
  unary('Gelu', 'float', gelu),
  unary('Elu', 'float', elu),
  unary('Celu', 'float', celu),
  unary('Selu', 'float', selu),
  unary('LeakyRelu', 'float', leakyRelu),
  unary('ThresholdedRelu', 'float', thresholdedRelu),
  unary('HardSigmoid', 'float', hardSigmoid),
  unary('HardSwish', 'float', hardSwish),
  unary('Swish', 'float', swish),
  unary('Shrink', 'numeric', shrink),
  unary(
    'Relu',
    'numeric',
    (x, y) => {
      for (let i = 0; i < x.length; i++) y[i] = x[i]! > 0 ? x[i]! : 0;
    },
    { sym: numberRule((v) => Math.max(v, 0)) },
  ),
  unary(
    'Neg',
    'numeric',
    (x, y) => {
      for (let i = 0; i < x.length; i++) y[i] = -x[i]!;
    },
    { sym: dimNeg },
  ),
  unary(
    'Abs',
    'numeric',
    (x, y) => {
      for (let i = 0; i < x.length; i++) y[i] = Math.abs(x[i]!);
    },
    { sym: numberRule(Math.abs) },
  ),
  unary(
    'Sign',
    'numeric',
    (x, y) => {
      for (let i = 0; i < x.length; i++) {
        const v = x[i]!;
        y[i] = v > 0 ? 1 : v < 0 ? -1 : v;
      }
    },
    { sym: numberRule(Math.sign) },
  ),
  unary(
    'IsNaN',
    'float',
    (x, y) => {
      for (let i = 0; i < x.length; i++) y[i] = x[i]! !== x[i]! ? 1 : 0;
    },
    { out: 'bool' },
  ),
  unary('IsInf', 'float', isInf, { out: 'bool' }),
  unary(
    'Not',
    'bool',
    (x, y) => {
      for (let i = 0; i < x.length; i++) y[i] = x[i]! ? 0 : 1;
    },
    { sym: numberRule((v) => (v ? 0 : 1)) },
  ),
  unary('BitwiseNot', 'int', bitwiseNot),
  CLIP_ATTRS,
  CLIP_INPUTS,
];
