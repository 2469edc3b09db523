// Sampling grids: GridSample (16: 4-D bilinear/nearest/bicubic; 20: N-D linear/nearest/cubic) and AffineGrid (20).
import type { Dim } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import { fromF64, knownInts, requireFloat } from './math-common.ts';
import type { OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

type Mode = 'nearest' | 'linear' | 'cubic';
type Padding = 'zeros' | 'border' | 'reflection';

function modeOf(ctx: OpContext): Mode {
  const legacy = ctx.opset < 20;
  const m = ctx.string('mode', legacy ? 'bilinear' : 'linear');
  if (m === 'nearest') return 'nearest';
  if (m === (legacy ? 'bilinear' : 'linear')) return 'linear';
  if (m === (legacy ? 'bicubic' : 'cubic')) return 'cubic';
  return ctx.fail(`mode '${m}' is not valid at opset ${ctx.opset}`);
}

function paddingOf(ctx: OpContext): Padding {
  const p = ctx.string('padding_mode', 'zeros');
  if (p !== 'zeros' && p !== 'border' && p !== 'reflection') ctx.fail(`padding_mode '${p}' is not valid`);
  return p;
}

/** Reflects x by the nearer border until it lies within [lo, hi]. */
function reflect(x: number, lo: number, hi: number): number {
  const rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    const dx = lo - x;
    const n = Math.trunc(dx / rng);
    const r = dx - n * rng;
    return n % 2 === 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const dx = x - hi;
    const n = Math.trunc(dx / rng);
    const r = dx - n * rng;
    return n % 2 === 0 ? hi - r : lo + r;
  }
  return x;
}

function cubicCoeffs(t: number): number[] {
  const a = -0.75;
  const x = Math.abs(t);
  return [
    ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a,
    ((a + 2) * x - (a + 3)) * x * x + 1,
    ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1,
    ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a,
  ];
}

/** Round half to even (nearbyint). */
function rint(v: number): number {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** Per spatial dim: taps (index resolved by padding, or -1 for a zero pixel) and weights. */
interface DimTaps {
  idx: number[];
  w: number[];
}

function resolveIndex(i: number, len: number, pad: Padding, lo: number, hi: number): number {
  if (pad === 'zeros') return i >= 0 && i < len ? i : -1;
  if (pad === 'border') return Math.min(Math.max(i, 0), len - 1);
  return Math.trunc(reflect(i, lo, hi));
}

function dimTaps(mode: Mode, x: number, len: number, pad: Padding, lo: number, hi: number): DimTaps {
  if (mode === 'nearest') return { idx: [resolveIndex(Math.trunc(x), len, pad, lo, hi)], w: [1] };
  const x0 = Math.floor(x);
  const t = x - x0;
  if (mode === 'linear') {
    return { idx: [resolveIndex(x0, len, pad, lo, hi), resolveIndex(x0 + 1, len, pad, lo, hi)], w: [1 - t, t] };
  }
  const idx = [-1, 0, 1, 2].map((k) => resolveIndex(x0 + k, len, pad, lo, hi));
  return { idx, w: cubicCoeffs(t) };
}

function gridSample(ctx: OpContext, x: Tensor, grid: Tensor): Tensor {
  const mode = modeOf(ctx);
  const pad = paddingOf(ctx);
  const align = ctx.int('align_corners', 0) !== 0;
  const k = x.rank - 2;
  if (k < 1) ctx.fail(`input must have rank >= 3, got dims [${x.dims}]`);
  if (ctx.opset < 20 && x.rank !== 4) ctx.fail(`input must be 4-D at opset ${ctx.opset}, got dims [${x.dims}]`);
  if (grid.rank !== x.rank || grid.dims[0] !== x.dims[0] || grid.dims[grid.rank - 1] !== k) {
    ctx.fail(`grid dims [${grid.dims}] do not fit input dims [${x.dims}]`);
  }
  const [n, c] = [x.dims[0]!, x.dims[1]!];
  const sp = x.dims.slice(2);
  const outSp = grid.dims.slice(1, -1);
  let inSize = 1;
  for (const d of sp) inSize *= d;
  let outSize = 1;
  for (const d of outSp) outSize *= d;
  const strides = new Array<number>(k);
  for (let i = k - 1, s = 1; i >= 0; i--) {
    strides[i] = s;
    s *= sp[i]!;
  }
  const lo = sp.map(() => (align ? 0 : -0.5));
  const hi = sp.map((d) => (align ? d - 1 : d - 0.5));
  const xv = x.nums;
  const g = grid.nums;
  const out = new Float64Array(n * c * outSize);
  for (let b = 0; b < n; b++) {
    for (let o = 0; o < outSize; o++) {
      const taps: DimTaps[] = [];
      for (let i = 0; i < k; i++) {
        const gn = g[(b * outSize + o) * k + (k - 1 - i)]!;
        const len = sp[i]!;
        let v = Math.fround(align ? ((gn + 1) / 2) * (len - 1) : ((gn + 1) * len - 1) / 2);
        if (mode === 'nearest') v = rint(v);
        if (v < lo[i]! || v > hi[i]!) {
          if (pad === 'border') v = Math.min(Math.max(v, 0), len - 1);
          else if (pad === 'reflection') v = Math.fround(reflect(v, lo[i]!, hi[i]!));
        }
        taps.push(dimTaps(mode, v, len, pad, lo[i]!, hi[i]!));
      }
      for (let ch = 0; ch < c; ch++) {
        const base = (b * c + ch) * inSize;
        out[(b * c + ch) * outSize + o] = sumTaps(taps, 0, base, strides, xv);
      }
    }
  }
  return fromF64(x.dtype, [n, c, ...outSp], out);
}

/** Σ over the tensor product of per-dim taps; a -1 index anywhere makes that term's pixel 0. */
function sumTaps(taps: DimTaps[], dim: number, off: number, strides: number[], xv: ArrayLike<number>): number {
  const t = taps[dim]!;
  let acc = 0;
  for (let j = 0; j < t.idx.length; j++) {
    const i = t.idx[j]!;
    const w = t.w[j]!;
    if (i < 0 || w === 0) continue;
    const o = off + i * strides[dim]!;
    acc += w * (dim === taps.length - 1 ? xv[o]! : sumTaps(taps, dim + 1, o, strides, xv));
  }
  return acc;
}

const GRID_SAMPLE: OpHandler = {
  op: 'GridSample',
  since: 16,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const grid = need(ctx, inputs, 1);
    modeOf(ctx);
    paddingOf(ctx);
    requireFloat(ctx, grid.dtype, 'grid');
    if (x.dtype === 'string' || x.dtype === 'bool') ctx.fail(`input must be numeric, got ${x.dtype}`);
    if (!x.shape || !grid.shape) return [{ dtype: x.dtype }];
    if (grid.shape.length !== x.shape.length)
      ctx.fail(`grid rank ${grid.shape.length} must equal input rank ${x.shape.length}`);
    return [{ dtype: x.dtype, shape: [x.shape[0]!, x.shape[1]!, ...grid.shape.slice(1, -1)] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const grid = need(ctx, inputs, 1);
    requireFloat(ctx, grid.dtype, 'grid');
    if (x.dtype === 'string' || x.dtype === 'bool') ctx.fail(`input must be numeric, got ${x.dtype}`);
    return [gridSample(ctx, x, grid)];
  },
};

// ---- AffineGrid: theta [N, 2, 3] or [N, 3, 4] and size (N, C, H, W) or (N, C, D, H, W) → grid [N, H, W, 2] / [N, D, H, W, 3] ----

/** Normalized base coordinates along a dim of length len. */
function linspace(len: number, align: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i < len; i++) {
    if (align) out.push(len === 1 ? 0 : -1 + (2 * i) / (len - 1));
    else out.push(-1 + (2 * i + 1) / len);
  }
  return out;
}

function affineGrid(ctx: OpContext, theta: Tensor, size: number[]): Tensor {
  const align = ctx.int('align_corners', 0) !== 0;
  const k = size.length - 2;
  if (k !== 2 && k !== 3) ctx.fail(`size must have 4 or 5 elements, got ${size.length}`);
  const n = size[0]!;
  if (theta.rank !== 3 || theta.dims[0] !== n || theta.dims[1] !== k || theta.dims[2] !== k + 1) {
    ctx.fail(`theta dims [${theta.dims}] must be [${n}, ${k}, ${k + 1}]`);
  }
  const sp = size.slice(2);
  // base[i] holds the coordinate for dim i; components are ordered (x=W, y=H, z=D).
  const bases = sp.map((d) => linspace(d, align));
  let cnt = 1;
  for (const d of sp) cnt *= d;
  const th = theta.nums;
  const out = new Float64Array(n * cnt * k);
  const idx = new Array<number>(k).fill(0);
  for (let b = 0; b < n; b++) {
    idx.fill(0);
    for (let p = 0; p < cnt; p++) {
      // homogeneous point: (x, y[, z], 1) with x from the last spatial dim
      const pt: number[] = [];
      for (let j = 0; j < k; j++) pt.push(bases[k - 1 - j]![idx[k - 1 - j]!]!);
      pt.push(1);
      for (let r = 0; r < k; r++) {
        let acc = 0;
        for (let j = 0; j <= k; j++) acc += th[(b * k + r) * (k + 1) + j]! * pt[j]!;
        out[(b * cnt + p) * k + r] = acc;
      }
      for (let i = k - 1; i >= 0; i--) {
        if (++idx[i]! < sp[i]!) break;
        idx[i] = 0;
      }
    }
  }
  return fromF64(theta.dtype, [n, ...sp, k], out);
}

const AFFINE_GRID: OpHandler = {
  op: 'AffineGrid',
  since: 20,
  infer(ctx, inputs) {
    const theta = need(ctx, inputs, 0);
    const size = need(ctx, inputs, 1);
    requireFloat(ctx, theta.dtype, 'theta');
    if (size.dtype !== 'int64') ctx.fail(`size must be int64, got ${size.dtype}`);
    const s: Dim[] | undefined = size.sym ?? knownInts(size);
    if (!s) return [{ dtype: theta.dtype, shape: undefined }];
    if (s.length !== 4 && s.length !== 5) ctx.fail(`size must have 4 or 5 elements, got ${s.length}`);
    return [{ dtype: theta.dtype, shape: [s[0]!, ...s.slice(2), s.length - 2] }];
  },
  eval(ctx, inputs) {
    const theta = need(ctx, inputs, 0);
    const size = need(ctx, inputs, 1);
    requireFloat(ctx, theta.dtype, 'theta');
    return [affineGrid(ctx, theta, Array.from(size.nums, Number))];
  },
};

export const GRID_OPS: OpHandler[] = [GRID_SAMPLE, AFFINE_GRID];
