// Unit tests for the elementwise operators: values, integer semantics, opset variants, symbolic inference and errors.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DType } from '../../compiler/dtype.ts';
import type { Attr, Node } from '../../compiler/ir.ts';
import { makeOpContext } from '../../model/ops/context.ts';
import { ELEMENTWISE_OPS } from '../../model/ops/elementwise.ts';
import { MersenneTwister } from '../../model/ops/elementwise-cast.ts';
import { erf } from '../../model/ops/elementwise-unary.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpHandler } from '../../model/ops/types.ts';
import { dimMul, dimStr, sym, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { failsWith } from '../helpers/expect-error.ts';

function handler(op: string, opset: number): OpHandler {
  const h = ELEMENTWISE_OPS.find((x) => x.op === op && (x.since ?? 1) <= opset && opset < (x.until ?? Infinity));
  if (!h) throw new Error(`no handler ${op} at opset ${opset}`);
  return h;
}

function node(op: string, nIn: number, nOut: number, attrs: Record<string, Attr>): Node {
  const outputs = Array.from({ length: nOut }, (_, i) => `out${i}`);
  return {
    name: 'n0',
    op,
    domain: '',
    inputs: Array.from({ length: nIn }, (_, i) => `in${i}`),
    outputs,
    attrs,
    origin: [],
  };
}

function runAll(
  op: string,
  ins: (Tensor | undefined)[],
  attrs: Record<string, Attr> = {},
  opset = 23,
  nOut = 1,
): Tensor[] {
  const ctx = {
    ...makeOpContext(node(op, ins.length, nOut, attrs), opset, 'PLANC_E202'),
    runSubgraph: () => [],
  } as EvalContext;
  return handler(op, opset).eval(ctx, ins);
}

const run = (op: string, ins: (Tensor | undefined)[], attrs: Record<string, Attr> = {}, opset = 23): Tensor =>
  runAll(op, ins, attrs, opset)[0]!;

function infer(
  op: string,
  ins: (InferInput | undefined)[],
  attrs: Record<string, Attr> = {},
  opset = 23,
  nOut = 1,
): InferOutput[] {
  const ctx = {
    ...makeOpContext(node(op, ins.length, nOut, attrs), opset, 'PLANC_E201'),
    inferSubgraph: () => [],
  } as InferContext;
  return handler(op, opset).infer(ctx, ins);
}

const t = (dtype: DType, v: number[], dims = [v.length]) => Tensor.fromNumbers(dtype, dims, v);
const f32 = (v: number[], dims = [v.length]) => t('float32', v, dims);
const scalar = (dtype: DType, v: number) => Tensor.scalar(dtype, v);
const int = (v: number): Attr => ({ kind: 'int', value: v });
const flt = (v: number): Attr => ({ kind: 'float', value: v });
const str = (v: string): Attr => ({ kind: 'string', value: v });
const vals = (x: Tensor) => Array.from(x.nums);
const dims = (s: readonly Dim[] | undefined) => (s ? s.map(dimStr).join(',') : '?');
const ti = (dtype: DType, s: Dim[]): InferInput => ({ dtype, shape: s });
const symIn = (dtype: DType, s: Dim[]): InferInput => ({ dtype, shape: [s.length], sym: s });

function close(actual: number[], expected: number[], tol = 1e-6): void {
  assert.is(actual.length, expected.length, 'length');
  actual.forEach((a, i) => {
    const e = expected[i]!;
    if (Number.isNaN(e)) assert.ok(Number.isNaN(a), `element ${i}: ${a} is not NaN`);
    else assert.ok(a === e || Math.abs(a - e) <= tol * Math.max(1, Math.abs(e)), `element ${i}: ${a} vs ${e}`);
  });
}

const batch = sym('batch');
const srcLen = sym('src_len');

// ---- arithmetic ----

test('Add broadcasts a row over a matrix', () => {
  const y = run('Add', [f32([1, 2, 3, 4, 5, 6], [2, 3]), f32([10, 20, 30])]);
  assert.equal(y.dims, [2, 3]);
  assert.equal(vals(y), [11, 22, 33, 14, 25, 36]);
});

test('broadcast of [2,1] against [1,3] and of a scalar', () => {
  assert.equal(vals(run('Mul', [f32([1, 2], [2, 1]), f32([1, 10, 100], [1, 3])])), [1, 10, 100, 2, 20, 200]);
  assert.equal(vals(run('Sub', [scalar('float32', 1), f32([1, 2, 3])])), [0, -1, -2]);
});

test('integer arithmetic wraps like C', () => {
  assert.equal(vals(run('Add', [t('int32', [2147483647]), t('int32', [1])])), [-2147483648]);
  assert.equal(vals(run('Add', [t('uint8', [250]), t('uint8', [10])])), [4]);
  assert.equal(vals(run('Sub', [t('uint8', [3]), t('uint8', [5])])), [254]);
  assert.equal(vals(run('Mul', [t('int32', [65536, 123456789]), t('int32', [65536, 1000])])), [0, -1097262584]);
  assert.equal(vals(run('Mul', [t('int8', [100]), t('int8', [3])])), [44]);
  assert.equal(vals(run('Sub', [t('uint64', [3]), t('uint64', [5])])), [18446744073709551614]);
});

test('integer Div truncates toward zero; division by zero gives 0', () => {
  assert.equal(vals(run('Div', [t('int32', [7, -7, 7, -7, 5]), t('int32', [2, 2, -2, -2, 0])])), [3, -3, -3, 3, 0]);
  assert.equal(vals(run('Div', [t('int64', [-9]), t('int64', [4])])), [-2]);
  close(vals(run('Div', [f32([1, -1]), f32([4, 0])])), [0.25, -Infinity]);
});

test('Pow: float, integer, and mixed base/exponent types (output has the base type)', () => {
  assert.equal(vals(run('Pow', [f32([2, 3, 4]), f32([2, 0.5, -1])])), [4, Math.fround(Math.sqrt(3)), 0.25]);
  const y = run('Pow', [t('int32', [2, 3]), f32([10, 1.5])]);
  assert.is(y.dtype, 'int32');
  assert.equal(vals(y), [1024, 5]); // 3^1.5 = 5.196… truncated
  assert.equal(vals(run('Pow', [t('int64', [3]), t('int64', [4])])), [81]);
});

test('Mod: integer sign follows the divisor; fmod=1 follows the dividend', () => {
  const a = t('int32', [-4, 7, 5, 4, -7, 8]);
  const b = t('int32', [2, -3, 8, -2, 3, 5]);
  assert.equal(vals(run('Mod', [a, b])), [0, -2, 5, 0, 2, 3]);
  assert.equal(vals(run('Mod', [a, b], { fmod: int(1) })), [0, 1, 5, 0, -1, 3]);
  close(vals(run('Mod', [f32([-4.5, 7.5]), f32([2, -3])], { fmod: int(1) })), [-0.5, 1.5]);
  assert.equal(vals(run('Mod', [t('uint8', [7]), t('uint8', [0])])), [0]);
});

test('bitwise ops on 32-bit and 64-bit integers', () => {
  assert.equal(vals(run('BitwiseAnd', [t('int64', [-1, -8]), t('int64', [5, 3])])), [5, 0]);
  assert.equal(vals(run('BitwiseOr', [t('int64', [-8]), t('int64', [3])])), [-5]);
  assert.equal(vals(run('BitwiseXor', [t('uint64', [4294967296 * 3 + 5]), t('uint64', [4294967296 + 1])])), [
    4294967296 * 2 + 4,
  ]);
  assert.equal(vals(run('BitwiseOr', [t('uint32', [0x80000000]), t('uint32', [1])])), [0x80000001]);
  assert.equal(vals(run('BitwiseNot', [t('int8', [5, -1])])), [-6, 0]);
  assert.equal(vals(run('BitwiseNot', [t('uint8', [5])])), [250]);
  assert.equal(vals(run('BitwiseNot', [t('int64', [-1, 7])])), [0, -8]);
  assert.equal(vals(run('BitwiseNot', [t('uint64', [0])])), [18446744073709551615]);
});

test('BitShift LEFT/RIGHT keeps the type width', () => {
  assert.equal(
    vals(run('BitShift', [t('uint8', [16, 4, 200, 1]), t('uint8', [1, 2, 1, 9])], { direction: str('LEFT') })),
    [32, 16, 144, 0],
  );
  assert.equal(vals(run('BitShift', [t('uint32', [0x80000000]), t('uint32', [31])], { direction: str('RIGHT') })), [1]);
  assert.equal(vals(run('BitShift', [t('uint64', [1]), t('uint64', [40])], { direction: str('LEFT') })), [2 ** 40]);
  assert.equal(vals(run('BitShift', [t('uint64', [2 ** 40]), t('uint64', [38])], { direction: str('RIGHT') })), [4]);
  failsWith(
    () => run('BitShift', [t('uint8', [1]), t('uint8', [1])], { direction: str('UP') }),
    'PLANC_E202',
    'direction',
  );
});

test('legacy broadcast (opset < 7) aligns B at axis', () => {
  const a = f32(
    Array.from({ length: 24 }, () => 0),
    [2, 3, 4],
  );
  const y = run('Add', [a, f32([1, 2, 3])], { broadcast: int(1), axis: int(1) }, 6);
  assert.equal(y.dims, [2, 3, 4]);
  assert.equal(vals(y).slice(0, 12), [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);
  const shape = infer('Add', [ti('float32', [2, 3, 4]), ti('float32', [3])], { broadcast: int(1), axis: int(1) }, 6)[0]!
    .shape;
  assert.is(dims(shape), '2,3,4');
});

// ---- comparisons and logic ----

test('comparisons give bool with broadcasting; Equal works on strings', () => {
  const a = f32([1, 2, 3]);
  const y = run('Less', [a, scalar('float32', 2)]);
  assert.is(y.dtype, 'bool');
  assert.equal(vals(y), [1, 0, 0]);
  assert.equal(vals(run('LessOrEqual', [a, scalar('float32', 2)])), [1, 1, 0]);
  assert.equal(vals(run('Greater', [a, scalar('float32', 2)])), [0, 0, 1]);
  assert.equal(vals(run('GreaterOrEqual', [a, scalar('float32', 2)])), [0, 1, 1]);
  assert.equal(vals(run('Equal', [f32([NaN, 1]), f32([NaN, 1])])), [0, 1]);
  const s = run('Equal', [Tensor.fromStrings([2], ['a', 'b']), Tensor.fromStrings([1], ['b'])]);
  assert.equal(vals(s), [0, 1]);
});

test('And, Or, Xor, Not on bool', () => {
  const a = t('bool', [0, 0, 1, 1]);
  const b = t('bool', [0, 1, 0, 1]);
  assert.equal(vals(run('And', [a, b])), [0, 0, 0, 1]);
  assert.equal(vals(run('Or', [a, b])), [0, 1, 1, 1]);
  assert.equal(vals(run('Xor', [a, b])), [0, 1, 1, 0]);
  assert.equal(vals(run('Not', [a])), [1, 1, 0, 0]);
  failsWith(() => run('And', [f32([1]), f32([1])]), 'PLANC_E202', 'expected bool');
});

test('Where selects with three-way broadcasting, strings included', () => {
  const c = t('bool', [1, 0], [2, 1]);
  const y = run('Where', [c, f32([1, 2, 3]), scalar('float32', -1)]);
  assert.equal(y.dims, [2, 3]);
  assert.equal(vals(y), [1, 2, 3, -1, -1, -1]);
  const s = run('Where', [t('bool', [0, 1]), Tensor.fromStrings([2], ['x', 'y']), Tensor.fromStrings([], ['z'])]);
  assert.equal(s.strings, ['z', 'y']);
  failsWith(() => run('Where', [f32([1]), f32([1]), f32([1])]), 'PLANC_E202', 'condition has dtype float32');
});

// ---- variadic ----

test('Max, Min, Sum, Mean are variadic and broadcast', () => {
  const a = f32([1, 5, 3]);
  const b = f32([4, 2, NaN]);
  const c = scalar('float32', 3);
  close(vals(run('Max', [a, b, c])), [4, 5, NaN]);
  close(vals(run('Min', [a, b, c])), [1, 2, NaN]);
  assert.equal(vals(run('Sum', [a, f32([1, 1, 1]), c])), [5, 9, 7]);
  assert.equal(vals(run('Mean', [a, f32([3, 3, 3])])), [2, 4, 3]);
  assert.equal(vals(run('Max', [a])), [1, 5, 3]);
  assert.equal(vals(run('Max', [t('uint64', [2 ** 40, 1]), t('uint64', [3, 2])])), [2 ** 40, 2]);
  assert.equal(vals(run('Sum', [t('int8', [100]), t('int8', [100])])), [-56]);
});

test('PRelu broadcasts slope onto X', () => {
  const y = run('PRelu', [f32([-2, 1, -4, 3], [2, 2]), f32([0.5, 0.25])]);
  assert.equal(vals(y), [-1, 1, -2, 3]);
  failsWith(() => run('PRelu', [f32([1, 2]), f32([1, 2, 3, 4], [2, 2])]), 'PLANC_E202', 'does not broadcast');
});

// ---- unary ----

test('math functions', () => {
  close(vals(run('Sqrt', [f32([4, 2])])), [2, Math.SQRT2]);
  close(vals(run('Exp', [f32([0, 1])])), [1, Math.E]);
  close(vals(run('Log', [f32([1, 0])])), [0, -Infinity]);
  close(vals(run('Reciprocal', [f32([4, -0.5])])), [0.25, -2]);
  close(vals(run('Tanh', [f32([0, 1])])), [0, Math.tanh(1)]);
  close(vals(run('Sin', [f32([0, Math.PI / 2])])), [0, 1]);
  close(vals(run('Acosh', [f32([1, 2])])), [0, Math.acosh(2)]);
  close(vals(run('Atanh', [f32([0.5])])), [Math.atanh(0.5)]);
  close(vals(run('Floor', [f32([-1.5, 1.5])])), [-2, 1]);
  close(vals(run('Ceil', [f32([-1.5, 1.5])])), [-1, 2]);
  close(vals(run('Abs', [f32([-1.5, 2])])), [1.5, 2]);
  close(vals(run('Sign', [f32([-3, 0, 2, NaN])])), [-1, 0, 1, NaN]);
  assert.equal(vals(run('Neg', [t('int8', [-128, 5])])), [-128, -5]);
});

test('Erf is accurate to double precision', () => {
  close(
    [erf(0.5), erf(1), erf(-2), erf(3), erf(1e-10), erf(7)],
    [0.5204998778130465, 0.8427007929497149, -0.9953222650189527, 0.9999779095030014, 1.1283791670955126e-10, 1],
    1e-15,
  );
  assert.ok(Number.isNaN(erf(NaN)));
});

test('Round is half to even', () => {
  const y = vals(run('Round', [f32([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6])]));
  assert.equal(y, [0, 2, 2, -0, -2, 2, -3]);
  assert.ok(Object.is(y[3], -0));
});

test('activations with their attribute defaults and overrides', () => {
  const x = f32([-1, 0, 1]);
  close(vals(run('Relu', [x])), [0, 0, 1]);
  close(vals(run('LeakyRelu', [x])), [-0.01, 0, 1]);
  close(vals(run('LeakyRelu', [x], { alpha: flt(0.5) })), [-0.5, 0, 1]);
  close(vals(run('Elu', [x])), [-0.6321205588285577, 0, 1]);
  close(vals(run('Celu', [x], { alpha: flt(2) })), [-0.7869386805747332, 0, 1]);
  close(vals(run('Selu', [x])), [-1.1113307412864784, 0, 1.05070102214813232421875]);
  close(vals(run('ThresholdedRelu', [f32([0.5, 1, 2])])), [0, 0, 2]);
  close(vals(run('HardSigmoid', [f32([-3, 0, 3])])), [0, 0.5, 1]);
  close(vals(run('HardSwish', [f32([-4, 1, 4])])), [0, 1 * (1 / 6 + 0.5), 4]);
  close(vals(run('Softplus', [f32([1, 100, -100])])), [1.3132616875182228, 100, 3.720075976020836e-44]);
  close(vals(run('Softsign', [f32([1, -3])])), [0.5, -0.75]);
  close(vals(run('Sigmoid', [f32([1, -1000, 1000])])), [0.7310585786300049, 0, 1]);
  close(vals(run('Mish', [f32([1])])), [0.8650983882673103]);
  close(vals(run('Swish', [f32([2])], { alpha: flt(1) })), [1.7615941559557646]);
  close(vals(run('Shrink', [f32([-2, -0.5, 0.5, 2])], { lambd: flt(1), bias: flt(0.5) })), [-1.5, 0, 0, 1.5]);
});

test('Gelu: exact (erf) and tanh approximations', () => {
  close(vals(run('Gelu', [f32([1, -2])], {}, 20)), [0.8413447460685429, -0.04550026389635842]);
  close(
    vals(run('Gelu', [f32([1, -2])], { approximate: str('tanh') }, 20)),
    [0.8411919906082768, -0.04540230591222494],
  );
  failsWith(() => run('Gelu', [f32([1])], { approximate: str('fast') }, 20), 'PLANC_E202', 'approximate');
});

test('float16 results are rounded to float16', () => {
  const y = run('Sqrt', [t('float16', [2])]);
  assert.is(y.dtype, 'float16');
  assert.equal(vals(y), [1.4140625]);
  assert.equal(vals(run('Add', [t('float16', [1]), t('float16', [0.0001])])), [1]);
});

test('IsNaN and IsInf (detect_positive / detect_negative)', () => {
  const x = f32([1, NaN, Infinity, -Infinity]);
  assert.equal(vals(run('IsNaN', [x])), [0, 1, 0, 0]);
  assert.equal(vals(run('IsInf', [x])), [0, 0, 1, 1]);
  assert.equal(vals(run('IsInf', [x], { detect_negative: int(0) })), [0, 0, 1, 0]);
  assert.equal(vals(run('IsInf', [x], { detect_positive: int(0) })), [0, 0, 0, 1]);
  assert.is(run('IsNaN', [x]).dtype, 'bool');
});

test('Clip: attributes before opset 11, optional inputs from 11; min > max gives max', () => {
  const x = f32([-5, 0, 5]);
  close(vals(run('Clip', [x], { min: flt(-1), max: flt(1) }, 6)), [-1, 0, 1]);
  close(vals(run('Clip', [x], { max: flt(1) }, 6)), [-5, 0, 1]);
  close(vals(run('Clip', [x, scalar('float32', -2), scalar('float32', 2)], {}, 13)), [-2, 0, 2]);
  close(vals(run('Clip', [x, undefined, scalar('float32', 2)], {}, 13)), [-5, 0, 2]);
  close(vals(run('Clip', [x, scalar('float32', 2), scalar('float32', 1)], {}, 13)), [1, 1, 1]);
  assert.equal(vals(run('Clip', [t('int8', [-100, 100]), scalar('int8', -3)], {}, 13)), [-3, 100]);
  failsWith(() => run('Clip', [x, scalar('int8', 1)], {}, 13), 'PLANC_E202', 'float32 and int8');
  failsWith(() => run('Clip', [x, f32([1, 2])], {}, 13), 'PLANC_E202', 'min must be a scalar');
});

// ---- Cast, CastLike, Identity, Dropout ----

test('Cast between numeric types: truncation, wrap, bool', () => {
  assert.equal(vals(run('Cast', [f32([1.7, -1.7, 2.5])], { to: int(6) })), [1, -1, 2]);
  assert.equal(vals(run('Cast', [f32([-1, 256])], { to: int(2) })), [255, 0]);
  assert.equal(vals(run('Cast', [f32([2.5, 0, NaN])], { to: int(9) })), [1, 0, 1]);
  assert.equal(vals(run('Cast', [t('int64', [4294967297])], { to: int(6) })), [1]);
  const h = run('Cast', [f32([0.1])], { to: int(10) });
  assert.is(h.dtype, 'float16');
  assert.equal(vals(h), [0.0999755859375]);
  assert.equal(vals(run('Cast', [f32([1.00390625])], { to: int(16) })), [1]);
});

test('Cast float64 → float16 rounds once (no detour through float32)', () => {
  const x = 1 + 2 ** -11 + 2 ** -40; // just above the float16 tie; float32 would round it onto the tie
  assert.equal(vals(run('Cast', [t('float64', [x])], { to: int(10) })), [1 + 2 ** -10]);
  assert.equal(vals(run('Cast', [t('float64', [70000, -65519])], { to: int(10) })), [Infinity, -65504]);
});

test('Cast to and from strings', () => {
  const s = run('Cast', [f32([0.1, 1, 1e-5, Infinity, NaN, -0, 1e20, 123.25])], { to: int(8) });
  assert.equal(s.strings, ['0.1', '1.0', '1e-05', 'inf', 'nan', '-0.0', '1e+20', '123.25']);
  assert.equal(run('Cast', [t('int64', [-42])], { to: int(8) }).strings, ['-42']);
  assert.equal(run('Cast', [t('bool', [1, 0])], { to: int(8) }).strings, ['True', 'False']);
  const f = run('Cast', [Tensor.fromStrings([5], ['1.5', '-INF', 'NaN', '1e-5', '+inf'])], { to: int(1) });
  close(vals(f), [1.5, -Infinity, NaN, Math.fround(1e-5), Infinity]);
  assert.equal(vals(run('Cast', [Tensor.fromStrings([1], ['100.5'])], { to: int(7) })), [100]);
  failsWith(() => run('Cast', [Tensor.fromStrings([1], ['abc'])], { to: int(1) }), 'PLANC_E202', "'abc'");
});

test("Cast to an unsupported dtype fails; CastLike takes the second input's dtype", () => {
  failsWith(() => run('Cast', [f32([1])], { to: int(17) }), 'PLANC_E202', 'FLOAT8E4M3FN');
  failsWith(() => infer('Cast', [ti('float32', [2])], { to: int(17) }), 'PLANC_E201', 'FLOAT8E4M3FN');
  const y = run('CastLike', [f32([3.9]), t('int32', [0])], {}, 15);
  assert.is(y.dtype, 'int32');
  assert.equal(vals(y), [3]);
});

test('Identity returns its input', () => {
  const x = f32([1, 2]);
  assert.is(run('Identity', [x]), x);
});

test('Dropout in inference passes the input; mask dtype by opset', () => {
  const x = f32([1, 2, 3]);
  const [y, m] = runAll('Dropout', [x], { ratio: flt(0.2) }, 7, 2);
  assert.equal(vals(y!), [1, 2, 3]);
  assert.is(m!.dtype, 'float32');
  assert.equal(vals(m!), [1, 1, 1]);
  assert.is(runAll('Dropout', [x], {}, 10, 2)[1]!.dtype, 'bool');
  const [y2, m2] = runAll('Dropout', [x, scalar('float32', 0.5), scalar('bool', 0)], {}, 13, 2);
  assert.equal(vals(y2!), [1, 2, 3]);
  assert.equal(vals(m2!), [1, 1, 1]);
  const outs = infer('Dropout', [ti('float32', [batch])], {}, 13, 2);
  assert.is(outs[1]!.dtype, 'bool');
  assert.is(dims(outs[1]!.shape), 'batch');
});

test('Dropout in training mode draws like numpy RandomState(seed).uniform', () => {
  const rng = new MersenneTwister(0);
  close(
    [rng.nextDouble(), rng.nextDouble(), rng.nextDouble()],
    [0.5488135039273248, 0.7151893663724195, 0.6027633760716439],
    1e-16,
  );
  // uniforms for seed 0 are 0.5488…, 0.7152…, 0.6028…: with ratio 0.6 the first is dropped, the others scaled by 2.5
  const [y, m] = runAll(
    'Dropout',
    [f32([1, 2, 3]), scalar('float32', 0.6), scalar('bool', 1)],
    { seed: int(0) },
    13,
    2,
  );
  close(vals(y!), [0, 5, 7.5]);
  assert.equal(vals(m!), [0, 1, 1]);
  failsWith(
    () => runAll('Dropout', [f32([1]), scalar('float32', 1), scalar('bool', 1)], { seed: int(0) }, 13),
    'PLANC_E202',
    'ratio',
  );
});

// ---- inference ----

test('infer: broadcast of symbolic shapes, dtype checks', () => {
  const [o] = infer('Add', [ti('float32', [batch, 1, 5]), ti('float32', [3, 1])]);
  assert.is(o!.dtype, 'float32');
  assert.is(dims(o!.shape), 'batch,3,5');
  assert.is(infer('Add', [{ dtype: 'float32' }, ti('float32', [3])])[0]!.shape, undefined);
  failsWith(() => infer('Add', [ti('float32', [2]), ti('int64', [2])]), 'PLANC_E201', 'float32 and int64');
  failsWith(() => infer('Mul', [ti('float32', [2, 3]), ti('float32', [4])]), 'PLANC_E201', 'broadcast');
  failsWith(() => infer('Sqrt', [ti('int32', [2])]), 'PLANC_E201', 'floating-point');
  failsWith(
    () => infer('Where', [ti('float32', [2]), ti('float32', [2]), ti('float32', [2])]),
    'PLANC_E201',
    'expected bool',
  );
  assert.is(infer('Equal', [ti('int64', [2]), ti('int64', [2])])[0]!.dtype, 'bool');
  assert.is(infer('IsNaN', [ti('float16', [2])])[0]!.dtype, 'bool');
  assert.is(infer('Pow', [ti('float32', [2]), ti('int64', [])])[0]!.dtype, 'float32');
  assert.is(infer('Cast', [ti('float32', [batch])], { to: int(7) })[0]!.dtype, 'int64');
  assert.is(infer('CastLike', [ti('float32', [2]), ti('float16', [1])], {}, 15)[0]!.dtype, 'float16');
  assert.is(
    dims(infer('Max', [ti('float32', [batch, 1]), ti('float32', [4]), ti('float32', [])])[0]!.shape),
    'batch,4',
  );
});

test('infer: symbolic elements through arithmetic', () => {
  const x = symIn('int64', [batch]);
  const four: InferInput = { dtype: 'int64', shape: [1], value: t('int64', [4]) };
  const mul = infer('Mul', [x, four])[0]!;
  assert.is(dims(mul.sym), dimStr(dimMul(batch, 4)));
  assert.is(dims(mul.shape), '1');
  assert.is(
    dims(
      infer('Add', [symIn('int64', [batch, srcLen]), { dtype: 'int64', shape: [], value: scalar('int64', 1) }])[0]!.sym,
    ),
    'batch+1,src_len+1',
  );
  assert.is(dims(infer('Sub', [symIn('int64', [srcLen]), symIn('int64', [1])])[0]!.sym), 'src_len-1');
  assert.is(dims(infer('Div', [symIn('int64', [dimMul(batch, 4), 7]), symIn('int64', [2])])[0]!.sym), 'batch*2,3');
  assert.is(dims(infer('Div', [symIn('int64', [-7]), symIn('int64', [2])])[0]!.sym), '-3');
  assert.is(dims(infer('Neg', [x])[0]!.sym), '-batch');
  assert.is(infer('Mul', [symIn('float32', [2]), symIn('float32', [3])])[0]!.sym, undefined);
});

test('infer: symbolic elements through Equal, Where, Cast, Identity, Max', () => {
  assert.is(dims(infer('Equal', [symIn('int64', [batch, 3]), symIn('int64', [batch, 4])])[0]!.sym), '1,0');
  assert.is(infer('Equal', [symIn('int64', [batch]), symIn('int64', [srcLen])])[0]!.sym, undefined);
  const cond = symIn('bool', [1, 0]);
  assert.is(dims(infer('Where', [cond, symIn('int64', [batch, 5]), symIn('int64', [-1])])[0]!.sym), 'batch,-1');
  assert.is(
    infer('Where', [{ dtype: 'bool', shape: [2] }, symIn('int64', [batch, 5]), symIn('int64', [-1])])[0]!.sym,
    undefined,
  );
  assert.is(dims(infer('Cast', [symIn('int64', [batch, 8])], { to: int(6) })[0]!.sym), 'batch,8');
  assert.is(infer('Cast', [symIn('int64', [batch])], { to: int(1) })[0]!.sym, undefined);
  assert.is(dims(infer('Cast', [symIn('int64', [0, 3])], { to: int(9) })[0]!.sym), '0,1');
  assert.is(dims(infer('Identity', [symIn('int64', [batch])])[0]!.sym), 'batch');
  assert.is(dims(infer('Max', [symIn('int64', [3, 1]), symIn('int64', [2])])[0]!.sym), '3,2');
  assert.is(infer('Max', [symIn('int64', [batch]), symIn('int64', [2])])[0]!.sym, undefined);
  assert.is(dims(infer('Less', [symIn('int64', [3, 1]), symIn('int64', [2])])[0]!.sym), '0,1');
});

test('eval: dtype mismatch and broadcast mismatch fail with PLANC_E202', () => {
  failsWith(() => run('Add', [f32([1]), t('int32', [1])]), 'PLANC_E202', 'float32 and int32');
  failsWith(() => run('Add', [f32([1, 2]), f32([1, 2, 3])]), 'PLANC_E202', 'broadcast');
  failsWith(() => run('Sum', []), 'PLANC_E202', 'at least one input');
  failsWith(() => run('Exp', [t('int32', [1])]), 'PLANC_E202', 'floating-point');
});

test.run();
