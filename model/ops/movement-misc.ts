// Movement operators over axes and blocks: Trilu, CumSum, CumProd, DepthToSpace, SpaceToDepth, ReverseSequence.
import { allocData, type DType } from '../../compiler/dtype.ts';
import { dimDiv, dimMul, type Dim } from '../../compiler/symbolic.ts';
import { converter, sizeOf, stridesOf, Tensor } from '../../compiler/tensor.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { axisOf, need } from './util.ts';
import { cloneData, needIndexType, needInt64, needRank, permute } from './movement-common.ts';

type Elems = { [i: number]: number | string; length: number };

/** Rounding after each accumulation step, as numpy does in the element type. */
function stepRounding(dtype: DType): ((x: number) => number) | undefined {
  if (dtype === 'float32') return Math.fround;
  return converter(dtype);
}

// ---------- Trilu ----------

const Trilu: OpHandler = {
  op: 'Trilu',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.shape !== undefined && x.shape.length < 2) ctx.fail(`input must have rank at least 2, got ${x.shape.length}`);
    const k = inputs[1];
    if (k !== undefined) needInt64(ctx, k.dtype, 'k');
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.rank < 2) ctx.fail(`input must have rank at least 2, got ${x.rank}`);
    const kt = inputs[1];
    if (kt !== undefined && kt.size !== 1) ctx.fail('k must be a scalar');
    const k = kt === undefined ? 0 : kt.nums[0]!;
    const upper = ctx.int('upper', 1) !== 0;
    const rows = x.dims[x.rank - 2]!;
    const cols = x.dims[x.rank - 1]!;
    const data = cloneData(x);
    const o = data as Elems;
    const zero = x.dtype === 'string' ? '' : 0;
    for (let base = 0; base < x.size; base += rows * cols) {
      for (let i = 0; i < rows; i++) {
        for (let j = 0; j < cols; j++) {
          const keep = upper ? j - i >= k : j - i <= k;
          if (!keep) o[base + i * cols + j] = zero;
        }
      }
    }
    return [new Tensor(x.dtype, x.dims, data)];
  },
};

// ---------- CumSum, CumProd ----------

function inferCumulative(ctx: OpContext, inputs: (InferInput | undefined)[]) {
  const x = need(ctx, inputs, 0);
  const a = need(ctx, inputs, 1);
  needIndexType(ctx, a.dtype, 'axis');
  if (x.dtype === 'string' || x.dtype === 'bool') ctx.fail(`unsupported dtype ${x.dtype}`);
  return [{ dtype: x.dtype, shape: x.shape }];
}

function evalCumulative(ctx: OpContext, inputs: (Tensor | undefined)[], isProd: boolean): Tensor[] {
  const x = need(ctx, inputs, 0);
  const at = need(ctx, inputs, 1);
  if (at.size !== 1) ctx.fail('axis must be a scalar');
  const axis = axisOf(ctx, at.nums[0]!, x.rank);
  const exclusive = ctx.int('exclusive', 0) !== 0;
  const reverse = ctx.int('reverse', 0) !== 0;
  const round = stepRounding(x.dtype);
  const n = x.dims[axis]!;
  const inner = sizeOf(x.dims.slice(axis + 1));
  const outer = sizeOf(x.dims.slice(0, axis));
  const src = x.nums;
  const out = allocData(x.dtype, x.size) as typeof src;
  const init = isProd ? 1 : 0;
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      let acc = init;
      for (let s = 0; s < n; s++) {
        const t = reverse ? n - 1 - s : s;
        const p = (o * n + t) * inner + i;
        const v = src[p]!;
        if (exclusive) out[p] = acc;
        acc = isProd ? acc * v : acc + v;
        if (round) acc = round(acc);
        if (!exclusive) out[p] = acc;
      }
    }
  }
  return [new Tensor(x.dtype, x.dims, out)];
}

const CumSum: OpHandler = {
  op: 'CumSum',
  infer: inferCumulative,
  eval: (ctx, inputs) => evalCumulative(ctx, inputs, false),
};

const CumProd: OpHandler = {
  op: 'CumProd',
  infer: inferCumulative,
  eval: (ctx, inputs) => evalCumulative(ctx, inputs, true),
};

// ---------- DepthToSpace, SpaceToDepth ----------

function blocksize(ctx: OpContext): number {
  const b = ctx.int('blocksize');
  if (b <= 0) ctx.fail(`blocksize must be positive, got ${b}`);
  return b;
}

function depthMode(ctx: OpContext): string {
  const mode = ctx.string('mode', 'DCR');
  if (mode !== 'DCR' && mode !== 'CRD') ctx.fail(`unsupported mode '${mode}'`);
  return mode;
}

const DepthToSpace: OpHandler = {
  op: 'DepthToSpace',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    needRank(ctx, x.shape, 4, 'input');
    const b = blocksize(ctx);
    depthMode(ctx);
    if (x.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
    const [n, c, h, w] = x.shape as [Dim, Dim, Dim, Dim];
    if (typeof c === 'number' && c % (b * b) !== 0) ctx.fail(`channels ${c} are not divisible by blocksize² ${b * b}`);
    return [{ dtype: x.dtype, shape: [n, dimDiv(c, b * b), dimMul(h, b), dimMul(w, b)] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.rank !== 4) ctx.fail(`input must have rank 4, got ${x.rank}`);
    const b = blocksize(ctx);
    const [n, c, h, w] = x.dims as [number, number, number, number];
    if (c % (b * b) !== 0) ctx.fail(`channels ${c} are not divisible by blocksize² ${b * b}`);
    const c2 = c / (b * b);
    const t =
      depthMode(ctx) === 'DCR'
        ? permute(x.reshape([n, b, b, c2, h, w]), [0, 3, 4, 1, 5, 2])
        : permute(x.reshape([n, c2, b, b, h, w]), [0, 1, 4, 2, 5, 3]);
    return [t.reshape([n, c2, h * b, w * b])];
  },
};

const SpaceToDepth: OpHandler = {
  op: 'SpaceToDepth',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    needRank(ctx, x.shape, 4, 'input');
    const b = blocksize(ctx);
    if (x.shape === undefined) return [{ dtype: x.dtype, shape: undefined }];
    const [n, c, h, w] = x.shape as [Dim, Dim, Dim, Dim];
    for (const d of [h, w])
      if (typeof d === 'number' && d % b !== 0) ctx.fail(`spatial dim ${d} is not divisible by blocksize ${b}`);
    return [{ dtype: x.dtype, shape: [n, dimMul(c, b * b), dimDiv(h, b), dimDiv(w, b)] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.rank !== 4) ctx.fail(`input must have rank 4, got ${x.rank}`);
    const b = blocksize(ctx);
    const [n, c, h, w] = x.dims as [number, number, number, number];
    if (h % b !== 0 || w % b !== 0) ctx.fail(`spatial dims ${h}x${w} are not divisible by blocksize ${b}`);
    const t = permute(x.reshape([n, c, h / b, b, w / b, b]), [0, 3, 5, 1, 2, 4]);
    return [t.reshape([n, c * b * b, h / b, w / b])];
  },
};

// ---------- ReverseSequence ----------

function seqAxes(ctx: OpContext): [number, number] {
  const b = ctx.int('batch_axis', 1);
  const t = ctx.int('time_axis', 0);
  if ((b !== 0 && b !== 1) || (t !== 0 && t !== 1) || b === t)
    ctx.fail(`batch_axis ${b} and time_axis ${t} must be 0 and 1 in some order`);
  return [b, t];
}

const ReverseSequence: OpHandler = {
  op: 'ReverseSequence',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const lens = need(ctx, inputs, 1);
    needInt64(ctx, lens.dtype, 'sequence_lens');
    needRank(ctx, lens.shape, 1, 'sequence_lens');
    seqAxes(ctx);
    if (x.shape !== undefined && x.shape.length < 2) ctx.fail(`input must have rank at least 2, got ${x.shape.length}`);
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const lens = need(ctx, inputs, 1).nums;
    const [ba, ta] = seqAxes(ctx);
    if (x.rank < 2) ctx.fail(`input must have rank at least 2, got ${x.rank}`);
    const batch = x.dims[ba]!;
    const time = x.dims[ta]!;
    if (lens.length !== batch) ctx.fail(`sequence_lens has ${lens.length} entries for batch ${batch}`);
    const st = stridesOf(x.dims);
    const inner = sizeOf(x.dims.slice(2));
    const data = cloneData(x);
    const o = data as Elems;
    const s = x.data as Elems;
    for (let b = 0; b < batch; b++) {
      const len = lens[b]!;
      if (len < 0 || len > time) ctx.fail(`sequence length ${len} is out of range for time ${time}`);
      for (let t = 0; t < len; t++) {
        const dst = b * st[ba]! + t * st[ta]!;
        const src = b * st[ba]! + (len - 1 - t) * st[ta]!;
        for (let e = 0; e < inner; e++) o[dst + e] = s[src + e]!;
      }
    }
    return [new Tensor(x.dtype, x.dims, data)];
  },
};

export const MOVEMENT_MISC_OPS: OpHandler[] = [Trilu, CumSum, CumProd, DepthToSpace, SpaceToDepth, ReverseSequence];
