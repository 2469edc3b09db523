// Movement operators that make tensors from attributes or shapes: Constant, ConstantOfShape, Range, EyeLike.
import { dtypeFromOnnx, isInt, onnxDtypeName, type DType } from '../../compiler/dtype.ts';
import { dimSub, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { sizeOf, Tensor } from '../../compiler/tensor.ts';
import type { InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';
import { ceilDivDim, constSym, needInt64, nonNeg, symOf } from './movement-common.ts';

// ---------- Constant ----------

function constantValue(ctx: OpContext): Tensor {
  if (ctx.has('value')) return ctx.tensor('value');
  if (ctx.has('value_float')) return Tensor.fromNumbers('float32', [], [ctx.float('value_float')]);
  if (ctx.has('value_floats')) {
    const v = ctx.floats('value_floats');
    return Tensor.fromNumbers('float32', [v.length], v);
  }
  if (ctx.has('value_int')) return Tensor.fromNumbers('int64', [], [ctx.int('value_int')]);
  if (ctx.has('value_ints')) {
    const v = ctx.ints('value_ints');
    return Tensor.fromNumbers('int64', [v.length], v);
  }
  if (ctx.has('value_string')) return Tensor.fromStrings([], [ctx.string('value_string')]);
  if (ctx.has('value_strings')) {
    const v = ctx.strings('value_strings');
    return Tensor.fromStrings([v.length], [...v]);
  }
  if (ctx.has('sparse_value')) ctx.fail('sparse_value constants are not supported');
  ctx.fail('needs one of the value attributes');
}

const Constant: OpHandler = {
  op: 'Constant',
  infer(ctx) {
    const t = constantValue(ctx);
    const out: InferOutput = { dtype: t.dtype, shape: [...t.dims] };
    const s = constSym(t);
    if (s !== undefined) out.sym = s;
    return [out];
  },
  eval(ctx) {
    return [constantValue(ctx)];
  },
};

// ---------- ConstantOfShape ----------

function fillValue(ctx: OpContext): Tensor {
  if (!ctx.has('value')) return Tensor.scalar('float32', 0);
  const v = ctx.tensor('value');
  if (v.size !== 1) ctx.fail(`value must have one element, has ${v.size}`);
  return v;
}

const ConstantOfShape: OpHandler = {
  op: 'ConstantOfShape',
  infer(ctx, inputs) {
    const s = need(ctx, inputs, 0);
    needInt64(ctx, s.dtype, 'input');
    const v = fillValue(ctx);
    const target = symOf(s);
    if (target === undefined) {
      const n = s.shape?.[0];
      return [
        {
          dtype: v.dtype,
          shape: typeof n === 'number' ? Array.from({ length: n }, () => unknownDim() as Dim) : undefined,
        },
      ];
    }
    for (const d of target) if (typeof d === 'number' && d < 0) ctx.fail(`negative dim ${d} in shape`);
    const out: InferOutput = { dtype: v.dtype, shape: [...target] };
    if (isInt(v.dtype) && target.length <= 1) {
      const len = target.length === 0 ? 1 : target[0]!;
      if (typeof len === 'number' && len <= 1024) out.sym = new Array<Dim>(len).fill(v.nums[0]!);
    }
    return [out];
  },
  eval(ctx, inputs) {
    const dims = Array.from(need(ctx, inputs, 0).nums);
    if (dims.some((d) => d < 0 || !Number.isInteger(d))) ctx.fail(`invalid shape [${dims}]`);
    const v = fillValue(ctx);
    const t = Tensor.zeros(v.dtype, dims);
    if (Array.isArray(t.data)) t.data.fill(v.strings[0]!);
    else t.nums.fill(v.nums[0]!);
    return [t];
  },
};

// ---------- Range ----------

const Range: OpHandler = {
  op: 'Range',
  infer(ctx, inputs) {
    const [s, l, d] = [0, 1, 2].map((i) => need(ctx, inputs, i));
    for (const x of [l!, d!]) if (x.dtype !== s!.dtype) ctx.fail(`inputs mix ${s!.dtype} and ${x.dtype}`);
    for (const x of [s!, l!, d!])
      if (x.shape !== undefined && sizeOf(x.shape.map((v) => (typeof v === 'number' ? v : 1))) !== 1)
        ctx.fail('start, limit and delta must be scalars');
    const [start, limit, delta] = [s, l, d].map((x) => scalarDim(symOf(x), x!.value));
    const out: InferOutput = { dtype: s!.dtype, shape: [rangeLen(ctx, start, limit, delta)] };
    const n = out.shape![0]!;
    if (
      isInt(s!.dtype) &&
      typeof n === 'number' &&
      n <= 1024 &&
      typeof start === 'number' &&
      typeof delta === 'number'
    ) {
      out.sym = Array.from({ length: n }, (_, i) => start + i * delta);
    }
    return [out];
  },
  eval(ctx, inputs) {
    const [s, l, d] = [0, 1, 2].map((i) => need(ctx, inputs, i));
    for (const x of [s!, l!, d!]) if (x.size !== 1) ctx.fail('start, limit and delta must be scalars');
    const start = s!.nums[0]!;
    const delta = d!.nums[0]!;
    const n = rangeLen(ctx, start, l!.nums[0]!, delta) as number;
    const vals = new Float64Array(n);
    for (let i = 0; i < n; i++) vals[i] = start + i * delta;
    return [Tensor.fromNumbers(s!.dtype, [n], vals)];
  },
};

/** The one element of a scalar input as a Dim, when known. */
function scalarDim(sym: Dim[] | undefined, value: Tensor | undefined): Dim | undefined {
  if (sym !== undefined && sym.length === 1) return sym[0];
  if (value !== undefined && value.size === 1) return value.nums[0];
  return undefined;
}

/** Number of Range elements: max(0, ceil((limit - start) / delta)); symbolic when delta is a known number. */
function rangeLen(ctx: OpContext, start: Dim | undefined, limit: Dim | undefined, delta: Dim | undefined): Dim {
  if (delta === 0) ctx.fail('delta cannot be 0');
  if (start === undefined || limit === undefined || typeof delta !== 'number') return unknownDim();
  if (typeof start === 'number' && typeof limit === 'number') return Math.max(0, Math.ceil((limit - start) / delta));
  if (!Number.isInteger(delta)) return unknownDim();
  return delta > 0 ? nonNeg(ceilDivDim(dimSub(limit, start), delta)) : nonNeg(ceilDivDim(dimSub(start, limit), -delta));
}

// ---------- EyeLike ----------

function eyeDtype(ctx: OpContext, input: DType): DType {
  if (!ctx.has('dtype')) return input;
  const code = ctx.int('dtype');
  const d = dtypeFromOnnx(code);
  if (d === undefined || d === 'string') ctx.fail(`unsupported dtype ${onnxDtypeName(code)}`);
  return d;
}

const EyeLike: OpHandler = {
  op: 'EyeLike',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.shape !== undefined && x.shape.length !== 2) ctx.fail(`input must be 2-D, got rank ${x.shape.length}`);
    return [{ dtype: eyeDtype(ctx, x.dtype), shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.rank !== 2) ctx.fail(`input must be 2-D, got rank ${x.rank}`);
    const [r, c] = x.dims as [number, number];
    const k = ctx.int('k', 0);
    const t = Tensor.zeros(eyeDtype(ctx, x.dtype), [r, c]);
    const o = t.nums;
    for (let i = 0; i < r; i++) {
      const j = i + k;
      if (j >= 0 && j < c) o[i * c + j] = 1;
    }
    return [t];
  },
};

export const MOVEMENT_MAKE_OPS: OpHandler[] = [Constant, ConstantOfShape, Range, EyeLike];
