// Normalizations: Layer, RMS, Batch (inference and training), Instance, Group, MeanVariance and Lp.
import type { NumArray } from '../../compiler/dtype.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import { broadcastIndex, sizeOf, type Tensor } from '../../compiler/tensor.ts';
import { broadcastsTo, dtypeAttr, fromF64, normAxes, prodRange, requireFloat } from './math-common.ts';
import { reduceMap } from './math-reduce.ts';
import type { InferContext, InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { axisOf, need } from './util.ts';

/** Keeps one result per node output (trailing optional outputs may be absent). */
function perOutput<T>(ctx: OpContext, all: T[]): T[] {
  return all.slice(0, Math.max(1, ctx.node.outputs.length));
}

/** Fails when a known parameter shape cannot broadcast to the input shape. */
function checkParam(ctx: OpContext, p: InferInput | undefined, x: readonly Dim[], what: string): void {
  if (p?.shape === undefined) return;
  const off = x.length - p.shape.length;
  const bad =
    off < 0 ||
    p.shape.some((d, i) => typeof d === 'number' && typeof x[i + off] === 'number' && d !== 1 && d !== x[i + off]);
  if (bad) ctx.fail(`${what} of rank ${p.shape.length} does not broadcast to the input's shape`);
}

/** A parameter broadcast over rows of `cols` elements: values and the step from one row to the next (0 = shared). */
interface RowParam {
  v: NumArray;
  stride: number;
}

function gather(src: NumArray, idx: Int32Array): Float64Array {
  const out = new Float64Array(idx.length);
  for (let i = 0; i < idx.length; i++) out[i] = src[idx[i]];
  return out;
}

/** A Scale/Bias input of LayerNormalization-like ops, broadcast to x and seen per row of dims[axis:]. */
function rowParam(
  ctx: OpContext,
  p: Tensor | undefined,
  dims: readonly number[],
  axis: number,
  what: string,
): RowParam {
  const tail = dims.slice(axis);
  if (p === undefined) return { v: new Float64Array(sizeOf(tail)), stride: 0 };
  if (!broadcastsTo(p.dims, dims)) ctx.fail(`${what} of shape [${p.dims}] does not broadcast to [${dims}]`);
  let lead = 0;
  while (lead < p.rank && p.dims[lead] === 1) lead++;
  const pd = p.dims.slice(lead);
  if (pd.length <= tail.length) {
    const idx = broadcastIndex(pd, tail);
    return { v: idx ? gather(p.nums, idx) : p.nums, stride: 0 };
  }
  const idx = broadcastIndex(p.dims, dims);
  return { v: idx ? gather(p.nums, idx) : p.nums, stride: sizeOf(tail) };
}

/** Shapes of LayerNormalization's Mean / InvStdDev: the input's dims before axis, 1 after. */
function statShape<D extends Dim>(shape: readonly D[], axis: number): (D | 1)[] {
  return shape.map((d, i) => (i < axis ? d : 1));
}

const layerNormalization: OpHandler = {
  op: 'LayerNormalization',
  since: 17,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1);
    requireFloat(ctx, x.dtype, 'X');
    const stash = dtypeAttr(ctx, ctx.int('stash_type', 1), 'stash_type');
    if (x.shape === undefined) return perOutput(ctx, [{ dtype: x.dtype }, { dtype: stash }, { dtype: stash }]);
    const axis = axisOf(ctx, ctx.int('axis', -1), x.shape.length);
    checkParam(ctx, scale, x.shape, 'Scale');
    checkParam(ctx, inputs[2], x.shape, 'B');
    const s = statShape(x.shape, axis);
    return perOutput(ctx, [
      { dtype: x.dtype, shape: x.shape },
      { dtype: stash, shape: s },
      { dtype: stash, shape: [...s] },
    ]);
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1);
    requireFloat(ctx, x.dtype, 'X');
    const stash = dtypeAttr(ctx, ctx.int('stash_type', 1), 'stash_type');
    const axis = axisOf(ctx, ctx.int('axis', -1), x.rank);
    const eps = ctx.float('epsilon', 1e-5);
    const rows = prodRange(x.dims, 0, axis),
      cols = prodRange(x.dims, axis, x.rank);
    const w = rowParam(ctx, scale, x.dims, axis, 'Scale'),
      b = rowParam(ctx, inputs[2], x.dims, axis, 'B');
    const xv = x.nums,
      wv = w.v,
      bv = b.v,
      ws = w.stride,
      bs = b.stride;
    const y = new Float64Array(x.size),
      means = new Float64Array(rows),
      invs = new Float64Array(rows);
    for (let r = 0; r < rows; r++) {
      const base = r * cols;
      let sum = 0;
      for (let j = 0; j < cols; j++) sum += xv[base + j];
      const mean = sum / cols;
      let sq = 0;
      for (let j = 0; j < cols; j++) {
        const d = xv[base + j] - mean;
        sq += d * d;
      }
      const inv = 1 / Math.sqrt(sq / cols + eps);
      const wo = r * ws,
        bo = r * bs;
      for (let j = 0; j < cols; j++) y[base + j] = (xv[base + j] - mean) * inv * wv[wo + j] + bv[bo + j];
      means[r] = mean;
      invs[r] = inv;
    }
    const s = statShape(x.dims, axis);
    return perOutput(ctx, [fromF64(x.dtype, x.dims, y), fromF64(stash, s, means), fromF64(stash, s, invs)]);
  },
};

const rmsNormalization: OpHandler = {
  op: 'RMSNormalization',
  since: 23,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1);
    requireFloat(ctx, x.dtype, 'X');
    dtypeAttr(ctx, ctx.int('stash_type', 1), 'stash_type');
    if (x.shape !== undefined) {
      axisOf(ctx, ctx.int('axis', -1), x.shape.length);
      checkParam(ctx, scale, x.shape, 'scale');
    }
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1);
    requireFloat(ctx, x.dtype, 'X');
    const axis = axisOf(ctx, ctx.int('axis', -1), x.rank);
    const eps = ctx.float('epsilon', 1e-5);
    const rows = prodRange(x.dims, 0, axis),
      cols = prodRange(x.dims, axis, x.rank);
    const w = rowParam(ctx, scale, x.dims, axis, 'scale');
    const xv = x.nums,
      wv = w.v,
      ws = w.stride;
    const y = new Float64Array(x.size);
    for (let r = 0; r < rows; r++) {
      const base = r * cols;
      let sq = 0;
      for (let j = 0; j < cols; j++) sq += xv[base + j] * xv[base + j];
      const inv = 1 / Math.sqrt(sq / cols + eps);
      const wo = r * ws;
      for (let j = 0; j < cols; j++) y[base + j] = xv[base + j] * inv * wv[wo + j];
    }
    return [fromF64(x.dtype, x.dims, y)];
  },
};

/**
 * Normalizes x [N, C, ...] over groups of `perGroup` consecutive channels (all spatial positions), then applies
 * per-channel scale and bias (given as functions of the channel index c and group g).
 */
function groupNormalize(
  x: NumArray,
  dims: readonly number[],
  perGroup: number,
  eps: number,
  scaleAt: (c: number, g: number) => number,
  biasAt: (c: number, g: number) => number,
): Float64Array {
  const n = dims[0],
    c = dims[1],
    spatial = prodRange(dims, 2, dims.length);
  const groups = c / perGroup,
    size = perGroup * spatial;
  const y = new Float64Array(x.length);
  for (let i = 0; i < n; i++) {
    for (let g = 0; g < groups; g++) {
      const base = (i * c + g * perGroup) * spatial;
      let sum = 0;
      for (let k = 0; k < size; k++) sum += x[base + k];
      const mean = sum / size;
      let sq = 0;
      for (let k = 0; k < size; k++) {
        const d = x[base + k] - mean;
        sq += d * d;
      }
      const inv = 1 / Math.sqrt(sq / size + eps);
      for (let ch = 0; ch < perGroup; ch++) {
        const s = scaleAt(g * perGroup + ch, g),
          b = biasAt(g * perGroup + ch, g);
        const o = base + ch * spatial;
        for (let k = 0; k < spatial; k++) y[o + k] = (x[o + k] - mean) * inv * s + b;
      }
    }
  }
  return y;
}

/** Fails unless a known 1-D parameter has `want` elements (when both are known). */
function checkVector(ctx: OpContext, p: InferInput | undefined, want: Dim | undefined, what: string): void {
  if (p?.shape === undefined) return;
  if (p.shape.length !== 1) ctx.fail(`${what} must be 1-D, got rank ${p.shape.length}`);
  const d = p.shape[0];
  if (typeof d === 'number' && typeof want === 'number' && d !== want)
    ctx.fail(`${what} has ${d} elements, expected ${want}`);
}

function requireChannels(ctx: OpContext, rank: number | undefined): void {
  if (rank !== undefined && rank < 2) ctx.fail(`input must have rank ≥ 2 ([N, C, ...]), got ${rank}`);
}

function requireSize(ctx: OpContext, t: Tensor, want: number, what: string): void {
  if (t.size !== want) ctx.fail(`${what} has ${t.size} elements, expected ${want}`);
}

const instanceNormalization: OpHandler = {
  op: 'InstanceNormalization',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    requireChannels(ctx, x.shape?.length);
    checkVector(ctx, need(ctx, inputs, 1), x.shape?.[1], 'scale');
    checkVector(ctx, need(ctx, inputs, 2), x.shape?.[1], 'B');
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1),
      bias = need(ctx, inputs, 2);
    requireFloat(ctx, x.dtype);
    requireChannels(ctx, x.rank);
    requireSize(ctx, scale, x.dims[1], 'scale');
    requireSize(ctx, bias, x.dims[1], 'B');
    const sv = scale.nums,
      bv = bias.nums;
    const y = groupNormalize(
      x.nums,
      x.dims,
      1,
      ctx.float('epsilon', 1e-5),
      (c) => sv[c],
      (c) => bv[c],
    );
    return [fromF64(x.dtype, x.dims, y)];
  },
};

/** GroupNormalization: scale and bias per group before opset 21, per channel from 21. */
function groupNormHandler(since: number, until: number | undefined): OpHandler {
  const perChannel = since >= 21;
  return {
    op: 'GroupNormalization',
    since,
    until,
    infer(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      requireFloat(ctx, x.dtype);
      requireChannels(ctx, x.shape?.length);
      const g = ctx.int('num_groups');
      const want = perChannel ? x.shape?.[1] : g;
      checkVector(ctx, need(ctx, inputs, 1), want, 'scale');
      checkVector(ctx, need(ctx, inputs, 2), want, 'bias');
      const c = x.shape?.[1];
      if (typeof c === 'number' && (g <= 0 || c % g !== 0)) ctx.fail(`num_groups ${g} does not divide ${c} channels`);
      if (perChannel) dtypeAttr(ctx, ctx.int('stash_type', 1), 'stash_type');
      return [{ dtype: x.dtype, shape: x.shape }];
    },
    eval(ctx, inputs) {
      const x = need(ctx, inputs, 0),
        scale = need(ctx, inputs, 1),
        bias = need(ctx, inputs, 2);
      requireFloat(ctx, x.dtype);
      requireChannels(ctx, x.rank);
      const g = ctx.int('num_groups'),
        c = x.dims[1];
      if (g <= 0 || c % g !== 0) ctx.fail(`num_groups ${g} does not divide ${c} channels`);
      requireSize(ctx, scale, perChannel ? c : g, 'scale');
      requireSize(ctx, bias, perChannel ? c : g, 'bias');
      const sv = scale.nums,
        bv = bias.nums;
      const at = (v: NumArray) => (perChannel ? (ch: number) => v[ch] : (_ch: number, grp: number) => v[grp]);
      const y = groupNormalize(x.nums, x.dims, c / g, ctx.float('epsilon', 1e-5), at(sv), at(bv));
      return [fromF64(x.dtype, x.dims, y)];
    },
  };
}

/** Is BatchNormalization in training mode (batch statistics) at this opset? */
function bnTraining(ctx: OpContext): boolean {
  if (ctx.opset >= 14) return ctx.int('training_mode', 0) !== 0;
  if (ctx.opset < 7) return ctx.int('is_test', 0) === 0;
  return ctx.node.outputs.filter((o) => o !== '').length > 1;
}

/** Per-channel batch mean and (population) variance of x [N, C, ...]. */
function channelStats(x: NumArray, dims: readonly number[]): { mean: Float64Array; variance: Float64Array } {
  const n = dims[0],
    c = dims[1],
    spatial = prodRange(dims, 2, dims.length),
    count = n * spatial;
  const mean = new Float64Array(c),
    variance = new Float64Array(c);
  for (let ch = 0; ch < c; ch++) {
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const o = (i * c + ch) * spatial;
      for (let k = 0; k < spatial; k++) sum += x[o + k];
    }
    const m = sum / count;
    let sq = 0;
    for (let i = 0; i < n; i++) {
      const o = (i * c + ch) * spatial;
      for (let k = 0; k < spatial; k++) {
        const d = x[o + k] - m;
        sq += d * d;
      }
    }
    mean[ch] = m;
    variance[ch] = sq / count;
  }
  return { mean, variance };
}

const batchNormalization: OpHandler = {
  op: 'BatchNormalization',
  infer(ctx: InferContext, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    requireChannels(ctx, x.shape?.length);
    for (let i = 1; i <= 4; i++) need(ctx, inputs, i);
    const mean = inputs[3]!;
    const c: Dim[] | undefined = x.shape !== undefined ? [x.shape[1]] : mean.shape;
    const stat: InferOutput = { dtype: mean.dtype, shape: c };
    return perOutput(ctx, [{ dtype: x.dtype, shape: x.shape }, stat, { ...stat }, { ...stat }, { ...stat }]);
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const [scale, bias, mean, variance] = [1, 2, 3, 4].map((i) => need(ctx, inputs, i));
    requireFloat(ctx, x.dtype);
    requireChannels(ctx, x.rank);
    const c = x.dims[1],
      spatial = prodRange(x.dims, 2, x.rank),
      perElem = c * spatial;
    for (const [t, what] of [
      [scale, 'scale'],
      [bias, 'B'],
      [mean, 'mean'],
      [variance, 'var'],
    ] as const) {
      if (t.size !== c && !(ctx.opset < 9 && t.size === perElem))
        ctx.fail(`${what} has ${t.size} elements, expected ${c}`);
    }
    const eps = ctx.float('epsilon', 1e-5);
    const training = bnTraining(ctx);
    const stats = training ? channelStats(x.nums, x.dims) : undefined;
    const mv = stats ? stats.mean : mean.nums,
      vv = stats ? stats.variance : variance.nums;
    const sv = scale.nums,
      bv = bias.nums,
      xv = x.nums;
    const y = new Float64Array(x.size);
    for (let i = 0; i < x.size; i++) {
      const e = i % perElem;
      const p = scale.size === c ? Math.floor(e / spatial) : e;
      const q = mv.length === c ? Math.floor(e / spatial) : e;
      y[i] = (sv[p] * (xv[i] - mv[q])) / Math.sqrt(vv[q] + eps) + bv[p];
    }
    const out = [fromF64(x.dtype, x.dims, y)];
    if (stats) {
      const momentum = ctx.float('momentum', 0.9);
      const run = (old: Tensor, now: Float64Array) =>
        fromF64(
          old.dtype,
          old.dims,
          Float64Array.from(old.nums, (v, i) => v * momentum + now[i] * (1 - momentum)),
        );
      out.push(run(mean, stats.mean), run(variance, stats.variance));
      if (ctx.opset < 14) out.push(fromF64(mean.dtype, [c], stats.mean), fromF64(mean.dtype, [c], stats.variance));
    }
    return perOutput(ctx, out);
  },
};

const meanVarianceNormalization: OpHandler = {
  op: 'MeanVarianceNormalization',
  since: 9,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    if (x.shape !== undefined) normAxes(ctx, ctx.ints('axes', [0, 2, 3]), x.shape.length);
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    const axes = normAxes(ctx, ctx.ints('axes', [0, 2, 3]), x.rank);
    const { outDims, map } = reduceMap(x.dims, axes);
    const groups = sizeOf(outDims),
      count = groups === 0 ? 0 : x.size / groups;
    const mean = new Float64Array(groups),
      sq = new Float64Array(groups);
    const xv = x.nums;
    for (let i = 0; i < x.size; i++) {
      mean[map[i]] += xv[i];
      sq[map[i]] += xv[i] * xv[i];
    }
    for (let g = 0; g < groups; g++) {
      mean[g] /= count;
      sq[g] = Math.sqrt(Math.max(0, sq[g] / count - mean[g] * mean[g])) + 1e-9;
    }
    const y = new Float64Array(x.size);
    for (let i = 0; i < x.size; i++) y[i] = (xv[i] - mean[map[i]]) / sq[map[i]];
    return [fromF64(x.dtype, x.dims, y)];
  },
};

const lpNormalization: OpHandler = {
  op: 'LpNormalization',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    const p = ctx.int('p', 2);
    if (p !== 1 && p !== 2) ctx.fail(`p must be 1 or 2, got ${p}`);
    if (x.shape !== undefined) axisOf(ctx, ctx.int('axis', -1), x.shape.length);
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    const p = ctx.int('p', 2);
    if (p !== 1 && p !== 2) ctx.fail(`p must be 1 or 2, got ${p}`);
    const axis = axisOf(ctx, ctx.int('axis', -1), x.rank);
    const outer = prodRange(x.dims, 0, axis),
      len = x.dims[axis],
      inner = prodRange(x.dims, axis + 1, x.rank);
    const xv = x.nums,
      y = new Float64Array(x.size);
    for (let o = 0; o < outer; o++) {
      for (let q = 0; q < inner; q++) {
        const base = o * len * inner + q;
        let acc = 0;
        for (let i = 0; i < len; i++) {
          const v = xv[base + i * inner];
          acc += p === 1 ? Math.abs(v) : v * v;
        }
        // A zero norm (all-zero fiber) leaves the zeros as they are, as the conformance data expects.
        const norm = acc === 0 ? 1 : p === 1 ? acc : Math.sqrt(acc);
        for (let i = 0; i < len; i++) y[base + i * inner] = xv[base + i * inner] / norm;
      }
    }
    return [fromF64(x.dtype, x.dims, y)];
  },
};

export const NORM_OPS: OpHandler[] = [
  layerNormalization,
  rmsNormalization,
  instanceNormalization,
  groupNormHandler(18, 21),
  groupNormHandler(21, undefined),
  batchNormalization,
  meanVarianceNormalization,
  lpNormalization,
];
