// Helpers private to the movement operators: element copies by index, permutes, int/sym reading, symbolic slicing.
import { allocData, isInt, type Data, type DType, type NumArray } from '../../compiler/dtype.ts';
import { dimAdd, dimDiv, dimEq, dimMul, dimProduct, dimSub, isSym, sym, type Dim } from '../../compiler/symbolic.ts';
import { sizeOf, stridesOf, Tensor } from '../../compiler/tensor.ts';
import type { InferInput, InferOutput, OpContext } from './types.ts';

/** Any element array, written and read element by element (numbers or strings). */
type Elems = { [i: number]: number | string; length: number };

/**
 * Slice bounds at or beyond this magnitude (INT32_MAX; INT64_MAX arrives as 9.223372036854776e18) count as
 * "unbounded" when the dim is symbolic.
 */
const HUGE = 2147483647;

/** A tensor of `dims` whose element i is src's element idx[i]. */
export function takeElems(src: Tensor, dims: readonly number[], idx: ArrayLike<number>): Tensor {
  const n = idx.length;
  const out = allocData(src.dtype, n);
  const o = out as Elems;
  const s = src.data as Elems;
  for (let i = 0; i < n; i++) o[i] = s[idx[i]!]!;
  return new Tensor(src.dtype, dims, out);
}

/** Copies n elements from src[srcOff..] into dst[dstOff..] (same dtype). */
export function copyRun(dst: Data, dstOff: number, src: Data, srcOff: number, n: number): void {
  if (n >= 32 && !Array.isArray(dst)) {
    (dst as NumArray).set((src as NumArray).subarray(srcOff, srcOff + n), dstOff);
    return;
  }
  const o = dst as Elems;
  const s = src as Elems;
  for (let i = 0; i < n; i++) o[dstOff + i] = s[srcOff + i]!;
}

/** A copy of a tensor's data (same dtype). */
export function cloneData(t: Tensor): Data {
  if (Array.isArray(t.data)) return t.data.slice();
  return (t.data as NumArray).slice();
}

/** Transpose: output axis i is input axis perm[i]. Innermost axis copied in a tight loop. */
export function permute(src: Tensor, perm: readonly number[]): Tensor {
  const dims = src.dims;
  const r = dims.length;
  const outDims = perm.map((p) => dims[p]!);
  const n = sizeOf(outDims);
  const out = allocData(src.dtype, n);
  if (r === 0 || n === 0) {
    if (n > 0) copyRun(out, 0, src.data, 0, n);
    return new Tensor(src.dtype, outDims, out);
  }
  const st = stridesOf(dims);
  const ps = perm.map((p) => st[p]!);
  const inner = outDims[r - 1]!;
  const innerStride = ps[r - 1]!;
  const ctr = new Array<number>(r).fill(0);
  const o = out as Elems;
  const s = src.data as Elems;
  let srcBase = 0;
  for (let k = 0; k < n; k += inner) {
    if (innerStride === 1) copyRun(out, k, src.data, srcBase, inner);
    else for (let j = 0, p = srcBase; j < inner; j++, p += innerStride) o[k + j] = s[p]!;
    for (let i = r - 2; i >= 0; i--) {
      ctr[i]!++;
      srcBase += ps[i]!;
      if (ctr[i]! < outDims[i]!) break;
      srcBase -= ps[i]! * ctr[i]!;
      ctr[i] = 0;
    }
  }
  return new Tensor(src.dtype, outDims, out);
}

/** The elements of a small integer tensor known at inference time, as Dims (sym, else the constant value). */
export function symOf(x: InferInput | undefined): Dim[] | undefined {
  if (x === undefined) return undefined;
  if (x.sym !== undefined) return x.sym;
  if (x.value !== undefined && isInt(x.value.dtype) && x.value.rank <= 1) return Array.from(x.value.nums);
  return undefined;
}

/** Like symOf, but only when every element is a known number. */
export function numsOf(x: InferInput | undefined): number[] | undefined {
  const s = symOf(x);
  if (s === undefined || s.some(isSym)) return undefined;
  return s as number[];
}

/** The sym to attach to a constant tensor output: its elements when it is a small rank-0/1 integer tensor. */
export function constSym(t: Tensor): Dim[] | undefined {
  if (!isInt(t.dtype) || t.rank > 1 || t.size > 1024) return undefined;
  return Array.from(t.nums);
}

/** Fails unless the dtype is int32 or int64 (index and shape inputs). */
export function needIndexType(ctx: OpContext, dtype: DType, what: string): void {
  if (dtype !== 'int32' && dtype !== 'int64') ctx.fail(`${what} must be int32 or int64, got ${dtype}`);
}

/** Fails unless the dtype is int64. */
export function needInt64(ctx: OpContext, dtype: DType, what: string): void {
  if (dtype !== 'int64') ctx.fail(`${what} must be int64, got ${dtype}`);
}

/** Fails unless a known shape has the given rank. */
export function needRank(ctx: OpContext, shape: readonly Dim[] | undefined, rank: number, what: string): void {
  if (shape !== undefined && shape.length !== rank)
    ctx.fail(`${what} must have rank ${rank}, got rank ${shape.length}`);
}

/** Two dims that must agree: fails when both are different numbers; returns the more informative one. */
export function unifyDim(ctx: OpContext, a: Dim, b: Dim, what: string): Dim {
  if (typeof a === 'number' && typeof b === 'number') {
    if (a !== b) ctx.fail(`${what}: ${a} vs ${b}`);
    return a;
  }
  return typeof a === 'number' ? a : b;
}

/** Normalizes an axis list against a rank; fails on out-of-range or repeated axes. */
export function axesOf(ctx: OpContext, axes: readonly number[], rank: number): number[] {
  const out: number[] = [];
  for (const a0 of axes) {
    const a = a0 < 0 ? a0 + rank : a0;
    if (a < 0 || a >= rank) ctx.fail(`axis ${a0} is out of range for rank ${rank}`);
    if (out.includes(a)) ctx.fail(`axis ${a0} is repeated`);
    out.push(a);
  }
  return out;
}

/** Exact division of products of dims: cancels equal factors first, then divides (monomials exactly). */
export function divDims(num: readonly Dim[], den: readonly Dim[]): Dim {
  const rest = [...num];
  const left: Dim[] = [];
  for (const d of den) {
    if (d === 1) continue;
    const i = rest.findIndex((x) => dimEq(x, d));
    if (i >= 0) rest.splice(i, 1);
    else left.push(d);
  }
  return divMonomial(dimProduct(rest), dimProduct(left));
}

/** a / b, exact when b is a single-term expression dividing every term of a; else dimDiv. */
function divMonomial(a: Dim, b: Dim): Dim {
  if (typeof b === 'number' || typeof a === 'number' || b.terms.size !== 1) return dimDiv(a, b);
  const [[bk, bc]] = [...b.terms] as [[string, number]];
  const bSyms = bk === '' ? [] : bk.split('*');
  let out: Dim = 0;
  for (const [k, c] of a.terms) {
    const syms = k === '' ? [] : k.split('*');
    for (const s of bSyms) {
      const i = syms.indexOf(s);
      if (i < 0) return dimDiv(a, b);
      syms.splice(i, 1);
    }
    if (c % bc !== 0) return dimDiv(a, b);
    let term: Dim = c / bc;
    for (const s of syms) term = dimMul(term, sym(s));
    out = dimAdd(out, term);
  }
  return out;
}

/** ceil(a / b) for a positive number b, symbolic when a is. */
export function ceilDivDim(a: Dim, b: number): Dim {
  if (typeof a === 'number') return Math.ceil(a / b);
  if (b === 1) return a;
  return dimDiv(dimAdd(a, b - 1), b);
}

/** max(0, d) for numbers; symbolic dims are assumed non-negative. */
export function nonNeg(d: Dim): Dim {
  return typeof d === 'number' ? Math.max(0, d) : d;
}

/**
 * Length of a slice of a dim of size `dim` from `start` to `end` by `step`, following ONNX clamping. Exact when
 * dim, start and end are numbers; with symbols, bounds are assumed to lie inside the dim unless they are huge.
 */
export function sliceLen(dim: Dim, start: Dim, end: Dim, step: number): Dim {
  const s = sliceBound(dim, start, step, true);
  const e = sliceBound(dim, end, step, false);
  if (step > 0) return nonNeg(ceilDivDim(dimSub(e, s), step));
  return nonNeg(ceilDivDim(dimSub(s, e), -step));
}

/** The clamped start (isStart) or end of a slice, symbolic when needed. */
function sliceBound(dim: Dim, v: Dim, step: number, isStart: boolean): Dim {
  const lo = step > 0 || isStart ? 0 : -1;
  const hiOff = step > 0 ? 0 : -1; // hi = dim + hiOff
  if (typeof v === 'number' && typeof dim === 'number') {
    const x = v < 0 ? v + dim : v;
    return Math.min(Math.max(x, lo), dim + hiOff);
  }
  if (typeof v === 'number') {
    if (v >= HUGE) return dimAdd(dim, hiOff);
    if (v <= -HUGE) return lo;
    if (v < 0) return dimAdd(dim, v);
    return v;
  }
  // a symbolic bound with only negative terms (e.g. -src_len) counts from the end
  if ([...v.terms.values()].every((c) => c < 0)) return dimAdd(dim, v);
  return v;
}

/** The sym of a result that is a plain rearrangement of one int input's elements (Reshape, Squeeze, ...). */
export function passSym(x: InferInput, out: InferOutput): InferOutput {
  const s = x.sym;
  if (s !== undefined && out.shape !== undefined && out.shape.length <= 1) out.sym = s;
  return out;
}

/**
 * For an output of outDims, the flat source index of each element: the sum over axes of maps[axis][coordinate],
 * or -1 when any axis maps its coordinate to -1 (a fill position, e.g. constant padding).
 */
export function offsetsFromMaps(outDims: readonly number[], maps: readonly Int32Array[]): Int32Array {
  const n = sizeOf(outDims);
  const idx = new Int32Array(n);
  const r = outDims.length;
  if (r === 0 || n === 0) return idx;
  const inner = maps[r - 1]!;
  const innerLen = outDims[r - 1]!;
  const ctr = new Array<number>(r).fill(0);
  for (let k = 0; k < n; k += innerLen) {
    let base = 0;
    let dead = false;
    for (let a = 0; a < r - 1; a++) {
      const m = maps[a]![ctr[a]!]!;
      if (m < 0) dead = true;
      base += m;
    }
    for (let j = 0; j < innerLen; j++) {
      const m = inner[j]!;
      idx[k + j] = dead || m < 0 ? -1 : base + m;
    }
    for (let a = r - 2; a >= 0; a--) {
      if (++ctr[a]! < outDims[a]!) break;
      ctr[a] = 0;
    }
  }
  return idx;
}

/** Per-axis map for a strided walk: coordinate j → (start + j*step) * stride. */
export function stridedMap(len: number, start: number, step: number, stride: number): Int32Array {
  const m = new Int32Array(len);
  for (let j = 0; j < len; j++) m[j] = (start + j * step) * stride;
  return m;
}

/**
 * A tensor of outDims whose element at coordinates c is src's element at flat index sum_a maps[a][c[a]], or `fill`
 * where any map gives -1. Runs along the last axis that are contiguous in src are block-copied.
 */
export function takeByMaps(
  src: Tensor,
  outDims: readonly number[],
  maps: readonly Int32Array[],
  fill: number | string = 0,
): Tensor {
  const n = sizeOf(outDims);
  const out = allocData(src.dtype, n);
  const r = outDims.length;
  if (n === 0) return new Tensor(src.dtype, outDims, out);
  if (r === 0) {
    copyRun(out, 0, src.data, 0, 1);
    return new Tensor(src.dtype, outDims, out);
  }
  const inner = maps[r - 1]!;
  const innerLen = outDims[r - 1]!;
  const contiguous = isRun(inner);
  const o = out as Elems;
  const s = src.data as Elems;
  const ctr = new Array<number>(r).fill(0);
  for (let k = 0; k < n; k += innerLen) {
    let base = 0;
    let dead = false;
    for (let a = 0; a < r - 1; a++) {
      const m = maps[a]![ctr[a]!]!;
      if (m < 0) dead = true;
      base += m;
    }
    if (dead) for (let j = 0; j < innerLen; j++) o[k + j] = fill;
    else if (contiguous) copyRun(out, k, src.data, base + inner[0]!, innerLen);
    else {
      for (let j = 0; j < innerLen; j++) {
        const m = inner[j]!;
        o[k + j] = m < 0 ? fill : s[base + m]!;
      }
    }
    for (let a = r - 2; a >= 0; a--) {
      if (++ctr[a]! < outDims[a]!) break;
      ctr[a] = 0;
    }
  }
  return new Tensor(src.dtype, outDims, out);
}

/** True when a map is m[0], m[0]+1, ... (a contiguous run, no fill). */
function isRun(m: Int32Array): boolean {
  if (m.length === 0 || m[0]! < 0) return false;
  for (let j = 1; j < m.length; j++) if (m[j] !== m[0]! + j) return false;
  return true;
}
