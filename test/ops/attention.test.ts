// Unit tests for the attention operators (Attention, RotaryEmbedding): values, inferred shapes and errors.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { DType } from '../../compiler/dtype.ts';
import type { Attr, Node } from '../../compiler/ir.ts';
import { makeOpContext } from '../../model/ops/context.ts';
import { ATTENTION_OPS } from '../../model/ops/attention.ts';
import type { EvalContext, InferContext, InferInput, OpHandler } from '../../model/ops/types.ts';
import { dimStr, sym, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { failsWith } from '../helpers/expect-error.ts';

const E = Math.E;

function handler(op: string): OpHandler {
  const h = ATTENTION_OPS.find((x) => x.op === op);
  if (!h) throw new Error(`no handler ${op}`);
  return h;
}

function node(op: string, inputs: (string | undefined)[], outputs: string[], attrs: Record<string, Attr> = {}): Node {
  return { name: 'n0', op, domain: '', inputs: inputs.map((x) => x ?? ''), outputs, attrs, origin: [] };
}

function run(
  op: string,
  ins: (Tensor | undefined)[],
  outputs: string[],
  attrs: Record<string, Attr> = {},
  opset = 23,
): Tensor[] {
  const n = node(
    op,
    ins.map((t, i) => (t ? `in${i}` : undefined)),
    outputs,
    attrs,
  );
  const ctx = { ...makeOpContext(n, opset, 'PLANC_E202'), runSubgraph: () => [] } as EvalContext;
  return handler(op).eval(ctx, ins);
}

function infer(
  op: string,
  ins: (InferInput | undefined)[],
  outputs: string[],
  attrs: Record<string, Attr> = {},
  opset = 23,
) {
  const n = node(
    op,
    ins.map((t, i) => (t ? `in${i}` : undefined)),
    outputs,
    attrs,
  );
  const ctx = { ...makeOpContext(n, opset, 'PLANC_E201'), inferSubgraph: () => [] } as InferContext;
  return handler(op).infer(ctx, ins);
}

const f32 = (dims: number[], v: number[]) => Tensor.fromNumbers('float32', dims, v);
const int = (v: number): Attr => ({ kind: 'int', value: v });
const flt = (v: number): Attr => ({ kind: 'float', value: v });
const shape = (s: Dim[] | undefined) => (s ? s.map(dimStr).join(',') : '?');
const ti = (dtype: DType, s: Dim[]): InferInput => ({ dtype, shape: s });

function close(got: ArrayLike<number>, want: number[], tol = 1e-5): void {
  assert.is(got.length, want.length, 'length');
  for (let i = 0; i < want.length; i++) {
    if (Math.abs(got[i]! - want[i]!) > tol)
      assert.unreachable(`element ${i}: got ${got[i]}, want ${want[i]} (all: ${Array.from(got)})`);
  }
}

// ---- Attention values ----

test('Attention 4-D: softmax(QK^T*scale)V with explicit and default scale', () => {
  const q = f32([1, 1, 1, 2], [1, 0]),
    k = f32([1, 1, 2, 2], [1, 0, 0, 1]),
    v = f32([1, 1, 2, 1], [2, 4]);
  const [y1] = run('Attention', [q, k, v], ['y'], { scale: flt(1) });
  close(y1!.nums, [(2 * E + 4) / (E + 1)]);
  const [y2] = run('Attention', [q, k, v], ['y']);
  const p0 = 1 / (1 + Math.exp(-Math.SQRT1_2));
  close(y2!.nums, [2 * p0 + 4 * (1 - p0)]);
  assert.equal(y2!.dims, [1, 1, 1, 1]);
});

test('Attention causal masks keys after the query row', () => {
  const q = f32([1, 1, 2, 1], [1, 1]),
    k = f32([1, 1, 2, 1], [1, 2]),
    v = f32([1, 1, 2, 1], [10, 20]);
  const [y] = run('Attention', [q, k, v], ['y'], { scale: flt(1), is_causal: int(1) });
  close(y!.nums, [10, 10 / (1 + E) + (20 * E) / (1 + E)]);
});

test('Attention with past: present_* concatenated, causal offset by the past length', () => {
  const q = f32([1, 1, 1, 1], [1]),
    k = f32([1, 1, 1, 1], [1]),
    v = f32([1, 1, 1, 1], [7]);
  const pk = f32([1, 1, 1, 1], [0]),
    pv = f32([1, 1, 1, 1], [5]);
  const [y, presK, presV, qk] = run('Attention', [q, k, v, undefined, pk, pv], ['y', 'pk', 'pv', 'qk'], {
    scale: flt(1),
    is_causal: int(1),
  });
  close(y!.nums, [5 / (1 + E) + (7 * E) / (1 + E)]);
  assert.equal(presK!.dims, [1, 1, 2, 1]);
  close(presK!.nums, [0, 1]);
  close(presV!.nums, [5, 7]);
  close(qk!.nums, [0, 1]);
});

test('Attention bool mask: a fully masked row gives zeros', () => {
  const q = f32([1, 1, 2, 1], [1, 1]),
    k = f32([1, 1, 2, 1], [1, 2]),
    v = f32([1, 1, 2, 1], [10, 20]);
  const mask = Tensor.fromNumbers('bool', [2, 2], [1, 0, 0, 0]);
  const [y] = run('Attention', [q, k, v, mask], ['y'], { scale: flt(1) });
  close(y!.nums, [10, 0]);
});

test('Attention additive mask shorter than the keys is padded with -inf', () => {
  const q = f32([1, 1, 1, 1], [1]),
    k = f32([1, 1, 2, 1], [1, 2]),
    v = f32([1, 1, 2, 1], [10, 20]);
  const [y] = run('Attention', [q, k, v, f32([1, 1], [0.5])], ['y'], { scale: flt(1) });
  close(y!.nums, [10]);
});

test('Attention GQA: each kv head serves a contiguous group of query heads', () => {
  const q = f32([1, 4, 1, 1], [1, 1, -1, -1]),
    k = f32([1, 2, 2, 1], [1, 0, 1, 0]),
    v = f32([1, 2, 2, 1], [0, 1, 2, 3]);
  const [y] = run('Attention', [q, k, v], ['y'], { scale: flt(1) });
  const a = 1 / (1 + E); // softmax([1,0])[1] and softmax([-1,0])[0]
  close(y!.nums, [a, a, 2 * a + 3 * (1 - a), 2 * a + 3 * (1 - a)]);
});

test('Attention 3-D splits the hidden axis into heads and merges them back', () => {
  const q = f32([1, 1, 4], [1, 0, 0, 1]);
  const k = f32([1, 2, 4], [1, 0, 1, 0, 0, 1, 0, 1]);
  const v = f32([1, 2, 2], [10, 30, 20, 40]);
  const [y] = run('Attention', [q, k, v], ['y'], { scale: flt(1), q_num_heads: int(2), kv_num_heads: int(2) });
  assert.equal(y!.dims, [1, 1, 2]);
  close(y!.nums, [(10 * E + 20) / (1 + E), (30 + 40 * E) / (1 + E)]);
});

test('Attention qk_matmul_output modes 0..3 with softcap', () => {
  const q = f32([1, 1, 1, 1], [2]),
    k = f32([1, 1, 2, 1], [1, 0]),
    v = f32([1, 1, 2, 1], [0, 1]);
  const mask = f32([1, 2], [0, -1]);
  const out = (mode: number) =>
    run('Attention', [q, k, v, mask], ['y', '', '', 'qk'], {
      scale: flt(1),
      softcap: flt(1),
      qk_matmul_output_mode: int(mode),
    });
  const t2 = Math.tanh(2);
  close(out(0)[3]!.nums, [t2, 0]);
  close(out(1)[3]!.nums, [t2, 0]);
  close(out(2)[3]!.nums, [t2, -1]);
  const p1 = Math.exp(-1) / (Math.exp(t2) + Math.exp(-1));
  close(out(3)[3]!.nums, [1 - p1, p1]);
  close(out(3)[0]!.nums, [p1]);
});

test('Attention opset 24 nonpad_kv_seqlen masks padded keys and sets the causal frontier', () => {
  const q = f32([2, 1, 1, 1], [1, 1]),
    k = f32([2, 1, 3, 1], [0, 0, 0, 0, 0, 0]),
    v = f32([2, 1, 3, 1], [1, 2, 3, 4, 5, 6]);
  const lens = Tensor.fromNumbers('int64', [2], [2, 3]);
  const [y] = run('Attention', [q, k, v, undefined, undefined, undefined, lens], ['y'], {}, 24);
  close(y!.nums, [1.5, 5]);
  const [yc] = run('Attention', [q, k, v, undefined, undefined, undefined, lens], ['y'], { is_causal: int(1) }, 24);
  close(yc!.nums, [1.5, 5]);
  failsWith(
    () => run('Attention', [q, k, v, undefined, undefined, undefined, lens], ['y'], {}, 23),
    'PLANC_E202',
    'opset 24',
  );
});

test('Attention float16 output is rounded to float16', () => {
  const h = (dims: number[], v: number[]) => Tensor.fromNumbers('float16', dims, v);
  const [y] = run('Attention', [h([1, 1, 1, 1], [1]), h([1, 1, 2, 1], [1, 0]), h([1, 1, 2, 1], [0, 1])], ['y'], {
    scale: flt(1),
  });
  assert.is(y!.dtype, 'float16');
  close(y!.nums, [0.2689], 1e-3);
  assert.is(Tensor.fromNumbers('float16', [1], [y!.nums[0]!]).nums[0], y!.nums[0]);
});

// ---- Attention inference ----

test('Attention infer 4-D with past: present and qk shapes use past_len + kv_len', () => {
  const b = sym('b'),
    s = sym('s'),
    p = sym('p');
  const outs = infer(
    'Attention',
    [
      ti('float32', [b, 4, s, 8]),
      ti('float32', [b, 2, s, 8]),
      ti('float32', [b, 2, s, 6]),
      undefined,
      ti('float32', [b, 2, p, 8]),
      ti('float32', [b, 2, p, 6]),
    ],
    ['y', 'pk', 'pv', 'qk'],
  );
  assert.is(outs.length, 4);
  assert.is(shape(outs[0]!.shape), 'b,4,s,6');
  assert.is(shape(outs[1]!.shape), 'b,2,p+s,8');
  assert.is(shape(outs[2]!.shape), 'b,2,p+s,6');
  assert.is(shape(outs[3]!.shape), 'b,4,s,p+s');
  assert.is(outs[0]!.dtype, 'float32');
});

test('Attention infer 3-D: output hidden is q_num_heads * v head size', () => {
  const outs = infer(
    'Attention',
    [ti('float16', [2, 4, 72]), ti('float16', [2, 6, 24]), ti('float16', [2, 6, 30])],
    ['y', 'pk', 'pv'],
    { q_num_heads: int(9), kv_num_heads: int(3) },
  );
  assert.is(shape(outs[0]!.shape), '2,4,90');
  assert.is(shape(outs[1]!.shape), '2,3,6,8');
  assert.is(shape(outs[2]!.shape), '2,3,6,10');
  assert.is(outs[0]!.dtype, 'float16');
});

test('Attention errors', () => {
  const q = ti('float32', [1, 3, 2, 4]),
    k = ti('float32', [1, 2, 2, 4]);
  failsWith(() => infer('Attention', [q, k, k], ['y']), 'PLANC_E201', 'not a multiple');
  failsWith(
    () => infer('Attention', [ti('int32', [1, 1, 1, 1]), ti('int32', [1, 1, 1, 1]), ti('int32', [1, 1, 1, 1])], ['y']),
    'PLANC_E201',
    'float',
  );
  failsWith(
    () => infer('Attention', [ti('float32', [1, 2, 4]), ti('float32', [1, 2, 4]), ti('float32', [1, 2, 4])], ['y']),
    'PLANC_E201',
    'q_num_heads',
  );
  failsWith(
    () =>
      infer(
        'Attention',
        [ti('float32', [1, 1, 2, 4]), ti('float32', [1, 1, 3, 4]), ti('float32', [1, 1, 3, 4]), ti('float32', [2, 4])],
        ['y'],
      ),
    'PLANC_E201',
    'attn_mask',
  );
  failsWith(
    () =>
      infer(
        'Attention',
        [ti('float32', [1, 1, 2, 4]), ti('float32', [1, 1, 3, 4]), ti('float32', [1, 1, 3, 4]), ti('float32', [2, 5])],
        ['y'],
      ),
    'PLANC_E201',
    'exceeds',
  );
  const t = f32([1, 1, 1, 2], [1, 2]);
  failsWith(() => run('Attention', [t, f32([1, 1, 1, 3], [1, 2, 3]), t], ['y']), 'PLANC_E202', 'head sizes');
  failsWith(() => run('Attention', [t, t, t, undefined, f32([1, 1, 1, 2], [0, 0])], ['y']), 'PLANC_E202', 'together');
});

// ---- RotaryEmbedding ----

test('RotaryEmbedding rotates halves (default) or interleaved pairs', () => {
  const x = f32([1, 1, 1, 4], [1, 2, 3, 4]);
  const cos = f32([1, 1, 2], [0, 1]),
    sin = f32([1, 1, 2], [1, 0]);
  close(run('RotaryEmbedding', [x, cos, sin], ['y'])[0]!.nums, [-3, 2, 1, 4]);
  close(run('RotaryEmbedding', [x, cos, sin], ['y'], { interleaved: int(1) })[0]!.nums, [-2, 1, 3, 4]);
});

test('RotaryEmbedding with position_ids, partial rotary dim and 3-D input', () => {
  const x = f32([1, 1, 1, 4], [1, 2, 3, 4]);
  const cos = f32([3, 2], [9, 9, 9, 9, 0, 1]),
    sin = f32([3, 2], [9, 9, 9, 9, 1, 0]);
  const pos = Tensor.fromNumbers('int64', [1, 1], [2]);
  close(run('RotaryEmbedding', [x, cos, sin, pos], ['y'])[0]!.nums, [-3, 2, 1, 4]);
  const c1 = f32([1, 1, 1], [0]),
    s1 = f32([1, 1, 1], [1]);
  close(run('RotaryEmbedding', [x, c1, s1], ['y'], { rotary_embedding_dim: int(2) })[0]!.nums, [-2, 1, 3, 4]);
  const x3 = f32([1, 1, 4], [1, 2, 3, 4]);
  const [y3] = run('RotaryEmbedding', [x3, c1, s1], ['y'], { num_heads: int(2) });
  assert.equal(y3!.dims, [1, 1, 4]);
  close(y3!.nums, [-2, 1, -4, 3]);
});

test('RotaryEmbedding 4-D [batch, heads, seq, size] picks the cache row per sequence position', () => {
  const x = f32([1, 1, 2, 2], [1, 0, 1, 0]);
  const cos = f32([2, 1], [1, 0]),
    sin = f32([2, 1], [0, 1]);
  const pos = Tensor.fromNumbers('int64', [1, 2], [0, 1]);
  close(run('RotaryEmbedding', [x, cos, sin, pos], ['y'])[0]!.nums, [1, 0, 0, 1]);
});

test('RotaryEmbedding infer and errors', () => {
  const outs = infer(
    'RotaryEmbedding',
    [
      ti('float32', [sym('b'), 4, sym('s'), 8]),
      ti('float32', [50, 4]),
      ti('float32', [50, 4]),
      ti('int64', [sym('b'), sym('s')]),
    ],
    ['y'],
  );
  assert.is(shape(outs[0]!.shape), 'b,4,s,8');
  failsWith(
    () =>
      infer('RotaryEmbedding', [ti('float32', [1, 2, 8]), ti('float32', [1, 2, 4]), ti('float32', [1, 2, 4])], ['y']),
    'PLANC_E201',
    'num_heads',
  );
  failsWith(
    () =>
      infer(
        'RotaryEmbedding',
        [ti('float32', [1, 1, 2, 8]), ti('float16', [1, 2, 4]), ti('float32', [1, 2, 4])],
        ['y'],
      ),
    'PLANC_E201',
    'cos_cache',
  );
  const x = f32([1, 1, 1, 4], [1, 2, 3, 4]);
  const pos = Tensor.fromNumbers('int64', [1, 1], [5]);
  failsWith(
    () => run('RotaryEmbedding', [x, f32([3, 2], [0, 0, 0, 0, 0, 0]), f32([3, 2], [0, 0, 0, 0, 0, 0]), pos], ['y']),
    'PLANC_E202',
    'outside the cache',
  );
  failsWith(
    () => run('RotaryEmbedding', [x, f32([1, 1, 3], [0, 0, 0]), f32([1, 1, 3], [0, 0, 0])], ['y']),
    'PLANC_E202',
    'rotary_embedding_dim/2',
  );
});

// ---- LinearAttention ----

test('LinearAttention linear/gated/delta recurrences with present_state', () => {
  const q = f32([1, 2, 1], [1, 2]),
    k = f32([1, 2, 1], [3, 4]),
    v = f32([1, 2, 1], [5, 6]);
  const heads = { q_num_heads: int(1), kv_num_heads: int(1) };
  const [y, st] = run(
    'LinearAttention',
    [q, k, v],
    ['y', 's'],
    { ...heads, update_rule: { kind: 'string', value: 'linear' } },
    27,
  );
  close(y!.nums, [15, 78]);
  assert.equal(st!.dims, [1, 1, 1, 1]);
  close(st!.nums, [39]);
  const decay = f32([1, 2, 1], [0, Math.log(0.5)]);
  close(
    run(
      'LinearAttention',
      [q, k, v, undefined, decay],
      ['y'],
      { ...heads, update_rule: { kind: 'string', value: 'gated' } },
      27,
    )[0]!.nums,
    [15, 63],
  );
  const beta = f32([1, 2, 1], [1, 0.5]);
  const [yd, sd] = run(
    'LinearAttention',
    [q, k, v, undefined, undefined, beta],
    ['y', 's'],
    { ...heads, update_rule: { kind: 'string', value: 'delta' } },
    27,
  );
  close(yd!.nums, [15, -186]);
  close(sd!.nums, [-93]);
  const [yp] = run(
    'LinearAttention',
    [f32([1, 1, 1], [1]), f32([1, 1, 1], [1]), f32([1, 1, 1], [1]), f32([1, 1, 1, 1], [10])],
    ['y'],
    { ...heads, update_rule: { kind: 'string', value: 'linear' } },
    27,
  );
  close(yp!.nums, [11]);
});

test('LinearAttention GQA, inference and errors', () => {
  const attrs = { q_num_heads: int(2), kv_num_heads: int(1), update_rule: { kind: 'string', value: 'linear' } as Attr };
  close(
    run('LinearAttention', [f32([1, 1, 2], [1, -1]), f32([1, 1, 1], [2]), f32([1, 1, 1], [3])], ['y'], attrs, 27)[0]!
      .nums,
    [6, -6],
  );
  const outs = infer(
    'LinearAttention',
    [
      ti('float32', [sym('b'), sym('t'), 64]),
      ti('float32', [sym('b'), sym('t'), 32]),
      ti('float32', [sym('b'), sym('t'), 32]),
      undefined,
      ti('float32', [sym('b'), sym('t'), 32]),
      ti('float32', [sym('b'), sym('t'), 4]),
    ],
    ['y', 's'],
    { q_num_heads: int(8), kv_num_heads: int(4) },
    27,
  );
  assert.is(shape(outs[0]!.shape), 'b,t,64');
  assert.is(shape(outs[1]!.shape), 'b,4,8,8');
  const t = f32([1, 1, 1], [1]);
  failsWith(() => run('LinearAttention', [t, t, t, undefined, t], ['y'], attrs, 27), 'PLANC_E202', 'no decay');
  failsWith(
    () => run('LinearAttention', [t, t, t], ['y'], { q_num_heads: int(1), kv_num_heads: int(1) }, 27),
    'PLANC_E202',
    'needs the decay',
  );
  failsWith(
    () =>
      infer(
        'LinearAttention',
        [ti('float32', [1, 1, 1]), ti('float32', [1, 1, 1]), ti('float32', [1, 1, 1])],
        ['y'],
        { q_num_heads: int(3), kv_num_heads: int(2) },
        27,
      ),
    'PLANC_E201',
    'multiple',
  );
});

// ---- FlexAttention (ai.onnx.preview) ----

test('FlexAttention without graph attributes is scaled dot-product attention', () => {
  const h = ATTENTION_OPS.find((x) => x.op === 'FlexAttention')!;
  assert.is(h.domain, 'ai.onnx.preview');
  const n = (attrs: Record<string, Attr>): Node => ({
    name: 'n0',
    op: 'FlexAttention',
    domain: 'ai.onnx.preview',
    inputs: ['q', 'k', 'v'],
    outputs: ['y'],
    attrs,
    origin: [],
  });
  const ectx = (attrs: Record<string, Attr>) =>
    ({ ...makeOpContext(n(attrs), 1, 'PLANC_E202'), runSubgraph: () => [] }) as EvalContext;
  const q = f32([1, 1, 1, 2], [1, 0]),
    k = f32([1, 1, 2, 2], [1, 0, 0, 1]),
    v = f32([1, 1, 2, 1], [2, 4]);
  close(h.eval(ectx({ scale: flt(1) }), [q, k, v])[0]!.nums, [(2 * E + 4) / (E + 1)]);
  const ictx = { ...makeOpContext(n({}), 1, 'PLANC_E201'), inferSubgraph: () => [] } as InferContext;
  assert.is(
    shape(
      h.infer(ictx, [ti('float32', [2, 8, 4, 16]), ti('float32', [2, 2, 6, 16]), ti('float32', [2, 2, 6, 32])])[0]!
        .shape,
    ),
    '2,8,4,32',
  );
  const g = { name: 'g', inputs: [], outputs: [], nodes: [], values: new Map(), initializers: new Map() };
  failsWith(() => h.eval(ectx({ score_mod: { kind: 'graph', value: g } }), [q, k, v]), 'PLANC_E202', 'score_mod');
});

test.run();
