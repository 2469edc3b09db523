// Fusion rules on what TorchScript / optimum exports write: golden IR before/after fuse-matmul-epilogue (biases aliased
// through Identity, swish as x·Sigmoid(x), gelu with Erf in two associations, gelu's tanh approximation as
// NewGELUActivation and torch's decomposition write it, with onnxruntime as the oracle), fuse-layernorm (T5's RMS norm with Casts
// and Div(1, Sqrt)) and fuse-project-topk (a scaled hidden state, a [1, V] bias), and the fused models computing what
// the unfused ones do (reference evaluator).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import { importOnnxFile } from '../model/onnx/import-model.ts';
import type { OnnxTypes } from '../model/onnx/proto.ts';
import { printModel } from '../model/printer.ts';
import { Tensor } from '../compiler/tensor.ts';
import { FUSE_LAYERNORM } from '../passes/fuse-layernorm.ts';
import { FUSE_MATMUL_EPILOGUE } from '../passes/fuse-matmul-epilogue.ts';
import { FUSE_PROJECT_TOPK } from '../passes/fuse-project-topk.ts';
import type { Pass } from '../passes/pass.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit, type ModelSpec, type NodeSpec } from './helpers/onnx-build.ts';
import { ort, relErr, runOrt } from './helpers/ort.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { fromRt, toRt } from './reference/rt-tensors.ts';
import { NEEDS_NATIVE, skipPart } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-fusion-patterns-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.7 + seed) * 0.5);

/** A Constant node as exports write them (a float32 scalar, or an int64 vector). */
function constant(out: string, v: number | number[]): NodeSpec {
  const t: OnnxTypes.ITensorProto =
    typeof v === 'number'
      ? { dims: [], dataType: 1, rawData: new Uint8Array(Float32Array.from([v]).buffer) }
      : { dims: [v.length], dataType: 7, rawData: new Uint8Array(BigInt64Array.from(v, BigInt).buffer) };
  return { op: 'Constant', inputs: [], outputs: [out], name: out, attrs: [{ name: 'value', type: 4, t }] };
}

function load(name: string, spec: ModelSpec): Model {
  const p = path.join(tmp, `${name}.onnx`);
  fs.writeFileSync(p, buildModel({ opset: 18, ...spec }));
  const m = importOnnxFile(p);
  inferModel(m);
  return m;
}

/** Golden IR before and after one pass; returns the fused model and the declines it explained. */
function golden(name: string, m: Model, pass: Pass, topk?: number): { f: Model; why: string[] } {
  matchGolden(`${name}.before.txt`, printModel(m));
  const why: string[] = [];
  const f = pass.run(m, { topk, explain: (_p, node, w) => why.push(`${node}: ${w}`) });
  inferModel(f);
  matchGolden(`${name}.after.txt`, printModel(f));
  return { f, why };
}

const planc = (m: Model) => m.graphs.get('main')!.nodes.filter((n) => n.domain === 'planc');
const close = (a: Tensor, b: Tensor, tol: number) =>
  a.nums.forEach((v, i) => assert.ok(Math.abs(v - b.nums[i]!) < tol, `element ${i}: ${v} vs ${b.nums[i]}`));

/**
 * Three FFNs on x [batch, len, 4]: swish (bias through an Identity, Add(bias, ·)) then + residual; gelu written
 * (h · (1 + Erf(h / √2))) · ½; gelu written (½ · h) · (Erf(h · 1/√2) + 1). `leak`: the last pre-activation is also
 * an output, so its gelu cannot fuse.
 */
function ffnExport(leak: boolean): Model {
  const mm = (a: string, w: string, out: string) => ({ op: 'MatMul', inputs: [a, w], outputs: [out], name: out });
  const op = (o: string, inputs: string[], out: string) => ({ op: o, inputs, outputs: [out], name: out });
  return load(`ffn-export-${leak}`, {
    inputs: [['x', 'float32', ['batch', 'len', 4]]],
    outputs: [
      ['y', 'float32', ['batch', 'len', 4]],
      ['z', 'float32', ['batch', 'len', 4]],
      ...(leak ? [['h5', 'float32', ['batch', 'len', 8]] as ModelSpec['inputs'][0]] : []),
    ],
    initializers: [
      floatInit('w1', [4, 8], vals(32, 1)),
      floatInit('b1', [8], vals(8, 2)),
      floatInit('w2', [8, 4], vals(32, 3)),
      floatInit('b2', [4], vals(4, 4)),
    ],
    nodes: [
      op('Identity', ['b1'], 'b1_alias'),
      mm('x', 'w1', 'a1'),
      op('Add', ['b1_alias', 'a1'], 'h1'),
      op('Sigmoid', ['h1'], 's1'),
      op('Mul', ['h1', 's1'], 'g1'),
      mm('g1', 'w2', 'a2'),
      op('Add', ['a2', 'b2'], 'h2'),
      op('Add', ['x', 'h2'], 'r2'),
      mm('r2', 'w1', 'a3'),
      op('Add', ['a3', 'b1'], 'h3'),
      constant('sqrt2', Math.SQRT2),
      op('Div', ['h3', 'sqrt2'], 'd3'),
      op('Erf', ['d3'], 'e3'),
      constant('one', 1),
      op('Add', ['e3', 'one'], 'p3'),
      op('Mul', ['h3', 'p3'], 'm3'),
      constant('half', 0.5),
      op('Mul', ['m3', 'half'], 'g3'),
      mm('g3', 'w2', 'a4'),
      op('Add', ['b2', 'a4'], 'y'),
      mm('y', 'w1', 'a5'),
      op('Add', ['a5', 'b1'], 'h5'),
      constant('half_b', 0.5),
      op('Mul', ['half_b', 'h5'], 'q5'),
      constant('inv_sqrt2', Math.SQRT1_2),
      op('Mul', ['h5', 'inv_sqrt2'], 'd5'),
      op('Erf', ['d5'], 'e5'),
      constant('one_b', 1),
      op('Add', ['one_b', 'e5'], 'p5'),
      op('Mul', ['q5', 'p5'], 'g5'),
      mm('g5', 'w2', 'a6'),
      op('Add', ['a6', 'b2'], 'z'),
    ],
  });
}

test('fuse-matmul-epilogue on export patterns: Identity biases, swish, gelu via Erf in two associations', () => {
  const m = ffnExport(false);
  const { f, why } = golden('fuse-matmul-epilogue.export', m, FUSE_MATMUL_EPILOGUE);
  assert.equal(why, []);
  assert.equal(
    planc(f).map(
      (n) =>
        `${n.attrs.activation?.kind === 'string' ? n.attrs.activation.value : ''} ${n.inputs.filter((x) => x).length}`,
    ),
    ['silu 3', 'none 4', 'gelu 3', 'none 3', 'gelu 3', 'none 3'],
  );
  assert.not.ok(
    f.graphs.get('main')!.nodes.some((n) => ['Erf', 'Sigmoid', 'Mul', 'Div', 'Add'].includes(n.op)),
    'every activation and Add fused',
  );
  const x = Tensor.fromNumbers(
    'float32',
    [2, 3, 4],
    vals(24, 9).map((v) => v * 3),
  );
  const [a, b] = [evaluate(m, 'main', { x }), evaluate(f, 'main', { x })];
  close(b.y!, a.y!, 1e-5);
  close(b.z!, a.z!, 1e-5);
});

test('fuse-matmul-epilogue: a written-out gelu whose input is read elsewhere stays, explained', () => {
  const why: string[] = [];
  const f = FUSE_MATMUL_EPILOGUE.run(ffnExport(true), { explain: (_p, node, w) => why.push(`${node}: ${w}`) });
  assert.equal(why, ['a5: its gelu has parts read outside it']);
  assert.is(f.graphs.get('main')!.nodes.filter((n) => n.op === 'Erf').length, 1);
  assert.is(planc(f).length, 6, 'a5 still takes its bias');
});

/**
 * gelu's tanh approximation ½x(1 + Tanh(√(2/π)(x + 0.044715x³))) in two FFNs on x [batch, len, 4]. First T5 v1.1's
 * gated-gelu: NewGELUActivation on wi_0 (no bias), Pow(x, 3), Constant nodes, times wi_1, wo + residual. Then torch's
 * own decomposition of gelu(approximate='tanh') after a biased MatMul: x·(x·x), constants as initializers (κ through
 * an Identity), sums and products the other way round, then w2 + b2; its √(2/π) is `beta`.
 */
function geluTanhExport(name: string, beta: number): Model {
  const op = (o: string, inputs: string[], out: string) => ({ op: o, inputs, outputs: [out], name: out });
  return load(name, {
    inputs: [['x', 'float32', ['batch', 'len', 4]]],
    outputs: [
      ['y', 'float32', ['batch', 'len', 4]],
      ['z', 'float32', ['batch', 'len', 4]],
    ],
    initializers: [
      floatInit('wi0', [4, 8], vals(32, 31)),
      floatInit('wi1', [4, 8], vals(32, 32)),
      floatInit('wo', [8, 4], vals(32, 33)),
      floatInit('w1', [4, 8], vals(32, 34)),
      floatInit('b1', [8], vals(8, 35)),
      floatInit('w2', [8, 4], vals(32, 36)),
      floatInit('b2', [4], vals(4, 38)),
      floatInit('kappa', [], [0.044715]),
      floatInit('beta', [], [beta]),
      floatInit('one', [], [1]),
      floatInit('half', [], [0.5]),
    ],
    nodes: [
      op('MatMul', ['x', 'wi0'], 'a1'),
      constant('c_half', 0.5),
      op('Mul', ['a1', 'c_half'], 'ha1'),
      constant('c_three', 3),
      op('Pow', ['a1', 'c_three'], 'cube1'),
      constant('c_kappa', 0.044715),
      op('Mul', ['cube1', 'c_kappa'], 'k1'),
      op('Add', ['a1', 'k1'], 's1'),
      constant('c_beta', Math.sqrt(2 / Math.PI)),
      op('Mul', ['s1', 'c_beta'], 'u1'),
      op('Tanh', ['u1'], 't1'),
      constant('c_one', 1),
      op('Add', ['t1', 'c_one'], 'p1'),
      op('Mul', ['ha1', 'p1'], 'g1'),
      op('MatMul', ['x', 'wi1'], 'lin1'),
      op('Mul', ['g1', 'lin1'], 'gl1'),
      op('MatMul', ['gl1', 'wo'], 'o1'),
      op('Add', ['x', 'o1'], 'y'),
      op('MatMul', ['y', 'w1'], 'a2'),
      op('Add', ['b1', 'a2'], 'h2'),
      op('Mul', ['h2', 'h2'], 'sq2'),
      op('Mul', ['h2', 'sq2'], 'cube2'),
      op('Identity', ['kappa'], 'kappa_alias'),
      op('Mul', ['kappa_alias', 'cube2'], 'k2'),
      op('Add', ['k2', 'h2'], 's2'),
      op('Mul', ['beta', 's2'], 'u2'),
      op('Tanh', ['u2'], 't2'),
      op('Add', ['one', 't2'], 'p2'),
      op('Mul', ['h2', 'p2'], 'm2'),
      op('Mul', ['half', 'm2'], 'g2'),
      op('MatMul', ['g2', 'w2'], 'a3'),
      op('Add', ['a3', 'b2'], 'z'),
    ],
  });
}

const activations = (m: Model) =>
  planc(m).map(
    (n) =>
      `${n.attrs.activation?.kind === 'string' ? n.attrs.activation.value : ''} ${n.inputs.filter((x) => x).length}`,
  );

test('fuse-matmul-epilogue: gelu tanh approximation (NewGELU with Pow and no bias, torch decomposition with x·x·x) → gelu_tanh', async () => {
  const m = geluTanhExport('gelu-tanh-export', Math.sqrt(2 / Math.PI));
  const { f, why } = golden('fuse-matmul-epilogue.gelu-tanh', m, FUSE_MATMUL_EPILOGUE);
  assert.equal(why, ['lin1: no bias, activation or residual follows it']);
  assert.equal(activations(f), ['gelu_tanh 2', 'none 3', 'gelu_tanh 3', 'none 3']);
  assert.not.ok(
    f.graphs.get('main')!.nodes.some((n) => ['Tanh', 'Pow', 'Add'].includes(n.op)),
    'both activations fused',
  );
  // The fused model (reference evaluator, native CPU plan) computes what onnxruntime computes on the unfused export.
  const x = Tensor.fromNumbers(
    'float32',
    [2, 3, 4],
    vals(24, 37).map((v) => v * 4),
  );
  const session = await ort.InferenceSession.create(path.join(tmp, 'gelu-tanh-export.onnx'));
  const want = await runOrt(session, { x });
  await session.release();
  const got: Record<string, Record<string, Tensor>> = { evaluator: evaluate(f, 'main', { x }) };
  if (nativeAvailable()) {
    const built = buildPlan(f, { target: 'cpu', maxBatch: 2, maxSrcLen: 8, maxTgtLen: 8 });
    const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'gelu-tanh.plan');
    try {
      got.native = Object.fromEntries(
        Object.entries(plan.runSync('main', { x: toRt(x) })).map(([k, t]) => [k, fromRt(t)]),
      );
    } finally {
      plan.close();
    }
  } else skipPart(NEEDS_NATIVE, 'the native half of the gelu-tanh test');
  for (const [by, out] of Object.entries(got)) {
    for (const k of ['y', 'z'])
      assert.ok(relErr(out[k]!, want[k]!) < 1e-5, `${by} ${k}: relative error ${relErr(out[k]!, want[k]!)}`);
  }
});

test('fuse-matmul-epilogue: a tanh gelu with another √(2/π) stays, explained', () => {
  const why: string[] = [];
  const f = FUSE_MATMUL_EPILOGUE.run(geluTanhExport('gelu-tanh-rounded', 0.7978), {
    explain: (_p, node, w) => why.push(`${node}: ${w}`),
  });
  assert.equal(why, [
    'lin1: no bias, activation or residual follows it',
    'a2: its Tanh argument is 0.7978·x + 0.03567363·x³, not 0.7978846·x + 0.03567741·x³ (gelu_tanh)',
  ]);
  assert.equal(activations(f), ['gelu_tanh 2', 'none 3', 'none 3', 'none 3']);
  assert.is(f.graphs.get('main')!.nodes.filter((n) => n.op === 'Tanh').length, 1);
});

test("fuse-layernorm on T5's RMS norm: Casts around it, Div(1, Sqrt), axes as a Constant, weight through an Identity", () => {
  const op = (o: string, inputs: string[], out: string, attrs?: OnnxTypes.IAttributeProto[]) => ({
    op: o,
    inputs,
    outputs: [out],
    name: out,
    attrs,
  });
  const cast = [{ name: 'to', type: 2, i: 1 }];
  const m = load('t5-rms', {
    inputs: [['h', 'float32', ['batch', 6]]],
    outputs: [['y', 'float32', ['batch', 6]]],
    initializers: [floatInit('w0', [6], vals(6, 5))],
    nodes: [
      op('Identity', ['w0'], 'w'),
      op('Cast', ['h'], 'c', cast),
      constant('two', 2),
      op('Pow', ['c', 'two'], 'p'),
      constant('axes', [-1]),
      op('ReduceMean', ['p', 'axes'], 'ms'),
      constant('eps', 1e-6),
      op('Add', ['ms', 'eps'], 'a'),
      op('Sqrt', ['a'], 's'),
      constant('one', 1),
      op('Div', ['one', 's'], 'r'),
      op('Mul', ['c', 'r'], 'n'),
      op('Cast', ['n'], 'nc', cast),
      op('Mul', ['w', 'nc'], 'y'),
    ],
  });
  const { f, why } = golden('fuse-layernorm.t5', m, FUSE_LAYERNORM);
  assert.equal(why, []);
  const g = f.graphs.get('main')!;
  assert.equal(
    g.nodes.map((n) => n.op),
    ['Identity', 'RMSNorm'],
  );
  assert.equal(g.nodes[1]!.inputs, ['h', 'w']);
  const h = Tensor.fromNumbers(
    'float32',
    [3, 6],
    vals(18, 11).map((v) => v * 4 + 1),
  );
  close(evaluate(f, 'main', { h }).y!, evaluate(m, 'main', { h }).y!, 1e-5);
});

test('fuse-project-topk: a scaled hidden state (T5) and a [1, V] final_logits_bias (Marian, BART)', () => {
  const m = load('scaled-logits', {
    inputs: [['x', 'float32', ['batch', 'len', 4]]],
    outputs: [['logits', 'float32', ['batch', 'len', 10]]],
    initializers: [
      floatInit(
        'w',
        [4, 10],
        vals(40, 21).map((v) => v * 3),
      ),
      floatInit('final_logits_bias', [1, 10], vals(10, 22)),
    ],
    nodes: [
      constant('scale', 0.5),
      { op: 'Mul', inputs: ['x', 'scale'], outputs: ['xs'], name: 'rescale' },
      { op: 'MatMul', inputs: ['xs', 'w'], outputs: ['mm'], name: 'lm_head' },
      { op: 'Add', inputs: ['mm', 'final_logits_bias'], outputs: ['logits'], name: 'bias' },
    ],
  });
  const { f, why } = golden('fuse-project-topk.export', m, FUSE_PROJECT_TOPK, 3);
  assert.equal(why, []);
  const node = planc(f)[0]!;
  assert.equal([node.op, node.origin], ['ProjectTopK', ['lm_head', 'bias']]);
  const x = Tensor.fromNumbers(
    'float32',
    [2, 3, 4],
    vals(24, 25).map((v) => v * 2),
  );
  const logits = evaluate(m, 'main', { x }).logits!;
  const got = evaluate(f, 'main', { x });
  for (let r = 0; r < 6; r++) {
    const row = Array.from(logits.nums.slice(r * 10, r * 10 + 10), Number);
    const lse = Math.log(row.reduce((s, v) => s + Math.exp(v), 0));
    const best = row
      .map((v, j) => [v, j] as const)
      .sort((p, q) => q[0] - p[0])
      .slice(0, 3);
    best.forEach(([v, j], t) => {
      assert.is(Number(got.topk_ids!.nums[r * 3 + t]), j);
      assert.ok(Math.abs(got.topk_logprobs!.nums[r * 3 + t]! - (v - lse)) < 1e-5);
    });
  }
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test.run();
