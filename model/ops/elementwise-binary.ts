// Binary and variadic elementwise operators: arithmetic, comparisons, logic, bitwise ops, Where, Max/Min/Sum/Mean, PRelu.
import { allocData, isFloat, isInt, type Data, type DType, type NumArray } from '../../compiler/dtype.ts';
import { dimAdd, dimCompare, dimDiv, dimEq, dimMul, dimSub, type Dim } from '../../compiler/symbolic.ts';
import { sizeOf, Tensor } from '../../compiler/tensor.ts';
import { broadcastShapes } from './util.ts';
import {
  allSym,
  broadcastConcrete,
  checkAccept,
  checkSameDtype,
  expandData,
  finish,
  finishData,
  legacyDims,
  required,
  symFits,
  zipSym,
  type Accept,
} from './elementwise-common.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpContext, OpHandler } from './types.ts';

type Kernel = (a: NumArray, b: NumArray, y: NumArray, dtype: DType) => void;
type CompareKernel = (a: Data, b: Data, y: Uint8Array) => void;
type SymRule = (a: Dim, b: Dim) => Dim | undefined;

// ---- operand preparation ----

/** Output shape of a binary op in inference (with opset < 7 legacy broadcast). */
function binaryShape(ctx: OpContext, a: InferInput, b: InferInput): Dim[] | undefined {
  if (a.shape === undefined || b.shape === undefined) return undefined;
  return broadcastShapes(ctx, [a.shape, legacyDims<Dim>(ctx, a.shape, b.shape, 1)]);
}

/** Both operands laid out at the broadcast output dims. */
function binaryOperands(ctx: OpContext, a: Tensor, b: Tensor): { da: Data; db: Data; dims: number[] } {
  const bb = b.reshape(legacyDims(ctx, a.dims, b.dims, 1));
  const dims = broadcastConcrete(ctx, [a.dims, bb.dims]);
  return { da: expandData(a, dims), db: expandData(bb, dims), dims };
}

/** The symbolic elements of a binary op's output, when both inputs' elements are known and the rule decides each. */
function binarySym(a: InferInput, b: InferInput, shape: Dim[] | undefined, rule: SymRule): Dim[] | undefined {
  if (!symFits(shape)) return undefined;
  const s = allSym([a, b]);
  return s && zipSym(s, ([x, y]) => rule(x!, y!));
}

// ---- arithmetic ----

interface ArithSpec {
  op: string;
  accept: Accept;
  kernel: Kernel;
  /** Rule for symbolic integer elements (shape computations). */
  sym?: SymRule;
  /** Whether input 1 may have its own dtype (Pow's exponent). */
  mixed?: boolean;
}

function arith(spec: ArithSpec): OpHandler {
  return {
    op: spec.op,
    infer(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
      const a = required(ctx, inputs, 0);
      const b = required(ctx, inputs, 1);
      if (!spec.mixed) checkSameDtype(ctx, [a.dtype, b.dtype]);
      checkAccept(ctx, spec.accept, a.dtype, 'input 0');
      checkAccept(ctx, spec.accept, b.dtype, 'input 1');
      const shape = binaryShape(ctx, a, b);
      const out: InferOutput = { dtype: a.dtype, shape };
      if (spec.sym !== undefined && isInt(a.dtype) && isInt(b.dtype)) {
        const s = binarySym(a, b, shape, spec.sym);
        if (s !== undefined) out.sym = s;
      }
      return [out];
    },
    eval(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
      const a = required(ctx, inputs, 0);
      const b = required(ctx, inputs, 1);
      if (!spec.mixed) checkSameDtype(ctx, [a.dtype, b.dtype]);
      checkAccept(ctx, spec.accept, a.dtype, 'input 0');
      checkAccept(ctx, spec.accept, b.dtype, 'input 1');
      const { da, db, dims } = binaryOperands(ctx, a, b);
      const y = allocData(a.dtype, sizeOf(dims)) as NumArray;
      spec.kernel(da as NumArray, db as NumArray, y, a.dtype);
      return [finish(a.dtype, dims, y)];
    },
  };
}

function addKernel(a: NumArray, b: NumArray, y: NumArray): void {
  for (let i = 0; i < y.length; i++) y[i] = a[i]! + b[i]!;
}

function subKernel(a: NumArray, b: NumArray, y: NumArray): void {
  for (let i = 0; i < y.length; i++) y[i] = a[i]! - b[i]!;
}

function mulKernel(a: NumArray, b: NumArray, y: NumArray, dtype: DType): void {
  if (dtype === 'int32' || dtype === 'uint32') {
    for (let i = 0; i < y.length; i++) y[i] = Math.imul(a[i]!, b[i]!); // exact C wraparound
  } else {
    for (let i = 0; i < y.length; i++) y[i] = a[i]! * b[i]!;
  }
}

function divKernel(a: NumArray, b: NumArray, y: NumArray, dtype: DType): void {
  if (isInt(dtype)) {
    // integer division truncates toward zero; division by zero gives 0 (as numpy does) instead of trapping
    for (let i = 0; i < y.length; i++) {
      const d = b[i]!;
      y[i] = d === 0 ? 0 : Math.trunc(a[i]! / d);
    }
  } else {
    for (let i = 0; i < y.length; i++) y[i] = a[i]! / b[i]!;
  }
}

function powKernel(a: NumArray, b: NumArray, y: NumArray, dtype: DType): void {
  if (isInt(dtype)) {
    for (let i = 0; i < y.length; i++) y[i] = truncInt(a[i]! ** b[i]!);
  } else {
    for (let i = 0; i < y.length; i++) {
      const x = a[i]!;
      const e = b[i]!;
      y[i] = e === 2 ? x * x : x ** e; // x² is common (variance in decomposed LayerNorm)
    }
  }
}

function truncInt(x: number): number {
  return Number.isFinite(x) ? Math.trunc(x) : 0;
}

/** Mod with fmod=0: integer remainder takes the divisor's sign (Python %); floats follow the reference's nan_to_num(fmod). */
function modKernel(a: NumArray, b: NumArray, y: NumArray, dtype: DType): void {
  if (isFloat(dtype)) {
    for (let i = 0; i < y.length; i++) {
      const r = a[i]! % b[i]!;
      y[i] = r !== r ? 0 : r;
    }
    return;
  }
  for (let i = 0; i < y.length; i++) {
    const d = b[i]!;
    if (d === 0) {
      y[i] = 0;
      continue;
    }
    let r = a[i]! % d;
    if (r !== 0 && r < 0 !== d < 0) r += d;
    y[i] = r;
  }
}

/** Mod with fmod=1: C fmod, the remainder takes the dividend's sign. */
function fmodKernel(a: NumArray, b: NumArray, y: NumArray, dtype: DType): void {
  const int = isInt(dtype);
  for (let i = 0; i < y.length; i++) {
    const d = b[i]!;
    y[i] = int && d === 0 ? 0 : a[i]! % d;
  }
}

const TWO32 = 4294967296;

/** Bitwise and/or/xor: 32-bit types directly, 64-bit types as two 32-bit halves. */
function bitwiseKernel(which: 'and' | 'or' | 'xor'): Kernel {
  return (a, b, y, dtype) => {
    const n = y.length;
    if (dtype !== 'int64' && dtype !== 'uint64') {
      if (which === 'and') for (let i = 0; i < n; i++) y[i] = a[i]! & b[i]!;
      else if (which === 'or') for (let i = 0; i < n; i++) y[i] = a[i]! | b[i]!;
      else for (let i = 0; i < n; i++) y[i] = a[i]! ^ b[i]!;
      return;
    }
    const unsigned = dtype === 'uint64';
    for (let i = 0; i < n; i++) {
      const x = a[i]!;
      const z = b[i]!;
      const xh = Math.floor(x / TWO32);
      const zh = Math.floor(z / TWO32);
      const xl = x - xh * TWO32;
      const zl = z - zh * TWO32;
      let hi: number;
      let lo: number;
      if (which === 'and') {
        hi = xh & zh;
        lo = xl & zl;
      } else if (which === 'or') {
        hi = xh | zh;
        lo = xl | zl;
      } else {
        hi = xh ^ zh;
        lo = xl ^ zl;
      }
      y[i] = (unsigned ? hi >>> 0 : hi) * TWO32 + (lo >>> 0);
    }
  };
}

const BITS: Partial<Record<DType, number>> = { uint8: 8, uint16: 16, uint32: 32, uint64: 64 };

function bitShiftKernel(left: boolean): Kernel {
  return (a, b, y, dtype) => {
    const width = BITS[dtype] ?? 64;
    for (let i = 0; i < y.length; i++) {
      const x = a[i]!;
      const s = b[i]!;
      if (s >= width) {
        y[i] = 0;
        continue;
      }
      if (width === 64) {
        y[i] = left ? (x * 2 ** s) % 18446744073709551616 : Math.floor(x / 2 ** s);
      } else if (left) {
        y[i] = s >= 32 ? 0 : (x << s) >>> 0; // the typed array keeps the low `width` bits
      } else {
        y[i] = x >>> s;
      }
    }
  };
}

function intDivSym(a: Dim, b: Dim): Dim | undefined {
  if (typeof a === 'number' && typeof b === 'number') return b === 0 ? undefined : Math.trunc(a / b);
  if (typeof b === 'number' && b <= 0) return undefined;
  return dimDiv(a, b); // dims are non-negative, so floor = trunc
}

function numericSym(f: (a: number, b: number) => number): SymRule {
  return (a, b) => (typeof a === 'number' && typeof b === 'number' ? f(a, b) : undefined);
}

function modHandler(): OpHandler {
  const plain = arith({
    op: 'Mod',
    accept: 'numeric',
    kernel: modKernel,
    sym: numericSym((a, b) => (b === 0 ? 0 : ((a % b) + b) % b)),
  });
  const c = arith({
    op: 'Mod',
    accept: 'numeric',
    kernel: fmodKernel,
    sym: numericSym((a, b) => (b === 0 ? 0 : a % b)),
  });
  return {
    op: 'Mod',
    infer: (ctx, inputs) => (ctx.int('fmod', 0) ? c : plain).infer(ctx, inputs),
    eval: (ctx, inputs) => (ctx.int('fmod', 0) ? c : plain).eval(ctx, inputs),
  };
}

function bitShiftHandler(): OpHandler {
  const pick = (ctx: OpContext): OpHandler => {
    const dir = ctx.string('direction');
    if (dir !== 'LEFT' && dir !== 'RIGHT') ctx.fail(`direction must be LEFT or RIGHT, got '${dir}'`);
    return dir === 'LEFT' ? SHIFT_LEFT : SHIFT_RIGHT;
  };
  return {
    op: 'BitShift',
    infer: (ctx, inputs) => pick(ctx).infer(ctx, inputs),
    eval: (ctx, inputs) => pick(ctx).eval(ctx, inputs),
  };
}

const SHIFT_LEFT = arith({ op: 'BitShift', accept: 'uint', kernel: bitShiftKernel(true) });
const SHIFT_RIGHT = arith({ op: 'BitShift', accept: 'uint', kernel: bitShiftKernel(false) });

// ---- comparisons and logic (bool outputs) ----

function compare(op: string, accept: Accept, kernel: CompareKernel, sym?: SymRule): OpHandler {
  return {
    op,
    infer(ctx, inputs) {
      const a = required(ctx, inputs, 0);
      const b = required(ctx, inputs, 1);
      checkSameDtype(ctx, [a.dtype, b.dtype]);
      checkAccept(ctx, accept, a.dtype);
      const shape = binaryShape(ctx, a, b);
      const out: InferOutput = { dtype: 'bool', shape };
      if (sym !== undefined && (isInt(a.dtype) || a.dtype === 'bool')) {
        const s = binarySym(a, b, shape, sym);
        if (s !== undefined) out.sym = s;
      }
      return [out];
    },
    eval(ctx, inputs) {
      const a = required(ctx, inputs, 0);
      const b = required(ctx, inputs, 1);
      checkSameDtype(ctx, [a.dtype, b.dtype]);
      checkAccept(ctx, accept, a.dtype);
      const { da, db, dims } = binaryOperands(ctx, a, b);
      const y = new Uint8Array(sizeOf(dims));
      kernel(da, db, y);
      return [new Tensor('bool', dims, y)];
    },
  };
}

/** Element access shared by numeric and string arrays (comparisons only). */
type Elems = { readonly [i: number]: number | string; readonly length: number };

function equalKernel(a: Data, b: Data, y: Uint8Array): void {
  const x = a as Elems;
  const z = b as Elems;
  for (let i = 0; i < y.length; i++) y[i] = x[i] === z[i] ? 1 : 0;
}

function lessKernel(a: Data, b: Data, y: Uint8Array): void {
  const x = a as NumArray;
  const z = b as NumArray;
  for (let i = 0; i < y.length; i++) y[i] = x[i]! < z[i]! ? 1 : 0;
}

function lessEqualKernel(a: Data, b: Data, y: Uint8Array): void {
  const x = a as NumArray;
  const z = b as NumArray;
  for (let i = 0; i < y.length; i++) y[i] = x[i]! <= z[i]! ? 1 : 0;
}

function greaterKernel(a: Data, b: Data, y: Uint8Array): void {
  lessKernel(b, a, y);
}
function greaterEqualKernel(a: Data, b: Data, y: Uint8Array): void {
  lessEqualKernel(b, a, y);
}

function andKernel(a: Data, b: Data, y: Uint8Array): void {
  const x = a as NumArray;
  const z = b as NumArray;
  for (let i = 0; i < y.length; i++) y[i] = x[i]! & z[i]!;
}

function orKernel(a: Data, b: Data, y: Uint8Array): void {
  const x = a as NumArray;
  const z = b as NumArray;
  for (let i = 0; i < y.length; i++) y[i] = x[i]! | z[i]!;
}

function xorKernel(a: Data, b: Data, y: Uint8Array): void {
  const x = a as NumArray;
  const z = b as NumArray;
  for (let i = 0; i < y.length; i++) y[i] = x[i]! ^ z[i]!;
}

function equalSym(a: Dim, b: Dim): Dim | undefined {
  if (dimEq(a, b)) return 1;
  const c = dimCompare(a, b);
  return c === undefined ? undefined : bool(c === 0);
}

/** A comparison of symbolic elements decided by the sign of a - b (symbols are sizes, so ≥ 0). */
function orderSym(f: (sign: number) => boolean): SymRule {
  return (a, b) => {
    const c = dimCompare(a, b);
    return c === undefined ? undefined : bool(f(c));
  };
}

/** Max/Min of symbolic elements when the order of every pair is decided. */
function extremeSym(pickFirst: (sign: number) => boolean): (xs: Dim[]) => Dim | undefined {
  return (xs) => {
    let best = xs[0]!;
    for (const x of xs.slice(1)) {
      const c = dimCompare(x, best);
      if (c === undefined) return undefined;
      if (pickFirst(c)) best = x;
    }
    return best;
  };
}

const bool = (v: boolean): number => (v ? 1 : 0);

// ---- Where ----

const WHERE: OpHandler = {
  op: 'Where',
  infer(ctx, inputs) {
    const c = required(ctx, inputs, 0);
    const x = required(ctx, inputs, 1);
    const y = required(ctx, inputs, 2);
    if (c.dtype !== 'bool') ctx.fail(`condition has dtype ${c.dtype}, expected bool`);
    checkSameDtype(ctx, [x.dtype, y.dtype]);
    const shape = broadcastShapes(ctx, [c.shape, x.shape, y.shape]);
    const out: InferOutput = { dtype: x.dtype, shape };
    if (symFits(shape) && (isInt(x.dtype) || x.dtype === 'bool')) {
      const s = allSym([c, x, y]);
      const r = s && zipSym(s, ([k, p, q]) => (typeof k === 'number' ? (k !== 0 ? p : q) : undefined));
      if (r !== undefined) out.sym = r;
    }
    return [out];
  },
  eval(ctx, inputs) {
    const c = required(ctx, inputs, 0);
    const x = required(ctx, inputs, 1);
    const y = required(ctx, inputs, 2);
    if (c.dtype !== 'bool') ctx.fail(`condition has dtype ${c.dtype}, expected bool`);
    checkSameDtype(ctx, [x.dtype, y.dtype]);
    const dims = broadcastConcrete(ctx, [c.dims, x.dims, y.dims]);
    const dc = expandData(c, dims) as Uint8Array;
    const dx = expandData(x, dims) as Elems;
    const dy = expandData(y, dims) as Elems;
    const out = allocData(x.dtype, sizeOf(dims));
    const o = out as { [i: number]: number | string };
    for (let i = 0; i < dc.length; i++) o[i] = dc[i] ? dx[i]! : dy[i]!;
    return [new Tensor(x.dtype, dims, out)];
  },
};

// ---- variadic Max / Min / Sum / Mean ----

function maxKernel(a: NumArray, b: NumArray, y: NumArray): void {
  for (let i = 0; i < y.length; i++) {
    const p = a[i]!;
    const q = b[i]!;
    y[i] = p > q || p !== p ? p : q; // NaN propagates like np.maximum
  }
}

function minKernel(a: NumArray, b: NumArray, y: NumArray): void {
  for (let i = 0; i < y.length; i++) {
    const p = a[i]!;
    const q = b[i]!;
    y[i] = p < q || p !== p ? p : q;
  }
}

function variadic(op: string, accept: Accept, kernel: Kernel, sym?: (xs: Dim[]) => Dim | undefined): OpHandler {
  const mean = op === 'Mean';
  return {
    op,
    infer(ctx, inputs) {
      const xs = inputs.filter((x): x is InferInput => x !== undefined);
      if (xs.length === 0) ctx.fail('needs at least one input');
      checkSameDtype(
        ctx,
        xs.map((x) => x.dtype),
      );
      checkAccept(ctx, accept, xs[0]!.dtype);
      const shape = broadcastShapes(
        ctx,
        xs.map((x) => x.shape),
      );
      const out: InferOutput = { dtype: xs[0]!.dtype, shape };
      if (sym !== undefined && isInt(out.dtype) && symFits(shape)) {
        const s = allSym(xs);
        const r = s && zipSym(s, sym);
        if (r !== undefined) out.sym = r;
      }
      return [out];
    },
    eval(ctx, inputs) {
      const xs = inputs.filter((x): x is Tensor => x !== undefined);
      if (xs.length === 0) ctx.fail('needs at least one input');
      const dtype = xs[0]!.dtype;
      checkSameDtype(
        ctx,
        xs.map((x) => x.dtype),
      );
      checkAccept(ctx, accept, dtype);
      const dims = broadcastConcrete(
        ctx,
        xs.map((x) => x.dims),
      );
      const n = sizeOf(dims);
      // accumulate in the output type, rounding after each step as numpy does
      const y = allocData(dtype, n) as NumArray;
      y.set(expandData(xs[0]!, dims) as NumArray);
      for (let k = 1; k < xs.length; k++) {
        kernel(y, expandData(xs[k]!, dims) as NumArray, y, dtype);
        finishData(dtype, y);
      }
      if (mean) for (let i = 0; i < n; i++) y[i] = y[i]! / xs.length;
      return [finish(dtype, dims, y)];
    },
  };
}

// ---- PRelu ----

function preluKernel(x: NumArray, s: NumArray, y: NumArray): void {
  for (let i = 0; i < y.length; i++) {
    const v = x[i]!;
    y[i] = v < 0 ? v * s[i]! : v;
  }
}

/** Slope dims aligned to X: unidirectional broadcast, and opset < 7's per-channel [C] slope. */
function slopeDims<D>(ctx: OpContext, x: readonly D[], s: readonly D[], one: D): D[] {
  if (ctx.opset < 7 && s.length === 1 && x.length > 2 && s[0] !== one)
    return [s[0]!, ...new Array<D>(x.length - 2).fill(one)];
  return [...s];
}

const PRELU: OpHandler = {
  op: 'PRelu',
  infer(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    const s = required(ctx, inputs, 1);
    checkSameDtype(ctx, [x.dtype, s.dtype]);
    checkAccept(ctx, 'numeric', x.dtype);
    if (x.shape !== undefined && s.shape !== undefined) {
      const b = broadcastShapes(ctx, [x.shape, slopeDims<Dim>(ctx, x.shape, s.shape, 1)]);
      if (b !== undefined && b.length > x.shape.length)
        ctx.fail(`slope of rank ${s.shape.length} does not broadcast to X of rank ${x.shape.length}`);
    }
    return [{ dtype: x.dtype, shape: x.shape }];
  },
  eval(ctx, inputs) {
    const x = required(ctx, inputs, 0);
    const s = required(ctx, inputs, 1);
    checkSameDtype(ctx, [x.dtype, s.dtype]);
    const sd = slopeDims(ctx, x.dims, s.dims, 1);
    const dims = broadcastConcrete(ctx, [x.dims, sd]);
    if (dims.length !== x.rank || dims.some((d, i) => d !== x.dims[i]))
      ctx.fail(`slope [${s.dims}] does not broadcast to X [${x.dims}]`);
    const y = allocData(x.dtype, x.size) as NumArray;
    preluKernel(x.nums, expandData(s.reshape(sd), dims) as NumArray, y);
    return [finish(x.dtype, x.dims, y)];
  },
};

export const BINARY_OPS: OpHandler[] = [
  arith({ op: 'Add', accept: 'numeric', kernel: addKernel, sym: dimAdd }),
  arith({ op: 'Sub', accept: 'numeric', kernel: subKernel, sym: dimSub }),
  arith({ op: 'Mul', accept: 'numeric', kernel: mulKernel, sym: dimMul }),
  arith({ op: 'Div', accept: 'numeric', kernel: divKernel, sym: intDivSym }),
  arith({ op: 'Pow', accept: 'numeric', kernel: powKernel, mixed: true, sym: numericSym((a, b) => truncInt(a ** b)) }),
  modHandler(),
  arith({ op: 'BitwiseAnd', accept: 'int', kernel: bitwiseKernel('and') }),
  arith({ op: 'BitwiseOr', accept: 'int', kernel: bitwiseKernel('or') }),
  arith({ op: 'BitwiseXor', accept: 'int', kernel: bitwiseKernel('xor') }),
  bitShiftHandler(),
  compare('Equal', 'any', equalKernel, equalSym),
  compare(
    'Less',
    'numeric',
    lessKernel,
    orderSym((c) => c < 0),
  ),
  compare(
    'LessOrEqual',
    'numeric',
    lessEqualKernel,
    orderSym((c) => c <= 0),
  ),
  compare(
    'Greater',
    'numeric',
    greaterKernel,
    orderSym((c) => c > 0),
  ),
  compare(
    'GreaterOrEqual',
    'numeric',
    greaterEqualKernel,
    orderSym((c) => c >= 0),
  ),
  compare(
    'And',
    'bool',
    andKernel,
    numericSym((a, b) => bool(a !== 0 && b !== 0)),
  ),
  compare(
    'Or',
    'bool',
    orKernel,
    numericSym((a, b) => bool(a !== 0 || b !== 0)),
  ),
  compare(
    'Xor',
    'bool',
    xorKernel,
    numericSym((a, b) => bool((a !== 0) !== (b !== 0))),
  ),
  WHERE,
  variadic(
    'Max',
    'numeric',
    maxKernel,
    extremeSym((c) => c > 0),
  ),
  variadic(
    'Min',
    'numeric',
    minKernel,
    extremeSym((c) => c < 0),
  ),
  variadic('Sum', 'numeric', addKernel, (xs) => xs.reduce((p, q) => dimAdd(p, q))),
  variadic('Mean', 'float', addKernel),
  PRELU,
];
