// Helpers shared by the math operator files: dtype checks, float64 results into output dtypes, reduction axes.
import { dtypeFromOnnx, isFloat, type DType } from '../../compiler/dtype.ts';
import { roundBf16, roundF16 } from '../../compiler/float16.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import type { InferInput, OpContext } from './types.ts';

/** A tensor of `dtype` from float64 results (rounds to f16/bf16, truncates for ints; float64 data is kept as is). */
export function fromF64(dtype: DType, dims: readonly number[], values: Float64Array): Tensor {
  if (dtype === 'float64') return new Tensor(dtype, dims, values);
  return Tensor.fromNumbers(dtype, dims, values);
}

/** Fails unless the dtype is a float type. */
export function requireFloat(ctx: OpContext, dtype: DType, what = 'input'): void {
  if (!isFloat(dtype)) ctx.fail(`${what} must be a float tensor, got ${dtype}`);
}

/** Fails unless the dtype is numeric (not string, not bool). */
export function requireNumeric(ctx: OpContext, dtype: DType, what = 'input'): void {
  if (dtype === 'string' || dtype === 'bool') ctx.fail(`${what} must be numeric, got ${dtype}`);
}

/** Fails when two inputs that must share a type do not. */
export function requireSameDtype(ctx: OpContext, a: DType, b: DType, what: string): void {
  if (a !== b) ctx.fail(`${what}: dtype ${b} does not match ${a}`);
}

/** The dtype named by an ONNX dtype code attribute, or a failure naming it. */
export function dtypeAttr(ctx: OpContext, code: number, name: string): DType {
  const d = dtypeFromOnnx(code);
  if (d === undefined) ctx.fail(`attribute ${name}=${code} is not a supported dtype`);
  return d;
}

/** Rounds a double to a float dtype's precision (float64: unchanged). */
export function roundTo(dtype: DType): (x: number) => number {
  if (dtype === 'float32') return Math.fround;
  if (dtype === 'float16') return roundF16;
  if (dtype === 'bfloat16') return roundBf16;
  return (x) => x;
}

/** Normalized, sorted, duplicate-free axes; fails when one is out of range or repeated. */
export function normAxes(ctx: OpContext, axes: readonly number[], rank: number): number[] {
  const out: number[] = [];
  for (const a of axes) {
    const n = a < 0 ? a + rank : a;
    if (n < 0 || n >= rank) ctx.fail(`axis ${a} is out of range for rank ${rank}`);
    if (out.includes(n)) ctx.fail(`axis ${a} is repeated`);
    out.push(n);
  }
  return out.sort((x, y) => x - y);
}

/** The elements of a constant or shape-derived integer input as numbers, when every one is known. */
export function knownInts(x: InferInput | undefined): number[] | undefined {
  if (x === undefined) return undefined;
  if (x.value !== undefined) return Array.from(x.value.nums, Number);
  if (x.sym?.every((d) => typeof d === 'number')) return x.sym as number[];
  return undefined;
}

/** Product of concrete dims over [from, to). */
export function prodRange(dims: readonly number[], from: number, to: number): number {
  let p = 1;
  for (let i = from; i < to; i++) p *= dims[i];
  return p;
}

/** Output shape of a reduction over `axes` (sorted, normalized) of `shape`. */
export function reducedShape<D extends Dim>(
  shape: readonly D[],
  axes: readonly number[],
  keepdims: boolean,
): (D | 1)[] {
  const out: (D | 1)[] = [];
  shape.forEach((d, i) => {
    if (!axes.includes(i)) out.push(d);
    else if (keepdims) out.push(1);
  });
  return out;
}

/** Round half to even, as numpy's rint. */
export function rint(v: number): number {
  const r = Math.round(v);
  return r - v === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Unidirectional broadcast test: can `from` be broadcast to `to`? */
export function broadcastsTo(from: readonly number[], to: readonly number[]): boolean {
  if (from.length > to.length) return false;
  const off = to.length - from.length;
  return from.every((d, i) => d === 1 || d === to[i + off]);
}
