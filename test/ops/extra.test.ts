// Unit tests for the extra operators: losses, Resize/Upsample, grids, Loop/Scan, signal, vision, text and assorted ops.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DType } from '../../compiler/dtype.ts';
import type { Attr, Graph, Node, ValueType } from '../../compiler/ir.ts';
import { makeOpContext } from '../../model/ops/context.ts';
import { EXTRA_OPS } from '../../model/ops/extra.ts';
import { pySplit } from '../../model/ops/extra-text.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpHandler } from '../../model/ops/types.ts';
import { dimStr, sym, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { failsWith } from '../helpers/expect-error.ts';

function handler(op: string, opset: number): OpHandler {
  const h = EXTRA_OPS.find((x) => x.op === op && (x.since ?? 1) <= opset && opset < (x.until ?? Infinity));
  if (!h) throw new Error(`no handler ${op} at opset ${opset}`);
  return h;
}

function node(op: string, nIn: number, nOut: number, attrs: Record<string, Attr>): Node {
  const inputs = Array.from({ length: nIn }, (_, i) => `in${i}`);
  const outputs = Array.from({ length: nOut }, (_, i) => `out${i}`);
  return { name: 'n0', op, domain: '', inputs, outputs, attrs, origin: [] };
}

type Body = (feeds: Tensor[]) => Tensor[];

function run(
  op: string,
  opset: number,
  ins: (Tensor | undefined)[],
  attrs: Record<string, Attr> = {},
  nOut = 1,
  body?: Body,
): Tensor[] {
  const ctx = {
    ...makeOpContext(node(op, ins.length, nOut, attrs), opset, 'PLANC_E202'),
    runSubgraph: (_g: Graph, feeds?: Tensor[]) => body!(feeds ?? []),
  } as EvalContext;
  return handler(op, opset).eval(ctx, ins);
}

function infer(
  op: string,
  opset: number,
  ins: (InferInput | undefined)[],
  attrs: Record<string, Attr> = {},
  nOut = 1,
  body?: (types: ValueType[]) => ValueType[],
): InferOutput[] {
  const ctx = {
    ...makeOpContext(node(op, ins.length, nOut, attrs), opset, 'PLANC_E201'),
    inferSubgraph: (_g: Graph, types?: ValueType[]) => body!(types ?? []),
  } as InferContext;
  return handler(op, opset).infer(ctx, ins);
}

const t = (dtype: DType, dims: number[], v: number[]) => Tensor.fromNumbers(dtype, dims, v);
const f32 = (dims: number[], v: number[]) => t('float32', dims, v);
const f64 = (dims: number[], v: number[]) => t('float64', dims, v);
const i64 = (v: number[]) => t('int64', [v.length], v);
const s64 = (v: number) => t('int64', [], [v]);
const str = (dims: number[], v: string[]) => Tensor.fromStrings(dims, v);
const int = (v: number): Attr => ({ kind: 'int', value: v });
const ints = (v: number[]): Attr => ({ kind: 'ints', value: v });
const flt = (v: number): Attr => ({ kind: 'float', value: v });
const floats = (v: number[]): Attr => ({ kind: 'floats', value: v });
const strA = (v: string): Attr => ({ kind: 'string', value: v });
const strs = (v: string[]): Attr => ({ kind: 'strings', value: v });
const ti = (dtype: DType, s: Dim[] | undefined, value?: Tensor): InferInput => ({ dtype, shape: s, value });
const shapeOf = (o: InferOutput) => (o.shape ? o.shape.map(dimStr).join(',') : '?');

function graph(inputs: string[], outputs: string[]): Attr {
  const g: Graph = { name: 'body', inputs, outputs, nodes: [], values: new Map(), initializers: new Map() };
  return { kind: 'graph', value: g };
}

function close(actual: Tensor, dims: number[], want: number[], tol = 1e-6): void {
  assert.equal([...actual.dims], dims, 'dims');
  const got = actual.toNumbers();
  assert.is(got.length, want.length, 'length');
  want.forEach((w, i) => {
    const g = got[i]!;
    const ok = Number.isNaN(w) ? Number.isNaN(g) : w === g || Math.abs(g - w) <= tol * Math.max(1, Math.abs(w));
    assert.ok(ok, `element ${i}: got ${g}, want ${w} (all: ${got.join(', ')})`);
  });
}

// ---- losses ----

test('NegativeLogLikelihoodLoss: reductions, weights, ignore_index', () => {
  const x = f32([2, 3], [-1, -2, -3, -4, -5, -6]);
  const target = i64([0, 2]);
  close(run('NegativeLogLikelihoodLoss', 13, [x, target], { reduction: strA('none') })[0], [2], [1, 6]);
  close(run('NegativeLogLikelihoodLoss', 13, [x, target])[0], [], [3.5]);
  close(run('NegativeLogLikelihoodLoss', 13, [x, target], { reduction: strA('sum') })[0], [], [7]);
  // weighted mean divides by the weights used: (1*1 + 6*3) / (1 + 3)
  close(run('NegativeLogLikelihoodLoss', 13, [x, target, f32([3], [1, 2, 3])])[0], [], [4.75]);
  close(run('NegativeLogLikelihoodLoss', 13, [x, target], { ignore_index: int(2) })[0], [], [1]);
  // [N, C, D]: x[n, t, d]
  const x3 = f32([1, 2, 2], [-1, -2, -3, -4]);
  close(
    run('NegativeLogLikelihoodLoss', 13, [x3, t('int64', [1, 2], [1, 0])], { reduction: strA('none') })[0],
    [1, 2],
    [3, 2],
  );
  failsWith(() => run('NegativeLogLikelihoodLoss', 13, [x, i64([0, 3])]), 'PLANC_E202', /out of range/);
  const o = infer('NegativeLogLikelihoodLoss', 13, [ti('float32', [sym('n'), 3]), ti('int64', [sym('n')])], {
    reduction: strA('none'),
  });
  assert.is(shapeOf(o[0]!), 'n');
  assert.is(shapeOf(infer('NegativeLogLikelihoodLoss', 13, [ti('float32', [2, 3]), ti('int64', [2])])[0]!), '');
  failsWith(
    () => infer('NegativeLogLikelihoodLoss', 13, [ti('float32', [2, 3]), ti('float32', [2])]),
    'PLANC_E201',
    /target must be/,
  );
});

test('SoftmaxCrossEntropyLoss: loss and log_prob output', () => {
  const [loss, logp] = run('SoftmaxCrossEntropyLoss', 13, [f32([1, 2], [0, 0]), i64([1])], {}, 2);
  close(loss!, [], [Math.LN2]);
  close(logp!, [1, 2], [-Math.LN2, -Math.LN2]);
  const o = infer(
    'SoftmaxCrossEntropyLoss',
    13,
    [ti('float32', [4, 3, 5]), ti('int64', [4, 5])],
    { reduction: strA('none') },
    2,
  );
  assert.is(shapeOf(o[0]!), '4,5');
  assert.is(shapeOf(o[1]!), '4,3,5');
});

// ---- Resize / Upsample ----

test('Resize-13+: nearest, linear half_pixel, sizes, keep_aspect_ratio_policy, axes', () => {
  const x = f32([1, 1, 1, 2], [1, 2]);
  const scales = f32([4], [1, 1, 1, 2]);
  close(run('Resize', 13, [x, undefined, scales])[0], [1, 1, 1, 4], [1, 1, 2, 2]);
  // half_pixel: source coords -0.25, 0.25, 0.75, 1.25 (edge-clamped)
  close(run('Resize', 13, [x, undefined, scales], { mode: strA('linear') })[0], [1, 1, 1, 4], [1, 1.25, 1.75, 2]);
  close(
    run('Resize', 13, [x, undefined, scales], {
      mode: strA('linear'),
      coordinate_transformation_mode: strA('align_corners'),
    })[0],
    [1, 1, 1, 4],
    [1, 4 / 3, 5 / 3, 2],
  );
  close(
    run('Resize', 13, [x, undefined, undefined, i64([1, 1, 1, 3])], {
      nearest_mode: strA('floor'),
      coordinate_transformation_mode: strA('asymmetric'),
    })[0],
    [1, 1, 1, 3],
    [1, 1, 2],
  );
  // not_larger: scale = min(2/2, 8/4) = 1 → unchanged
  const y = f32([2, 4], [1, 2, 3, 4, 5, 6, 7, 8]);
  close(
    run('Resize', 18, [y, undefined, undefined, i64([2, 8])], { keep_aspect_ratio_policy: strA('not_larger') })[0],
    [2, 4],
    [1, 2, 3, 4, 5, 6, 7, 8],
  );
  // axes: only the last axis is given
  close(
    run('Resize', 18, [y, undefined, f32([1], [0.5])], {
      axes: ints([1]),
      coordinate_transformation_mode: strA('asymmetric'),
    })[0],
    [2, 2],
    [1, 3, 5, 7],
  );
  failsWith(
    () => run('Resize', 13, [x, undefined, scales, i64([1, 1, 1, 4])]),
    'PLANC_E202',
    /only one of scales and sizes/,
  );
  failsWith(
    () => run('Resize', 18, [x, undefined, scales], { mode: strA('nearest'), antialias: int(1) }),
    'PLANC_E202',
    /antialias/,
  );
});

test('Resize tf_crop_and_resize extrapolates outside the roi', () => {
  const x = f32([1, 3], [1, 2, 3]);
  const roi = f32([4], [0, 0, 1, 2]); // the second axis spans [0, 2*(3-1)] = beyond the input
  const r = run('Resize', 13, [x, roi, undefined, i64([1, 3])], {
    mode: strA('linear'),
    coordinate_transformation_mode: strA('tf_crop_and_resize'),
    extrapolation_value: flt(-1),
  })[0]!;
  close(r, [1, 3], [1, 3, -1]);
});

test('Resize infer: shapes from constant scales or sizes', () => {
  const b = sym('b');
  const o = infer('Resize', 13, [ti('float32', [b, 3, 4, 4]), undefined, ti('float32', [4], f32([4], [1, 1, 2, 0.5]))]);
  assert.is(shapeOf(o[0]!), 'b,3,8,2');
  const s = infer('Resize', 13, [
    ti('float32', [b, 3, 4, 4]),
    undefined,
    undefined,
    ti('int64', [4], i64([1, 3, 5, 6])),
  ]);
  assert.is(shapeOf(s[0]!), '1,3,5,6');
  failsWith(() => infer('Resize', 13, [ti('string', [2])]), 'PLANC_E201', /numeric/);
});

test('Upsample-7/9 and Resize-10: asymmetric nearest repeats, linear interpolates', () => {
  const x = f32([1, 2], [1, 2]);
  close(run('Upsample', 7, [x], { scales: floats([1, 2]) })[0], [1, 4], [1, 1, 2, 2]);
  close(run('Upsample', 9, [x, f32([2], [2, 1])])[0], [2, 2], [1, 2, 1, 2]);
  close(run('Resize', 10, [x, f32([2], [1, 2])], { mode: strA('linear') })[0], [1, 4], [1, 1.5, 2, 2]);
  assert.is(shapeOf(infer('Upsample', 7, [ti('float32', [1, 2])], { scales: floats([1, 3]) })[0]!), '1,6');
});

// ---- GridSample / AffineGrid ----

test('GridSample: corners with align_corners, zeros padding, nearest', () => {
  const x = f32([1, 1, 2, 2], [1, 2, 3, 4]);
  const grid = f32([1, 1, 4, 2], [-1, -1, 1, -1, -1, 1, 1, 1]);
  close(run('GridSample', 20, [x, grid], { align_corners: int(1) })[0], [1, 1, 1, 4], [1, 2, 3, 4]);
  // centre of the image: the mean of the four pixels
  close(run('GridSample', 16, [x, f32([1, 1, 1, 2], [0, 0])], { mode: strA('bilinear') })[0], [1, 1, 1, 1], [2.5]);
  // far outside: zeros padding gives 0, border padding the corner pixel
  const out = f32([1, 1, 1, 2], [-3, -3]);
  close(run('GridSample', 20, [x, out])[0], [1, 1, 1, 1], [0]);
  close(run('GridSample', 20, [x, out], { padding_mode: strA('border') })[0], [1, 1, 1, 1], [1]);
  close(
    run('GridSample', 20, [x, f32([1, 1, 1, 2], [0.6, -0.6])], { mode: strA('nearest'), align_corners: int(1) })[0],
    [1, 1, 1, 1],
    [2],
  );
  failsWith(
    () => run('GridSample', 20, [x, grid], { mode: strA('bilinear') }),
    'PLANC_E202',
    /mode 'bilinear' is not valid/,
  );
  assert.is(
    shapeOf(infer('GridSample', 20, [ti('float32', [2, 3, 8, 8]), ti('float32', [2, 5, 6, 2])])[0]!),
    '2,3,5,6',
  );
});

test('AffineGrid: identity theta gives the normalized base grid', () => {
  const theta = f32([1, 2, 3], [1, 0, 0, 0, 1, 0]);
  close(
    run('AffineGrid', 20, [theta, i64([1, 1, 2, 2])], { align_corners: int(1) })[0],
    [1, 2, 2, 2],
    [-1, -1, 1, -1, -1, 1, 1, 1],
  );
  close(run('AffineGrid', 20, [theta, i64([1, 1, 1, 2])])[0], [1, 1, 2, 2], [-0.5, 0, 0.5, 0]);
  assert.is(
    shapeOf(infer('AffineGrid', 20, [ti('float32', [1, 3, 4]), ti('int64', [5], i64([1, 1, 2, 3, 4]))])[0]!),
    '1,2,3,4,3',
  );
});

// ---- Loop / Scan ----

test('Loop: trip count, condition, carried state and scan outputs', () => {
  const body: Body = ([it, , s]) => {
    const next = s!.nums[0]! + it!.nums[0]!;
    return [t('bool', [], [next < 100 ? 1 : 0]), f32([], [next]), f32([1], [s!.nums[0]!])];
  };
  const attrs = { body: graph(['i', 'c', 's'], ['c_out', 's_out', 'scan']) };
  const [state, scan] = run('Loop', 11, [s64(4), t('bool', [], [1]), f32([], [10])], attrs, 2, body);
  close(state!, [], [16]); // 10 + 0 + 1 + 2 + 3
  close(scan!, [4, 1], [10, 10, 11, 13]);
  // the body's condition stops the loop: no trip count
  const stop: Body = ([it, , s]) => [
    t('bool', [], [it!.nums[0]! < 2 ? 1 : 0]),
    f32([], [s!.nums[0]! * 2]),
    f32([1], [0]),
  ];
  close(run('Loop', 11, [undefined, undefined, f32([], [1])], attrs, 2, stop)[0]!, [], [8]);
  // infer: carried type, scan outputs get an unknown leading dim
  const o = infer('Loop', 11, [ti('int64', []), ti('bool', []), ti('float32', [])], attrs, 2, () => [
    { dtype: 'bool', shape: [] },
    { dtype: 'float32', shape: [] },
    { dtype: 'float32', shape: [1] },
  ]);
  assert.is(shapeOf(o[0]!), '');
  assert.is(o[1]!.shape!.length, 2);
  assert.is(o[1]!.shape![1], 1);
  failsWith(
    () =>
      infer('Loop', 11, [ti('int64', []), ti('bool', []), ti('float32', [])], attrs, 2, () => [
        { dtype: 'bool', shape: [] },
        { dtype: 'int64', shape: [] },
        { dtype: 'float32', shape: [1] },
      ]),
    'PLANC_E201',
    /loop-carried value 0/,
  );
});

test('Scan-9: running sum, reversed input, scan output axis', () => {
  const body: Body = ([s, x]) => {
    const sum = f32([2], [s!.nums[0]! + x!.nums[0]!, s!.nums[1]! + x!.nums[1]!]);
    return [sum, sum];
  };
  const attrs = { body: graph(['s', 'x'], ['s_out', 'y']), num_scan_inputs: int(1) };
  const x = f32([3, 2], [1, 2, 3, 4, 5, 6]);
  const [fin, ys] = run('Scan', 9, [f32([2], [0, 0]), x], attrs, 2, body);
  close(fin!, [2], [9, 12]);
  close(ys!, [3, 2], [1, 2, 4, 6, 9, 12]);
  const rev = run(
    'Scan',
    9,
    [f32([2], [0, 0]), x],
    { ...attrs, scan_input_directions: ints([1]), scan_output_axes: ints([1]) },
    2,
    body,
  );
  close(rev[1]!, [2, 3], [5, 8, 9, 6, 10, 12]);
  // scan along axis 1 of a [2, 3] input: slices are columns
  const cols = run(
    'Scan',
    9,
    [f32([2], [0, 0]), f32([2, 3], [1, 2, 3, 4, 5, 6])],
    { ...attrs, scan_input_axes: ints([1]) },
    2,
    body,
  );
  close(cols[0]!, [2], [6, 15]);
  const o = infer('Scan', 9, [ti('float32', [2]), ti('float32', [sym('t'), 2])], attrs, 2, (types) => [
    types[0]!,
    types[0]!,
  ]);
  assert.is(shapeOf(o[0]!), '2');
  assert.is(shapeOf(o[1]!), 't,2');
});

test('Scan-8: batched with sequence_lens padding', () => {
  const body: Body = ([s, x]) => {
    const v = f32([], [s!.nums[0]! + x!.nums[0]!]);
    return [v, v];
  };
  const attrs = { body: graph(['s', 'x'], ['s_out', 'y']), num_scan_inputs: int(1) };
  const [fin, ys] = run('Scan', 8, [i64([2, 1]), f32([2], [0, 100]), f32([2, 2], [1, 2, 3, 4])], attrs, 2, body);
  close(fin!, [2], [3, 103]);
  close(ys!, [2, 2], [1, 3, 103, 0]);
});

// ---- assorted ----

test('CenterCropPad crops and pads around the centre', () => {
  const x = f32([3, 2], [1, 2, 3, 4, 5, 6]);
  close(run('CenterCropPad', 18, [x, i64([1, 4])])[0], [1, 4], [0, 3, 4, 0]);
  close(run('CenterCropPad', 18, [x, i64([2])], { axes: ints([-2]) })[0], [2, 2], [1, 2, 3, 4]);
  assert.is(shapeOf(infer('CenterCropPad', 18, [ti('float32', [3, 2]), ti('int64', [2], i64([5, 1]))])[0]!), '5,1');
  failsWith(() => run('CenterCropPad', 18, [x, i64([1])]), 'PLANC_E202', /axes/);
});

test('BitCast reinterprets bytes between same-width types', () => {
  const r = run('BitCast', 26, [f32([2], [1, -2])], { to: int(6) })[0]!;
  assert.is(r.dtype, 'int32');
  close(r, [2], [1065353216, -1073741824]);
  close(run('BitCast', 26, [t('int8', [2], [-1, 5])], { to: int(2) })[0]!, [2], [255, 5]);
  close(run('BitCast', 26, [t('int64', [1], [4607182418800017408])], { to: int(11) })[0]!, [1], [1]);
  failsWith(() => run('BitCast', 26, [f32([1], [1])], { to: int(7) }), 'PLANC_E202', /equal widths/);
  assert.is(infer('BitCast', 26, [ti('uint16', [3])], { to: int(5) })[0]!.dtype, 'int16');
});

test('Det, LRN, SwiGLU', () => {
  close(run('Det', 11, [f32([2, 2, 2], [1, 2, 3, 4, 0, 1, 1, 0])])[0], [2], [-2, -1]);
  close(run('Det', 11, [f64([3, 3], [2, 0, 0, 0, 3, 0, 0, 0, 4])])[0], [], [24]);
  failsWith(() => run('Det', 11, [f32([2, 3], [1, 2, 3, 4, 5, 6])]), 'PLANC_E202', /M, M/);
  // size 1: y = x / (bias + alpha * x^2)^beta
  close(
    run('LRN', 13, [f32([1, 1, 1, 1], [2])], { size: int(1), alpha: flt(1), beta: flt(1), bias: flt(1) })[0],
    [1, 1, 1, 1],
    [0.4],
  );
  // size 3 over 2 channels: both channels see 1 + 4
  close(
    run('LRN', 13, [f32([1, 2], [1, 2])], { size: int(3), alpha: flt(3), beta: flt(1), bias: flt(0) })[0],
    [1, 2],
    [0.2, 0.4],
  );
  const sig = (v: number) => 1 / (1 + Math.exp(-v));
  close(run('SwiGLU', 28, [f32([2], [1, -1]), f32([2], [2, 3])])[0], [2], [2 * sig(1), -3 * sig(-1)]);
  close(run('SwiGLU', 28, [f32([1], [2]), f32([1], [1])], { alpha: flt(0.5) })[0], [1], [2 * sig(1)]);
});

test('TensorScatter: linear and circular writes, range check', () => {
  const past = f32([1, 3, 1], [1, 2, 3]);
  close(run('TensorScatter', 24, [past, f32([1, 1, 1], [9]), i64([1])])[0], [1, 3, 1], [1, 9, 3]);
  close(
    run('TensorScatter', 24, [past, f32([1, 2, 1], [8, 9]), i64([2])], { mode: strA('circular') })[0],
    [1, 3, 1],
    [9, 2, 8],
  );
  close(run('TensorScatter', 24, [past, f32([1, 1, 1], [7])])[0], [1, 3, 1], [7, 2, 3]);
  failsWith(() => run('TensorScatter', 24, [past, f32([1, 2, 1], [8, 9]), i64([2])]), 'PLANC_E202', /out of range/);
});

// ---- signal ----

test('DFT: forward, inverse, onesided, irfft, opset 20 axis input', () => {
  const x = f32([4, 1], [1, 2, 3, 4]);
  const fwd = run('DFT', 17, [x], { axis: int(0) })[0]!;
  close(fwd, [4, 2], [10, 0, -2, 2, -2, 0, -2, -2]);
  close(run('DFT', 17, [fwd], { axis: int(0), inverse: int(1) })[0], [4, 2], [1, 0, 2, 0, 3, 0, 4, 0]);
  const half = run('DFT', 17, [x], { axis: int(0), onesided: int(1) })[0]!;
  close(half, [3, 2], [10, 0, -2, 2, -2, 0]);
  close(run('DFT', 17, [half], { axis: int(0), onesided: int(1), inverse: int(1) })[0], [4, 1], [1, 2, 3, 4]);
  close(
    run('DFT', 20, [f32([1, 4, 1], [1, 2, 3, 4]), undefined, s64(-2)])[0],
    [1, 4, 2],
    [10, 0, -2, 2, -2, 0, -2, -2],
  );
  // dft_length pads with zeros
  close(run('DFT', 17, [f32([2, 1], [1, 1]), s64(4)], { axis: int(0) })[0], [4, 2], [2, 0, 1, -1, 0, 0, 1, 1]);
  failsWith(() => run('DFT', 20, [x, undefined, s64(1)]), 'PLANC_E202', /out of range/);
  assert.is(shapeOf(infer('DFT', 17, [ti('float32', [1, 10, 1])], { onesided: int(1) })[0]!), '1,6,2');
});

test('STFT frames, windows and MelWeightMatrix', () => {
  const sig = f32([1, 4, 1], [1, 2, 3, 4]);
  // frames [1,2] and [3,4] (step 2, length 2): DFT = [sum, diff]
  close(
    run('STFT', 17, [sig, s64(2), undefined, s64(2)], { onesided: int(0) })[0],
    [1, 2, 2, 2],
    [3, 0, -1, 0, 7, 0, -1, 0],
  );
  close(run('STFT', 17, [sig, s64(2), f32([2], [1, 0])])[0], [1, 2, 2, 2], [1, 0, 1, 0, 3, 0, 3, 0]);
  close(run('HannWindow', 17, [s64(4)])[0], [4], [0, 0.5, 1, 0.5]);
  close(run('HannWindow', 17, [s64(3)], { periodic: int(0) })[0], [3], [0, 1, 0]);
  close(run('HammingWindow', 17, [s64(2)])[0], [2], [(2 * 25) / 46 - 1, 1]);
  close(run('BlackmanWindow', 17, [s64(2)])[0], [2], [0, 1]);
  assert.is(run('HannWindow', 17, [s64(2)], { output_datatype: int(11) })[0]!.dtype, 'float64');
  const mel = run('MelWeightMatrix', 17, [
    t('int32', [], [8]),
    t('int32', [], [16]),
    t('int32', [], [8192]),
    f32([], [0]),
    f32([], [4096]),
  ])[0]!;
  assert.equal([...mel.dims], [9, 8]);
  close(f32([2], [mel.nums[0]!, mel.nums[1]!]), [2], [1, 1]);
});

// ---- vision ----

test('NonMaxSuppression: suppression by IoU, score threshold, limit', () => {
  const boxes = f32([1, 3, 4], [0, 0, 1, 1, 0, 0.1, 1, 1.1, 0, 2, 1, 3]);
  const scores = f32([1, 1, 3], [0.9, 0.8, 0.7]);
  const r = run('NonMaxSuppression', 11, [boxes, scores, i64([3]), f32([1], [0.5])])[0]!;
  close(r, [2, 3], [0, 0, 0, 0, 0, 2]);
  close(
    run('NonMaxSuppression', 11, [boxes, scores, i64([3]), f32([1], [0.5]), f32([1], [0.75])])[0]!,
    [1, 3],
    [0, 0, 0],
  );
  close(run('NonMaxSuppression', 11, [boxes, scores, i64([1]), f32([1], [1])])[0]!, [1, 3], [0, 0, 0]);
  assert.is(run('NonMaxSuppression', 11, [boxes, scores])[0]!.dims[0], 0);
  assert.is(
    shapeOf(infer('NonMaxSuppression', 11, [ti('float32', [1, 3, 4]), ti('float32', [1, 1, 3])])[0]!).split(',')[1],
    '3',
  );
});

test('RoiAlign averages bilinear samples; Col2Im sums blocks', () => {
  const x = f32([1, 1, 2, 2], [1, 2, 3, 4]);
  const rois = f32([1, 4], [0, 0, 1, 1]);
  // output_half_pixel, one bin of 2x2 samples at 0.25/0.75 → mean of the bilinear values = 2.5
  close(run('RoiAlign', 10, [x, rois, i64([0])], { sampling_ratio: int(2) })[0], [1, 1, 1, 1], [2.5]);
  close(run('RoiAlign', 16, [x, rois, i64([0])], { sampling_ratio: int(1), mode: strA('max') })[0], [1, 1, 1, 1], [1]);
  failsWith(() => run('RoiAlign', 16, [x, rois, i64([1])]), 'PLANC_E202', /batch index/);
  // 1x2 blocks over a 1x3 image: positions (0,0..1) and (0,1..2) overlap at the middle
  const cols = f32([1, 2, 2], [1, 10, 2, 20]);
  close(run('Col2Im', 18, [cols, i64([1, 3]), i64([1, 2])])[0], [1, 1, 1, 3], [1, 12, 20]);
  failsWith(
    () => run('Col2Im', 18, [f32([1, 3, 2], [0, 0, 0, 0, 0, 0]), i64([1, 3]), i64([1, 2])]),
    'PLANC_E202',
    /divisible/,
  );
});

// ---- text ----

test('pySplit follows str.split', () => {
  assert.equal(pySplit('  a  b c ', undefined, -1), ['a', 'b', 'c']);
  assert.equal(pySplit('  a  b c ', undefined, 1), ['a', 'b c ']);
  assert.equal(pySplit('', undefined, -1), []);
  assert.equal(pySplit('a,,b', ',', -1), ['a', '', 'b']);
  assert.equal(pySplit('a,b,c', ',', 1), ['a', 'b,c']);
  assert.equal(pySplit('', ',', -1), ['']);
});

test('StringSplit, StringConcat, RegexFullMatch, StringNormalizer', () => {
  const [parts, counts] = run('StringSplit', 20, [str([2], ['a b', 'c'])], {}, 2);
  assert.equal([...parts!.dims], [2, 2]);
  assert.equal(parts!.strings, ['a', 'b', 'c', '']);
  close(counts!, [2], [2, 1]);
  assert.equal(run('StringConcat', 20, [str([2], ['a', 'b']), str([], ['!'])])[0]!.strings, ['a!', 'b!']);
  close(run('RegexFullMatch', 20, [str([3], ['abc', 'abcd', 'xabc'])], { pattern: strA('a.c') })[0]!, [3], [1, 0, 0]);
  failsWith(
    () => run('RegexFullMatch', 20, [str([1], ['a'])], { pattern: strA('(') }),
    'PLANC_E202',
    /not a valid regular expression/,
  );
  const n = run('StringNormalizer', 10, [str([3], ['Café', 'the', 'Dog'])], {
    case_change_action: strA('LOWER'),
    stopwords: strs(['THE']),
  })[0]!;
  assert.equal(n.strings, ['cafe', 'dog']);
  assert.equal(
    run('StringNormalizer', 10, [str([1, 1], ['x'])], { is_case_sensitive: int(1), stopwords: strs(['x']) })[0]!
      .strings,
    [''],
  );
  failsWith(() => run('StringConcat', 20, [f32([1], [1]), str([1], ['a'])]), 'PLANC_E202', /string tensor/);
});

test('TfIdfVectorizer counts uni- and bigrams with skips', () => {
  const attrs = {
    mode: strA('TF'),
    min_gram_length: int(1),
    max_gram_length: int(2),
    max_skip_count: int(1),
    ngram_counts: ints([0, 2]),
    ngram_indexes: ints([0, 1, 2]),
    pool_int64s: ints([1, 2, 1, 2]),
  };
  // unigrams 1, 2 and bigram (1, 2): [1, 3, 2] has 1 once, 2 once, (1,2) with skip 1 once
  close(run('TfIdfVectorizer', 9, [t('int64', [3], [1, 3, 2])], attrs)[0]!, [3], [1, 1, 1]);
  close(
    run('TfIdfVectorizer', 9, [t('int32', [2, 2], [1, 2, 2, 2])], {
      ...attrs,
      mode: strA('IDF'),
      weights: floats([0.5, 2, 3]),
    })[0]!,
    [2, 3],
    [0.5, 2, 3, 0, 2, 0],
  );
  assert.is(shapeOf(infer('TfIdfVectorizer', 9, [ti('int64', [sym('b'), 5])], attrs)[0]!), 'b,3');
});

// ---- recurrent ----

const sig = (v: number) => 1 / (1 + Math.exp(-v));

test('RNN: one step, reverse direction, Affine activation, sequence_lens', () => {
  const one = [
    f32([1, 1, 1], [1]),
    f32([1, 1, 1], [2]),
    f32([1, 1, 1], [0.5]),
    f32([1, 2], [0.1, 0.2]),
    undefined,
    f32([1, 1, 1], [0.5]),
  ];
  const [y, yh] = run('RNN', 14, one, { hidden_size: int(1) }, 2);
  close(y!, [1, 1, 1, 1], [Math.tanh(2.55)]);
  close(yh!, [1, 1, 1], [Math.tanh(2.55)]);
  const x2 = f32([2, 1, 1], [1, 2]);
  const w = f32([1, 1, 1], [1]);
  const rev = run('RNN', 14, [x2, w, w], { direction: strA('reverse') }, 2);
  close(rev[0]!, [2, 1, 1, 1], [Math.tanh(1 + Math.tanh(2)), Math.tanh(2)]);
  close(rev[1]!, [1, 1, 1], [Math.tanh(1 + Math.tanh(2))]);
  close(
    run('RNN', 14, [x2, w, f32([1, 1, 1], [0])], {
      activations: strs(['Affine']),
      activation_alpha: floats([2]),
      activation_beta: floats([1]),
    })[0]!,
    [2, 1, 1, 1],
    [3, 5],
  );
  const masked = run('RNN', 14, [x2, w, w, undefined, t('int32', [1], [1])], {}, 2);
  close(masked[0]!, [2, 1, 1, 1], [Math.tanh(1), 0]);
  close(masked[1]!, [1, 1, 1], [Math.tanh(1)]);
  failsWith(() => run('RNN', 14, [x2, w, w], { direction: strA('sideways') }), 'PLANC_E202', /direction/);
});

test('GRU and LSTM single steps, peepholes, input_forget', () => {
  const x = f32([1, 1, 1], [1]);
  const g = run('GRU', 14, [x, f32([1, 3, 1], [1, 1, 1]), f32([1, 3, 1], [0, 0, 0])])[0]!;
  close(g, [1, 1, 1, 1], [(1 - sig(1)) * Math.tanh(1)]);
  // linear_before_reset with a recurrent weight: h~ = tanh(x + r * (R_h * h0)), h0 = 1
  const h0 = f32([1, 1, 1], [1]);
  const gl = run('GRU', 14, [x, f32([1, 3, 1], [0, 0, 1]), f32([1, 3, 1], [0, 0, 2]), undefined, undefined, h0], {
    linear_before_reset: int(1),
  })[0]!;
  close(gl, [1, 1, 1, 1], [0.5 * Math.tanh(1 + 0.5 * 2) + 0.5]);
  const w4 = f32([1, 4, 1], [1, 1, 1, 1]);
  const r4 = f32([1, 4, 1], [0, 0, 0, 0]);
  const [y, yh, yc] = run('LSTM', 14, [x, w4, r4], {}, 3);
  const c1 = sig(1) * Math.tanh(1);
  close(y!, [1, 1, 1, 1], [sig(1) * Math.tanh(c1)]);
  close(yh!, [1, 1, 1], [sig(1) * Math.tanh(c1)]);
  close(yc!, [1, 1, 1], [c1]);
  const c0 = f32([1, 1, 1], [1]);
  const peep = run('LSTM', 14, [x, w4, r4, undefined, undefined, undefined, c0, f32([1, 3], [1, 0, 0])], {}, 3);
  const c2 = sig(1) * 1 + sig(2) * Math.tanh(1);
  close(peep[2]!, [1, 1, 1], [c2]);
  const coupled = run('LSTM', 14, [x, w4, r4, undefined, undefined, undefined, c0], { input_forget: int(1) }, 3);
  close(coupled[2]!, [1, 1, 1], [(1 - sig(1)) * 1 + sig(1) * Math.tanh(1)]);
});

test('RNN/GRU/LSTM infer: directions and layout', () => {
  const o = infer(
    'LSTM',
    14,
    [ti('float32', [5, 3, 4]), ti('float32', [2, 24, 4]), ti('float32', [2, 24, 6])],
    { hidden_size: int(6), direction: strA('bidirectional') },
    3,
  );
  assert.equal(o.map(shapeOf), ['5,2,3,6', '2,3,6', '2,3,6']);
  const b = infer(
    'GRU',
    14,
    [ti('float32', [3, 5, 4]), ti('float32', [1, 18, 4]), ti('float32', [1, 18, 6])],
    { layout: int(1) },
    2,
  );
  assert.equal(b.map(shapeOf), ['3,5,1,6', '3,1,6']);
  failsWith(
    () => infer('RNN', 14, [ti('int32', [1, 1, 1]), ti('int32', [1, 1, 1]), ti('int32', [1, 1, 1])]),
    'PLANC_E201',
    /float/,
  );
});

// ---- ai.onnx.ml and training ----

function runD(
  domain: string,
  op: string,
  opset: number,
  ins: (Tensor | undefined)[],
  attrs: Record<string, Attr> = {},
  nOut = 1,
): Tensor[] {
  const n = { ...node(op, ins.length, nOut, attrs), domain };
  const ctx = { ...makeOpContext(n, opset, 'PLANC_E202'), runSubgraph: () => [] } as EvalContext;
  const h = EXTRA_OPS.find(
    (x) => x.op === op && x.domain === domain && (x.since ?? 1) <= opset && opset < (x.until ?? Infinity),
  );
  if (!h) throw new Error(`no handler ${domain}.${op}`);
  return h.eval(ctx, ins);
}

test('ai.onnx.ml: LabelEncoder, Binarizer, ArrayFeatureExtractor, TreeEnsemble', () => {
  const ml = 'ai.onnx.ml';
  const le = runD(ml, 'LabelEncoder', 2, [i64([1, 5, 2])], {
    keys_int64s: ints([1, 2]),
    values_strings: strs(['one', 'two']),
  })[0]!;
  assert.equal(le.strings, ['one', '_Unused', 'two']);
  close(runD(ml, 'LabelEncoder', 1, [str([2], ['b', 'z'])], { classes_strings: strs(['a', 'b']) })[0]!, [2], [1, -1]);
  close(runD(ml, 'Binarizer', 1, [f32([3], [-1, 0.5, 2])], { threshold: flt(0.5) })[0]!, [3], [0, 0, 1]);
  close(runD(ml, 'ArrayFeatureExtractor', 1, [f32([3], [5, 6, 7]), i64([2, 0])])[0]!, [1, 2], [7, 5]);
  const tree = {
    nodes_splits: { kind: 'tensor', value: f32([1], [0.5]) } as Attr,
    nodes_featureids: ints([0]),
    nodes_modes: { kind: 'tensor', value: t('uint8', [1], [0]) } as Attr,
    nodes_truenodeids: ints([0]),
    nodes_falsenodeids: ints([1]),
    nodes_trueleafs: ints([1]),
    nodes_falseleafs: ints([1]),
    leaf_targetids: ints([0, 0]),
    leaf_weights: { kind: 'tensor', value: f32([2], [1, 2]) } as Attr,
    tree_roots: ints([0]),
    n_targets: int(1),
  };
  close(runD(ml, 'TreeEnsemble', 5, [f32([2, 1], [0, 1])], tree)[0]!, [2, 1], [1, 2]);
  close(runD(ml, 'TreeEnsemble', 5, [f32([1, 1], [0])], { ...tree, post_transform: int(2) })[0]!, [1, 1], [sig(1)]);
});

test('ai.onnx.preview.training: Momentum, Adagrad, Adam steps', () => {
  const tr = 'ai.onnx.preview.training';
  const r = f32([], [0.1]),
    t0 = s64(0);
  const [x, v] = runD(
    tr,
    'Momentum',
    1,
    [r, t0, f32([1], [1]), f32([1], [2]), f32([1], [0])],
    { alpha: flt(0.9), beta: flt(0.5), norm_coefficient: flt(0), mode: strA('standard') },
    2,
  );
  close(x!, [1], [0.8]);
  close(v!, [1], [2]);
  const [xa, ha] = runD(tr, 'Adagrad', 1, [r, t0, f32([1], [1]), f32([1], [2]), f32([1], [0])], {}, 2);
  close(xa!, [1], [0.9]);
  close(ha!, [1], [4]);
  const adam = runD(tr, 'Adam', 1, [r, t0, f32([1], [1]), f32([1], [2]), f32([1], [0]), f32([1], [0])], {}, 3);
  close(adam[0]!, [1], [1 - 0.1 * (0.2 / Math.sqrt(0.004))]);
  close(adam[1]!, [1], [0.2]);
  close(adam[2]!, [1], [0.004]);
});

test.run();
