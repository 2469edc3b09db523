// Unit tests for the math operators: matrix products, einsum, softmax family, normalizations, reductions, TopK, quantization.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DType } from '../../compiler/dtype.ts';
import type { Attr, Node } from '../../compiler/ir.ts';
import { makeOpContext } from '../../model/ops/context.ts';
import { MATH_OPS } from '../../model/ops/math.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpHandler } from '../../model/ops/types.ts';
import { dimStr, isSym, sym, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { failsWith } from '../helpers/expect-error.ts';

function handler(op: string, opset: number): OpHandler {
  const h = MATH_OPS.find((x) => x.op === op && (x.since ?? 1) <= opset && opset < (x.until ?? Infinity));
  if (!h) throw new Error(`no handler ${op} at opset ${opset}`);
  return h;
}

function node(op: string, nIn: number, nOut: number, attrs: Record<string, Attr>): Node {
  const inputs = Array.from({ length: nIn }, (_, i) => `in${i}`);
  const outputs = Array.from({ length: nOut }, (_, i) => `out${i}`);
  return { name: 'n0', op, domain: '', inputs, outputs, attrs, origin: [] };
}

function run(
  op: string,
  opset: number,
  ins: (Tensor | undefined)[],
  attrs: Record<string, Attr> = {},
  nOut = 1,
): Tensor[] {
  const ctx = {
    ...makeOpContext(node(op, ins.length, nOut, attrs), opset, 'PLANC_E202'),
    runSubgraph: () => [],
  } as EvalContext;
  return handler(op, opset).eval(ctx, ins);
}

function infer(
  op: string,
  opset: number,
  ins: (InferInput | undefined)[],
  attrs: Record<string, Attr> = {},
  nOut = 1,
): InferOutput[] {
  const ctx = {
    ...makeOpContext(node(op, ins.length, nOut, attrs), opset, 'PLANC_E201'),
    inferSubgraph: () => [],
  } as InferContext;
  return handler(op, opset).infer(ctx, ins);
}

const t = (dtype: DType, dims: number[], v: number[]) => Tensor.fromNumbers(dtype, dims, v);
const f32 = (dims: number[], v: number[]) => t('float32', dims, v);
const i64 = (v: number[]) => t('int64', [v.length], v);
const int = (v: number): Attr => ({ kind: 'int', value: v });
const ints = (v: number[]): Attr => ({ kind: 'ints', value: v });
const flt = (v: number): Attr => ({ kind: 'float', value: v });
const str = (v: string): Attr => ({ kind: 'string', value: v });
const ti = (dtype: DType, s: Dim[] | undefined): InferInput => ({ dtype, shape: s });
const shapeOf = (o: InferOutput) => (o.shape ? o.shape.map(dimStr).join(',') : '?');

function close(actual: Tensor, dims: number[], want: number[], tol = 1e-6): void {
  assert.equal([...actual.dims], dims, 'dims');
  const got = actual.toNumbers();
  assert.is(got.length, want.length, 'length');
  want.forEach((w, i) => {
    const g = got[i];
    const ok = Number.isNaN(w) ? Number.isNaN(g) : w === g || Math.abs(g - w) <= tol * Math.max(1, Math.abs(w));
    assert.ok(ok, `element ${i}: got ${g}, want ${w} (all: ${got.join(', ')})`);
  });
}

// ---- MatMul, Gemm, MatMulInteger, QLinearMatMul ----

test('MatMul 2-D, 1-D promotion and batch broadcasting', () => {
  const a = f32([2, 3], [1, 2, 3, 4, 5, 6]);
  const b = f32([3, 2], [7, 8, 9, 10, 11, 12]);
  close(run('MatMul', 13, [a, b])[0], [2, 2], [58, 64, 139, 154]);
  close(run('MatMul', 13, [f32([3], [1, 0, -1]), b])[0], [2], [-4, -4]);
  close(run('MatMul', 13, [a, f32([3], [1, 1, 1])])[0], [2], [6, 15]);
  close(run('MatMul', 13, [f32([3], [1, 2, 3]), f32([3], [4, 5, 6])])[0], [], [32]);
  // [2,1,1,2] x [3,2,1]: batch [2,3]
  const x = f32([2, 1, 1, 2], [1, 2, 3, 4]);
  const y = f32([3, 2, 1], [1, 0, 0, 1, 1, 1]);
  close(run('MatMul', 13, [x, y])[0], [2, 3, 1, 1], [1, 2, 3, 3, 4, 7]);
});

test('MatMul over blocks and remainders matches a naive product', () => {
  const m = 7,
    k = 13,
    n = 1100;
  const av = Array.from({ length: m * k }, (_, i) => ((i * 7) % 11) - 5);
  const bv = Array.from({ length: k * n }, (_, i) => ((i * 5) % 13) - 6);
  const want: number[] = [];
  for (let i = 0; i < m; i++)
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += av[i * k + p] * bv[p * n + j];
      want.push(s);
    }
  close(run('MatMul', 13, [f32([m, k], av), f32([k, n], bv)])[0], [m, n], want, 0);
  // a batched A against one B folds the batch into rows
  const a3 = f32([1, m, k], av);
  close(run('MatMul', 13, [a3, f32([k, n], bv)])[0], [1, m, n], want, 0);
});

test('MatMul keeps integer and float16 dtypes', () => {
  const r = run('MatMul', 13, [t('int32', [1, 2], [3, -4]), t('int32', [2, 1], [5, 6])])[0];
  assert.is(r.dtype, 'int32');
  close(r, [1, 1], [-9]);
  const h = run('MatMul', 13, [t('float16', [1, 1], [1]), t('float16', [1, 1], [0.1])])[0];
  assert.is(h.dtype, 'float16');
  assert.is(h.nums[0], 0.0999755859375); // 0.1 rounded to float16
});

test('MatMul infer: shapes, symbols and inner-dim checks', () => {
  const b = sym('batch'),
    l = sym('len');
  const o = infer('MatMul', 13, [ti('float32', [b, l, 256]), ti('float32', [256, 32000])]);
  assert.is(shapeOf(o[0]), 'batch,len,32000');
  assert.is(o[0].dtype, 'float32');
  assert.is(shapeOf(infer('MatMul', 13, [ti('float32', [4]), ti('float32', [2, 4, 3])])[0]), '2,3');
  assert.is(shapeOf(infer('MatMul', 13, [ti('float32', [4]), ti('float32', [4])])[0]), '');
  assert.is(shapeOf(infer('MatMul', 13, [ti('float32', [2, l]), ti('float32', [sym('k'), 5])])[0]), '2,5');
  assert.is(infer('MatMul', 13, [ti('float32', undefined), ti('float32', [3, 5])])[0].shape, undefined);
  failsWith(
    () => infer('MatMul', 13, [ti('float32', [2, 3]), ti('float32', [4, 5])]),
    'PLANC_E201',
    /inner dimensions differ/,
  );
  failsWith(() => infer('MatMul', 13, [ti('float32', [2, 3]), ti('float16', [3, 5])]), 'PLANC_E201', /dtype/);
  failsWith(
    () => run('MatMul', 13, [f32([2, 3], [0, 0, 0, 0, 0, 0]), f32([2, 2], [0, 0, 0, 0])]),
    'PLANC_E202',
    /inner dimensions differ/,
  );
});

test('Gemm: transA, transB, alpha, beta and C broadcasting', () => {
  const a = f32([2, 2], [1, 2, 3, 4]);
  const b = f32([2, 2], [5, 6, 7, 8]);
  close(run('Gemm', 13, [a, b])[0], [2, 2], [19, 22, 43, 50]);
  // A' = [[1,3],[2,4]], B' = [[5,7],[6,8]]: A'B' = [[23,31],[34,46]]
  const attrs = { transA: int(1), transB: int(1), alpha: flt(2), beta: flt(0.5) };
  close(run('Gemm', 13, [a, b, f32([2], [10, 20])], attrs)[0], [2, 2], [51, 72, 73, 102]);
  close(run('Gemm', 13, [a, b, f32([], [1])])[0], [2, 2], [20, 23, 44, 51]);
  close(run('Gemm', 13, [a, b, f32([2, 1], [1, 2])])[0], [2, 2], [20, 23, 45, 52]);
  const o = infer('Gemm', 13, [ti('float32', [sym('m'), 3]), ti('float32', [4, 3]), ti('float32', [4])], {
    transB: int(1),
  });
  assert.is(shapeOf(o[0]), 'm,4');
  failsWith(() => infer('Gemm', 13, [ti('float32', [2, 3, 1]), ti('float32', [3, 4])]), 'PLANC_E201', /2-D/);
  failsWith(
    () => infer('Gemm', 13, [ti('float32', [2, 3]), ti('float32', [3, 4]), ti('float32', [3])]),
    'PLANC_E201',
    /does not broadcast/,
  );
  failsWith(
    () => infer('Gemm', 9, [ti('float32', [2, 3]), ti('float32', [3, 4])]),
    'PLANC_E201',
    /required before opset 11/,
  );
});

test('MatMulInteger subtracts per-row and per-column zero points', () => {
  const a = t('uint8', [2, 2], [11, 12, 13, 14]);
  const b = t('uint8', [2, 2], [1, 2, 3, 4]);
  // A - [10, 12] per row = [[1,2],[1,2]]; B - [1, 2] per column = [[0,0],[2,2]]
  const r = run('MatMulInteger', 10, [a, b, t('uint8', [2], [10, 12]), t('uint8', [2], [1, 2])])[0];
  assert.is(r.dtype, 'int32');
  close(r, [2, 2], [4, 4, 4, 4]);
  close(run('MatMulInteger', 10, [t('int8', [1, 2], [-1, 2]), t('int8', [2, 1], [3, 4])])[0], [1, 1], [5]);
  assert.is(infer('MatMulInteger', 10, [ti('uint8', [2, 3]), ti('int8', [3, 4])])[0].dtype, 'int32');
  failsWith(
    () => infer('MatMulInteger', 10, [ti('float32', [2, 3]), ti('int8', [3, 4])]),
    'PLANC_E201',
    /int8 or uint8/,
  );
});

test('QLinearMatMul requantizes with rounding and saturation', () => {
  const a = t('uint8', [1, 2], [2, 4]),
    b = t('uint8', [2, 1], [3, 5]);
  const s = (v: number) => f32([], [v]);
  // (2*3 + 4*5) = 26; times 0.5*1/2 = 6.5 → rint 6 (half to even) + 10 = 16
  const r = run('QLinearMatMul', 10, [
    a,
    s(0.5),
    t('uint8', [], [0]),
    b,
    s(1),
    t('uint8', [], [0]),
    s(2),
    t('uint8', [], [10]),
  ])[0];
  assert.is(r.dtype, 'uint8');
  close(r, [1, 1], [16]);
  const big = run('QLinearMatMul', 10, [
    a,
    s(10),
    t('uint8', [], [0]),
    b,
    s(10),
    t('uint8', [], [0]),
    s(1),
    t('uint8', [], [0]),
  ])[0];
  close(big, [1, 1], [255]);
});

// ---- Einsum ----

test('Einsum: explicit, implicit, diagonal, trace, ellipsis, sums', () => {
  const a = t('float64', [2, 2], [1, 2, 3, 4]);
  const b = t('float64', [2, 2], [5, 6, 7, 8]);
  const e = (eq: string, ...xs: Tensor[]) => run('Einsum', 12, xs, { equation: str(eq) })[0];
  close(e('ij,jk->ik', a, b), [2, 2], [19, 22, 43, 50]);
  close(e('ij,jk', a, b), [2, 2], [19, 22, 43, 50]);
  close(e('ji', a), [2, 2], [1, 3, 2, 4]); // implicit output sorted: 'ij' of a transposed
  close(e('ii->i', a), [2], [1, 4]);
  close(e('ii', a), [], [5]);
  close(e('ij->', a), [], [10]);
  close(e('ij->j', a), [2], [4, 6]);
  close(e('i,i', t('float64', [3], [1, 2, 3]), t('float64', [3], [4, 5, 6])), [], [32]);
  close(e('i,j->ij', t('float64', [2], [1, 2]), t('float64', [2], [3, 4])), [2, 2], [3, 4, 6, 8]);
  const x = t('float64', [2, 1, 2], [1, 2, 3, 4]);
  close(e('...ij->...ji', x), [2, 2, 1], [1, 2, 3, 4]);
  close(e('... ij -> ...', x), [2], [3, 7]);
  close(
    e('bij,bjk->bik', t('float64', [2, 1, 2], [1, 2, 3, 4]), t('float64', [2, 2, 1], [1, 1, 2, 0])),
    [2, 1, 1],
    [3, 6],
  );
  const o = infer('Einsum', 12, [ti('float32', [sym('b'), 3, 4]), ti('float32', [sym('b'), 4, 5])], {
    equation: str('bij,bjk->bik'),
  });
  assert.is(shapeOf(o[0]), 'b,3,5');
  failsWith(() => e('ij,jk->ik', a, t('float64', [3, 1], [1, 2, 3])), 'PLANC_E202', /label 'j' has sizes 2 and 3/);
  failsWith(() => e('i1->i', t('float64', [2, 2], [1, 2, 3, 4])), 'PLANC_E202', /invalid character/);
  failsWith(() => e('ijk->i', a), 'PLANC_E202', /rank/);
  failsWith(() => e('ij->iz', a), 'PLANC_E202', /not in any input/);
});

// ---- Softmax family ----

test('Softmax and LogSoftmax along an axis (opset 13) and over 2-D coercion (opset < 13)', () => {
  const x = f32([2, 2], [0, 1, 2, 4]);
  const s = (a: number, b: number) => [
    Math.exp(a) / (Math.exp(a) + Math.exp(b)),
    Math.exp(b) / (Math.exp(a) + Math.exp(b)),
  ];
  close(run('Softmax', 13, [x])[0], [2, 2], [...s(0, 1), ...s(2, 4)]);
  const col = [s(0, 2), s(1, 4)];
  close(run('Softmax', 13, [x], { axis: int(0) })[0], [2, 2], [col[0][0], col[1][0], col[0][1], col[1][1]]);
  // opset 11, axis 0: one softmax over all four elements
  const z = 1 + Math.E + Math.exp(2) + Math.exp(4);
  close(run('Softmax', 11, [x], { axis: int(0) })[0], [2, 2], [1 / z, Math.E / z, Math.exp(2) / z, Math.exp(4) / z]);
  // opset 11 default axis 1 on [2,1,2]: per batch row over 2 elements
  close(run('Softmax', 11, [f32([2, 1, 2], [0, 1, 2, 4])])[0], [2, 1, 2], [...s(0, 1), ...s(2, 4)]);
  close(run('LogSoftmax', 13, [f32([1, 2], [1000, 1000])])[0], [1, 2], [-Math.LN2, -Math.LN2]);
  close(run('LogSoftmax', 13, [f32([1, 2], [0, 1])])[0], [1, 2], s(0, 1).map(Math.log));
  failsWith(() => infer('Softmax', 13, [ti('int32', [2])]), 'PLANC_E201', /float/);
  failsWith(() => infer('Softmax', 13, [ti('float32', [2, 2])], { axis: int(2) }), 'PLANC_E201', /out of range/);
});

test('Hardmax marks the first maximum', () => {
  close(run('Hardmax', 13, [f32([2, 3], [1, 3, 3, 5, 0, 5])])[0], [2, 3], [0, 1, 0, 1, 0, 0]);
  close(run('Hardmax', 13, [f32([2, 2], [1, 3, 2, 0])], { axis: int(0) })[0], [2, 2], [0, 1, 1, 0]);
  // opset 11, axis 0: one-hot over the whole tensor
  close(run('Hardmax', 11, [f32([2, 2], [1, 3, 2, 0])], { axis: int(0) })[0], [2, 2], [0, 1, 0, 0]);
});

// ---- Normalizations ----

test('LayerNormalization with Mean and InvStdDev outputs', () => {
  const x = f32([2, 2], [1, 3, 2, 6]);
  const [y, mean, inv] = run('LayerNormalization', 17, [x, f32([2], [2, 1]), f32([2], [1, 0])], { epsilon: flt(0) }, 3);
  close(y, [2, 2], [-1, 1, -1, 1]);
  close(mean, [2, 1], [2, 4]);
  close(inv, [2, 1], [1, 0.5]);
  // axis 0: one group of four; no bias
  const [y0] = run('LayerNormalization', 17, [f32([2, 2], [1, 1, 3, 3]), f32([2, 2], [1, 2, 3, 4])], {
    axis: int(0),
    epsilon: flt(0),
  });
  close(y0, [2, 2], [-1, -2, 3, 4]);
  const h = run(
    'LayerNormalization',
    17,
    [t('float16', [1, 2], [1, 3]), t('float16', [2], [1, 1])],
    { epsilon: flt(0) },
    3,
  );
  assert.is(h[0].dtype, 'float16');
  assert.is(h[1].dtype, 'float32');
  const o = infer(
    'LayerNormalization',
    17,
    [ti('float16', [sym('b'), 7, 256]), ti('float16', [256])],
    { axis: int(-1) },
    3,
  );
  assert.equal(o.map(shapeOf), ['b,7,256', 'b,7,1', 'b,7,1']);
  assert.equal(
    o.map((x) => x.dtype),
    ['float16', 'float32', 'float32'],
  );
  failsWith(
    () => infer('LayerNormalization', 17, [ti('float32', [2, 3]), ti('float32', [4])]),
    'PLANC_E201',
    /broadcast/,
  );
});

test('RMSNormalization scales by the root mean square', () => {
  const y = run('RMSNormalization', 23, [f32([2, 2], [3, 4, 1, 1]), f32([2], [1, 2])], { epsilon: flt(0) })[0];
  const r = Math.sqrt(12.5);
  close(y, [2, 2], [3 / r, 8 / r, 1, 2], 1e-6);
  assert.is(shapeOf(infer('RMSNormalization', 23, [ti('float32', [2, 4]), ti('float32', [4])])[0]), '2,4');
});

test('GroupNormalization: per-group scale at opset 18, per-channel at 21', () => {
  const x = f32([1, 4, 1, 1], [1, 3, 2, 6]);
  const attrs = { num_groups: int(2), epsilon: flt(0) };
  close(run('GroupNormalization', 18, [x, f32([2], [2, 3]), f32([2], [0, 1])], attrs)[0], [1, 4, 1, 1], [-2, 2, -2, 4]);
  close(
    run('GroupNormalization', 21, [x, f32([4], [1, 2, 3, 4]), f32([4], [0, 0, 0, 1])], attrs)[0],
    [1, 4, 1, 1],
    [-1, 2, -3, 5],
  );
  failsWith(
    () => run('GroupNormalization', 21, [x, f32([2], [1, 1]), f32([2], [0, 0])], attrs),
    'PLANC_E202',
    /scale has 2 elements, expected 4/,
  );
  failsWith(
    () => infer('GroupNormalization', 21, [ti('float32', [1, 5, 2]), ti('float32', [5]), ti('float32', [5])], attrs),
    'PLANC_E201',
    /does not divide/,
  );
});

test('InstanceNormalization normalizes each channel of each instance', () => {
  const y = run('InstanceNormalization', 6, [f32([1, 2, 2], [1, 3, 2, 6]), f32([2], [1, 2]), f32([2], [0, 1])], {
    epsilon: flt(0),
  })[0];
  close(y, [1, 2, 2], [-1, 1, -1, 3]);
});

test('BatchNormalization in inference and training mode', () => {
  const x = f32([1, 2, 1], [1, 2]);
  const y = run('BatchNormalization', 15, [x, f32([2], [2, 3]), f32([2], [1, 0]), f32([2], [0, 1]), f32([2], [4, 1])], {
    epsilon: flt(0),
  })[0];
  close(y, [1, 2, 1], [2, 3]);
  const one = f32([1], [1]),
    zero = f32([1], [0]);
  const tr = run(
    'BatchNormalization',
    15,
    [f32([2, 1], [1, 3]), one, zero, zero, one],
    { epsilon: flt(0), training_mode: int(1) },
    3,
  );
  close(tr[0], [2, 1], [-1, 1]);
  close(tr[1], [1], [0.2]);
  close(tr[2], [1], [1]);
  // opset 6, is_test=1: inference with the given statistics
  close(
    run('BatchNormalization', 6, [f32([1, 1], [3]), one, zero, one, f32([1], [4])], {
      epsilon: flt(0),
      is_test: int(1),
    })[0],
    [1, 1],
    [1],
  );
  const o = infer(
    'BatchNormalization',
    15,
    [ti('float32', [sym('n'), 3, 8]), ...[0, 1, 2, 3].map(() => ti('float32', [3]))],
    { training_mode: int(1) },
    3,
  );
  assert.equal(o.map(shapeOf), ['n,3,8', '3', '3']);
});

test('MeanVarianceNormalization and LpNormalization', () => {
  const y = run('MeanVarianceNormalization', 13, [f32([1, 2, 1, 2], [1, 3, 2, 6])])[0];
  close(y, [1, 2, 1, 2], [-1, 1, -1, 1], 1e-6);
  close(run('LpNormalization', 22, [f32([1, 2], [1, -3])], { p: int(1) })[0], [1, 2], [0.25, -0.75]);
  close(run('LpNormalization', 22, [f32([2, 2], [3, 0, 4, 0])], { axis: int(0) })[0], [2, 2], [0.6, 0, 0.8, 0]);
  failsWith(() => infer('LpNormalization', 22, [ti('float32', [2])], { p: int(3) }), 'PLANC_E201', /p must be 1 or 2/);
});

// ---- Reductions, ArgMax/ArgMin ----

test('ReduceSum: axes attribute before opset 13, input from 13; keepdims; noop_with_empty_axes', () => {
  const x = f32([2, 3], [1, 2, 3, 4, 5, 6]);
  close(run('ReduceSum', 11, [x], { axes: ints([1]) })[0], [2, 1], [6, 15]);
  close(run('ReduceSum', 11, [x], { keepdims: int(0) })[0], [], [21]);
  close(run('ReduceSum', 13, [x, i64([0])], { keepdims: int(0) })[0], [3], [5, 7, 9]);
  close(run('ReduceSum', 13, [x, i64([-1, 0])])[0], [1, 1], [21]);
  close(run('ReduceSum', 13, [x])[0], [1, 1], [21]);
  close(run('ReduceSum', 13, [x, i64([])], { noop_with_empty_axes: int(1) })[0], [2, 3], [1, 2, 3, 4, 5, 6]);
  const big = run('ReduceSum', 13, [t('int64', [2], [2 ** 52, 3]), i64([0])])[0];
  assert.is(big.dtype, 'int64');
  assert.is(big.nums[0], 2 ** 52 + 3);
  failsWith(() => run('ReduceSum', 13, [x, i64([2])]), 'PLANC_E202', /out of range/);
  failsWith(() => run('ReduceSum', 13, [x, i64([1, -1])]), 'PLANC_E202', /repeated/);
});

test('Reduce Mean/Max/Min/Prod/L1/L2/SumSquare/LogSum/LogSumExp values', () => {
  const x = f32([2, 3], [1, 2, 3, 4, 5, 6]);
  close(run('ReduceMean', 18, [x, i64([-1])], { keepdims: int(0) })[0], [2], [2, 5]);
  close(run('ReduceMean', 13, [x], { axes: ints([0]) })[0], [1, 3], [2.5, 3.5, 4.5]);
  close(run('ReduceMax', 18, [x, i64([1])])[0], [2, 1], [3, 6]);
  close(run('ReduceMin', 13, [x], { axes: ints([0]), keepdims: int(0) })[0], [3], [1, 2, 3]);
  close(run('ReduceProd', 18, [x, i64([1])])[0], [2, 1], [6, 120]);
  close(run('ReduceL1', 18, [f32([2], [1, -2])])[0], [1], [3]);
  close(run('ReduceL2', 18, [f32([2], [3, -4])])[0], [1], [5]);
  close(run('ReduceSumSquare', 13, [f32([2], [3, -4])])[0], [1], [25]);
  close(run('ReduceLogSum', 18, [f32([2], [1, Math.E - 1])])[0], [1], [1]);
  close(run('ReduceLogSumExp', 18, [t('float64', [2], [1000, 1000])])[0], [1], [1000 + Math.LN2]);
  close(run('ReduceLogSumExp', 13, [f32([2], [0, 0])])[0], [1], [Math.LN2]);
  const b = run('ReduceMax', 20, [t('bool', [2, 2], [0, 1, 0, 0]), i64([1])])[0];
  assert.is(b.dtype, 'bool');
  close(b, [2, 1], [1, 0]);
});

test('Reductions of an empty set give the identity of each op', () => {
  const e = f32([2, 0], []);
  const r = (op: string) => run(op, 18, [e, i64([1])], { keepdims: int(0) })[0];
  close(r('ReduceMax'), [2], [-Infinity, -Infinity]);
  close(r('ReduceMin'), [2], [Infinity, Infinity]);
  close(r('ReduceSum'), [2], [0, 0]);
  close(r('ReduceProd'), [2], [1, 1]);
  close(r('ReduceMean'), [2], [NaN, NaN]);
  close(r('ReduceL2'), [2], [0, 0]);
  close(r('ReduceLogSum'), [2], [-Infinity, -Infinity]);
  close(r('ReduceLogSumExp'), [2], [-Infinity, -Infinity]);
  close(run('ReduceMax', 18, [t('int32', [1, 0], []), i64([1])])[0], [1, 1], [-2147483648]);
  // reducing a non-empty axis of an empty tensor gives an empty result
  close(run('ReduceSum', 13, [t('float32', [2, 0, 4], []), i64([1])])[0], [2, 1, 4], [0, 0, 0, 0, 0, 0, 0, 0]);
  close(run('ReduceSum', 13, [t('float32', [2, 0, 4], []), i64([2])])[0], [2, 0, 1], []);
});

test('Reduce infer: constant, empty and unknown axes', () => {
  const x = ti('float32', [sym('b'), 1, 5]);
  assert.is(shapeOf(infer('ReduceMean', 18, [x, { dtype: 'int64', shape: [1], value: i64([-1]) }])[0]), 'b,1,1');
  assert.is(
    shapeOf(infer('ReduceMean', 18, [x, { dtype: 'int64', shape: [1], value: i64([0]) }], { keepdims: int(0) })[0]),
    '1,5',
  );
  assert.is(shapeOf(infer('ReduceMean', 13, [x], { axes: ints([2]), keepdims: int(0) })[0]), 'b,1');
  assert.is(shapeOf(infer('ReduceSum', 13, [x, ti('int64', [0])])[0]), '1,1,1');
  assert.is(shapeOf(infer('ReduceSum', 13, [x, ti('int64', [0])], { noop_with_empty_axes: int(1) })[0]), 'b,1,5');
  assert.is(
    shapeOf(infer('ReduceSum', 13, [x, { dtype: 'int64', shape: [1], sym: [2] }], { keepdims: int(0) })[0]),
    'b,1',
  );
  const unknown = infer('ReduceSum', 13, [x, ti('int64', [1])])[0];
  assert.is(unknown.shape!.length, 3);
  assert.ok(isSym(unknown.shape![0]) && unknown.shape![1] === 1 && isSym(unknown.shape![2]));
  assert.is(infer('ReduceSum', 13, [x, ti('int64', [1])], { keepdims: int(0) })[0].shape, undefined);
  failsWith(() => infer('ReduceSum', 13, [ti('string', [2])]), 'PLANC_E201', /numeric/);
  failsWith(() => infer('ReduceMean', 13, [x], { axes: ints([3]) }), 'PLANC_E201', /out of range/);
});

test('ArgMax / ArgMin: axis, keepdims, select_last_index, int64 output', () => {
  const x = f32([2, 3], [1, 3, 3, 2, 0, 2]);
  const a = run('ArgMax', 13, [x], { axis: int(1) })[0];
  assert.is(a.dtype, 'int64');
  close(a, [2, 1], [1, 0]);
  close(run('ArgMax', 13, [x], { axis: int(1), select_last_index: int(1), keepdims: int(0) })[0], [2], [2, 2]);
  const y = f32([2, 2], [1, 3, 0, 3]);
  close(run('ArgMin', 13, [y], { keepdims: int(0) })[0], [2], [1, 0]);
  close(run('ArgMin', 13, [y], { keepdims: int(0), select_last_index: int(1) })[0], [2], [1, 1]);
  const o = infer('ArgMax', 13, [ti('float32', [sym('b'), 7])], { axis: int(-1), keepdims: int(0) })[0];
  assert.is(o.dtype, 'int64');
  assert.is(shapeOf(o), 'b');
});

// ---- TopK ----

test('TopK: largest/smallest, ties lower index first, k attribute before opset 10', () => {
  const x = f32([1, 4], [1, 3, 3, 2]);
  const [v, i] = run('TopK', 11, [x, i64([2])], {}, 2);
  close(v, [1, 2], [3, 3]);
  assert.is(i.dtype, 'int64');
  close(i, [1, 2], [1, 2]);
  const [vs, is] = run('TopK', 11, [x, i64([3])], { largest: int(0) }, 2);
  close(vs, [1, 3], [1, 2, 3]);
  close(is, [1, 3], [0, 3, 1]);
  const [v1, i1] = run('TopK', 1, [f32([2, 2], [1, 5, 4, 2])], { k: int(1), axis: int(0) }, 2);
  close(v1, [1, 2], [4, 5]);
  close(i1, [1, 2], [1, 0]);
  // small k over a long axis (the insertion path)
  const long = f32(
    [100],
    Array.from({ length: 100 }, (_, j) => j % 10),
  );
  const [vl, il] = run('TopK', 11, [long, i64([3])], {}, 2);
  close(vl, [3], [9, 9, 9]);
  close(il, [3], [9, 19, 29]);
  const [vsm, ism] = run('TopK', 11, [long, i64([2])], { largest: int(0) }, 2);
  close(vsm, [2], [0, 0]);
  close(ism, [2], [0, 10]);
  failsWith(() => run('TopK', 11, [x, i64([5])], {}, 2), 'PLANC_E202', /out of range/);
  const o = infer('TopK', 11, [ti('float32', [sym('b'), 10]), { dtype: 'int64', shape: [1], value: i64([4]) }], {}, 2);
  assert.equal(o.map(shapeOf), ['b,4', 'b,4']);
  assert.equal(
    o.map((x) => x.dtype),
    ['float32', 'int64'],
  );
  assert.ok(isSym(infer('TopK', 11, [ti('float32', [3, 10]), ti('int64', [1])], {}, 2)[0].shape![1]));
});

// ---- Quantization ----

test('QuantizeLinear: half-to-even rounding, saturation, zero point, output_dtype', () => {
  const x = f32([6], [0, 1.5, 2.5, -1.5, 300, -300]);
  const q = run('QuantizeLinear', 13, [x, f32([], [1]), t('uint8', [], [128])])[0];
  assert.is(q.dtype, 'uint8');
  close(q, [6], [128, 130, 130, 126, 255, 0]);
  close(run('QuantizeLinear', 10, [f32([2], [1, 3]), f32([], [2])])[0], [2], [0, 2]); // 0.5 → 0, 1.5 → 2
  const s = run('QuantizeLinear', 21, [f32([3], [-200, 0.5, 1.5]), f32([], [1])], { output_dtype: int(3) })[0];
  assert.is(s.dtype, 'int8');
  close(s, [3], [-128, 0, 2]);
  const w = run('QuantizeLinear', 21, [f32([2], [-40000, 40000]), f32([], [1]), t('int16', [], [0])])[0];
  close(w, [2], [-32768, 32767]);
});

test('QuantizeLinear per-axis and blocked', () => {
  const x = f32([2, 2], [1, 2, 3, 4]);
  close(
    run('QuantizeLinear', 13, [x, f32([2], [1, 2]), t('uint8', [2], [0, 1])], { axis: int(0) })[0],
    [2, 2],
    [1, 2, 3, 3],
  );
  close(run('QuantizeLinear', 13, [x, f32([2], [1, 2]), t('uint8', [2], [0, 1])])[0], [2, 2], [1, 2, 3, 3]);
  const blocked = run(
    'QuantizeLinear',
    21,
    [f32([1, 4], [1, 2, 3, 4]), f32([1, 2], [1, 2]), t('int8', [1, 2], [0, 0])],
    { axis: int(1), block_size: int(2) },
  )[0];
  close(blocked, [1, 4], [1, 2, 2, 2]);
  failsWith(
    () =>
      run('QuantizeLinear', 21, [f32([1, 4], [1, 2, 3, 4]), f32([1, 3], [1, 2, 3])], {
        axis: int(1),
        block_size: int(2),
      }),
    'PLANC_E202',
    /blocked scale/,
  );
  failsWith(() => run('QuantizeLinear', 13, [x, f32([3], [1, 2, 3])], { axis: int(0) }), 'PLANC_E202', /does not fit/);
});

test('QuantizeLinear infer: output dtype from zero point, output_dtype or uint8', () => {
  const x = ti('float32', [sym('n'), 4]);
  assert.is(infer('QuantizeLinear', 13, [x, ti('float32', [])])[0].dtype, 'uint8');
  assert.is(infer('QuantizeLinear', 13, [x, ti('float32', []), ti('int8', [])])[0].dtype, 'int8');
  assert.is(infer('QuantizeLinear', 21, [x, ti('float32', [])], { output_dtype: int(4) })[0].dtype, 'uint16');
  assert.is(shapeOf(infer('QuantizeLinear', 21, [x, ti('float32', [])])[0]), 'n,4');
  failsWith(
    () => infer('QuantizeLinear', 21, [x, ti('float32', []), ti('int8', [])], { output_dtype: int(2) }),
    'PLANC_E201',
    /does not match/,
  );
  failsWith(
    () => infer('QuantizeLinear', 21, [x, ti('float32', [])], { output_dtype: int(6) }),
    'PLANC_E201',
    /cannot quantize to int32/,
  );
});

test('DequantizeLinear: zero point, per-axis, int32, output dtype', () => {
  const y = run('DequantizeLinear', 13, [t('uint8', [3], [0, 128, 255]), f32([], [2]), t('uint8', [], [128])])[0];
  assert.is(y.dtype, 'float32');
  close(y, [3], [-256, 0, 254]);
  close(
    run('DequantizeLinear', 13, [t('int8', [2, 2], [1, -2, 3, 4]), f32([2], [1, 0.5]), t('int8', [2], [0, 2])])[0],
    [2, 2],
    [1, -2, 3, 1],
  );
  close(run('DequantizeLinear', 13, [t('int32', [2], [100000, -7]), f32([], [0.5])])[0], [2], [50000, -3.5]);
  const h = run('DequantizeLinear', 19, [t('int8', [1], [3]), t('float16', [], [0.1])])[0];
  assert.is(h.dtype, 'float16');
  assert.is(h.nums[0], 0.2998046875);
  assert.is(
    infer('DequantizeLinear', 23, [ti('uint8', [2]), ti('float32', [])], { output_dtype: int(11) })[0].dtype,
    'float64',
  );
  failsWith(
    () => infer('DequantizeLinear', 13, [ti('uint8', [2]), ti('float32', []), ti('int8', [])]),
    'PLANC_E201',
    /does not match/,
  );
  failsWith(
    () => infer('DequantizeLinear', 13, [ti('float32', [2]), ti('float32', [])]),
    'PLANC_E201',
    /cannot dequantize/,
  );
});

test('DynamicQuantizeLinear: scale, zero point and values (the ONNX example)', () => {
  const [y, scale, zp] = run('DynamicQuantizeLinear', 11, [f32([6], [0, 2, -3, -2.5, 1.34, 0.5])], {}, 3);
  assert.is(y.dtype, 'uint8');
  close(y, [6], [153, 255, 0, 26, 221, 179]);
  close(scale, [], [Math.fround(5 / 255)]);
  close(zp, [], [153]);
  const [y0, s0, z0] = run('DynamicQuantizeLinear', 11, [f32([2], [0, 0])], {}, 3);
  close(y0, [2], [0, 0]);
  close(s0, [], [1]);
  close(z0, [], [0]);
  const o = infer('DynamicQuantizeLinear', 11, [ti('float32', [sym('n')])], {}, 3);
  assert.equal(
    o.map((x) => x.dtype),
    ['uint8', 'float32', 'uint8'],
  );
  assert.equal(o.map(shapeOf), ['n', '', '']);
});

test.run();
