// Type conversion and pass-through operators: Cast, CastLike, Identity, Dropout (with numpy's MT19937 for training mode).
import {
  allocData,
  dtypeFromOnnx,
  isFloat,
  onnxDtypeName,
  type Data,
  type DType,
  type NumArray,
} from '../../compiler/dtype.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import { converter, Tensor } from '../../compiler/tensor.ts';
import {
  checkAccept,
  f32ToBf16,
  f32ToF16,
  finish,
  isIntLike,
  required,
  symElems,
  symFits,
} from './elementwise-common.ts';
import { roundHalfEven } from './elementwise-unary.ts';
import type { InferInput, InferOutput, OpContext, OpHandler } from './types.ts';

// ---- exact rounding to narrow floats (from any double, without going through float32 first) ----

/** Rounds to a binary float with `mant` fraction bits, minimum normal exponent `minExp`, largest finite `max`. */
function roundToFloat(x: number, mant: number, minExp: number, max: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  const ax = Math.abs(x);
  let e = Math.floor(Math.log2(ax));
  if (2 ** e > ax) e--;
  else if (2 ** (e + 1) <= ax) e++;
  if (e < minExp) e = minExp;
  const q = 2 ** (e - mant);
  const r = roundHalfEven(ax / q) * q;
  const v = r > max ? Infinity : r;
  return x < 0 ? -v : v;
}

export function toF16(x: number): number {
  return roundToFloat(x, 10, -14, 65504);
}
export function toBf16(x: number): number {
  return roundToFloat(x, 7, -126, 3.3895313892515355e38);
}

// ---- numbers ↔ strings ----

/** Parses a string element as ONNX Cast does: decimal or scientific, and case-insensitive INF/+INF/-INF/NaN. */
function parseNumber(ctx: OpContext, s: string): number {
  const t = s.trim();
  const l = t.toLowerCase();
  if (l === 'nan' || l === '+nan' || l === '-nan') return NaN;
  if (l === 'inf' || l === '+inf' || l === 'infinity' || l === '+infinity') return Infinity;
  if (l === '-inf' || l === '-infinity') return -Infinity;
  if (l === 'true') return 1;
  if (l === 'false') return 0;
  const v = t === '' ? NaN : Number(t);
  if (v !== v) ctx.fail(`cannot convert string '${s}' to a number`);
  return v;
}

/** The shortest decimal that reads back as x in the dtype, written as numpy/Python repr does ('0.1', '1.0', '1e-05'). */
function formatFloat(x: number, dtype: DType): string {
  if (x !== x) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const back =
    dtype === 'float32' ? Math.fround : dtype === 'float16' ? toF16 : dtype === 'bfloat16' ? toBf16 : (v: number) => v;
  let exp = x.toExponential();
  for (let p = 1; p <= 17; p++) {
    const s = x.toExponential(p - 1);
    if (back(Number(s)) === x) {
      exp = s;
      break;
    }
  }
  const m = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(exp)!;
  const sign = m[1]!;
  const digits = (m[2]! + (m[3] ?? '')).replace(/0+$/, '') || '0';
  const e = Number(m[4]);
  if (e < -4 || e >= 16) {
    const mantissa = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const es = Math.abs(e) < 10 ? `0${Math.abs(e)}` : `${Math.abs(e)}`;
    return `${sign}${mantissa}e${e < 0 ? '-' : '+'}${es}`;
  }
  if (e < 0) return `${sign}0.${'0'.repeat(-e - 1)}${digits}`;
  const intPart = digits.length > e + 1 ? digits.slice(0, e + 1) : digits + '0'.repeat(e + 1 - digits.length);
  const frac = digits.length > e + 1 ? digits.slice(e + 1) : '0';
  return `${sign}${intPart}.${frac}`;
}

function formatElement(x: number, dtype: DType): string {
  if (dtype === 'bool') return x ? 'True' : 'False';
  if (isFloat(dtype)) return formatFloat(x, dtype);
  return String(x);
}

// ---- Cast ----

/** Converts a tensor's elements to another dtype as ONNX Cast does. */
export function castTensor(ctx: OpContext, x: Tensor, to: DType): Tensor {
  if (x.dtype === to) return x;
  const n = x.size;
  if (to === 'string') {
    const src = x.nums;
    const out = new Array<string>(n);
    for (let i = 0; i < n; i++) out[i] = formatElement(src[i]!, x.dtype);
    return Tensor.fromStrings(x.dims, out);
  }
  let src: ArrayLike<number>;
  if (x.dtype === 'string') {
    const s = x.strings;
    const parsed = new Float64Array(n);
    for (let i = 0; i < n; i++) parsed[i] = parseNumber(ctx, s[i]!);
    src = parsed;
  } else src = x.nums;
  if (to === 'float16' || to === 'bfloat16') {
    const exact = to === 'float16' ? toF16 : toBf16;
    const fast = to === 'float16' ? f32ToF16 : f32ToBf16; // for values that are float32 already
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const v = src[i]!;
      out[i] = Math.fround(v) === v ? fast(v) : exact(v);
    }
    return new Tensor(to, x.dims, out);
  }
  const out = allocData(to, n) as NumArray;
  const conv = converter(to);
  if (conv !== undefined) for (let i = 0; i < n; i++) out[i] = conv(src[i]!);
  else out.set(src);
  return new Tensor(to, x.dims, out);
}

function targetOf(ctx: OpContext): DType {
  const code = ctx.int('to');
  const d = dtypeFromOnnx(code);
  if (d === undefined) ctx.fail(`cast to unsupported dtype ${onnxDtypeName(code)}`);
  return d;
}

/** Symbolic elements survive integer ↔ integer casts (bool targets only for known numbers). */
function castSym(x: InferInput, to: DType, shape: Dim[] | undefined): Dim[] | undefined {
  if (!isIntLike(x.dtype) || !isIntLike(to) || !symFits(shape)) return undefined;
  const s = symElems(x);
  if (s === undefined) return undefined;
  if (to !== 'bool') return s;
  if (s.some((d) => typeof d !== 'number')) return undefined;
  return s.map((d) => (d !== 0 ? 1 : 0));
}

function castInfer(x: InferInput, to: DType): InferOutput[] {
  const out: InferOutput = { dtype: to, shape: x.shape };
  const s = castSym(x, to, x.shape);
  if (s !== undefined) out.sym = s;
  return [out];
}

const CAST: OpHandler = {
  op: 'Cast',
  infer: (ctx, inputs) => castInfer(required(ctx, inputs, 0), targetOf(ctx)),
  eval: (ctx, inputs) => [castTensor(ctx, required(ctx, inputs, 0), targetOf(ctx))],
};

const CAST_LIKE: OpHandler = {
  op: 'CastLike',
  infer: (ctx, inputs) => castInfer(required(ctx, inputs, 0), required(ctx, inputs, 1).dtype),
  eval: (ctx, inputs) => [castTensor(ctx, required(ctx, inputs, 0), required(ctx, inputs, 1).dtype)],
};

const IDENTITY: OpHandler = {
  op: 'Identity',
  infer(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    const out: InferOutput = { dtype: x.dtype, shape: x.shape };
    const s = symFits(x.shape) && isIntLike(x.dtype) ? symElems(x) : undefined;
    if (s !== undefined) out.sym = s;
    return [out];
  },
  eval: (ctx, inputs) => [required(ctx, inputs, 0)],
};

// ---- Dropout ----

/** numpy's legacy RandomState: MT19937 seeded with init_genrand, doubles from two draws (53 bits). */
export class MersenneTwister {
  private readonly mt = new Uint32Array(624);
  private index = 624;

  constructor(seed: number) {
    const mt = this.mt;
    mt[0] = seed >>> 0;
    for (let i = 1; i < 624; i++) {
      const p = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = (Math.imul(1812433253, p) + i) >>> 0;
    }
  }

  private twist(): void {
    const mt = this.mt;
    for (let k = 0; k < 624; k++) {
      const y = (mt[k]! & 0x80000000) | (mt[(k + 1) % 624]! & 0x7fffffff);
      mt[k] = mt[(k + 397) % 624]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    }
    this.index = 0;
  }

  nextUint32(): number {
    if (this.index >= 624) this.twist();
    let y = this.mt[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** Uniform in [0, 1), as numpy's random_sample. */
  nextDouble(): number {
    const a = this.nextUint32() >>> 5;
    const b = this.nextUint32() >>> 6;
    return (a * 67108864 + b) / 9007199254740992;
  }
}

function dropoutInfer(ctx: OpContext, x: InferInput, maskDtype: DType): InferOutput[] {
  checkAccept(ctx, 'float', x.dtype);
  const outs: InferOutput[] = [{ dtype: x.dtype, shape: x.shape }];
  if (ctx.node.outputs.length > 1) outs.push({ dtype: maskDtype, shape: x.shape });
  return outs;
}

/** Inference-mode result: the input, and an all-true mask when asked for. */
function dropoutPass(ctx: OpContext, x: Tensor, maskDtype: DType): Tensor[] {
  const outs = [x];
  if (ctx.node.outputs.length > 1) outs.push(Tensor.fromNumbers(maskDtype, x.dims, new Uint8Array(x.size).fill(1)));
  return outs;
}

/** Dropout before opset 12: ratio attribute, always inference (the input passes through). */
const DROPOUT_OLD: OpHandler = {
  op: 'Dropout',
  until: 12,
  infer: (ctx, inputs) => {
    const x = required(ctx, inputs, 0);
    return dropoutInfer(ctx, x, ctx.opset < 10 ? x.dtype : 'bool');
  },
  eval: (ctx, inputs) => {
    const x = required(ctx, inputs, 0);
    return dropoutPass(ctx, x, ctx.opset < 10 ? x.dtype : 'bool');
  },
};

/** Dropout from opset 12: optional ratio and training_mode inputs; training mode draws the mask like the reference. */
const DROPOUT: OpHandler = {
  op: 'Dropout',
  since: 12,
  infer(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    const r = inputs[1];
    const t = inputs[2];
    if (r !== undefined) checkAccept(ctx, 'float', r.dtype, 'ratio');
    if (t !== undefined && t.dtype !== 'bool') ctx.fail(`training_mode has dtype ${t.dtype}, expected bool`);
    return dropoutInfer(ctx, x, 'bool');
  },
  eval(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    checkAccept(ctx, 'float', x.dtype);
    const ratio = inputs[1] === undefined ? 0.5 : inputs[1].nums[0]!;
    const training = inputs[2] !== undefined && inputs[2].nums[0] !== 0;
    if (!training || ratio === 0) return dropoutPass(ctx, x, 'bool');
    if (!(ratio > 0 && ratio < 1)) ctx.fail(`ratio must be in [0, 1) in training mode, got ${ratio}`);
    const seed = ctx.has('seed') ? ctx.int('seed') : Math.floor(Math.random() * 4294967296);
    const rng = new MersenneTwister(seed);
    const n = x.size;
    const mask = new Uint8Array(n);
    for (let i = 0; i < n; i++) mask[i] = rng.nextDouble() >= ratio ? 1 : 0;
    const scale = Tensor.scalar(x.dtype, 1 / (1 - ratio)).nums[0]!; // numpy multiplies by the scale in X's type
    const src = x.nums;
    const y = allocData(x.dtype, n) as NumArray;
    for (let i = 0; i < n; i++) y[i] = mask[i] ? src[i]! * scale : 0;
    const outs = [finish(x.dtype, x.dims, y)];
    if (ctx.node.outputs.length > 1) outs.push(new Tensor('bool', x.dims, mask as Data));
    return outs;
  },
};

export const CAST_OPS: OpHandler[] = [CAST, CAST_LIKE, IDENTITY, DROPOUT_OLD, DROPOUT];
