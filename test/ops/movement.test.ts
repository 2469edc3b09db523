// Unit tests for the movement operators: values, opset variants, symbolic shape inference and errors.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DType } from '../../compiler/dtype.ts';
import type { Attr, Node } from '../../compiler/ir.ts';
import { makeOpContext } from '../../model/ops/context.ts';
import { MOVEMENT_OPS } from '../../model/ops/movement.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpHandler } from '../../model/ops/types.ts';
import { dimMul, dimNeg, dimStr, sym, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { failsWith } from '../helpers/expect-error.ts';

const INT64_MAX = 9223372036854775807;

function handler(op: string, opset: number): OpHandler {
  const h = MOVEMENT_OPS.find((x) => x.op === op && (x.since ?? 1) <= opset && opset < (x.until ?? Infinity));
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

function run(
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

const f32 = (dims: number[], v: number[]) => Tensor.fromNumbers('float32', dims, v);
const i64 = (v: number[], dims = [v.length]) => Tensor.fromNumbers('int64', dims, v);
const int = (v: number): Attr => ({ kind: 'int', value: v });
const ints = (v: number[]): Attr => ({ kind: 'ints', value: v });
const str = (v: string): Attr => ({ kind: 'string', value: v });
const dims = (s: readonly Dim[] | undefined) => (s ? s.map(dimStr).join(',') : '?');
const ti = (dtype: DType, s: Dim[]): InferInput => ({ dtype, shape: s });
/** A constant int64 input as inference sees it (value and sym). */
const ci = (v: number[], shape = [v.length]): InferInput => ({ dtype: 'int64', shape, value: i64(v, shape), sym: v });
const iota = (n: number) => Array.from({ length: n }, (_, i) => i);
const vals = (t: Tensor) => Array.from(t.nums);

const batch = sym('batch');
const srcLen = sym('src_len');

// ---- symbolic shape chains ----

test('Shape→Gather→Unsqueeze→Concat→Reshape gives [batch,src_len,4,64]', () => {
  const x = ti('float32', [batch, srcLen, 256]);
  const [shape] = infer('Shape', [x]);
  assert.is(dims(shape!.shape), '3');
  assert.is(dims(shape!.sym), 'batch,src_len,256');
  const [b] = infer('Gather', [shape!, ci([0], [])], { axis: int(0) });
  assert.is(dims(b!.shape), '');
  assert.is(dims(b!.sym), 'batch');
  const [s] = infer('Gather', [shape!, ci([1], [])]);
  const [b1] = infer('Unsqueeze', [b!, ci([0])], {}, 13);
  const [s1] = infer('Unsqueeze', [s!, ci([0])], {}, 13);
  assert.is(dims(b1!.shape), '1');
  assert.is(dims(s1!.sym), 'src_len');
  const [cat] = infer('Concat', [b1!, s1!, ci([4]), ci([64])], { axis: int(0) });
  assert.is(dims(cat!.shape), '4');
  assert.is(dims(cat!.sym), 'batch,src_len,4,64');
  const [y] = infer('Reshape', [x, cat!]);
  assert.is(dims(y!.shape), 'batch,src_len,4,64');
});

test('Reshape solves -1 symbolically and copies 0 dims', () => {
  const x = ti('float32', [batch, srcLen, 256]);
  assert.is(dims(infer('Reshape', [x, ci([0, 0, -1, 64])])[0]!.shape), 'batch,src_len,4,64');
  assert.is(dims(infer('Reshape', [x, ci([-1, 256])])[0]!.shape), 'batch*src_len,256');
  assert.is(dims(infer('Reshape', [x, ci([-1])])[0]!.shape), 'batch*src_len*256');
  const flat = ti('float32', [dimMul(batch, srcLen), 256]);
  assert.is(
    dims(infer('Reshape', [flat, { dtype: 'int64', shape: [4], sym: [batch, -1, 4, 64] }])[0]!.shape),
    'batch,src_len,4,64',
  );
  // allowzero keeps a literal 0
  assert.is(dims(infer('Reshape', [ti('float32', [0, 3]), ci([3, 0])], { allowzero: int(1) })[0]!.shape), '3,0');
  // unknown shape values but known length: rank only
  assert.is(infer('Reshape', [x, { dtype: 'int64', shape: [2] }])[0]!.shape!.length, 2);
  failsWith(() => infer('Reshape', [ti('float32', [2, 3]), ci([4, -1])]), 'PLANC_E201', 'cannot reshape');
  failsWith(() => infer('Reshape', [x, ci([-1, -1])]), 'PLANC_E201', 'more than one -1');
});

test('Slice with symbolic dims and INT64_MAX ends', () => {
  const x = ti('float32', [batch, srcLen]);
  const one = (v: number) => ci([v]);
  assert.is(dims(infer('Slice', [x, one(1), one(INT64_MAX), one(1)])[0]!.shape), 'batch,src_len-1');
  assert.is(dims(infer('Slice', [x, one(0), one(-1), one(-1)])[0]!.shape), 'batch,src_len-1');
  assert.is(dims(infer('Slice', [x, one(-3), one(INT64_MAX), one(1)])[0]!.shape), 'batch,3');
  assert.is(dims(infer('Slice', [x, one(-1), one(-INT64_MAX), one(1), one(-1)])[0]!.shape), 'batch,src_len');
  // symbolic ends from a shape computation
  const x2 = ti('float32', [512, 64]);
  const end: InferInput = { dtype: 'int64', shape: [1], sym: [srcLen] };
  assert.is(dims(infer('Slice', [x2, one(0), end, one(0)])[0]!.shape), 'src_len,64');
  const negStart: InferInput = { dtype: 'int64', shape: [1], sym: [dimNeg(srcLen)] };
  assert.is(
    dims(infer('Slice', [ti('float32', [batch, sym('total')]), negStart, one(INT64_MAX), one(1)])[0]!.shape),
    'batch,src_len',
  );
  // sym of a sliced Shape
  const [shape] = infer('Shape', [ti('float32', [batch, srcLen, 256])]);
  const [head] = infer('Slice', [shape!, one(0), one(2)]);
  assert.is(dims(head!.sym), 'batch,src_len');
  // unknown starts: the sliced axis is unknown, the others are kept
  const [u] = infer('Slice', [x, { dtype: 'int64', shape: [1] }, one(5), one(1)]);
  assert.is(dimStr(u!.shape![0]!), 'batch');
});

test('Size, Range, Expand, ConstantOfShape, Tile and Pad with symbols', () => {
  assert.is(dims(infer('Size', [ti('float32', [batch, srcLen, 4])])[0]!.sym), 'batch*src_len*4');
  const scalar = (d: Dim): InferInput => ({ dtype: 'int64', shape: [], sym: [d] });
  assert.is(dims(infer('Range', [scalar(0), scalar(srcLen), scalar(1)])[0]!.shape), 'src_len');
  assert.is(dims(infer('Range', [scalar(1), scalar(srcLen), scalar(1)])[0]!.shape), 'src_len-1');
  const [r] = infer('Range', [scalar(2), scalar(11), scalar(3)]);
  assert.is(dims(r!.shape), '3');
  assert.is(dims(r!.sym), '2,5,8');
  const shp: InferInput = { dtype: 'int64', shape: [3], sym: [batch, 1, srcLen] };
  assert.is(dims(infer('Expand', [ti('float32', [1, 8, 1]), shp])[0]!.shape), 'batch,8,src_len');
  const [c] = infer('ConstantOfShape', [{ dtype: 'int64', shape: [2], sym: [batch, srcLen] }], {
    value: { kind: 'tensor', value: i64([1], [1]) },
  });
  assert.is(c!.dtype, 'int64');
  assert.is(dims(c!.shape), 'batch,src_len');
  assert.is(dims(infer('Tile', [ti('float32', [batch, 3]), ci([2, 2])])[0]!.shape), 'batch*2,6');
  assert.is(dims(infer('Pad', [ti('float32', [batch, srcLen]), ci([0, 1, 0, 2])])[0]!.shape), 'batch,src_len+3');
});

test('Squeeze, Flatten, Split, Transpose infer with symbols', () => {
  assert.is(dims(infer('Squeeze', [ti('float32', [batch, 1, srcLen]), ci([1])], {}, 13)[0]!.shape), 'batch,src_len');
  assert.is(
    dims(infer('Squeeze', [ti('float32', [batch, 1, srcLen])], { axes: ints([-2]) }, 11)[0]!.shape),
    'batch,src_len',
  );
  assert.is(dims(infer('Flatten', [ti('float32', [batch, srcLen, 4])], { axis: int(2) })[0]!.shape), 'batch*src_len,4');
  const parts = infer('Split', [ti('float32', [batch, 512])], { axis: int(1) }, 13, 2);
  assert.is(parts.map((p) => dims(p.shape)).join(' '), 'batch,256 batch,256');
  const uneven = infer('Split', [ti('float32', [srcLen])], { num_outputs: int(2) }, 18, 2);
  assert.is(uneven.map((p) => dims(p.shape)).join(' '), '(src_len+1)/(2) -(src_len+1)/(2)+src_len');
  const sp = infer('Split', [ci([7, 8, 9])], {}, 13, 3);
  assert.equal(
    sp.map((p) => p.sym),
    [[7], [8], [9]],
  );
  failsWith(() => infer('Gather', [ti('float32', [3, 2]), ci([3])]), 'PLANC_E201', 'out of range');
  assert.is(
    dims(infer('Transpose', [ti('float32', [batch, srcLen, 4, 64])], { perm: ints([0, 2, 1, 3]) })[0]!.shape),
    'batch,4,src_len,64',
  );
  const [nz] = infer('NonZero', [ti('float32', [2, 3])]);
  assert.is(nz!.shape![0], 2);
  failsWith(() => infer('Squeeze', [ti('float32', [2, 3]), ci([0])], {}, 13), 'PLANC_E201', 'cannot squeeze');
  failsWith(() => infer('Concat', [ti('float32', [2]), ti('int64', [2])], { axis: int(0) }), 'PLANC_E201', 'mix');
  failsWith(
    () => infer('Transpose', [ti('float32', [2, 3])], { perm: ints([0, 0]) }),
    'PLANC_E201',
    'not a permutation',
  );
  failsWith(() => infer('Gather', [ti('float32', [2, 3]), ti('float32', [2])]), 'PLANC_E201', 'int32 or int64');
});

// ---- values ----

test('Transpose default and explicit perm', () => {
  const x = f32([2, 3], iota(6));
  assert.equal(vals(run('Transpose', [x])[0]!), [0, 3, 1, 4, 2, 5]);
  const y = run('Transpose', [f32([2, 2, 2], iota(8))], { perm: ints([1, 2, 0]) })[0]!;
  assert.equal(y.dims, [2, 2, 2]);
  assert.equal(vals(y), [0, 4, 1, 5, 2, 6, 3, 7]);
});

test('Reshape, Flatten, Squeeze, Unsqueeze values across opsets', () => {
  const x = f32([2, 3, 4], iota(24));
  assert.equal(run('Reshape', [x, i64([4, 0, -1])])[0]!.dims, [4, 3, 2]);
  assert.equal(run('Reshape', [x], { shape: ints([6, -1]) }, 4)[0]!.dims, [6, 4]);
  failsWith(() => run('Reshape', [x, i64([5, -1])]), 'PLANC_E202', 'cannot reshape');
  assert.equal(run('Flatten', [x], { axis: int(-1) })[0]!.dims, [6, 4]);
  assert.equal(run('Flatten', [x], { axis: int(0) })[0]!.dims, [1, 24]);
  const y = f32([1, 3, 1], [1, 2, 3]);
  assert.equal(run('Squeeze', [y], {}, 13)[0]!.dims, [3]);
  assert.equal(run('Squeeze', [y, i64([-1])], {}, 13)[0]!.dims, [1, 3]);
  assert.equal(run('Squeeze', [y], { axes: ints([0]) }, 11)[0]!.dims, [3, 1]);
  assert.equal(run('Unsqueeze', [f32([3], [1, 2, 3]), i64([2, 0])], {}, 13)[0]!.dims, [1, 3, 1]);
  assert.equal(run('Unsqueeze', [f32([3], [1, 2, 3])], { axes: ints([-1]) }, 11)[0]!.dims, [3, 1]);
  failsWith(() => run('Unsqueeze', [f32([3], [1, 2, 3]), i64([0, 0])], {}, 13), 'PLANC_E202', 'repeated');
});

test('Shape with start/end and Size', () => {
  const x = f32([2, 3, 4, 5], new Array(120).fill(0));
  assert.equal(vals(run('Shape', [x])[0]!), [2, 3, 4, 5]);
  assert.equal(vals(run('Shape', [x], { start: int(1), end: int(-1) })[0]!), [3, 4]);
  assert.equal(vals(run('Shape', [x], { start: int(-10), end: int(10) })[0]!), [2, 3, 4, 5]);
  assert.equal(vals(run('Shape', [x], { start: int(3), end: int(1) })[0]!), []);
  assert.equal(vals(run('Size', [x])[0]!), [120]);
});

test('Concat and Split (attribute, input, num_outputs with an uneven last part)', () => {
  const a = f32([2, 2], [1, 2, 3, 4]);
  const b = f32([2, 1], [5, 6]);
  assert.equal(vals(run('Concat', [a, b], { axis: int(-1) })[0]!), [1, 2, 5, 3, 4, 6]);
  const x = f32([7], iota(7));
  const parts = run('Split', [x], { num_outputs: int(4) }, 18, 4);
  assert.equal(
    parts.map((p) => vals(p)),
    [[0, 1], [2, 3], [4, 5], [6]],
  );
  const p13 = run('Split', [x, i64([3, 4])], {}, 13, 2);
  assert.equal(
    p13.map((p) => vals(p)),
    [
      [0, 1, 2],
      [3, 4, 5, 6],
    ],
  );
  const p11 = run('Split', [f32([2, 4], iota(8))], { axis: int(1), split: ints([1, 3]) }, 11, 2);
  assert.equal(
    p11.map((p) => vals(p)),
    [
      [0, 4],
      [1, 2, 3, 5, 6, 7],
    ],
  );
  failsWith(() => run('Split', [x], {}, 13, 2), 'PLANC_E202', 'equal parts');
});

test('Slice: attributes (opset 1), negative steps, clamping of huge bounds', () => {
  const x = f32([3, 4], iota(12));
  assert.equal(vals(run('Slice', [x], { starts: ints([1, 0]), ends: ints([2, 3]) }, 9)[0]!), [4, 5, 6]);
  const y = run('Slice', [x, i64([INT64_MAX, -1]), i64([-INT64_MAX, -INT64_MAX]), i64([0, 1]), i64([-1, -2])])[0]!;
  assert.equal(y.dims, [3, 2]);
  assert.equal(vals(y), [11, 9, 7, 5, 3, 1]);
  const z = run('Slice', [x, i64([1]), i64([INT64_MAX]), i64([-1])])[0]!;
  assert.equal(vals(z), [1, 2, 3, 5, 6, 7, 9, 10, 11]);
  assert.equal(run('Slice', [x, i64([10]), i64([20]), i64([1])])[0]!.dims, [3, 0]);
  failsWith(() => run('Slice', [x, i64([0]), i64([1]), i64([0]), i64([0])]), 'PLANC_E202', 'step cannot be 0');
});

test('Pad modes: constant (attrs before 11), reflect, edge, wrap, axes, negative pads', () => {
  const x = f32([3], [1, 2, 3]);
  assert.equal(
    vals(run('Pad', [x], { pads: ints([2, 1]), value: { kind: 'float', value: 9 } }, 2)[0]!),
    [9, 9, 1, 2, 3, 9],
  );
  assert.equal(vals(run('Pad', [x, i64([2, 2])], { mode: str('reflect') })[0]!), [3, 2, 1, 2, 3, 2, 1]);
  assert.equal(vals(run('Pad', [x, i64([2, 2])], { mode: str('edge') })[0]!), [1, 1, 1, 2, 3, 3, 3]);
  assert.equal(vals(run('Pad', [x, i64([2, 2])], { mode: str('wrap') })[0]!), [2, 3, 1, 2, 3, 1, 2]);
  assert.equal(vals(run('Pad', [x, i64([-1, 1]), f32([], [7])])[0]!), [2, 3, 7]);
  const m = run('Pad', [f32([2, 2], [1, 2, 3, 4]), i64([1, 0]), f32([], [0]), i64([-1])])[0]!;
  assert.equal(m.dims, [2, 3]);
  assert.equal(vals(m), [0, 1, 2, 0, 3, 4]);
});

test('Gather, GatherElements, GatherND (batch_dims), negative and out-of-range indices', () => {
  const x = f32([3, 2], iota(6));
  const g = run('Gather', [x, i64([-1, 0], [1, 2])])[0]!;
  assert.equal(g.dims, [1, 2, 2]);
  assert.equal(vals(g), [4, 5, 0, 1]);
  assert.equal(vals(run('Gather', [x, i64([1], [])], { axis: int(1) })[0]!), [1, 3, 5]);
  failsWith(() => run('Gather', [x, i64([3])]), 'PLANC_E202', 'out of range');
  assert.equal(
    vals(run('GatherElements', [f32([2, 2], [1, 2, 3, 4]), i64([0, 0, -1, 0], [2, 2])], { axis: int(1) })[0]!),
    [1, 1, 4, 3],
  );
  const nd = run('GatherND', [f32([2, 2, 2], iota(8)), i64([1, 0], [2, 1])], { batch_dims: int(1) })[0]!;
  assert.equal(nd.dims, [2, 2]);
  assert.equal(vals(nd), [2, 3, 4, 5]);
  const nd2 = run('GatherND', [f32([2, 2, 2], iota(8)), i64([1, 0, 0, 1], [2, 2])], { batch_dims: int(1) })[0]!;
  assert.equal(nd2.dims, [2]);
  assert.equal(vals(nd2), [2, 5]);
  assert.equal(vals(run('GatherND', [f32([2, 2], [0, 1, 2, 3]), i64([1, 1, 0, 1], [2, 2])])[0]!), [3, 1]);
});

test('ScatterND and ScatterElements with reductions; Scatter alias', () => {
  const x = f32([4], [1, 2, 3, 4]);
  assert.equal(vals(run('ScatterND', [x, i64([1, 3], [2, 1]), f32([2], [10, 20])])[0]!), [1, 10, 3, 20]);
  assert.equal(
    vals(run('ScatterND', [x, i64([1, 1], [2, 1]), f32([2], [10, 20])], { reduction: str('add') })[0]!),
    [1, 32, 3, 4],
  );
  assert.equal(
    vals(run('ScatterND', [x, i64([0, -1], [2, 1]), f32([2], [0, 9])], { reduction: str('max') }, 18)[0]!),
    [1, 2, 3, 9],
  );
  const d = f32([1, 5], [1, 2, 3, 4, 5]);
  const e = run('ScatterElements', [d, i64([1, 1], [1, 2]), f32([1, 2], [1.1, 2.1])], {
    axis: int(1),
    reduction: str('mul'),
  })[0]!;
  assert.equal(
    vals(e).map((v) => Math.round(v * 1000) / 1000),
    [1, 4.62, 3, 4, 5],
  );
  assert.equal(vals(run('Scatter', [f32([3], [0, 0, 0]), i64([-1]), f32([1], [5])], {}, 10)[0]!), [0, 0, 5]);
  failsWith(
    () => run('ScatterElements', [d, i64([5], [1, 1]), f32([1, 1], [0])], { axis: int(1) }),
    'PLANC_E202',
    'out of range',
  );
});

test('Expand, Tile, ConstantOfShape, Constant, Range', () => {
  const e = run('Expand', [f32([3, 1], [1, 2, 3]), i64([2, 1, 2])])[0]!;
  assert.equal(e.dims, [2, 3, 2]);
  assert.equal(vals(e), [1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3]);
  failsWith(() => run('Expand', [f32([3], [1, 2, 3]), i64([2])]), 'PLANC_E202', 'cannot expand');
  assert.equal(vals(run('Tile', [f32([2], [1, 2]), i64([3])])[0]!), [1, 2, 1, 2, 1, 2]);
  const c = run('ConstantOfShape', [i64([2, 2])], {
    value: { kind: 'tensor', value: Tensor.fromNumbers('int32', [1], [7]) },
  })[0]!;
  assert.is(c.dtype, 'int32');
  assert.equal(vals(c), [7, 7, 7, 7]);
  assert.equal(vals(run('ConstantOfShape', [i64([0])])[0]!), []);
  assert.equal(vals(run('Constant', [], { value_ints: ints([1, 2]) })[0]!), [1, 2]);
  const cf = run('Constant', [], { value_float: { kind: 'float', value: 1.5 } })[0]!;
  assert.is(cf.dtype, 'float32');
  assert.equal(cf.dims, []);
  assert.equal(infer('Constant', [], { value_ints: ints([3, 4]) })[0]!.sym, [3, 4]);
  assert.equal(
    vals(run('Range', [Tensor.scalar('int32', 10), Tensor.scalar('int32', 4), Tensor.scalar('int32', -3)])[0]!),
    [10, 7],
  );
  assert.equal(
    vals(run('Range', [Tensor.scalar('float32', 0), Tensor.scalar('float32', 1), Tensor.scalar('float32', 0.25)])[0]!),
    [0, 0.25, 0.5, 0.75],
  );
});

test('Trilu, CumSum, CumProd, EyeLike', () => {
  const x = f32([3, 3], [1, 2, 3, 4, 5, 6, 7, 8, 9]);
  assert.equal(vals(run('Trilu', [x])[0]!), [1, 2, 3, 0, 5, 6, 0, 0, 9]);
  assert.equal(vals(run('Trilu', [x, i64([-1], [])], { upper: int(0) })[0]!), [0, 0, 0, 4, 0, 0, 7, 8, 0]);
  const v = f32([4], [1, 2, 3, 4]);
  assert.equal(vals(run('CumSum', [v, i64([0], [])])[0]!), [1, 3, 6, 10]);
  assert.equal(vals(run('CumSum', [v, i64([0], [])], { exclusive: int(1), reverse: int(1) })[0]!), [9, 7, 4, 0]);
  assert.equal(vals(run('CumSum', [f32([2, 2], [1, 2, 3, 4]), i64([-1], [])])[0]!), [1, 3, 3, 7]);
  assert.equal(vals(run('CumProd', [v, i64([0], [])], { exclusive: int(1) })[0]!), [1, 1, 2, 6]);
  const eye = run('EyeLike', [f32([2, 3], iota(6))], { k: int(1), dtype: int(7) })[0]!;
  assert.is(eye.dtype, 'int64');
  assert.equal(vals(eye), [0, 1, 0, 0, 0, 1]);
});

test('DepthToSpace (DCR, CRD), SpaceToDepth, ReverseSequence', () => {
  const x = f32([1, 4, 1, 1], [1, 2, 3, 4]);
  const d = run('DepthToSpace', [x], { blocksize: int(2) })[0]!;
  assert.equal(d.dims, [1, 1, 2, 2]);
  assert.equal(vals(d), [1, 2, 3, 4]);
  const x8 = f32([1, 8, 1, 1], iota(8));
  assert.equal(vals(run('DepthToSpace', [x8], { blocksize: int(2) })[0]!), [0, 2, 4, 6, 1, 3, 5, 7]);
  assert.equal(vals(run('DepthToSpace', [x8], { blocksize: int(2), mode: str('CRD') })[0]!), iota(8));
  const s = run('SpaceToDepth', [f32([1, 1, 2, 2], [1, 2, 3, 4])], { blocksize: int(2) })[0]!;
  assert.equal(s.dims, [1, 4, 1, 1]);
  assert.equal(vals(s), [1, 2, 3, 4]);
  const seq = f32([3, 2], [1, 10, 2, 20, 3, 30]); // time-major: [time, batch]
  const r = run('ReverseSequence', [seq, i64([3, 2])], { time_axis: int(0), batch_axis: int(1) })[0]!;
  assert.equal(vals(r), [3, 20, 2, 10, 1, 30]);
});

test('OneHot, Compress, NonZero, Unique', () => {
  const oh = run('OneHot', [i64([1, -1, 5]), f32([], [3]), f32([2], [0, 1])])[0]!;
  assert.equal(oh.dims, [3, 3]);
  assert.equal(vals(oh), [0, 1, 0, 0, 0, 1, 0, 0, 0]);
  const oh0 = run('OneHot', [i64([0, 2]), i64([3], []), f32([2], [-1, 1])], { axis: int(0) })[0]!;
  assert.equal(oh0.dims, [3, 2]);
  assert.equal(vals(oh0), [1, -1, -1, -1, -1, 1]);
  const cond = Tensor.fromNumbers('bool', [2], [0, 1]);
  assert.equal(vals(run('Compress', [f32([2, 2], [1, 2, 3, 4]), cond], { axis: int(1) })[0]!), [2, 4]);
  assert.equal(vals(run('Compress', [f32([2, 2], [1, 2, 3, 4]), cond])[0]!), [2]);
  const nz = run('NonZero', [f32([2, 2], [1, 0, 0, 1])])[0]!;
  assert.equal(nz.dims, [2, 2]);
  assert.equal(vals(nz), [0, 1, 0, 1]);
  const [y, idx, inv, cnt] = run('Unique', [f32([6], [2, 1, 1, 3, 4, 3])], { sorted: int(0) }, 11, 4);
  assert.equal(vals(y!), [2, 1, 3, 4]);
  assert.equal(vals(idx!), [0, 1, 3, 4]);
  assert.equal(vals(inv!), [0, 1, 1, 2, 3, 2]);
  assert.equal(vals(cnt!), [1, 2, 2, 1]);
  const [ys, , invs] = run('Unique', [f32([2, 2], [1, 0, 1, 0])], { axis: int(0) }, 11, 3);
  assert.equal(ys!.dims, [1, 2]);
  assert.equal(vals(invs!), [0, 0]);
  const u = infer('Unique', [ti('float32', [batch])], {}, 11, 4);
  assert.equal(
    u.map((o) => o.dtype),
    ['float32', 'int64', 'int64', 'int64'],
  );
  assert.is(dimStr(u[0]!.shape![0]!), dimStr(u[3]!.shape![0]!));
});

test.run();
