// Tensors of the evaluator: a dtype, concrete dims and a flat row-major JS array (see dtype.ts for the array kinds).
import { allocData, type Data, type DType, type NumArray } from './dtype.ts';
import { roundBf16, roundF16 } from './float16.ts';

export class Tensor {
  constructor(
    readonly dtype: DType,
    readonly dims: readonly number[],
    readonly data: Data,
  ) {
    const n = sizeOf(dims);
    if (data.length !== n)
      throw new Error(`internal: tensor data has ${data.length} elements, dims [${dims}] need ${n}`);
  }

  get size(): number {
    return this.data.length;
  }
  get rank(): number {
    return this.dims.length;
  }

  /** Numeric elements (throws for strings). */
  get nums(): NumArray {
    if (Array.isArray(this.data)) throw new Error('internal: string tensor used as numbers');
    return this.data as NumArray;
  }

  get strings(): string[] {
    if (!Array.isArray(this.data)) throw new Error('internal: numeric tensor used as strings');
    return this.data;
  }

  /** A zero-filled tensor. */
  static zeros(dtype: DType, dims: readonly number[]): Tensor {
    return new Tensor(dtype, dims, allocData(dtype, sizeOf(dims)));
  }

  /** A tensor from plain numbers, converted to the dtype as ONNX Cast would (round, truncate, wrap, bool). */
  static fromNumbers(dtype: DType, dims: readonly number[], values: ArrayLike<number>): Tensor {
    const data = allocData(dtype, values.length) as NumArray;
    const conv = converter(dtype);
    if (conv) for (let i = 0; i < values.length; i++) data[i] = conv(values[i]!);
    else data.set(values);
    return new Tensor(dtype, dims, data);
  }

  static scalar(dtype: DType, v: number): Tensor {
    return Tensor.fromNumbers(dtype, [], [v]);
  }

  static fromStrings(dims: readonly number[], values: string[]): Tensor {
    return new Tensor('string', dims, values);
  }

  /** Same data, other dims (sizes must agree). */
  reshape(dims: readonly number[]): Tensor {
    return new Tensor(this.dtype, dims, this.data);
  }

  /** The elements as plain numbers (copy). */
  toNumbers(): number[] {
    return Array.from(this.nums);
  }
}

/** The per-element conversion from a JS number into a dtype's array, or undefined when the typed array does it. */
export function converter(dtype: DType): ((x: number) => number) | undefined {
  switch (dtype) {
    case 'float16':
      return roundF16;
    case 'bfloat16':
      return roundBf16;
    case 'bool':
      return (x) => (x !== 0 ? 1 : 0);
    case 'int64':
      return (x) =>
        Number.isFinite(x) ? Math.trunc(x) : x !== x ? 0 : x > 0 ? 9223372036854775807 : -9223372036854775808;
    case 'uint64':
      return (x) => (Number.isFinite(x) ? wrapU64(Math.trunc(x)) : 0);
    case 'int8':
    case 'int16':
    case 'int32':
    case 'uint8':
    case 'uint16':
    case 'uint32':
      return (x) => (Number.isFinite(x) ? Math.trunc(x) : 0);
    default:
      return undefined;
  }
}

function wrapU64(x: number): number {
  return x < 0 ? x + 18446744073709551616 : x;
}

/** A row-major [rows, cols] float32 matrix transposed into a new [cols, rows] one. */
export function transposeMatrix(w: ArrayLike<number>, rows: number, cols: number): Float32Array {
  const t = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) t[c * rows + r] = w[r * cols + c]!;
  return t;
}

export function sizeOf(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/** Row-major strides of dims. */
export function stridesOf(dims: readonly number[]): number[] {
  const s = new Array<number>(dims.length);
  let acc = 1;
  for (let i = dims.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= dims[i]!;
  }
  return s;
}

/** Normalizes a possibly negative axis against a rank; throws a plain Error when out of range. */
export function normAxis(axis: number, rank: number, what = 'axis'): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) throw new Error(`${what} ${axis} is out of range for rank ${rank}`);
  return a;
}

/** Numpy-style broadcast of two shapes; throws when incompatible. */
export function broadcastDims(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) throw new Error(`shapes [${a}] and [${b}] do not broadcast`);
    out[i] = x === 1 ? y : x;
  }
  return out;
}

/** For each flat index of `out` dims, the flat index into a tensor of `dims` broadcast to it. */
export function broadcastIndex(dims: readonly number[], out: readonly number[]): Int32Array | undefined {
  const n = sizeOf(out);
  if (dims.length === out.length && dims.every((d, i) => d === out[i])) return undefined;
  const idx = new Int32Array(n);
  const r = out.length;
  const st = stridesOf(dims);
  const bst = new Array<number>(r);
  for (let i = 0; i < r; i++) {
    const j = i - (r - dims.length);
    bst[i] = j >= 0 && dims[j] !== 1 ? st[j]! : 0;
  }
  const ctr = new Array<number>(r).fill(0);
  let src = 0;
  for (let k = 0; k < n; k++) {
    idx[k] = src;
    for (let i = r - 1; i >= 0; i--) {
      ctr[i]!++;
      src += bst[i]!;
      if (ctr[i]! < out[i]!) break;
      src -= bst[i]! * ctr[i]!;
      ctr[i] = 0;
    }
  }
  return idx;
}
