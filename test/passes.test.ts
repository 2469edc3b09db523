// Passes: golden IR before/after each pass, declines explained, and fused models computing what unfused ones do.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import { importOnnxFile } from '../model/onnx/import-model.ts';
import { printModel } from '../model/printer.ts';
import { dimStr } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { FUSE_LAYERNORM } from '../passes/fuse-layernorm.ts';
import { FUSE_MATMUL_EPILOGUE } from '../passes/fuse-matmul-epilogue.ts';
import { FUSE_PROJECT_TOPK } from '../passes/fuse-project-topk.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit } from './helpers/onnx-build.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-passes-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.7 + seed) * 0.5);

/** A transformer FFN block: x → MatMul W1 + b1 → Relu → MatMul W2 + b2 → + x, plus a MatMul that must not fuse. */
function ffnModel(): string {
  const bytes = buildModel({
    inputs: [['x', 'float32', ['batch', 'len', 4]]],
    outputs: [
      ['y', 'float32', ['batch', 'len', 4]],
      ['z', 'float32', ['batch', 'len', 'len']],
    ],
    initializers: [
      floatInit('w1', [4, 8], vals(32, 1)),
      floatInit('b1', [8], vals(8, 2)),
      floatInit('w2', [8, 4], vals(32, 3)),
      floatInit('b2', [4], vals(4, 4)),
    ],
    nodes: [
      { op: 'MatMul', inputs: ['x', 'w1'], outputs: ['h1'], name: 'ffn_w1' },
      { op: 'Add', inputs: ['h1', 'b1'], outputs: ['h2'], name: 'ffn_b1' },
      { op: 'Relu', inputs: ['h2'], outputs: ['h3'], name: 'ffn_relu' },
      { op: 'MatMul', inputs: ['h3', 'w2'], outputs: ['h4'], name: 'ffn_w2' },
      { op: 'Add', inputs: ['b2', 'h4'], outputs: ['h5'], name: 'ffn_b2' },
      { op: 'Add', inputs: ['h5', 'x'], outputs: ['y'], name: 'residual' },
      {
        op: 'Transpose',
        inputs: ['x'],
        outputs: ['xt'],
        name: 'xt',
        attrs: [{ name: 'perm', type: 7, ints: [0, 2, 1] }],
      },
      { op: 'MatMul', inputs: ['x', 'xt'], outputs: ['z'], name: 'scores' },
    ],
  });
  const p = path.join(tmp, 'ffn.onnx');
  fs.writeFileSync(p, bytes);
  return p;
}

test('fuse-matmul-epilogue: golden IR before and after', () => {
  const m = importOnnxFile(ffnModel());
  inferModel(m);
  matchGolden('fuse-matmul-epilogue.before.txt', printModel(m));
  const why: string[] = [];
  const f = FUSE_MATMUL_EPILOGUE.run(m, { explain: (_p, node, w) => why.push(`${node}: ${w}`) });
  inferModel(f);
  matchGolden('fuse-matmul-epilogue.after.txt', printModel(f));
  assert.equal(why, ['scores: the weight is not a constant 2-D tensor']);
  const fused = f.graphs.get('main')!.nodes.filter((n) => n.op === 'FusedMatMul');
  assert.is(fused.length, 2);
  assert.equal(fused[1]!.origin, ['ffn_w2', 'ffn_b2', 'residual']);
  assert.is(m.graphs.get('main')!.nodes.length, 8, 'the input model is unchanged');
});

test('fused and unfused models give the same outputs (reference evaluator)', () => {
  const m = importOnnxFile(ffnModel());
  const f = runPipeline(m);
  const x = Tensor.fromNumbers('float32', [2, 3, 4], vals(24, 9));
  const a = evaluate(m, 'main', { x });
  const b = evaluate(f, 'main', { x });
  assert.equal(Array.from(b.y!.nums), Array.from(a.y!.nums));
  assert.equal(Array.from(b.z!.nums), Array.from(a.z!.nums));
});

/** A PyTorch-style decomposed layer norm followed by a T5-style RMS norm, and a mean that must not fuse. */
function normsModel(): string {
  const f = (name: string, v: number) => ({
    name,
    dims: [],
    dataType: 1,
    rawData: new Uint8Array(Float32Array.from([v]).buffer),
  });
  const bytes = buildModel({
    inputs: [['x', 'float32', ['batch', 6]]],
    outputs: [
      ['y', 'float32', ['batch', 6]],
      ['m', 'float32', ['batch', 1]],
    ],
    initializers: [
      floatInit('gamma', [6], vals(6, 5)),
      floatInit('beta', [6], vals(6, 6)),
      floatInit('g2', [6], vals(6, 7)),
      f('two', 2),
      f('eps', 1e-5),
      f('eps2', 1e-6),
    ],
    nodes: [
      {
        op: 'ReduceMean',
        inputs: ['x'],
        outputs: ['mu'],
        name: 'ln_mean',
        attrs: [{ name: 'axes', type: 7, ints: [-1] }],
      },
      { op: 'Sub', inputs: ['x', 'mu'], outputs: ['d'], name: 'ln_sub' },
      { op: 'Pow', inputs: ['d', 'two'], outputs: ['d2'], name: 'ln_pow' },
      {
        op: 'ReduceMean',
        inputs: ['d2'],
        outputs: ['var'],
        name: 'ln_var',
        attrs: [{ name: 'axes', type: 7, ints: [-1] }],
      },
      { op: 'Add', inputs: ['var', 'eps'], outputs: ['ve'], name: 'ln_eps' },
      { op: 'Sqrt', inputs: ['ve'], outputs: ['sd'], name: 'ln_sqrt' },
      { op: 'Div', inputs: ['d', 'sd'], outputs: ['n'], name: 'ln_div' },
      { op: 'Mul', inputs: ['n', 'gamma'], outputs: ['s'], name: 'ln_scale' },
      { op: 'Add', inputs: ['s', 'beta'], outputs: ['ln'], name: 'ln_shift' },
      { op: 'Pow', inputs: ['ln', 'two'], outputs: ['q'], name: 'rms_pow' },
      {
        op: 'ReduceMean',
        inputs: ['q'],
        outputs: ['qm'],
        name: 'rms_mean',
        attrs: [{ name: 'axes', type: 7, ints: [-1] }],
      },
      { op: 'Add', inputs: ['qm', 'eps2'], outputs: ['qe'], name: 'rms_eps' },
      { op: 'Sqrt', inputs: ['qe'], outputs: ['rs'], name: 'rms_sqrt' },
      { op: 'Reciprocal', inputs: ['rs'], outputs: ['inv'], name: 'rms_inv' },
      { op: 'Mul', inputs: ['ln', 'inv'], outputs: ['r'], name: 'rms_mul' },
      { op: 'Mul', inputs: ['r', 'g2'], outputs: ['y'], name: 'rms_scale' },
      {
        op: 'ReduceMean',
        inputs: ['x'],
        outputs: ['m'],
        name: 'plain_mean',
        attrs: [{ name: 'axes', type: 7, ints: [-1] }],
      },
    ],
  });
  const p = path.join(tmp, 'norms.onnx');
  fs.writeFileSync(p, bytes);
  return p;
}

test('fuse-layernorm: golden IR before and after; same outputs within float32 rounding', () => {
  const m = importOnnxFile(normsModel());
  inferModel(m);
  matchGolden('fuse-layernorm.before.txt', printModel(m));
  const f = FUSE_LAYERNORM.run(m, {});
  inferModel(f);
  matchGolden('fuse-layernorm.after.txt', printModel(f));
  const ops = f.graphs.get('main')!.nodes.map((n) => (n.domain ? `${n.domain}.${n.op}` : n.op));
  assert.equal(
    ops.filter((o) => o.startsWith('planc.')),
    ['planc.LayerNorm', 'planc.RMSNorm'],
  );
  assert.ok(ops.includes('ReduceMean'), 'the unrelated mean stays');
  const x = Tensor.fromNumbers(
    'float32',
    [3, 6],
    vals(18, 11).map((v) => v * 4 + 1),
  );
  const a = evaluate(m, 'main', { x }).y!;
  const b = evaluate(f, 'main', { x }).y!;
  for (let i = 0; i < a.size; i++)
    assert.ok(Math.abs(a.nums[i]! - b.nums[i]!) < 1e-5, `element ${i}: ${a.nums[i]} vs ${b.nums[i]}`);
});

/**
 * A tied-embedding output layer: logits = x · Transpose(E) + b (E [10, 4]); also an output of x · xᵀ (not constant)
 * and a second candidate (x · W + c) that must stay because only one output per graph becomes planc.ProjectTopK.
 */
function outputLayerModel(): string {
  const bytes = buildModel({
    inputs: [['x', 'float32', ['batch', 'len', 4]]],
    outputs: [
      ['scores', 'float32', ['batch', 'len', 'len']],
      ['logits', 'float32', ['batch', 'len', 10]],
      ['other', 'float32', ['batch', 'len', 6]],
    ],
    initializers: [
      floatInit(
        'emb',
        [10, 4],
        vals(40, 21).map((v) => v * 3),
      ),
      floatInit('b', [10], vals(10, 22)),
      floatInit('w', [4, 6], vals(24, 23)),
      floatInit('c', [6], vals(6, 24)),
    ],
    nodes: [
      {
        op: 'Transpose',
        inputs: ['x'],
        outputs: ['xt'],
        name: 'xt',
        attrs: [{ name: 'perm', type: 7, ints: [0, 2, 1] }],
      },
      { op: 'MatMul', inputs: ['x', 'xt'], outputs: ['scores'], name: 'scores' },
      { op: 'Transpose', inputs: ['emb'], outputs: ['emb_t'], name: 'emb_t' },
      { op: 'MatMul', inputs: ['x', 'emb_t'], outputs: ['proj'], name: 'lm_head' },
      { op: 'Add', inputs: ['proj', 'b'], outputs: ['logits'], name: 'lm_bias' },
      { op: 'MatMul', inputs: ['x', 'w'], outputs: ['o1'], name: 'other_mm' },
      { op: 'Add', inputs: ['c', 'o1'], outputs: ['other'], name: 'other_bias' },
    ],
  });
  const p = path.join(tmp, 'output-layer.onnx');
  fs.writeFileSync(p, bytes);
  return p;
}

/** Top-k of log_softmax over the last axis, in float64 (lower index first on ties). */
function topkLogSoftmax(t: Tensor, k: number): { values: number[]; ids: number[] } {
  const v = t.dims[t.rank - 1]!;
  const values: number[] = [],
    ids: number[] = [];
  for (let r = 0; r < t.size / v; r++) {
    const row = Array.from(t.nums.slice(r * v, (r + 1) * v), Number);
    const m = Math.max(...row);
    const lse = m + Math.log(row.reduce((a, x) => a + Math.exp(x - m), 0));
    const order = row
      .map((_, j) => j)
      .sort((a, b) => row[b]! - row[a]! || a - b)
      .slice(0, k);
    for (const j of order) {
      values.push(row[j]! - lse);
      ids.push(j);
    }
  }
  return { values, ids };
}

test('fuse-project-topk: golden IR before and after; opt-in; same top-k as log_softmax of the logits', () => {
  const m = importOnnxFile(outputLayerModel());
  inferModel(m);
  matchGolden('fuse-project-topk.before.txt', printModel(m));
  assert.is(FUSE_PROJECT_TOPK.run(m, {}), m, 'without topk the pass does nothing');
  const why: string[] = [];
  const f = FUSE_PROJECT_TOPK.run(m, { topk: 3, explain: (_p, node, w) => why.push(`${node}: ${w}`) });
  inferModel(f);
  matchGolden('fuse-project-topk.after.txt', printModel(f));
  assert.equal(why, [
    'scores: the weight is not a constant 2-D tensor (nor the Transpose of one)',
    "other_bias: only one output per graph becomes planc.ProjectTopK ('logits' already did)",
  ]);
  const g = f.graphs.get('main')!;
  assert.equal(g.outputs, ['scores', 'topk_logprobs', 'topk_ids', 'other']);
  const node = g.nodes.find((n) => n.op === 'ProjectTopK')!;
  assert.equal(node.origin, ['emb_t', 'lm_head', 'lm_bias']);
  assert.equal(node.attrs.transposed, { kind: 'int', value: 1 });
  assert.ok(!g.nodes.some((n) => n.name === 'emb_t'), 'the Transpose of the embedding went with the fusion');
  const x = Tensor.fromNumbers(
    'float32',
    [2, 3, 4],
    vals(24, 25).map((v) => v * 2),
  );
  const want = topkLogSoftmax(evaluate(m, 'main', { x }).logits!, 3);
  const got = evaluate(f, 'main', { x });
  assert.equal(got.topk_logprobs!.dims, [2, 3, 3]);
  assert.equal(got.topk_ids!.dtype, 'int64');
  assert.equal(Array.from(got.topk_ids!.nums, Number), want.ids);
  got.topk_logprobs!.nums.forEach((v, i) =>
    assert.ok(Math.abs(Number(v) - want.values[i]!) < 1e-5, `value ${i}: ${v} vs ${want.values[i]}`),
  );
});

test('fuse-project-topk after fuse-matmul-epilogue: FusedMatMul(x, W, b) becomes ProjectTopK; declines explained', () => {
  const model = (extraOutput: boolean) => {
    const bytes = buildModel({
      inputs: [['x', 'float32', ['batch', 4]]],
      outputs: [
        ['logits', 'float32', ['batch', 10]],
        ...(extraOutput ? [['probs', 'float32', ['batch', 10]] as [string, 'float32', string[]]] : []),
      ],
      initializers: [floatInit('w', [4, 10], vals(40, 31)), floatInit('b', [10], vals(10, 32))],
      nodes: [
        { op: 'MatMul', inputs: ['x', 'w'], outputs: ['mm'], name: 'proj' },
        { op: 'Add', inputs: ['mm', 'b'], outputs: ['logits'], name: 'bias' },
        ...(extraOutput ? [{ op: 'Softmax', inputs: ['logits'], outputs: ['probs'], name: 'softmax' }] : []),
      ],
    });
    const p = path.join(tmp, `logits-${extraOutput}.onnx`);
    fs.writeFileSync(p, bytes);
    return importOnnxFile(p);
  };
  const f = runPipeline(model(false), { topk: 10 });
  const g = f.graphs.get('main')!;
  assert.equal(
    g.nodes.map((n) => `${n.domain}.${n.op}`),
    ['planc.ProjectTopK'],
  );
  assert.equal(g.nodes[0]!.inputs, ['x', 'w', 'b']);
  assert.equal(g.nodes[0]!.origin, ['proj', 'bias']);
  assert.is(g.values.get('topk_ids')!.type!.dtype, 'int64');
  assert.equal(g.values.get('topk_ids')!.type!.shape!.map(dimStr), ['batch', '10']);
  const why: string[] = [];
  const kept = runPipeline(model(true), {
    topk: 4,
    explain: (p, node, w) => p === 'fuse-project-topk' && why.push(`${node}: ${w}`),
  });
  assert.ok(kept.graphs.get('main')!.outputs.includes('logits'));
  assert.equal(why, ["proj:fused: the logits 'logits' have other consumers"]);
  const big: string[] = [];
  runPipeline(model(false), {
    topk: 11,
    explain: (p, node, w) => p === 'fuse-project-topk' && big.push(`${node}: ${w}`),
  });
  assert.equal(big, ['proj:fused: k = 11 exceeds the vocabulary size 10']);
});

test('a pass that finds nothing leaves the graph unchanged', () => {
  const bytes = buildModel({
    inputs: [['x', 'float32', [2, 2]]],
    outputs: [['y', 'float32', [2, 2]]],
    nodes: [{ op: 'Relu', inputs: ['x'], outputs: ['y'] }],
  });
  const p = path.join(tmp, 'relu.onnx');
  fs.writeFileSync(p, bytes);
  const m = importOnnxFile(p);
  inferModel(m);
  assert.fixture(printModel(runPipeline(m)), printModel(m));
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
