// Optimize-time quantization of weights into the layouts the quantized kernels read (compiler/kernel-schema.ts qmatmul,
// qproject_topk: the one statement of those layouts), and references computing exactly what the kernels compute.
import type { QUANT_INPUTS } from '../kernel-enums.ts';

export type QuantInput = (typeof QUANT_INPUTS)[number];

/**
 * A quantized weight: its int data in the kernel's layout with dims, per-channel scales, and per-channel sums of q;
 * rows of a vocabulary table (quantizeRows) also carry their residual plane (residualRows).
 */
export interface QuantizedWeight {
  q: Int8Array | Int16Array;
  dims: number[];
  scale: Float32Array;
  sum: Int32Array;
  res?: Uint8Array;
}

/** Channels per block and the reduction group of the packed layouts (int8: 4 values of K per lane, int16: 2). */
export const BLOCK_N = 16;
const GROUP = { 8: 4, 16: 2 } as const;
/** qproject_topk's rows are padded to a multiple of this many values. */
export const ROW_ALIGN = 64;
/**
 * The int16 limit L of a product over k values: the largest L ≤ 32767 with k · L² ≤ 2^31 − 1, so no int32 sum of int16
 * products wraps (native/src/cpu/qgemm.h int16_limit is the same rule). int16 weights and input rows use [-L, L].
 */
export function int16Limit(k: number): number {
  const max = 2 ** 31 - 1,
    kk = Math.max(1, k);
  let l = Math.min(32767, Math.floor(Math.sqrt(Math.floor(max / kk))));
  while (l > 1 && kk * l * l > max) l--;
  while (l < 32767 && kk * (l + 1) * (l + 1) <= max) l++;
  return l;
}

const fr = Math.fround;

/** Round half to even, as the vector conversions (cvtps2dq) and lrintf do. */
export function roundEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

const clampInt = (x: number, lim: number) => (x > lim ? lim : x < -lim ? -lim : x);
/** The scale of weights whose largest magnitude is max, on [-lim, lim]: max / lim (1 for an all-zero channel, whose q are 0). */
const weightScale = (max: number, lim: number) => (max > 0 ? fr(max / lim) : 1);

/**
 * W [K, N] row-major (an ONNX MatMul weight) → per output channel n, symmetric: s_n = max_k |W[k, n]| / L,
 * q = round-half-even(W / s_n) in [-L, L], L = 127 (int8) or int16Limit(K) (int16). Packed in blocks of 16
 * channels: int8 [ceil(N/16), ceil(K/4), 16, 4] with (k, n) at [n/16][k/4][n%16][k%4]; int16 [ceil(N/16), ceil(K/2), 16, 2].
 */
export function quantizeChannels(w: Float32Array, k: number, n: number, bits: 8 | 16): QuantizedWeight {
  if (w.length !== k * n) throw new Error(`internal: weight of ${w.length} values is not [${k}, ${n}]`);
  const g = GROUP[bits],
    nb = Math.ceil(n / BLOCK_N),
    kg = Math.ceil(k / g);
  const q = bits === 8 ? new Int8Array(nb * kg * BLOCK_N * g) : new Int16Array(nb * kg * BLOCK_N * g);
  const scale = new Float32Array(n),
    sum = new Int32Array(n),
    lim = bits === 8 ? 127 : int16Limit(k);
  for (let c = 0; c < n; c++) {
    let max = 0;
    for (let r = 0; r < k; r++) max = Math.max(max, Math.abs(w[r * n + c]!));
    const s = weightScale(max, lim);
    scale[c] = s;
    let total = 0;
    for (let r = 0; r < k; r++) {
      const v = clampInt(roundEven(fr(w[r * n + c]! / s)), lim);
      q[packedIndex(r, c, kg, g)] = v;
      total += v;
    }
    sum[c] = total;
  }
  return { q, dims: [nb, kg, BLOCK_N, g], scale, sum };
}

/** The position of (k, n) in a packed layout with kg groups of g values of K. */
function packedIndex(r: number, c: number, kg: number, g: number): number {
  return ((Math.floor(c / BLOCK_N) * kg + Math.floor(r / g)) * BLOCK_N + (c % BLOCK_N)) * g + (r % g);
}

/**
 * W [V, D] row-major (row v = vocabulary id v) → int8 [V, Dp] per row (Dp = D rounded up to 64, zero padded), as
 * qproject_topk reads it, with its residual plane (residualRows).
 */
export function quantizeRows(w: Float32Array, v: number, d: number): QuantizedWeight {
  if (w.length !== v * d) throw new Error(`internal: weight of ${w.length} values is not [${v}, ${d}]`);
  const dp = Math.ceil(d / ROW_ALIGN) * ROW_ALIGN;
  const q = new Int8Array(v * dp),
    scale = new Float32Array(v),
    sum = new Int32Array(v);
  for (let j = 0; j < v; j++) {
    let max = 0;
    for (let p = 0; p < d; p++) max = Math.max(max, Math.abs(w[j * d + p]!));
    const s = weightScale(max, 127);
    scale[j] = s;
    let total = 0;
    for (let p = 0; p < d; p++) {
      const x = clampInt(roundEven(fr(w[j * d + p]! / s)), 127);
      q[j * dp + p] = x;
      total += x;
    }
    sum[j] = total;
  }
  return { q, dims: [v, dp], scale, sum, res: residualRows(w, v, d, dp, q, scale) };
}

/**
 * The steps of a residual per int8 step: a fine weight is (15 · q + r) · s / 15, r in [-8, 7] (15, not 16: (W / s − q) · 15
 * stays within [-7.5, 7.5], so the residual never clamps).
 */
export const RESIDUAL_STEPS = 15;

/**
 * The 4-bit residual plane of int8 rows: r = round-half-even((W / s − q) · 15) in [-8, 7], two per byte (uint8
 * [V, Dp / 2]: value p of a row in the low nibble of byte p / 2 when p is even, the high nibble when odd, two's
 * complement). With it a row is known to 12 bits: qproject_topk rescores its best candidates with it and qgather
 * returns fine rows (compiler/kernel-schema.ts w_res / residual).
 */
function residualRows(
  w: Float32Array,
  v: number,
  d: number,
  dp: number,
  q: Int8Array,
  scale: Float32Array,
): Uint8Array {
  const res = new Uint8Array((v * dp) / 2);
  for (let j = 0; j < v; j++) {
    const s = scale[j]!;
    for (let p = 0; p < d; p++) {
      const r = Math.max(-8, Math.min(7, roundEven((w[j * d + p]! / s - q[j * dp + p]!) * RESIDUAL_STEPS)));
      const at = (j * dp + p) >> 1;
      res[at] = res[at]! | ((r & 15) << ((p & 1) * 4));
    }
  }
  return res;
}

/**
 * With a residual plane, qproject_topk rescores at least this many best ids per row (the CPU kernel's kRescored,
 * native/src/cpu/qproject_topk.cc; the CUDA rule and the IR evaluator read it here).
 */
export const RESCORED = 8;

/** Value p of row j of a residual plane (rows of dp values). */
export function residualAt(res: ArrayLike<number>, dp: number, j: number, p: number): number {
  const x = (res[(j * dp + p) >> 1]! >> ((p & 1) * 4)) & 15;
  return x >= 8 ? x - 16 : x;
}

/** The fine (12-bit) integer of value p of row j: 15 · q + r; its weight is that times s / 15. */
export function fineAt(q: ArrayLike<number>, res: ArrayLike<number>, dp: number, j: number, p: number): number {
  return q[j * dp + p]! * RESIDUAL_STEPS + residualAt(res, dp, j, p);
}

/**
 * A rescored logit, as qproject_topk computes it for its candidates: float(Σ_d x[d] · fine[j][d] in float64, as eight
 * partial sums by d mod 8 added pairwise) · (s_j / 15), + bias in float32.
 */
export function fineLogit(
  x: ArrayLike<number>,
  d: number,
  q: ArrayLike<number>,
  res: ArrayLike<number>,
  dp: number,
  scale: ArrayLike<number>,
  j: number,
  bias?: ArrayLike<number>,
): number {
  const a = [0, 0, 0, 0, 0, 0, 0, 0];
  for (let p = 0; p < d; p++) a[p & 7] += x[p]! * fineAt(q, res, dp, j, p);
  const acc = a[0]! + a[1]! + (a[2]! + a[3]!) + (a[4]! + a[5]! + (a[6]! + a[7]!));
  const l = fr(fr(acc) * fr(scale[j]! / RESIDUAL_STEPS));
  return bias ? fr(l + bias[j]!) : l;
}

/** One input row quantized as the kernels do: its ints and scale (float32 input: the row itself, scale 1). */
export function quantizeInputRow(x: Float32Array, input: QuantInput): { q: ArrayLike<number>; scale: number } {
  if (input === 'float32') return { q: x, scale: 1 };
  const lim = input === 'int16' ? int16Limit(x.length) : 127;
  let max = 0;
  for (const v of x) max = Number.isNaN(v) || Number.isNaN(max) ? NaN : Math.max(max, Math.abs(v));
  if (max === 0) return { q: new Int8Array(x.length), scale: 0 };
  if (!Number.isFinite(max)) return { q: new Int8Array(x.length), scale: NaN };
  const s = fr(max / lim);
  return { q: Array.from(x, (v) => clampInt(roundEven(fr(v / s)), lim)), scale: s };
}

/** The padded row length kp of quantized A rows (quantize_rows' q, qmatmul's quantized A): K rounded up to its group. */
export const quantizedRowLength = (k: number, input: 'int8' | 'int16'): number =>
  Math.ceil(k / GROUP[input === 'int16' ? 16 : 8]) * GROUP[input === 'int16' ? 16 : 8];

/**
 * What quantize_rows writes for A [M, K]: q [M, kp] (int8: uint8 q + 128, padding 128; int16: int16 q, padding 0) and
 * each row's scale, the values qmatmul computes itself from a float32 A.
 */
export function quantizeRowsRef(
  a: Float32Array,
  m: number,
  k: number,
  input: 'int8' | 'int16',
): { q: Uint8Array | Int16Array; scale: Float32Array } {
  const kp = quantizedRowLength(k, input),
    off = input === 'int8' ? 128 : 0;
  const q = input === 'int8' ? new Uint8Array(m * kp).fill(off) : new Int16Array(m * kp);
  const scale = new Float32Array(m);
  for (let i = 0; i < m; i++) {
    const row = quantizeInputRow(a.subarray(i * k, (i + 1) * k), input);
    scale[i] = row.scale;
    for (let c = 0; c < k; c++) q[i * kp + c] = row.q[c]! + off;
  }
  return { q, scale };
}

/** Dot products of one input row with every channel, then the dequantization: y = float(acc) · (s_x · s_n) (+ bias). */
function dequantized(acc: number, input: QuantInput, sx: number, sn: number): number {
  return input === 'float32' ? fr(fr(acc) * sn) : fr(fr(acc) * fr(sx * sn));
}

/**
 * What qmatmul computes before its activation and residual: Y [M, N] = dequant(quant(A) × Wq) + bias, for A [M, K] and
 * W packed by quantizeChannels. Int inputs: exact int32 sums (the kernels match bit for bit); float32 inputs: the sum
 * in float64 (the kernels' float32 sums agree within rounding).
 */
export function qmatmulRef(o: {
  a: Float32Array;
  m: number;
  k: number;
  n: number;
  input: QuantInput;
  w: Int8Array | Int16Array;
  scale: Float32Array;
  bias?: Float32Array;
  /** A already quantized (quantizeRowsRef's q and scale; `a` unused): the rows qmatmul reads with a_scale. */
  rows?: { q: Uint8Array | Int16Array; scale: ArrayLike<number> };
}): Float32Array {
  const g = o.w instanceof Int16Array ? GROUP[16] : GROUP[8];
  const kg = Math.ceil(o.k / g);
  const y = new Float32Array(o.m * o.n);
  const given = o.rows;
  const kp = o.input === 'float32' ? o.k : quantizedRowLength(o.k, o.input),
    off = o.input === 'int8' ? 128 : 0;
  for (let i = 0; i < o.m; i++) {
    const row = given
      ? { q: Array.from(given.q.subarray(i * kp, i * kp + o.k), (v) => v - off), scale: given.scale[i]! }
      : quantizeInputRow(o.a.subarray(i * o.k, (i + 1) * o.k), o.input);
    for (let c = 0; c < o.n; c++) {
      let acc = 0;
      // int inputs: exact int32 sums (int16 operands are bounded by int16Limit(K), so they never wrap)
      if (o.input === 'float32') for (let r = 0; r < o.k; r++) acc += row.q[r]! * o.w[packedIndex(r, c, kg, g)]!;
      else for (let r = 0; r < o.k; r++) acc = (acc + row.q[r]! * o.w[packedIndex(r, c, kg, g)]!) | 0;
      const v = dequantized(acc, o.input, row.scale, o.scale[c]!);
      y[i * o.n + c] = o.bias ? fr(v + o.bias[c]!) : v;
    }
  }
  return y;
}

/** qproject_topk's logits before the bias: [rows, V] = dequant(quant(X) · Wqᵀ) for W from quantizeRows. */
export function qlogitsRef(o: {
  x: Float32Array;
  rows: number;
  d: number;
  v: number;
  input: QuantInput;
  w: Int8Array;
  scale: Float32Array;
}): Float32Array {
  const dp = o.w.length / o.v;
  const y = new Float32Array(o.rows * o.v);
  for (let i = 0; i < o.rows; i++) {
    const row = quantizeInputRow(o.x.subarray(i * o.d, (i + 1) * o.d), o.input);
    for (let j = 0; j < o.v; j++) {
      let acc = 0;
      for (let p = 0; p < o.d; p++) acc += row.q[p]! * o.w[j * dp + p]!;
      y[i * o.v + j] = dequantized(acc, o.input, row.scale, o.scale[j]!);
    }
  }
  return y;
}
