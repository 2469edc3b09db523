// Pooling operators: MaxPool (with Indices), AveragePool, LpPool and their Global* forms.
import { isFloat, type DType, type NumArray } from '../../compiler/dtype.ts';
import { shapeStr, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import {
  geo3,
  needFloat,
  outSize,
  outSizeDim,
  readWindow,
  resolvePads,
  type Geo3,
  type Window,
} from './conv-common.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

type PoolKind = 'max' | 'avg' | 'lp';

function checkPoolInput(ctx: OpContext, kind: PoolKind, dtype: DType, shape: readonly Dim[] | undefined): void {
  if (kind === 'max') {
    if (!isFloat(dtype) && dtype !== 'int8' && dtype !== 'uint8')
      ctx.fail(`X must be a float, int8 or uint8 tensor, got ${dtype}`);
  } else needFloat(ctx, dtype, 'X');
  if (shape && shape.length < 3) ctx.fail(`X must have rank >= 3 ([N, C, spatial...]), got ${shapeStr([...shape])}`);
}

/** LpPool's p: a float attribute at opset 1, an int from opset 2. */
function readP(ctx: OpContext): number {
  const a = ctx.attr('p');
  if (a === undefined) return 2;
  if (a.kind !== 'int' && a.kind !== 'float') return ctx.fail(`attribute 'p' must be a number, got ${a.kind}`);
  if (a.value <= 0) ctx.fail(`p must be positive, got ${a.value}`);
  return a.value;
}

// ---- windowed pools ----

function inferPool(kind: PoolKind) {
  return (ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] => {
    const x = need(ctx, inputs, 0);
    checkPoolInput(ctx, kind, x.dtype, x.shape);
    let shape: Dim[] | undefined;
    if (x.shape) {
      const win = readWindow(ctx, x.shape.length - 2);
      shape = [x.shape[0]!, x.shape[1]!, ...x.shape.slice(2).map((d, i) => outSizeDim(d, win, i))];
    }
    const outs: InferOutput[] = [{ dtype: x.dtype, shape }];
    if (kind === 'max' && ctx.node.outputs.length > 1) outs.push({ dtype: 'int64', shape });
    return outs;
  };
}

function poolGeometry(ctx: OpContext, x: Tensor): { win: Window; geo: Geo3 } {
  if (x.rank < 3) ctx.fail(`X must have rank >= 3 ([N, C, spatial...]), got [${x.dims}]`);
  const win = readWindow(ctx, x.rank - 2);
  const inS = x.dims.slice(2);
  const outS = inS.map((d, i) => outSize(d, win, i));
  return { win, geo: geo3(ctx, inS, win, outS, resolvePads(inS, win, outS)) };
}

function evalPool(kind: PoolKind) {
  return (ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] => {
    const x = need(ctx, inputs, 0);
    checkPoolInput(ctx, kind, x.dtype, x.dims);
    const { geo } = poolGeometry(ctx, x);
    const planes = x.dims[0]! * x.dims[1]!;
    const dims = [x.dims[0]!, x.dims[1]!, ...geo.outS.slice(5 - x.rank)];
    if (kind === 'max') {
      const storageOrder = ctx.int('storage_order', 0);
      if (storageOrder !== 0 && storageOrder !== 1) ctx.fail(`storage_order must be 0 or 1, got ${storageOrder}`);
      const { y, idx } = maxPoolLoops(x.nums, planes, geo, storageOrder === 1);
      const outs = [Tensor.fromNumbers(x.dtype, dims, y)];
      if (ctx.node.outputs.length > 1) outs.push(Tensor.fromNumbers('int64', dims, idx));
      return outs;
    }
    if (kind === 'avg') {
      const includePad = ctx.int('count_include_pad', 0) !== 0;
      return [Tensor.fromNumbers(x.dtype, dims, avgPoolLoops(x.nums, planes, geo, includePad))];
    }
    return [Tensor.fromNumbers(x.dtype, dims, lpPoolLoops(x.nums, planes, geo, readP(ctx)))];
  };
}

/** How many of the k dilated taps starting at `start` land in [lo, hi). */
function tapsIn(start: number, k: number, d: number, lo: number, hi: number): number {
  let n = 0;
  for (let t = 0; t < k; t++) {
    const p = start + t * d;
    if (p >= lo && p < hi) n++;
  }
  return n;
}

/** Max over each window (NaN ignored); the argmax as a flat index into X (row- or column-major spatial order). */
function maxPoolLoops(
  x: NumArray,
  planes: number,
  g: Geo3,
  columnMajor: boolean,
): { y: Float64Array; idx: Float64Array } {
  const [ID, IH, IW] = g.inS,
    [OD, OH, OW] = g.outS,
    [KD, KH, KW] = g.k;
  const inPlane = ID * IH * IW,
    outPlane = OD * OH * OW;
  const y = new Float64Array(planes * outPlane);
  const idx = new Float64Array(planes * outPlane);
  for (let pl = 0; pl < planes; pl++) {
    const xBase = pl * inPlane;
    for (let od = 0; od < OD; od++) {
      const d0 = od * g.s[0] - g.p[0];
      for (let oh = 0; oh < OH; oh++) {
        const h0 = oh * g.s[1] - g.p[1];
        for (let ow = 0; ow < OW; ow++) {
          const w0 = ow * g.s[2] - g.p[2];
          let best = 0,
            bd = -1,
            bh = -1,
            bw = -1;
          for (let kd = 0; kd < KD; kd++) {
            const id = d0 + kd * g.d[0];
            if (id < 0 || id >= ID) continue;
            for (let kh = 0; kh < KH; kh++) {
              const ih = h0 + kh * g.d[1];
              if (ih < 0 || ih >= IH) continue;
              const row = xBase + (id * IH + ih) * IW;
              for (let kw = 0; kw < KW; kw++) {
                const iw = w0 + kw * g.d[2];
                if (iw < 0 || iw >= IW) continue;
                const v = x[row + iw]!;
                if (v !== v) continue;
                if (bd < 0 || v > best) {
                  best = v;
                  bd = id;
                  bh = ih;
                  bw = iw;
                }
              }
            }
          }
          const o = pl * outPlane + (od * OH + oh) * OW + ow;
          y[o] = bd < 0 ? NaN : best;
          idx[o] = bd < 0 ? -1 : xBase + (columnMajor ? bd + ID * (bh + IH * bw) : (bd * IH + bh) * IW + bw);
        }
      }
    }
  }
  return { y, idx };
}

/** Mean over each window; the divisor counts padding taps (not taps past the end padding) when includePad. */
function avgPoolLoops(x: NumArray, planes: number, g: Geo3, includePad: boolean): Float64Array {
  const [ID, IH, IW] = g.inS,
    [OD, OH, OW] = g.outS,
    [KD, KH, KW] = g.k;
  const inPlane = ID * IH * IW,
    outPlane = OD * OH * OW;
  const y = new Float64Array(planes * outPlane);
  for (let od = 0; od < OD; od++) {
    const d0 = od * g.s[0] - g.p[0];
    for (let oh = 0; oh < OH; oh++) {
      const h0 = oh * g.s[1] - g.p[1];
      for (let ow = 0; ow < OW; ow++) {
        const w0 = ow * g.s[2] - g.p[2];
        const count = includePad
          ? tapsIn(d0, KD, g.d[0], -g.p[0], ID + g.pe[0]) *
            tapsIn(h0, KH, g.d[1], -g.p[1], IH + g.pe[1]) *
            tapsIn(w0, KW, g.d[2], -g.p[2], IW + g.pe[2])
          : tapsIn(d0, KD, g.d[0], 0, ID) * tapsIn(h0, KH, g.d[1], 0, IH) * tapsIn(w0, KW, g.d[2], 0, IW);
        for (let pl = 0; pl < planes; pl++) {
          const xBase = pl * inPlane;
          let sum = 0;
          for (let kd = 0; kd < KD; kd++) {
            const id = d0 + kd * g.d[0];
            if (id < 0 || id >= ID) continue;
            for (let kh = 0; kh < KH; kh++) {
              const ih = h0 + kh * g.d[1];
              if (ih < 0 || ih >= IH) continue;
              const row = xBase + (id * IH + ih) * IW;
              for (let kw = 0; kw < KW; kw++) {
                const iw = w0 + kw * g.d[2];
                if (iw >= 0 && iw < IW) sum += x[row + iw]!;
              }
            }
          }
          y[pl * outPlane + (od * OH + oh) * OW + ow] = count > 0 ? sum / count : NaN;
        }
      }
    }
  }
  return y;
}

/** (Σ |x|^p)^(1/p) over each window; padding contributes zeros. */
function lpPoolLoops(x: NumArray, planes: number, g: Geo3, p: number): Float64Array {
  const [ID, IH, IW] = g.inS,
    [OD, OH, OW] = g.outS,
    [KD, KH, KW] = g.k;
  const inPlane = ID * IH * IW,
    outPlane = OD * OH * OW;
  const y = new Float64Array(planes * outPlane);
  for (let pl = 0; pl < planes; pl++) {
    const xBase = pl * inPlane;
    for (let od = 0; od < OD; od++) {
      const d0 = od * g.s[0] - g.p[0];
      for (let oh = 0; oh < OH; oh++) {
        const h0 = oh * g.s[1] - g.p[1];
        for (let ow = 0; ow < OW; ow++) {
          const w0 = ow * g.s[2] - g.p[2];
          let sum = 0;
          for (let kd = 0; kd < KD; kd++) {
            const id = d0 + kd * g.d[0];
            if (id < 0 || id >= ID) continue;
            for (let kh = 0; kh < KH; kh++) {
              const ih = h0 + kh * g.d[1];
              if (ih < 0 || ih >= IH) continue;
              const row = xBase + (id * IH + ih) * IW;
              for (let kw = 0; kw < KW; kw++) {
                const iw = w0 + kw * g.d[2];
                if (iw >= 0 && iw < IW) sum += Math.abs(x[row + iw]!) ** p;
              }
            }
          }
          y[pl * outPlane + (od * OH + oh) * OW + ow] = sum ** (1 / p);
        }
      }
    }
  }
  return y;
}

// ---- global pools ----

function inferGlobal(kind: PoolKind) {
  return (ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] => {
    const x = need(ctx, inputs, 0);
    needFloat(ctx, x.dtype, 'X');
    if (x.shape && x.shape.length < 3) ctx.fail(`X must have rank >= 3 ([N, C, spatial...]), got ${shapeStr(x.shape)}`);
    if (kind === 'lp') readP(ctx);
    return [{ dtype: x.dtype, shape: x.shape && [x.shape[0]!, x.shape[1]!, ...x.shape.slice(2).map(() => 1)] }];
  };
}

function evalGlobal(kind: PoolKind) {
  return (ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] => {
    const x = need(ctx, inputs, 0);
    needFloat(ctx, x.dtype, 'X');
    if (x.rank < 3) ctx.fail(`X must have rank >= 3 ([N, C, spatial...]), got [${x.dims}]`);
    const p = kind === 'lp' ? readP(ctx) : 0;
    const planes = x.dims[0]! * x.dims[1]!;
    const plane = x.size / Math.max(planes, 1);
    const xd = x.nums;
    const y = new Float64Array(planes);
    for (let pl = 0; pl < planes; pl++) {
      const base = pl * plane;
      if (kind === 'max') {
        let m = -Infinity;
        for (let i = 0; i < plane; i++) {
          const v = xd[base + i]!;
          if (v > m || v !== v) m = v;
          if (m !== m) break;
        }
        y[pl] = m;
      } else if (kind === 'avg') {
        let s = 0;
        for (let i = 0; i < plane; i++) s += xd[base + i]!;
        y[pl] = s / plane;
      } else {
        let s = 0;
        for (let i = 0; i < plane; i++) s += Math.abs(xd[base + i]!) ** p;
        y[pl] = s ** (1 / p);
      }
    }
    return [Tensor.fromNumbers(x.dtype, [x.dims[0]!, x.dims[1]!, ...x.dims.slice(2).map(() => 1)], y)];
  };
}

export const CONV_POOL_OPS: OpHandler[] = [
  { op: 'MaxPool', infer: inferPool('max'), eval: evalPool('max') },
  { op: 'AveragePool', infer: inferPool('avg'), eval: evalPool('avg') },
  { op: 'LpPool', infer: inferPool('lp'), eval: evalPool('lp') },
  { op: 'GlobalMaxPool', infer: inferGlobal('max'), eval: evalGlobal('max') },
  { op: 'GlobalAveragePool', infer: inferGlobal('avg'), eval: evalGlobal('avg') },
  { op: 'GlobalLpPool', infer: inferGlobal('lp'), eval: evalGlobal('lp') },
];
