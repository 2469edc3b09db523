// Softmax, LogSoftmax and Hardmax: before opset 13 over the input coerced to 2-D at axis (default 1), from 13 along one axis (default -1).
import type { NumArray } from '../../compiler/dtype.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import { fromF64, prodRange, requireFloat } from './math-common.ts';
import type { OpContext, OpHandler } from './types.ts';
import { axisOf, need, same } from './util.ts';

type Kind = 'softmax' | 'logsoftmax' | 'hardmax';

/** The input seen as [outer, len, inner] with the op running over len. */
interface Layout {
  outer: number;
  len: number;
  inner: number;
}

function layout(ctx: OpContext, dims: readonly number[], coerce2d: boolean): Layout {
  const rank = dims.length;
  if (coerce2d) {
    const a = rank === 0 ? 0 : axisOf(ctx, ctx.int('axis', 1), rank);
    return { outer: prodRange(dims, 0, a), len: prodRange(dims, a, rank), inner: 1 };
  }
  const a = axisOf(ctx, ctx.int('axis', -1), rank);
  return { outer: prodRange(dims, 0, a), len: dims[a], inner: prodRange(dims, a + 1, rank) };
}

/** Writes softmax / log-softmax / hardmax of each [len] fiber (stride `inner`) of x into out. */
function run(kind: Kind, x: NumArray, l: Layout, out: Float64Array): void {
  const { outer, len, inner } = l;
  for (let o = 0; o < outer; o++) {
    for (let q = 0; q < inner; q++) {
      const base = o * len * inner + q;
      let max = -Infinity,
        arg = 0;
      for (let i = 0; i < len; i++) {
        const v = x[base + i * inner];
        if (v > max || (v !== v && max === max)) {
          max = v;
          arg = i;
        }
      }
      if (kind === 'hardmax') {
        if (len > 0) out[base + arg * inner] = 1;
        continue;
      }
      let sum = 0;
      for (let i = 0; i < len; i++) {
        const e = Math.exp(x[base + i * inner] - max);
        if (kind === 'softmax') out[base + i * inner] = e;
        sum += e;
      }
      if (kind === 'softmax') {
        const inv = 1 / sum;
        for (let i = 0; i < len; i++) out[base + i * inner] *= inv;
      } else {
        const shift = max + Math.log(sum);
        for (let i = 0; i < len; i++) out[base + i * inner] = x[base + i * inner] - shift;
      }
    }
  }
}

function handler(op: string, kind: Kind, since: number, until: number | undefined): OpHandler {
  const coerce2d = since < 13;
  return {
    op,
    since,
    until,
    infer(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      requireFloat(ctx, x.dtype);
      if (x.shape !== undefined && (x.shape.length > 0 || !coerce2d)) {
        axisOf(ctx, ctx.int('axis', coerce2d ? 1 : -1), x.shape.length);
      }
      return [same(x)];
    },
    eval(ctx, inputs) {
      const x: Tensor = need(ctx, inputs, 0);
      requireFloat(ctx, x.dtype);
      const out = new Float64Array(x.size);
      run(kind, x.nums, layout(ctx, x.dims, coerce2d), out);
      return [fromF64(x.dtype, x.dims, out)];
    },
  };
}

export const SOFTMAX_OPS: OpHandler[] = [
  handler('Softmax', 'softmax', 1, 13),
  handler('Softmax', 'softmax', 13, undefined),
  handler('LogSoftmax', 'logsoftmax', 1, 13),
  handler('LogSoftmax', 'logsoftmax', 13, undefined),
  handler('Hardmax', 'hardmax', 1, 13),
  handler('Hardmax', 'hardmax', 13, undefined),
];
