// Movement operators that only reinterpret shapes: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Transpose.
import { dimProduct, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { sizeOf, Tensor } from '../../compiler/tensor.ts';
import type { InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';
import { axesOf, divDims, needInt64, numsOf, passSym, permute, symOf } from './movement-common.ts';

// ---------- Shape, Size ----------

/** Shape's [start, end) window of a rank, clamped as the spec says. */
function shapeWindow(ctx: OpContext, rank: number): [number, number] {
  const clamp = (v: number) => Math.min(Math.max(v < 0 ? v + rank : v, 0), rank);
  const start = clamp(ctx.int('start', 0));
  const end = clamp(ctx.int('end', rank));
  return [start, Math.max(start, end)];
}

const Shape: OpHandler = {
  op: 'Shape',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.shape === undefined) return [{ dtype: 'int64', shape: [unknownDim()] }];
    const [s, e] = shapeWindow(ctx, x.shape.length);
    const dims = x.shape.slice(s, e);
    return [{ dtype: 'int64', shape: [dims.length], sym: dims }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const [s, e] = shapeWindow(ctx, x.rank);
    const dims = x.dims.slice(s, e);
    return [Tensor.fromNumbers('int64', [dims.length], dims)];
  },
};

const Size: OpHandler = {
  op: 'Size',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const out: InferOutput = { dtype: 'int64', shape: [] };
    if (x.shape !== undefined) out.sym = [dimProduct(x.shape)];
    return [out];
  },
  eval(ctx, inputs) {
    return [Tensor.scalar('int64', need(ctx, inputs, 0).size)];
  },
};

// ---------- Reshape ----------

/** Output dims of Reshape from the requested shape (numbers or symbols) and the input shape (if known). */
function reshapeDims(
  ctx: OpContext,
  inShape: readonly Dim[] | undefined,
  target: readonly Dim[],
  allowzero: boolean,
): Dim[] {
  const out: Dim[] = [];
  let neg = -1;
  for (let i = 0; i < target.length; i++) {
    const v = target[i]!;
    if (typeof v !== 'number') {
      out.push(v);
      continue;
    }
    if (v === -1) {
      if (neg >= 0) ctx.fail('shape has more than one -1');
      neg = i;
      out.push(-1);
    } else if (v === 0 && !allowzero) {
      if (inShape === undefined) out.push(unknownDim());
      else if (i >= inShape.length) ctx.fail(`shape[${i}] = 0 copies a dim the rank-${inShape.length} input lacks`);
      else out.push(inShape[i]!);
    } else if (v < -1 || !Number.isInteger(v)) ctx.fail(`invalid shape value ${v}`);
    else out.push(v);
  }
  if (allowzero && neg >= 0 && target.includes(0)) ctx.fail('shape has both 0 and -1 with allowzero=1');
  if (inShape === undefined) {
    if (neg >= 0) out[neg] = unknownDim();
    return out;
  }
  const others = out.filter((_, i) => i !== neg);
  if (neg >= 0) {
    const inSize = dimProduct(inShape);
    const rest = dimProduct(others);
    if (typeof inSize === 'number' && typeof rest === 'number') {
      if (rest === 0 || inSize % rest !== 0) ctx.fail(`cannot reshape ${inSize} elements to [${target}]`);
      out[neg] = inSize / rest;
    } else out[neg] = divDims(inShape, others);
  } else {
    const a = dimProduct(inShape);
    const b = dimProduct(out);
    if (typeof a === 'number' && typeof b === 'number' && a !== b)
      ctx.fail(`cannot reshape ${a} elements to [${target}]`);
  }
  return out;
}

function inferReshape(
  ctx: OpContext,
  x: InferInput,
  target: Dim[] | undefined,
  targetLen: Dim | undefined,
): InferOutput[] {
  if (target === undefined) {
    const shape =
      typeof targetLen === 'number' ? Array.from({ length: targetLen }, () => unknownDim() as Dim) : undefined;
    return [{ dtype: x.dtype, shape }];
  }
  const shape = reshapeDims(ctx, x.shape, target, ctx.int('allowzero', 0) === 1);
  return [passSym(x, { dtype: x.dtype, shape })];
}

function evalReshape(ctx: OpContext, x: Tensor, target: number[]): Tensor[] {
  const dims = reshapeDims(ctx, x.dims, target, ctx.int('allowzero', 0) === 1) as number[];
  if (sizeOf(dims) !== x.size) ctx.fail(`cannot reshape [${x.dims}] to [${target}]`);
  return [x.reshape(dims)];
}

const Reshape: OpHandler = {
  op: 'Reshape',
  since: 5,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const s = need(ctx, inputs, 1);
    needInt64(ctx, s.dtype, 'shape');
    if (s.shape !== undefined && s.shape.length !== 1) ctx.fail(`shape must be 1-D, got rank ${s.shape.length}`);
    return inferReshape(ctx, x, symOf(s), s.shape?.[0]);
  },
  eval(ctx, inputs) {
    return evalReshape(ctx, need(ctx, inputs, 0), Array.from(need(ctx, inputs, 1).nums));
  },
};

const Reshape1: OpHandler = {
  op: 'Reshape',
  until: 5,
  infer(ctx, inputs) {
    const target = ctx.ints('shape');
    return inferReshape(ctx, need(ctx, inputs, 0), target, target.length);
  },
  eval(ctx, inputs) {
    return evalReshape(ctx, need(ctx, inputs, 0), ctx.ints('shape'));
  },
};

// ---------- Flatten ----------

function flattenAxis(ctx: OpContext, rank: number): number {
  const a0 = ctx.int('axis', 1);
  const a = a0 < 0 ? a0 + rank : a0;
  if (a < 0 || a > rank) ctx.fail(`axis ${a0} is out of range for rank ${rank}`);
  return a;
}

const Flatten: OpHandler = {
  op: 'Flatten',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.shape === undefined) return [{ dtype: x.dtype, shape: [unknownDim(), unknownDim()] }];
    const a = flattenAxis(ctx, x.shape.length);
    return [{ dtype: x.dtype, shape: [dimProduct(x.shape.slice(0, a)), dimProduct(x.shape.slice(a))] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const a = flattenAxis(ctx, x.rank);
    return [x.reshape([sizeOf(x.dims.slice(0, a)), sizeOf(x.dims.slice(a))])];
  },
};

// ---------- Squeeze ----------

/** Squeezed shape; axes undefined squeezes every dim that is 1 (symbolic dims are kept). */
function squeezeDims(ctx: OpContext, shape: readonly Dim[], axes: readonly number[] | undefined): Dim[] {
  if (axes === undefined) return shape.filter((d) => d !== 1);
  const norm = axesOf(ctx, axes, shape.length);
  for (const a of norm) {
    const d = shape[a]!;
    if (typeof d === 'number' && d !== 1) ctx.fail(`cannot squeeze axis ${a} of size ${d}`);
  }
  return shape.filter((_, i) => !norm.includes(i));
}

function inferSqueeze(ctx: OpContext, x: InferInput, axes: number[] | undefined, axesKnown: boolean): InferOutput[] {
  if (x.shape === undefined || !axesKnown) return [{ dtype: x.dtype, shape: undefined }];
  return [passSym(x, { dtype: x.dtype, shape: squeezeDims(ctx, x.shape, axes) })];
}

const Squeeze13: OpHandler = {
  op: 'Squeeze',
  since: 13,
  infer(ctx, inputs) {
    const ax = inputs[1];
    if (ax !== undefined) needInt64(ctx, ax.dtype, 'axes');
    return inferSqueeze(ctx, need(ctx, inputs, 0), numsOf(ax), ax === undefined || numsOf(ax) !== undefined);
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const ax = inputs[1] === undefined ? undefined : Array.from(inputs[1].nums);
    return [x.reshape(squeezeDims(ctx, x.dims, ax) as number[])];
  },
};

const Squeeze1: OpHandler = {
  op: 'Squeeze',
  until: 13,
  infer(ctx, inputs) {
    return inferSqueeze(ctx, need(ctx, inputs, 0), ctx.has('axes') ? ctx.ints('axes') : undefined, true);
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    return [x.reshape(squeezeDims(ctx, x.dims, ctx.has('axes') ? ctx.ints('axes') : undefined) as number[])];
  },
};

// ---------- Unsqueeze ----------

function unsqueezeDims(ctx: OpContext, shape: readonly Dim[], axes: readonly number[]): Dim[] {
  const rank = shape.length + axes.length;
  const norm = axesOf(ctx, axes, rank);
  const out: Dim[] = [];
  let j = 0;
  for (let i = 0; i < rank; i++) out.push(norm.includes(i) ? 1 : shape[j++]!);
  return out;
}

function inferUnsqueeze(ctx: OpContext, x: InferInput, axes: number[] | undefined): InferOutput[] {
  if (x.shape === undefined || axes === undefined) return [{ dtype: x.dtype, shape: undefined }];
  return [passSym(x, { dtype: x.dtype, shape: unsqueezeDims(ctx, x.shape, axes) })];
}

const Unsqueeze13: OpHandler = {
  op: 'Unsqueeze',
  since: 13,
  infer(ctx, inputs) {
    const ax = need(ctx, inputs, 1);
    needInt64(ctx, ax.dtype, 'axes');
    const x = need(ctx, inputs, 0);
    const axes = numsOf(ax);
    if (axes === undefined && x.shape !== undefined && typeof ax.shape?.[0] === 'number') {
      return [
        { dtype: x.dtype, shape: Array.from({ length: x.shape.length + ax.shape[0] }, () => unknownDim() as Dim) },
      ];
    }
    return inferUnsqueeze(ctx, x, axes);
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    return [x.reshape(unsqueezeDims(ctx, x.dims, Array.from(need(ctx, inputs, 1).nums)) as number[])];
  },
};

const Unsqueeze1: OpHandler = {
  op: 'Unsqueeze',
  until: 13,
  infer(ctx, inputs) {
    return inferUnsqueeze(ctx, need(ctx, inputs, 0), ctx.ints('axes'));
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    return [x.reshape(unsqueezeDims(ctx, x.dims, ctx.ints('axes')) as number[])];
  },
};

// ---------- Transpose ----------

function permOf(ctx: OpContext, rank: number): number[] {
  const def = Array.from({ length: rank }, (_, i) => rank - 1 - i);
  const perm = ctx.has('perm') ? ctx.ints('perm') : def;
  if (perm.length !== rank) ctx.fail(`perm [${perm}] has ${perm.length} entries for rank ${rank}`);
  const seen = new Set<number>();
  for (const p of perm) {
    if (!Number.isInteger(p) || p < 0 || p >= rank || seen.has(p))
      ctx.fail(`perm [${perm}] is not a permutation of 0..${rank - 1}`);
    seen.add(p);
  }
  return perm;
}

const Transpose: OpHandler = {
  op: 'Transpose',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
    const perm = permOf(ctx, x.shape.length);
    return [passSym(x, { dtype: x.dtype, shape: perm.map((p) => x.shape![p]!) })];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    return [permute(x, permOf(ctx, x.rank))];
  },
};

export const MOVEMENT_SHAPE_OPS: OpHandler[] = [
  Shape,
  Size,
  Reshape,
  Reshape1,
  Flatten,
  Squeeze13,
  Squeeze1,
  Unsqueeze13,
  Unsqueeze1,
  Transpose,
];
