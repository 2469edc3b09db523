// Loss operators: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (reductions none/sum/mean, class weights, ignore_index).
import { isInt } from '../../compiler/dtype.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { fromF64, requireFloat } from './math-common.ts';
import type { InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

type Reduction = 'none' | 'sum' | 'mean';

function reductionOf(ctx: OpContext): Reduction {
  const r = ctx.string('reduction', 'mean');
  if (r !== 'none' && r !== 'sum' && r !== 'mean') ctx.fail(`reduction must be none, sum or mean, got '${r}'`);
  return r;
}

/** Checks the input/target/weight types and returns the loss output type. */
function inferLoss(ctx: OpContext, inputs: (InferInput | undefined)[]): InferOutput {
  const x = need(ctx, inputs, 0);
  const target = need(ctx, inputs, 1);
  const weight = inputs[2];
  requireFloat(ctx, x.dtype);
  if (target.dtype !== 'int32' && target.dtype !== 'int64')
    ctx.fail(`target must be int32 or int64, got ${target.dtype}`);
  if (weight && weight.dtype !== x.dtype) ctx.fail(`weight dtype ${weight.dtype} does not match input ${x.dtype}`);
  if (x.shape && x.shape.length < 2) ctx.fail(`input must have rank >= 2 ([N, C, ...]), got rank ${x.shape.length}`);
  if (x.shape && target.shape && target.shape.length !== x.shape.length - 1) {
    ctx.fail(`target rank ${target.shape.length} must be input rank ${x.shape.length} minus 1`);
  }
  if (weight?.shape && weight.shape.length !== 1) ctx.fail(`weight must be 1-D, got rank ${weight.shape.length}`);
  const red = reductionOf(ctx);
  if (red !== 'none') return { dtype: x.dtype, shape: [] };
  let shape: Dim[] | undefined = target.shape;
  if (!shape && x.shape) shape = [x.shape[0]!, ...x.shape.slice(2)];
  return { dtype: x.dtype, shape };
}

/**
 * The loss of log-probabilities `logp` ([N, C, D...] flat) against target ([N, D...]): per element
 * -logp[n, t, d] * w[t], 0 where t == ignore_index; then reduced (mean divides by the sum of the weights used).
 */
function nll(
  ctx: OpContext,
  logp: ArrayLike<number>,
  dims: readonly number[],
  target: Tensor,
  weight: Tensor | undefined,
): Tensor {
  const n = dims[0]!;
  const c = dims[1]!;
  let d = 1;
  for (let i = 2; i < dims.length; i++) d *= dims[i]!;
  if (target.size !== n * d) ctx.fail(`target dims [${target.dims}] do not match input dims [${dims}]`);
  if (weight && weight.size !== c) ctx.fail(`weight has ${weight.size} elements, expected C = ${c}`);
  const hasIgnore = ctx.has('ignore_index');
  const ignore = ctx.int('ignore_index', 0);
  const t = target.nums;
  const w = weight?.nums;
  const loss = new Float64Array(n * d);
  let wsum = 0;
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < d; k++) {
      const j = i * d + k;
      const cls = t[j]!;
      if (hasIgnore && cls === ignore) continue;
      if (cls < 0 || cls >= c) ctx.fail(`target value ${cls} is out of range [0, ${c})`);
      const wt = w ? w[cls]! : 1;
      loss[j] = -logp[(i * c + cls) * d + k]! * wt;
      wsum += wt;
    }
  }
  return reduceLoss(ctx, loss, target.dims, wsum, weight !== undefined || hasIgnore);
}

function reduceLoss(
  ctx: OpContext,
  loss: Float64Array,
  dims: readonly number[],
  wsum: number,
  weighted: boolean,
): Tensor {
  const red = reductionOf(ctx);
  if (red === 'none') return new Tensor('float64', dims, loss);
  let s = 0;
  for (let i = 0; i < loss.length; i++) s += loss[i]!;
  if (red === 'sum') return new Tensor('float64', [], new Float64Array([s]));
  return new Tensor('float64', [], new Float64Array([weighted ? s / wsum : s / loss.length]));
}

function checkTarget(ctx: OpContext, x: Tensor, target: Tensor): void {
  requireFloat(ctx, x.dtype);
  if (!isInt(target.dtype)) ctx.fail(`target must be int32 or int64, got ${target.dtype}`);
  if (x.rank < 2) ctx.fail(`input must have rank >= 2 ([N, C, ...]), got dims [${x.dims}]`);
}

/** Converts a float64 result into the input's float dtype. */
function toDtype(like: Tensor, t: Tensor): Tensor {
  return fromF64(like.dtype, t.dims, t.nums as Float64Array);
}

const NLL_LOSS: OpHandler = {
  op: 'NegativeLogLikelihoodLoss',
  since: 12,
  infer(ctx, inputs) {
    return [inferLoss(ctx, inputs)];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const target = need(ctx, inputs, 1);
    checkTarget(ctx, x, target);
    return [toDtype(x, nll(ctx, x.nums, x.dims, target, inputs[2]))];
  },
};

/** log_softmax over axis 1 of an [N, C, D...] tensor. */
function logSoftmaxAxis1(x: Tensor): Float64Array {
  const n = x.dims[0]!;
  const c = x.dims[1]!;
  const d = x.size / Math.max(1, n * c);
  const v = x.nums;
  const out = new Float64Array(x.size);
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < d; k++) {
      const base = i * c * d + k;
      let max = -Infinity;
      for (let j = 0; j < c; j++) max = Math.max(max, v[base + j * d]!);
      let sum = 0;
      for (let j = 0; j < c; j++) sum += Math.exp(v[base + j * d]! - max);
      const shift = max + Math.log(sum);
      for (let j = 0; j < c; j++) out[base + j * d] = v[base + j * d]! - shift;
    }
  }
  return out;
}

const SOFTMAX_CE_LOSS: OpHandler = {
  op: 'SoftmaxCrossEntropyLoss',
  since: 12,
  infer(ctx, inputs) {
    const loss = inferLoss(ctx, inputs);
    const x = inputs[0]!;
    return ctx.node.outputs.length > 1 ? [loss, { dtype: x.dtype, shape: x.shape }] : [loss];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const target = need(ctx, inputs, 1);
    checkTarget(ctx, x, target);
    const logp = logSoftmaxAxis1(x);
    const loss = toDtype(x, nll(ctx, logp, x.dims, target, inputs[2]));
    return ctx.node.outputs.length > 1 ? [loss, fromF64(x.dtype, x.dims, logp)] : [loss];
  },
};

export const LOSS_OPS: OpHandler[] = [NLL_LOSS, SOFTMAX_CE_LOSS];
