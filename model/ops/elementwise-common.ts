// Helpers private to the elementwise operators: dtype classes, broadcasting of operands, f16 rounding, symbolic elements.
import { allocData, isFloat, isInt, type Data, type DType, type NumArray } from '../../compiler/dtype.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import { sizeOf, Tensor } from '../../compiler/tensor.ts';
import { broadcastShapes } from './util.ts';
import type { InferInput, OpContext } from './types.ts';

/** Which element types an op accepts (ONNX type constraints, coarsely). */
export type Accept = 'float' | 'numeric' | 'int' | 'uint' | 'bool' | 'any';

export function accepts(accept: Accept, d: DType): boolean {
  switch (accept) {
    case 'float':
      return isFloat(d);
    case 'numeric':
      return isFloat(d) || isInt(d);
    case 'int':
      return isInt(d);
    case 'uint':
      return d.startsWith('uint');
    case 'bool':
      return d === 'bool';
    case 'any':
      return true;
  }
}

const ACCEPT_WORDS: Record<Accept, string> = {
  float: 'a floating-point type',
  numeric: 'a numeric type',
  int: 'an integer type',
  uint: 'an unsigned integer type',
  bool: 'bool',
  any: 'any type',
};

/** Fails unless the dtype is accepted; `what` names the input. */
export function checkAccept(ctx: OpContext, accept: Accept, d: DType, what = 'input'): void {
  if (!accepts(accept, d)) ctx.fail(`${what} has dtype ${d}, expected ${ACCEPT_WORDS[accept]}`);
}

/** Fails unless all given dtypes are equal. */
export function checkSameDtype(ctx: OpContext, dtypes: DType[]): void {
  for (let i = 1; i < dtypes.length; i++) {
    if (dtypes[i] !== dtypes[0]) ctx.fail(`input dtypes differ: ${dtypes.join(' and ')}`);
  }
}

/** A required input or ctx.fail. */
export function required<T>(ctx: OpContext, inputs: (T | undefined)[], i: number): T {
  const v = inputs[i];
  if (v === undefined) ctx.fail(`input ${i} is required`);
  return v;
}

/** Numpy broadcast of concrete dims, failing through ctx. */
export function broadcastConcrete(ctx: OpContext, shapes: readonly (readonly number[])[]): number[] {
  const n = Math.max(0, ...shapes.map((s) => s.length));
  const out = new Array<number>(n).fill(1);
  for (const s of shapes) {
    for (let i = 0; i < s.length; i++) {
      const j = n - s.length + i;
      const d = s[i]!;
      if (d === out[j]) continue;
      if (out[j] === 1) out[j] = d;
      else if (d !== 1) ctx.fail(`cannot broadcast shapes ${shapes.map((x) => `[${x.join(',')}]`).join(' and ')}`);
    }
  }
  return out;
}

/**
 * Opset < 7 binary ops broadcast B onto A only when attribute broadcast=1, aligned at `axis`
 * (default: trailing). Returns B's dims padded to A's rank, or B's dims unchanged for numpy broadcasting.
 */
export function legacyDims<D>(ctx: OpContext, a: readonly D[], b: readonly D[], one: D): D[] {
  if (ctx.opset >= 7 || ctx.int('broadcast', 0) === 0) return [...b];
  const axis = ctx.has('axis') ? ctx.int('axis') : a.length - b.length;
  const at = axis < 0 ? axis + a.length : axis;
  if (at < 0 || at + b.length > a.length)
    ctx.fail(`legacy broadcast axis ${axis} does not fit shapes of rank ${a.length} and ${b.length}`);
  const out: D[] = [];
  for (let i = 0; i < a.length; i++) out.push(i >= at && i < at + b.length ? b[i - at]! : one);
  return out;
}

/** Inferred broadcast shape of inputs (symbolic), failing on proven mismatch. */
export function inferBroadcast(ctx: OpContext, xs: InferInput[]): Dim[] | undefined {
  return broadcastShapes(
    ctx,
    xs.map((x) => x.shape),
  );
}

/**
 * The data of `t` laid out at `out` dims (a broadcast copy), or t's own data when its dims already are `out`.
 * Copies whole blocks: a trailing run of dims equal to the output's is copied contiguously, a trailing run of
 * size-1 dims is filled with one element, and only the dims in front of that run are walked.
 */
export function expandData(t: Tensor, out: readonly number[]): Data {
  const n = sizeOf(out);
  const r = out.length;
  const dims = new Array<number>(r - t.rank).fill(1).concat(t.dims);
  if (dims.every((d, i) => d === out[i])) return t.data;
  const dst = allocData(t.dtype, n);
  if (n === 0) return dst;
  if (t.size === 1) {
    if (Array.isArray(dst)) dst.fill(t.strings[0]!);
    else dst.fill(t.nums[0]!);
    return dst;
  }
  // stop: first dim of the trailing run that is copied (equal dims) or filled (source dims of 1) as one block
  let copyFrom = r;
  while (copyFrom > 0 && dims[copyFrom - 1] === out[copyFrom - 1]) copyFrom--;
  let fillFrom = r;
  while (fillFrom > 0 && dims[fillFrom - 1] === 1) fillFrom--;
  const fill = fillFrom < copyFrom;
  const stop = fill ? fillFrom : copyFrom;
  let block = 1;
  for (let i = stop; i < r; i++) block *= out[i]!;
  const srcStrides = new Array<number>(r);
  let acc = 1;
  for (let i = r - 1; i >= 0; i--) {
    srcStrides[i] = dims[i] === 1 ? 0 : acc;
    acc *= dims[i]!;
  }
  const ctr = new Array<number>(stop).fill(0);
  let src = 0;
  for (let dstOff = 0; dstOff < n; dstOff += block) {
    copyBlock(t.data, src, dst, dstOff, block, fill);
    for (let i = stop - 1; i >= 0; i--) {
      ctr[i]!++;
      src += srcStrides[i]!;
      if (ctr[i]! < out[i]!) break;
      src -= srcStrides[i]! * ctr[i]!;
      ctr[i] = 0;
    }
  }
  return dst;
}

/** dst[dstOff..+block] = src[srcOff..+block] (copy), or src[srcOff] repeated (fill). */
function copyBlock(src: Data, srcOff: number, dst: Data, dstOff: number, block: number, fill: boolean): void {
  if (Array.isArray(src)) {
    const d = dst as string[];
    for (let j = 0; j < block; j++) d[dstOff + j] = src[fill ? srcOff : srcOff + j]!;
    return;
  }
  const d = dst as NumArray;
  if (fill) {
    if (block === 1) d[dstOff] = src[srcOff]!;
    else d.fill(src[srcOff]!, dstOff, dstOff + block);
  } else if (block < 16) {
    for (let j = 0; j < block; j++) d[dstOff + j] = src[srcOff + j]!;
  } else {
    d.set((src as NumArray).subarray(srcOff, srcOff + block), dstOff);
  }
}

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/** A float32 value rounded to float16 (nearest even; overflow to ±∞). Fast path of float16.ts's roundF16. */
export function f32ToF16(v: number): number {
  const a = Math.abs(v);
  if (!(a >= 6.103515625e-5)) {
    if (a !== a) return v;
    // subnormal range: quantum 2^-24, rounded by adding 1.5·2^28 (whose ulp is 2^-24)
    const r = v + 402653184 - 402653184;
    return r === 0 && v < 0 ? -0 : r;
  }
  if (a >= 65520) return v > 0 ? Infinity : -Infinity;
  F32[0] = v;
  const b = U32[0]!;
  U32[0] = (b + 0xfff + ((b >>> 13) & 1)) & 0xffffe000;
  return F32[0]!;
}

/** A float32 value rounded to bfloat16 (nearest even). Fast path of float16.ts's roundBf16. */
export function f32ToBf16(v: number): number {
  if (v !== v) return v;
  F32[0] = v;
  const b = U32[0]!;
  U32[0] = (b + 0x7fff + ((b >>> 16) & 1)) & 0xffff0000;
  return F32[0]!;
}

/** Rounds an output array in place to the dtype where the typed array does not: float16, bfloat16, uint64 wrap. */
export function finishData(dtype: DType, y: NumArray): void {
  const n = y.length;
  if (dtype === 'float16') for (let i = 0; i < n; i++) y[i] = f32ToF16(y[i]!);
  else if (dtype === 'bfloat16') for (let i = 0; i < n; i++) y[i] = f32ToBf16(y[i]!);
  else if (dtype === 'uint64') {
    // negative results (Sub underflow) wrap; int64 is left alone: INT64_MAX is held as 2^63 and must stay large
    for (let i = 0; i < n; i++) if (y[i]! < 0) y[i] = y[i]! + 18446744073709551616;
  }
}

/** A new tensor from computed data: rounds/wraps where needed. */
export function finish(dtype: DType, dims: readonly number[], y: NumArray): Tensor {
  finishData(dtype, y);
  return new Tensor(dtype, dims, y);
}

/** Is this dtype computed with JS ints (typed int arrays or int64 doubles)? */
export function isIntLike(d: DType): boolean {
  return isInt(d) || d === 'bool';
}

// ---- symbolic elements (shape computations) ----

/** Small integer/bool tensors known at inference time, as Dims: the `sym`, else a small constant `value`. */
export function symElems(x: InferInput | undefined): Dim[] | undefined {
  if (x === undefined) return undefined;
  if (x.sym !== undefined) return x.sym;
  const v = x.value;
  if (v !== undefined && isIntLike(v.dtype) && v.rank <= 1 && v.size <= 64) return Array.from(v.nums);
  return undefined;
}

/** Elementwise combination of Dim lists with broadcasting (lengths equal or 1); undefined if any element is undecidable. */
export function zipSym(lists: Dim[][], f: (xs: Dim[]) => Dim | undefined): Dim[] | undefined {
  let n = 1;
  for (const l of lists) {
    if (l.length === 1) continue;
    if (n !== 1 && l.length !== n) return undefined;
    n = l.length;
  }
  const out: Dim[] = [];
  for (let i = 0; i < n; i++) {
    const r = f(lists.map((l) => (l.length === 1 ? l[0]! : l[i]!)));
    if (r === undefined) return undefined;
    out.push(r);
  }
  return out;
}

/** The Dims of all inputs when every one is known, else undefined. */
export function allSym(xs: (InferInput | undefined)[]): Dim[][] | undefined {
  const out: Dim[][] = [];
  for (const x of xs) {
    const s = symElems(x);
    if (s === undefined) return undefined;
    out.push(s);
  }
  return out;
}

/** Whether a sym list may describe a value of this shape (rank ≤ 1). */
export function symFits(shape: Dim[] | undefined): boolean {
  return shape !== undefined && shape.length <= 1;
}

/** Numbers of a Dim list, or undefined if any is symbolic. */
export function numbersOf(xs: Dim[]): number[] | undefined {
  for (const x of xs) if (typeof x !== 'number') return undefined;
  return xs as number[];
}
