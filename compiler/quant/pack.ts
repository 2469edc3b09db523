// Optimize-time quantization of weights into the layouts the quantized kernels read (compiler/kernel-schema.ts qmatmul,
// qproject_topk: the one statement of those layouts), and references computing exactly what the kernels compute.
import { QUANT_INPUTS } from '../kernel-enums.ts';

export type QuantInput = (typeof QUANT_INPUTS)[number];

/** A quantized weight: its int data in the kernel's layout with dims, per-channel scales, and per-channel sums of q. */
export interface QuantizedWeight {
  q: Int8Array | Int16Array;
  dims: number[];
  scale: Float32Array;
  sum: Int32Array;
}

/** Channels per block and the reduction group of the packed layouts (int8: 4 values of K per lane, int16: 2). */
export const BLOCK_N = 16;
const GROUP = { 8: 4, 16: 2 } as const;
/** qproject_topk's rows are padded to a multiple of this many values. */
export const ROW_ALIGN = 64;
/** Marian's fixed int16 scale: q = x · 1024. */
export const INT16_SCALE = 1024;

const fr = Math.fround;

/** Round half to even, as the vector conversions (cvtps2dq) and lrintf do. */
export function roundEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

const clampInt = (x: number, lim: number) => (x > lim ? lim : x < -lim ? -lim : x);
/** int16 saturation, as the kernels and the contract (compiler/kernel-enums.ts QUANT_INPUTS) have it: [-32768, 32767]. */
const sat16 = (x: number) => (x > 32767 ? 32767 : x < -32768 ? -32768 : x);

/** The int8 scale of values whose largest magnitude is max: max / 127 (1 for an all-zero channel, whose q are 0). */
const int8Scale = (max: number) => (max > 0 ? fr(max / 127) : 1);

/**
 * W [K, N] row-major (an ONNX MatMul weight) → per output channel n, symmetric: int8 s_n = max_k |W[k, n]| / 127,
 * q = round-half-even(W / s_n); int16: s = 1/1024, q = round-half-even(W · 1024) saturated. Packed in blocks of 16
 * channels: int8 [ceil(N/16), ceil(K/4), 16, 4] with (k, n) at [n/16][k/4][n%16][k%4]; int16 [ceil(N/16), ceil(K/2), 16, 2].
 */
export function quantizeChannels(w: Float32Array, k: number, n: number, bits: 8 | 16): QuantizedWeight {
  if (w.length !== k * n) throw new Error(`internal: weight of ${w.length} values is not [${k}, ${n}]`);
  const g = GROUP[bits], nb = Math.ceil(n / BLOCK_N), kg = Math.ceil(k / g);
  const q = bits === 8 ? new Int8Array(nb * kg * BLOCK_N * g) : new Int16Array(nb * kg * BLOCK_N * g);
  const scale = new Float32Array(n), sum = new Int32Array(n);
  for (let c = 0; c < n; c++) {
    let max = 0;
    for (let r = 0; r < k; r++) max = Math.max(max, Math.abs(w[r * n + c]!));
    const s = bits === 8 ? int8Scale(max) : fr(1 / INT16_SCALE);
    scale[c] = s;
    let total = 0;
    for (let r = 0; r < k; r++) {
      const v = bits === 8 ? clampInt(roundEven(fr(w[r * n + c]! / s)), 127) : sat16(roundEven(fr(w[r * n + c]! * INT16_SCALE)));
      q[packedIndex(r, c, kg, g)] = v;
      total += v;
    }
    sum[c] = total;
  }
  return { q, dims: [nb, kg, BLOCK_N, g], scale, sum };
}

/** The position of (k, n) in a packed layout with kg groups of g values of K. */
function packedIndex(r: number, c: number, kg: number, g: number): number {
  return (((Math.floor(c / BLOCK_N) * kg + Math.floor(r / g)) * BLOCK_N + (c % BLOCK_N)) * g) + (r % g);
}

/** W [V, D] row-major (row v = vocabulary id v) → int8 [V, Dp] per row (Dp = D rounded up to 64, zero padded), as qproject_topk reads it. */
export function quantizeRows(w: Float32Array, v: number, d: number): QuantizedWeight {
  if (w.length !== v * d) throw new Error(`internal: weight of ${w.length} values is not [${v}, ${d}]`);
  const dp = Math.ceil(d / ROW_ALIGN) * ROW_ALIGN;
  const q = new Int8Array(v * dp), scale = new Float32Array(v), sum = new Int32Array(v);
  for (let j = 0; j < v; j++) {
    let max = 0;
    for (let p = 0; p < d; p++) max = Math.max(max, Math.abs(w[j * d + p]!));
    const s = int8Scale(max);
    scale[j] = s;
    let total = 0;
    for (let p = 0; p < d; p++) {
      const x = clampInt(roundEven(fr(w[j * d + p]! / s)), 127);
      q[j * dp + p] = x;
      total += x;
    }
    sum[j] = total;
  }
  return { q, dims: [v, dp], scale, sum };
}

/** One input row quantized as the kernels do: its ints and scale (float32 input: the row itself, scale 1). */
export function quantizeInputRow(x: Float32Array, input: QuantInput): { q: ArrayLike<number>; scale: number } {
  if (input === 'float32') return { q: x, scale: 1 };
  if (input === 'int16') return { q: Array.from(x, (v) => sat16(roundEven(fr(v * INT16_SCALE)))), scale: fr(1 / INT16_SCALE) };
  let max = 0;
  for (const v of x) max = Math.max(max, Math.abs(v));
  if (max === 0) return { q: new Int8Array(x.length), scale: 0 };
  const s = fr(max / 127);
  return { q: Array.from(x, (v) => clampInt(roundEven(fr(v / s)), 127)), scale: s };
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
export function qmatmulRef(o: { a: Float32Array; m: number; k: number; n: number; input: QuantInput; w: Int8Array | Int16Array; scale: Float32Array; bias?: Float32Array }): Float32Array {
  const g = o.w instanceof Int16Array ? GROUP[16] : GROUP[8];
  const kg = Math.ceil(o.k / g);
  const y = new Float32Array(o.m * o.n);
  for (let i = 0; i < o.m; i++) {
    const row = quantizeInputRow(o.a.subarray(i * o.k, (i + 1) * o.k), o.input);
    for (let c = 0; c < o.n; c++) {
      let acc = 0;
      // int inputs: the kernels' int32 sums wrap modulo 2^32 (only int16 inputs can get there); | 0 does the same
      if (o.input === 'float32') for (let r = 0; r < o.k; r++) acc += row.q[r]! * o.w[packedIndex(r, c, kg, g)]!;
      else for (let r = 0; r < o.k; r++) acc = (acc + row.q[r]! * o.w[packedIndex(r, c, kg, g)]!) | 0;
      const v = dequantized(acc, o.input, row.scale, o.scale[c]!);
      y[i * o.n + c] = o.bias ? fr(v + o.bias[c]!) : v;
    }
  }
  return y;
}

/** qproject_topk's logits before the bias: [rows, V] = dequant(quant(X) · Wqᵀ) for W from quantizeRows. */
export function qlogitsRef(o: { x: Float32Array; rows: number; d: number; v: number; input: QuantInput; w: Int8Array; scale: Float32Array }): Float32Array {
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
