// Passes: golden IR before/after each pass, declines explained, and fused models computing what unfused ones do.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { evaluate } from '../compiler/eval/evaluate.ts';
import { inferModel } from '../compiler/infer/infer.ts';
import { importOnnxFile } from '../compiler/onnx/import-model.ts';
import { printModel } from '../compiler/printer.ts';
import { Tensor } from '../compiler/tensor.ts';
import { FUSE_MATMUL_EPILOGUE } from '../passes/fuse-matmul-epilogue.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit } from './helpers/onnx-build.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-passes-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.7 + seed) * 0.5);

/** A transformer FFN block: x → MatMul W1 + b1 → Relu → MatMul W2 + b2 → + x, plus a MatMul that must not fuse. */
function ffnModel(): string {
  const bytes = buildModel({
    inputs: [['x', 'float32', ['batch', 'len', 4]]],
    outputs: [['y', 'float32', ['batch', 'len', 4]], ['z', 'float32', ['batch', 'len', 'len']]],
    initializers: [floatInit('w1', [4, 8], vals(32, 1)), floatInit('b1', [8], vals(8, 2)), floatInit('w2', [8, 4], vals(32, 3)), floatInit('b2', [4], vals(4, 4))],
    nodes: [
      { op: 'MatMul', inputs: ['x', 'w1'], outputs: ['h1'], name: 'ffn_w1' },
      { op: 'Add', inputs: ['h1', 'b1'], outputs: ['h2'], name: 'ffn_b1' },
      { op: 'Relu', inputs: ['h2'], outputs: ['h3'], name: 'ffn_relu' },
      { op: 'MatMul', inputs: ['h3', 'w2'], outputs: ['h4'], name: 'ffn_w2' },
      { op: 'Add', inputs: ['b2', 'h4'], outputs: ['h5'], name: 'ffn_b2' },
      { op: 'Add', inputs: ['h5', 'x'], outputs: ['y'], name: 'residual' },
      { op: 'Transpose', inputs: ['x'], outputs: ['xt'], name: 'xt', attrs: [{ name: 'perm', type: 7, ints: [0, 2, 1] }] },
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

test('a pass that finds nothing leaves the graph unchanged', () => {
  const bytes = buildModel({
    inputs: [['x', 'float32', [2, 2]]], outputs: [['y', 'float32', [2, 2]]],
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
