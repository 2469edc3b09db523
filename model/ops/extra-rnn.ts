// Recurrent layers: RNN, GRU and LSTM (directions, layout, sequence_lens, activations with alpha/beta, clip, peepholes).
import { unknownDim, type Dim } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import { fromF64, requireFloat } from './math-common.ts';
import type { InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

type Kind = 'RNN' | 'GRU' | 'LSTM';
type Act = (x: number) => number;

const GATES: Record<Kind, number> = { RNN: 1, GRU: 3, LSTM: 4 };
const DEFAULT_ACTS: Record<Kind, string[]> = {
  RNN: ['Tanh'],
  GRU: ['Sigmoid', 'Tanh'],
  LSTM: ['Sigmoid', 'Tanh', 'Tanh'],
};

const sigmoid: Act = (x) => 1 / (1 + Math.exp(-x));

/** An activation by its ONNX name; alpha/beta come from the attribute lists, consumed in order by the functions that take them. */
function activation(ctx: OpContext, name: string, alphas: number[], betas: number[]): Act {
  const a = (def: number) => alphas.shift() ?? def;
  const b = (def: number) => betas.shift() ?? def;
  switch (name.toLowerCase()) {
    case 'tanh':
      return Math.tanh;
    case 'sigmoid':
      return sigmoid;
    case 'relu':
      return (x) => Math.max(0, x);
    case 'affine': {
      const al = a(1),
        be = b(0);
      return (x) => al * x + be;
    }
    case 'leakyrelu': {
      const al = a(0.01);
      return (x) => (x >= 0 ? x : al * x);
    }
    case 'thresholdedrelu': {
      const al = a(1);
      return (x) => (x > al ? x : 0);
    }
    case 'scaledtanh': {
      const al = a(1),
        be = b(1);
      return (x) => al * Math.tanh(be * x);
    }
    case 'hardsigmoid': {
      const al = a(0.2),
        be = b(0.5);
      return (x) => Math.max(0, Math.min(1, al * x + be));
    }
    case 'elu': {
      const al = a(1);
      return (x) => (x >= 0 ? x : al * (Math.exp(x) - 1));
    }
    case 'softsign':
      return (x) => x / (1 + Math.abs(x));
    case 'softplus':
      return (x) => Math.log1p(Math.exp(x));
    default:
      return ctx.fail(`unknown activation '${name}'`);
  }
}

interface Cfg {
  kind: Kind;
  dirs: number;
  reverseOnly: boolean;
  hidden: number;
  layout: number;
  clip: number;
  acts: Act[][];
  linearBeforeReset: boolean;
  inputForget: boolean;
}

function directionOf(ctx: OpContext): { dirs: number; reverseOnly: boolean } {
  const d = ctx.string('direction', 'forward');
  if (d !== 'forward' && d !== 'reverse' && d !== 'bidirectional') ctx.fail(`direction '${d}' is not valid`);
  return { dirs: d === 'bidirectional' ? 2 : 1, reverseOnly: d === 'reverse' };
}

function configOf(ctx: OpContext, kind: Kind, hiddenFromR: number | undefined): Cfg {
  const { dirs, reverseOnly } = directionOf(ctx);
  const per = DEFAULT_ACTS[kind].length;
  const names = ctx.strings(
    'activations',
    dirs === 2 ? [...DEFAULT_ACTS[kind], ...DEFAULT_ACTS[kind]] : DEFAULT_ACTS[kind],
  );
  if (names.length !== per * dirs) ctx.fail(`activations has ${names.length} entries, expected ${per * dirs}`);
  const alphas = [...ctx.floats('activation_alpha', [])];
  const betas = [...ctx.floats('activation_beta', [])];
  const all = names.map((n) => activation(ctx, n, alphas, betas));
  const acts = Array.from({ length: dirs }, (_, d) => all.slice(d * per, (d + 1) * per));
  const hidden = ctx.has('hidden_size') ? ctx.int('hidden_size') : (hiddenFromR ?? -1);
  return {
    kind,
    dirs,
    reverseOnly,
    hidden,
    acts,
    layout: ctx.int('layout', 0),
    clip: ctx.has('clip') ? ctx.float('clip') : Infinity,
    linearBeforeReset: kind === 'GRU' && ctx.int('linear_before_reset', 0) !== 0,
    inputForget: kind === 'LSTM' && ctx.int('input_forget', 0) !== 0,
  };
}

/** Weights of one direction as flat arrays. */
interface DirWeights {
  w: ArrayLike<number>;
  r: ArrayLike<number>;
  wb: Float64Array;
  rb: Float64Array;
  p: Float64Array;
}

function dirWeights(
  cfg: Cfg,
  d: number,
  W: Tensor,
  R: Tensor,
  B: Tensor | undefined,
  P: Tensor | undefined,
  inSize: number,
): DirWeights {
  const g = GATES[cfg.kind] * cfg.hidden;
  const w = W.nums.subarray(d * g * inSize, (d + 1) * g * inSize);
  const r = R.nums.subarray(d * g * cfg.hidden, (d + 1) * g * cfg.hidden);
  const wb = new Float64Array(g),
    rb = new Float64Array(g);
  if (B)
    for (let k = 0; k < g; k++) {
      wb[k] = B.nums[d * 2 * g + k]!;
      rb[k] = B.nums[d * 2 * g + g + k]!;
    }
  const p = new Float64Array(3 * cfg.hidden);
  if (P) for (let k = 0; k < 3 * cfg.hidden; k++) p[k] = P.nums[d * 3 * cfg.hidden + k]!;
  return { w, r, wb, rb, p };
}

/** y[k] = Σ_i x[i] * m[k, i] for k < rows (m row-major [rows, cols]), starting at row `from`. */
function matVec(
  m: ArrayLike<number>,
  cols: number,
  from: number,
  rows: number,
  x: ArrayLike<number>,
  xOff: number,
  out: Float64Array,
): void {
  for (let k = 0; k < rows; k++) {
    let s = 0;
    const base = (from + k) * cols;
    for (let i = 0; i < cols; i++) s += x[xOff + i]! * m[base + i]!;
    out[k] = s;
  }
}

/** One time step of one batch item: updates h (and c) in place. */
function step(
  cfg: Cfg,
  acts: Act[],
  dw: DirWeights,
  x: ArrayLike<number>,
  xOff: number,
  inSize: number,
  h: Float64Array,
  c: Float64Array,
): void {
  const H = cfg.hidden;
  const nG = GATES[cfg.kind];
  const clip = (v: number) => (v > cfg.clip ? cfg.clip : v < -cfg.clip ? -cfg.clip : v);
  const xw = new Float64Array(nG * H);
  const hr = new Float64Array(nG * H);
  matVec(dw.w, inSize, 0, nG * H, x, xOff, xw);
  matVec(dw.r, H, 0, nG * H, h, 0, hr);
  if (cfg.kind === 'RNN') {
    for (let k = 0; k < H; k++) h[k] = acts[0]!(clip(xw[k]! + hr[k]! + dw.wb[k]! + dw.rb[k]!));
    return;
  }
  if (cfg.kind === 'GRU') {
    const [f, g] = acts as [Act, Act];
    const z = new Float64Array(H),
      r = new Float64Array(H);
    for (let k = 0; k < H; k++) {
      z[k] = f(clip(xw[k]! + hr[k]! + dw.wb[k]! + dw.rb[k]!));
      r[k] = f(clip(xw[H + k]! + hr[H + k]! + dw.wb[H + k]! + dw.rb[H + k]!));
    }
    const hh = new Float64Array(H);
    if (cfg.linearBeforeReset) {
      for (let k = 0; k < H; k++)
        hh[k] = g(clip(xw[2 * H + k]! + r[k]! * (hr[2 * H + k]! + dw.rb[2 * H + k]!) + dw.wb[2 * H + k]!));
    } else {
      const rh = new Float64Array(H);
      for (let k = 0; k < H; k++) rh[k] = r[k]! * h[k]!;
      const rr = new Float64Array(H);
      matVec(dw.r, H, 2 * H, H, rh, 0, rr);
      for (let k = 0; k < H; k++) hh[k] = g(clip(xw[2 * H + k]! + rr[k]! + dw.wb[2 * H + k]! + dw.rb[2 * H + k]!));
    }
    for (let k = 0; k < H; k++) h[k] = (1 - z[k]!) * hh[k]! + z[k]! * h[k]!;
    return;
  }
  // LSTM gates in order i, o, f, c; peepholes p = [p_i, p_o, p_f]
  const [f, g, hAct] = acts as [Act, Act, Act];
  const pre = (gate: number, k: number) =>
    xw[gate * H + k]! + hr[gate * H + k]! + dw.wb[gate * H + k]! + dw.rb[gate * H + k]!;
  for (let k = 0; k < H; k++) {
    const ig = f(clip(pre(0, k) + dw.p[k]! * c[k]!));
    const fg = cfg.inputForget ? 1 - ig : f(clip(pre(2, k) + dw.p[2 * H + k]! * c[k]!));
    const cc = g(clip(pre(3, k)));
    const cNew = fg * c[k]! + ig * cc;
    const og = f(clip(pre(1, k) + dw.p[H + k]! * cNew));
    c[k] = cNew;
    h[k] = og * hAct(clip(cNew));
  }
}

function runRecurrent(ctx: OpContext, kind: Kind, inputs: (Tensor | undefined)[]): Tensor[] {
  const X = need(ctx, inputs, 0);
  const W = need(ctx, inputs, 1);
  const R = need(ctx, inputs, 2);
  requireFloat(ctx, X.dtype);
  const cfg = configOf(ctx, kind, R.dims[R.rank - 1]);
  if (X.rank !== 3 || W.rank !== 3 || R.rank !== 3) ctx.fail('X, W and R must be 3-D');
  const [T, batch, inSize] = cfg.layout ? [X.dims[1]!, X.dims[0]!, X.dims[2]!] : [X.dims[0]!, X.dims[1]!, X.dims[2]!];
  const H = cfg.hidden;
  const nG = GATES[kind];
  if (W.dims[0] !== cfg.dirs || W.dims[1] !== nG * H || W.dims[2] !== inSize)
    ctx.fail(`W dims [${W.dims}] must be [${cfg.dirs}, ${nG * H}, ${inSize}]`);
  if (R.dims[0] !== cfg.dirs || R.dims[1] !== nG * H || R.dims[2] !== H)
    ctx.fail(`R dims [${R.dims}] must be [${cfg.dirs}, ${nG * H}, ${H}]`);
  const B = inputs[3];
  if (B && B.size !== cfg.dirs * 2 * nG * H) ctx.fail(`B dims [${B.dims}] must be [${cfg.dirs}, ${2 * nG * H}]`);
  const lens = inputs[4] ? Array.from(inputs[4].nums, Number) : new Array<number>(batch).fill(T);
  if (lens.length !== batch || lens.some((l) => l < 0 || l > T))
    ctx.fail(`sequence_lens [${lens}] do not fit batch ${batch} and length ${T}`);
  const h0 = inputs[5];
  const c0 = kind === 'LSTM' ? inputs[6] : undefined;
  const P = kind === 'LSTM' ? inputs[7] : undefined;
  for (const [s, what] of [
    [h0, 'initial_h'],
    [c0, 'initial_c'],
  ] as const)
    if (s && s.size !== cfg.dirs * batch * H) ctx.fail(`${what} dims [${s.dims}] do not fit`);
  if (P && P.size !== cfg.dirs * 3 * H) ctx.fail(`P dims [${P.dims}] must be [${cfg.dirs}, ${3 * H}]`);
  const xv = X.nums;
  const xOff = (t: number, b: number) => (cfg.layout ? (b * T + t) * inSize : (t * batch + b) * inSize);
  // state index: layout 0 [dir, batch, H], layout 1 [batch, dir, H]
  const sOff = (d: number, b: number) => (cfg.layout ? (b * cfg.dirs + d) * H : (d * batch + b) * H);
  const yOff = (t: number, d: number, b: number) =>
    cfg.layout ? ((b * T + t) * cfg.dirs + d) * H : ((t * cfg.dirs + d) * batch + b) * H;
  const Y = new Float64Array(T * cfg.dirs * batch * H);
  const Yh = new Float64Array(cfg.dirs * batch * H);
  const Yc = new Float64Array(cfg.dirs * batch * H);
  for (let d = 0; d < cfg.dirs; d++) {
    const reverse = cfg.reverseOnly || d === 1;
    const dw = dirWeights(cfg, d, W, R, B, P, inSize);
    for (let b = 0; b < batch; b++) {
      const h = new Float64Array(H),
        c = new Float64Array(H);
      if (h0) for (let k = 0; k < H; k++) h[k] = h0.nums[sOff(d, b) + k]!;
      if (c0) for (let k = 0; k < H; k++) c[k] = c0.nums[sOff(d, b) + k]!;
      const len = lens[b]!;
      for (let s = 0; s < len; s++) {
        const t = reverse ? len - 1 - s : s;
        step(cfg, cfg.acts[d]!, dw, xv, xOff(t, b), inSize, h, c);
        Y.set(h, yOff(t, d, b));
      }
      Yh.set(h, sOff(d, b));
      Yc.set(c, sOff(d, b));
    }
  }
  const yDims = cfg.layout ? [batch, T, cfg.dirs, H] : [T, cfg.dirs, batch, H];
  const sDims = cfg.layout ? [batch, cfg.dirs, H] : [cfg.dirs, batch, H];
  const outs = [fromF64(X.dtype, yDims, Y), fromF64(X.dtype, sDims, Yh), fromF64(X.dtype, sDims, Yc)];
  return outs.slice(0, kind === 'LSTM' ? 3 : 2).slice(0, Math.max(1, ctx.node.outputs.length));
}

function inferRecurrent(ctx: OpContext, kind: Kind, inputs: (InferInput | undefined)[]): InferOutput[] {
  const X = need(ctx, inputs, 0);
  const W = need(ctx, inputs, 1);
  const R = need(ctx, inputs, 2);
  requireFloat(ctx, X.dtype);
  for (const [x, what] of [
    [W, 'W'],
    [R, 'R'],
  ] as const)
    if (x.dtype !== X.dtype) ctx.fail(`${what} dtype ${x.dtype} does not match X ${X.dtype}`);
  if (inputs[4] && inputs[4].dtype !== 'int32') ctx.fail(`sequence_lens must be int32, got ${inputs[4].dtype}`);
  const rH = R.shape?.[2];
  const cfg = configOf(ctx, kind, typeof rH === 'number' ? rH : undefined);
  const hidden: Dim = cfg.hidden >= 0 ? cfg.hidden : (rH ?? unknownDim());
  if (X.shape && X.shape.length !== 3) ctx.fail(`X must be 3-D, got rank ${X.shape.length}`);
  const seq: Dim = X.shape?.[cfg.layout ? 1 : 0] ?? unknownDim();
  const batch: Dim = X.shape?.[cfg.layout ? 0 : 1] ?? unknownDim();
  const y = cfg.layout ? [batch, seq, cfg.dirs, hidden] : [seq, cfg.dirs, batch, hidden];
  const s = cfg.layout ? [batch, cfg.dirs, hidden] : [cfg.dirs, batch, hidden];
  const outs: InferOutput[] = [
    { dtype: X.dtype, shape: y },
    { dtype: X.dtype, shape: s },
    { dtype: X.dtype, shape: [...s] },
  ];
  return outs.slice(0, kind === 'LSTM' ? 3 : 2).slice(0, Math.max(1, ctx.node.outputs.length));
}

function recurrent(kind: Kind): OpHandler {
  return {
    op: kind,
    since: 7,
    infer: (ctx, inputs) => inferRecurrent(ctx, kind, inputs),
    eval: (ctx, inputs) => runRecurrent(ctx, kind, inputs),
  };
}

export const RNN_OPS: OpHandler[] = [recurrent('RNN'), recurrent('GRU'), recurrent('LSTM')];
