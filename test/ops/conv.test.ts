// Unit tests for the conv family (Conv, ConvTranspose, ConvInteger, MaxPool, AveragePool, LpPool, Global*).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DType } from '../../compiler/dtype.ts';
import type { Attr, Node } from '../../compiler/ir.ts';
import { makeOpContext } from '../../model/ops/context.ts';
import { CONV_OPS } from '../../model/ops/conv.ts';
import type { EvalContext, InferContext, InferInput, OpHandler } from '../../model/ops/types.ts';
import { dimStr, sym, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { failsWith } from '../helpers/expect-error.ts';

function handler(op: string): OpHandler {
  const h = CONV_OPS.find((x) => x.op === op);
  if (!h) throw new Error(`no handler ${op}`);
  return h;
}

function node(op: string, nIn: number, outputs: string[], attrs: Record<string, Attr>): Node {
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
  outputs = ['y'],
  opset = 19,
): Tensor[] {
  const ctx = {
    ...makeOpContext(node(op, ins.length, outputs, attrs), opset, 'PLANC_E202'),
    runSubgraph: () => [],
  } as EvalContext;
  return handler(op).eval(ctx, ins);
}

function infer(
  op: string,
  ins: (InferInput | undefined)[],
  attrs: Record<string, Attr> = {},
  outputs = ['y'],
  opset = 19,
) {
  const ctx = {
    ...makeOpContext(node(op, ins.length, outputs, attrs), opset, 'PLANC_E201'),
    inferSubgraph: () => [],
  } as InferContext;
  return handler(op).infer(ctx, ins);
}

const f32 = (dims: number[], v: number[]) => Tensor.fromNumbers('float32', dims, v);
const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
const ints = (v: number[]): Attr => ({ kind: 'ints', value: v });
const int = (v: number): Attr => ({ kind: 'int', value: v });
const str = (v: string): Attr => ({ kind: 'string', value: v });
const shape = (s: Dim[] | undefined) => (s ? s.map(dimStr).join(',') : '?');
const ti = (dtype: DType, s: Dim[]): InferInput => ({ dtype, shape: s });

function close(t: Tensor, dims: number[], want: number[], tol = 1e-5): void {
  assert.equal([...t.dims], dims, 'dims');
  assert.is(t.size, want.length, 'size');
  for (let i = 0; i < want.length; i++) {
    if (Math.abs(t.nums[i]! - want[i]!) > tol)
      assert.unreachable(`element ${i}: got ${t.nums[i]}, want ${want[i]} (all: ${Array.from(t.nums)})`);
  }
}

// ---- Conv ----

test('Conv 2-D: diagonal kernel, bias', () => {
  const x = f32([1, 1, 3, 3], range(9)),
    w = f32([1, 1, 2, 2], [1, 0, 0, 1]);
  close(run('Conv', [x, w])[0]!, [1, 1, 2, 2], [6, 8, 12, 14]);
  close(run('Conv', [x, w, f32([1], [10])])[0]!, [1, 1, 2, 2], [16, 18, 22, 24]);
});

test('Conv pads and strides', () => {
  const x = f32([1, 1, 3, 3], range(9)),
    w = f32([1, 1, 3, 3], new Array(9).fill(1));
  close(run('Conv', [x, w], { pads: ints([1, 1, 1, 1]), strides: ints([2, 2]) })[0]!, [1, 1, 2, 2], [12, 16, 24, 28]);
});

test('Conv auto_pad SAME_UPPER puts the odd pad at the end, SAME_LOWER at the start; VALID', () => {
  const x = f32([1, 1, 4], [1, 2, 3, 4]),
    w = f32([1, 1, 2], [1, 1]);
  close(run('Conv', [x, w], { auto_pad: str('SAME_UPPER') })[0]!, [1, 1, 4], [3, 5, 7, 4]);
  close(run('Conv', [x, w], { auto_pad: str('SAME_LOWER') })[0]!, [1, 1, 4], [1, 3, 5, 7]);
  close(run('Conv', [x, w], { auto_pad: str('VALID') })[0]!, [1, 1, 3], [3, 5, 7]);
});

test('Conv groups, dilations and 3-D', () => {
  close(
    run('Conv', [f32([1, 2, 1, 1], [2, 3]), f32([2, 1, 1, 1], [10, 100])], { group: int(2) })[0]!,
    [1, 2, 1, 1],
    [20, 300],
  );
  close(
    run('Conv', [f32([1, 1, 5], range(5)), f32([1, 1, 2], [1, 1])], { dilations: ints([2]) })[0]!,
    [1, 1, 3],
    [4, 6, 8],
  );
  close(
    run('Conv', [f32([1, 1, 2, 2, 2], range(8)), f32([1, 1, 2, 2, 2], new Array(8).fill(1))])[0]!,
    [1, 1, 1, 1, 1],
    [36],
  );
});

test('Conv float16 rounds its output', () => {
  const x = Tensor.fromNumbers('float16', [1, 1, 1], [1]),
    w = Tensor.fromNumbers('float16', [1, 1, 1], [0.1]);
  const [y] = run('Conv', [x, w]);
  assert.is(y!.dtype, 'float16');
  assert.is(y!.nums[0], Tensor.fromNumbers('float16', [1], [0.1]).nums[0]);
});

test('Conv infer: symbolic spatial dims, kernel from W', () => {
  const b = sym('b'),
    h = sym('h');
  const outs = infer('Conv', [ti('float32', [b, 3, h, 7]), ti('float32', [8, 3, 3, 3])], { pads: ints([1, 1, 1, 1]) });
  assert.is(shape(outs[0]!.shape), 'b,8,h,7');
  const s2 = infer('Conv', [ti('float32', [1, 3, 7, 8]), ti('float32', [4, 3, 3, 3])], { strides: ints([2, 2]) });
  assert.is(shape(s2[0]!.shape), '1,4,3,3');
});

test('Conv errors', () => {
  failsWith(() => infer('Conv', [ti('float32', [1, 4, 5, 5]), ti('float32', [2, 3, 3, 3])]), 'PLANC_E201', 'channels');
  failsWith(() => infer('Conv', [ti('int32', [1, 3, 5, 5]), ti('int32', [2, 3, 3, 3])]), 'PLANC_E201', 'float');
  failsWith(
    () => infer('Conv', [ti('float32', [1, 3, 5, 5]), ti('float32', [2, 3, 3, 3])], { strides: ints([1]) }),
    'PLANC_E201',
    'strides',
  );
  failsWith(
    () => run('Conv', [f32([1, 1, 2, 2], [1, 2, 3, 4]), f32([1, 1, 3, 3], new Array(9).fill(1))]),
    'PLANC_E202',
    'empty',
  );
  failsWith(
    () => run('Conv', [f32([1, 1, 2, 2], [1, 2, 3, 4]), f32([1, 1, 1, 1], [1]), f32([2], [0, 0])]),
    'PLANC_E202',
    'B must be',
  );
});

// ---- ConvTranspose ----

test('ConvTranspose 1-D: stride, pads, output_padding, output_shape, bias', () => {
  const x = f32([1, 1, 2], [1, 2]),
    w = f32([1, 1, 3], [1, 1, 1]);
  close(run('ConvTranspose', [x, w])[0]!, [1, 1, 4], [1, 3, 3, 2]);
  close(run('ConvTranspose', [x, w], { strides: ints([2]) })[0]!, [1, 1, 5], [1, 1, 3, 2, 2]);
  close(run('ConvTranspose', [x, w], { strides: ints([2]), pads: ints([1, 1]) })[0]!, [1, 1, 3], [1, 3, 2]);
  close(
    run('ConvTranspose', [x, w], { strides: ints([2]), output_padding: ints([1]) })[0]!,
    [1, 1, 6],
    [1, 1, 3, 2, 2, 0],
  );
  close(
    run('ConvTranspose', [x, w], { strides: ints([2]), output_shape: ints([6]) })[0]!,
    [1, 1, 6],
    [1, 1, 3, 2, 2, 0],
  );
  close(run('ConvTranspose', [x, w, f32([1], [1])])[0]!, [1, 1, 4], [2, 4, 4, 3]);
});

test('ConvTranspose auto_pad SAME and groups', () => {
  const x = f32([1, 1, 2], [1, 2]),
    w = f32([1, 1, 3], [1, 1, 1]);
  close(run('ConvTranspose', [x, w], { strides: ints([2]), auto_pad: str('SAME_UPPER') })[0]!, [1, 1, 4], [1, 1, 3, 2]);
  close(run('ConvTranspose', [x, w], { strides: ints([2]), auto_pad: str('SAME_LOWER') })[0]!, [1, 1, 4], [1, 3, 2, 2]);
  close(
    run('ConvTranspose', [f32([1, 2, 1], [1, 2]), f32([2, 1, 1], [3, 4])], { group: int(2) })[0]!,
    [1, 2, 1],
    [3, 8],
  );
  const outs = infer('ConvTranspose', [ti('float32', [sym('b'), 2, sym('t')]), ti('float32', [2, 3, 4])], {
    strides: ints([2]),
    pads: ints([1, 1]),
  });
  assert.is(shape(outs[0]!.shape), 'b,3,t*2');
  const fixed = infer('ConvTranspose', [ti('float32', [1, 1, 3, 3]), ti('float32', [1, 2, 3, 3])], {
    strides: ints([3, 2]),
    output_padding: ints([1, 1]),
  });
  assert.is(shape(fixed[0]!.shape), '1,2,10,8');
  failsWith(
    () => infer('ConvTranspose', [ti('float32', [1, 3, 4]), ti('float32', [2, 1, 3])]),
    'PLANC_E201',
    'channels',
  );
});

// ---- ConvInteger ----

test('ConvInteger subtracts zero points and returns int32', () => {
  const x = Tensor.fromNumbers('uint8', [1, 1, 2, 2], [2, 3, 4, 5]),
    w = Tensor.fromNumbers('int8', [1, 1, 1, 1], [3]);
  const [y] = run(
    'ConvInteger',
    [x, w, Tensor.fromNumbers('uint8', [], [1]), Tensor.fromNumbers('int8', [], [1])],
    {},
    ['y'],
    10,
  );
  assert.is(y!.dtype, 'int32');
  close(y!, [1, 1, 2, 2], [2, 4, 6, 8]);
  assert.is(
    infer('ConvInteger', [ti('uint8', [1, 1, 2, 2]), ti('int8', [1, 1, 1, 1])], {}, ['y'], 10)[0]!.dtype,
    'int32',
  );
  failsWith(
    () => infer('ConvInteger', [ti('float32', [1, 1, 2, 2]), ti('int8', [1, 1, 1, 1])], {}, ['y'], 10),
    'PLANC_E201',
    'int8 or uint8',
  );
});

// ---- pools ----

test('MaxPool with Indices in row-major and column-major order', () => {
  const x = f32([1, 1, 4, 4], range(16));
  const [y, idx] = run('MaxPool', [x], { kernel_shape: ints([2, 2]), strides: ints([2, 2]) }, ['y', 'i']);
  close(y!, [1, 1, 2, 2], [6, 8, 14, 16]);
  assert.is(idx!.dtype, 'int64');
  close(idx!, [1, 1, 2, 2], [5, 7, 13, 15]);
  const [, idxCol] = run('MaxPool', [x], { kernel_shape: ints([2, 2]), strides: ints([2, 2]), storage_order: int(1) }, [
    'y',
    'i',
  ]);
  close(idxCol!, [1, 1, 2, 2], [5, 13, 7, 15]);
  const [y2, idx2] = run('MaxPool', [f32([1, 2, 1, 2], [1, 5, 7, 3])], { kernel_shape: ints([1, 2]) }, ['y', 'i']);
  close(y2!, [1, 2, 1, 1], [5, 7]);
  close(idx2!, [1, 2, 1, 1], [1, 2]);
});

test('MaxPool ceil_mode keeps a partial last window but drops one starting in the end padding', () => {
  const x = f32([1, 1, 5], range(5));
  close(run('MaxPool', [x], { kernel_shape: ints([2]), strides: ints([2]) })[0]!, [1, 1, 2], [2, 4]);
  close(
    run('MaxPool', [x], { kernel_shape: ints([2]), strides: ints([2]), ceil_mode: int(1) })[0]!,
    [1, 1, 3],
    [2, 4, 5],
  );
  const x4 = f32([1, 1, 4], range(4));
  close(
    run('MaxPool', [x4], { kernel_shape: ints([3]), strides: ints([2]), pads: ints([0, 2]), ceil_mode: int(1) })[0]!,
    [1, 1, 2],
    [3, 4],
  );
  close(run('MaxPool', [x], { kernel_shape: ints([2]), dilations: ints([3]) })[0]!, [1, 1, 2], [4, 5]);
  const u8 = run('MaxPool', [Tensor.fromNumbers('uint8', [1, 1, 3], [7, 200, 3])], { kernel_shape: ints([2]) })[0]!;
  assert.is(u8.dtype, 'uint8');
  close(u8, [1, 1, 2], [200, 200]);
});

test('AveragePool count_include_pad, ceil_mode and SAME padding', () => {
  const x = f32([1, 1, 3], [1, 2, 3]);
  close(run('AveragePool', [x], { kernel_shape: ints([3]), pads: ints([1, 1]) })[0]!, [1, 1, 3], [1.5, 2, 2.5]);
  close(
    run('AveragePool', [x], { kernel_shape: ints([3]), pads: ints([1, 1]), count_include_pad: int(1) })[0]!,
    [1, 1, 3],
    [1, 2, 5 / 3],
  );
  const x5 = f32([1, 1, 5], range(5));
  close(
    run('AveragePool', [x5], {
      kernel_shape: ints([2]),
      strides: ints([2]),
      ceil_mode: int(1),
      count_include_pad: int(1),
    })[0]!,
    [1, 1, 3],
    [1.5, 3.5, 5],
  );
  close(
    run('AveragePool', [f32([1, 1, 4], [1, 2, 3, 4])], { kernel_shape: ints([2]), auto_pad: str('SAME_UPPER') })[0]!,
    [1, 1, 4],
    [1.5, 2.5, 3.5, 4],
  );
  close(
    run('AveragePool', [f32([1, 1, 4], [1, 2, 3, 4])], { kernel_shape: ints([2]), auto_pad: str('SAME_LOWER') })[0]!,
    [1, 1, 4],
    [1, 1.5, 2.5, 3.5],
  );
});

test('LpPool with integer and float p', () => {
  close(run('LpPool', [f32([1, 1, 2], [3, -4])], { kernel_shape: ints([2]) })[0]!, [1, 1, 1], [5]);
  close(run('LpPool', [f32([1, 1, 2], [3, -4])], { kernel_shape: ints([2]), p: int(1) })[0]!, [1, 1, 1], [7]);
  close(
    run('LpPool', [f32([1, 1, 2], [3, -4])], { kernel_shape: ints([2]), p: { kind: 'float', value: 2 } }, ['y'], 1)[0]!,
    [1, 1, 1],
    [5],
  );
});

test('Global pools reduce every spatial axis to 1', () => {
  const x = f32([1, 2, 2, 2], range(8));
  close(run('GlobalAveragePool', [x])[0]!, [1, 2, 1, 1], [2.5, 6.5]);
  close(run('GlobalMaxPool', [x])[0]!, [1, 2, 1, 1], [4, 8]);
  close(run('GlobalLpPool', [x])[0]!, [1, 2, 1, 1], [Math.sqrt(30), Math.sqrt(25 + 36 + 49 + 64)]);
  assert.is(shape(infer('GlobalAveragePool', [ti('float32', [sym('b'), 3, sym('h'), sym('w')])])[0]!.shape), 'b,3,1,1');
});

test('pool inference and errors', () => {
  const outs = infer(
    'MaxPool',
    [ti('float32', [sym('b'), 3, 8, 8])],
    { kernel_shape: ints([3, 3]), strides: ints([2, 2]), pads: ints([1, 1, 1, 1]) },
    ['y', 'i'],
  );
  assert.is(shape(outs[0]!.shape), 'b,3,4,4');
  assert.is(outs[1]!.dtype, 'int64');
  assert.is(
    shape(
      infer('AveragePool', [ti('float32', [1, 1, 7])], {
        kernel_shape: ints([2]),
        strides: ints([2]),
        ceil_mode: int(1),
      })[0]!.shape,
    ),
    '1,1,4',
  );
  failsWith(() => infer('MaxPool', [ti('float32', [1, 3, 8, 8])]), 'PLANC_E201', 'kernel_shape');
  failsWith(
    () => infer('AveragePool', [ti('int32', [1, 3, 8, 8])], { kernel_shape: ints([2, 2]) }),
    'PLANC_E201',
    'float',
  );
  failsWith(() => infer('MaxPool', [ti('float32', [3, 8])], { kernel_shape: ints([2]) }), 'PLANC_E201', 'rank');
  failsWith(
    () => run('MaxPool', [f32([1, 1, 2], [1, 2])], { kernel_shape: ints([2]), auto_pad: str('BOGUS') }),
    'PLANC_E202',
    'auto_pad',
  );
  failsWith(
    () => run('MaxPool', [f32([1, 1, 2], [1, 2])], { kernel_shape: ints([2]), storage_order: int(2) }),
    'PLANC_E202',
    'storage_order',
  );
});

// ---- QLinearConv, DeformConv, MaxUnpool, CausalConvWithState ----

test('QLinearConv requantizes with round-half-even and saturation', () => {
  const u8 = (dims: number[], v: number[]) => Tensor.fromNumbers('uint8', dims, v);
  const x = u8([1, 1, 1, 4], [10, 20, 40, 255]),
    w = u8([1, 1, 1, 1], [2]);
  const [y] = run(
    'QLinearConv',
    [x, f32([], [0.5]), u8([], [10]), w, f32([1], [2]), u8([1], [1]), f32([], [4]), u8([], [0])],
    {},
    ['y'],
    10,
  );
  assert.is(y!.dtype, 'uint8');
  close(y!, [1, 1, 1, 4], [0, 2, 8, 61]);
  const [y8] = run(
    'QLinearConv',
    [
      x,
      f32([], [0.5]),
      u8([], [10]),
      w,
      f32([1], [2]),
      u8([1], [1]),
      f32([], [4]),
      Tensor.fromNumbers('int8', [], [100]),
    ],
    {},
    ['y'],
    10,
  );
  assert.is(y8!.dtype, 'int8');
  close(y8!, [1, 1, 1, 4], [100, 102, 108, 127]);
});

test('DeformConv samples bilinearly at offset positions, scaled by the mask', () => {
  const x = f32([1, 1, 2, 2], [1, 2, 3, 4]),
    w = f32([1, 1, 1, 1], [1]);
  close(run('DeformConv', [x, w, f32([1, 2, 2, 2], new Array(8).fill(0))])[0]!, [1, 1, 2, 2], [1, 2, 3, 4]);
  const off = f32([1, 2, 2, 2], [0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0]);
  close(run('DeformConv', [x, w, off])[0]!, [1, 1, 2, 2], [2, 3, 1.5, 2]);
  close(
    run('DeformConv', [x, w, off, f32([1], [1]), f32([1, 1, 2, 2], [0.5, 0.5, 0.5, 0.5])])[0]!,
    [1, 1, 2, 2],
    [2, 2.5, 1.75, 2],
  );
  failsWith(() => run('DeformConv', [x, w, f32([1, 2, 1, 1], [0, 0])]), 'PLANC_E202', 'offset must be');
});

test('MaxUnpool scatters by index and pads to output_shape', () => {
  const x = f32([1, 1, 1, 2], [5, 6]),
    i = Tensor.fromNumbers('int64', [1, 1, 1, 2], [1, 2]);
  const attrs = { kernel_shape: ints([1, 2]), strides: ints([1, 2]) };
  close(run('MaxUnpool', [x, i], attrs, ['y'], 11)[0]!, [1, 1, 1, 4], [0, 5, 6, 0]);
  close(
    run('MaxUnpool', [x, i, Tensor.fromNumbers('int64', [4], [1, 1, 2, 5])], attrs, ['y'], 11)[0]!,
    [1, 1, 2, 5],
    [0, 5, 6, 0, 0, 0, 0, 0, 0, 0],
  );
  assert.is(
    shape(infer('MaxUnpool', [ti('float32', [1, 1, 1, 2]), ti('int64', [1, 1, 1, 2])], attrs, ['y'], 11)[0]!.shape),
    '1,1,1,4',
  );
  failsWith(
    () => run('MaxUnpool', [x, Tensor.fromNumbers('int64', [1, 1, 1, 2], [1, 9])], attrs, ['y'], 11),
    'PLANC_E202',
    'outside',
  );
});

test('CausalConvWithState: left state padding, present state, silu', () => {
  const x = f32([1, 1, 3], [1, 2, 3]),
    w = f32([1, 1, 2], [1, 10]);
  const [y, st] = run('CausalConvWithState', [x, w], {}, ['y', 's'], 27);
  close(y!, [1, 1, 3], [10, 21, 32]);
  close(st!, [1, 1, 1], [3]);
  close(
    run('CausalConvWithState', [x, w, f32([1], [1]), f32([1, 1, 1], [5])], {}, ['y', 's'], 27)[0]!,
    [1, 1, 3],
    [16, 22, 33],
  );
  const silu = (v: number) => v / (1 + Math.exp(-v));
  close(
    run('CausalConvWithState', [x, w], { activation: str('silu') }, ['y', 's'], 27)[0]!,
    [1, 1, 3],
    [silu(10), silu(21), silu(32)],
  );
  const outs = infer(
    'CausalConvWithState',
    [ti('float32', [sym('b'), 4, sym('t')]), ti('float32', [4, 1, 4])],
    {},
    ['y', 's'],
    27,
  );
  assert.is(shape(outs[1]!.shape), 'b,4,3');
  failsWith(
    () => run('CausalConvWithState', [x, w], { activation: str('gelu') }, ['y'], 27),
    'PLANC_E202',
    'activation',
  );
});

test.run();
