// IR: the printer's golden text, symbolic shape folding, the verifier, and ONNX round trips of small models.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import { writeOnnxFile } from '../model/onnx/export.ts';
import { importOnnxFile } from '../model/onnx/import-model.ts';
import { printModel } from '../model/printer.ts';
import { parseDim, sym, dimAdd, dimBind, dimMul, dimDiv, dimStr, dimEval } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { verifyModel } from '../model/verify.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit } from './helpers/onnx-build.ts';
import { ort, relErr, runOrt } from './helpers/ort.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-ir-'));
const ints = (name: string, values: number[]) => ({ name, dims: [values.length], dataType: 7, int64Data: values });

/** Multi-head split the way exporters write it: Shape → Gather → Unsqueeze → Concat → Reshape → Transpose. */
function headSplitModel(): string {
  const bytes = buildModel({
    inputs: [['x', 'float32', ['batch', 'src_len', 8]]],
    outputs: [['y', 'float32', ['batch', 2, 'src_len', 4]]],
    initializers: [
      floatInit(
        'w',
        [8, 8],
        Array.from({ length: 64 }, (_, i) => ((i * 7) % 11) / 10 - 0.5),
      ),
      ints('i0', [0]),
      ints('i1', [1]),
      ints('heads', [2, 4]),
    ],
    nodes: [
      { op: 'MatMul', inputs: ['x', 'w'], outputs: ['q'], name: 'proj' },
      { op: 'Shape', inputs: ['x'], outputs: ['s'], name: 'shape' },
      { op: 'Gather', inputs: ['s', 'i0'], outputs: ['b'], name: 'get_batch' },
      { op: 'Gather', inputs: ['s', 'i1'], outputs: ['t'], name: 'get_len' },
      {
        op: 'Concat',
        inputs: ['b', 't', 'heads'],
        outputs: ['target'],
        name: 'target',
        attrs: [{ name: 'axis', type: 2, i: 0 }],
      },
      { op: 'Reshape', inputs: ['q', 'target'], outputs: ['q4'], name: 'split_heads' },
      {
        op: 'Transpose',
        inputs: ['q4'],
        outputs: ['y'],
        name: 'heads_first',
        attrs: [{ name: 'perm', type: 7, ints: [0, 2, 1, 3] }],
      },
    ],
  });
  const p = path.join(tmp, 'heads.onnx');
  fs.writeFileSync(p, bytes);
  return p;
}

test('symbolic dims: canonical polynomials, parsing of dim_param expressions', () => {
  const b = sym('batch');
  const t = sym('src_len');
  assert.is(dimStr(dimMul(dimAdd(t, 1), 4)), 'src_len*4+4');
  assert.is(dimStr(dimDiv(dimMul(b, 8), 4)), 'batch*2');
  assert.is(dimStr(parseDim('past_decoder_sequence_length + 1')), 'past_decoder_sequence_length+1');
  assert.is(dimStr(parseDim('2*seq - 1')), 'seq*2-1');
  assert.is(
    dimEval(
      parseDim('batch*src_len'),
      new Map([
        ['batch', 3],
        ['src_len', 5],
      ]),
    ),
    15,
  );
  assert.is(dimStr(parseDim('weird(dim)')), 'weird(dim)');
  // one symbol bound, the others kept: batch*step+past+step*2 at step = 1 is batch+past+2; at 3, batch*3+past+6
  const d = dimAdd(dimAdd(dimMul(b, sym('step')), sym('past')), dimMul(sym('step'), 2));
  assert.is(dimStr(dimBind(d, 'step', 1)), 'batch+past+2');
  assert.is(dimStr(dimBind(d, 'step', 3)), 'batch*3+past+6');
  assert.is(dimBind(dimMul(sym('step'), 4), 'step', 1), 4);
  assert.is(dimBind(7, 'step', 1), 7);
});

test('inference folds Shape → Gather → Concat → Reshape into symbolic dims; printer golden', () => {
  const m = importOnnxFile(headSplitModel());
  inferModel(m);
  const g = m.graphs.get('main')!;
  assert.is(g.values.get('q4')!.type!.shape!.map(dimStr).join(','), 'batch,src_len,2,4');
  matchGolden('head-split.txt', printModel(m));
});

test('the evaluator runs the head split and matches onnxruntime', async () => {
  const file = headSplitModel();
  const m = importOnnxFile(file);
  const x = Tensor.fromNumbers(
    'float32',
    [2, 3, 8],
    Array.from({ length: 48 }, (_, i) => Math.sin(i)),
  );
  const got = evaluate(m, 'main', { x }).y!;
  const want = (await runOrt(await ort.InferenceSession.create(file), { x })).y!;
  assert.equal([...got.dims], [2, 2, 3, 4]);
  assert.ok(relErr(got, want) < 1e-6);
});

test('round trip: write → import gives the same IR text, and onnxruntime runs the written file', async () => {
  const m = importOnnxFile(headSplitModel());
  inferModel(m);
  const out = path.join(tmp, 'written.onnx');
  writeOnnxFile(m, 'main', out);
  const again = importOnnxFile(out);
  assert.fixture(printModel(again), printModel(m));
  const x = Tensor.fromNumbers(
    'float32',
    [1, 5, 8],
    Array.from({ length: 40 }, (_, i) => Math.cos(i)),
  );
  const a = (await runOrt(await ort.InferenceSession.create(out), { x })).y!;
  assert.ok(relErr(evaluate(m, 'main', { x }).y!, a) < 1e-6);
});

test('verifier: type errors name the pass, node, op and input types', () => {
  const m = importOnnxFile(headSplitModel());
  inferModel(m);
  const g = m.graphs.get('main')!;
  g.values.get('q4')!.type = { dtype: 'float16', shape: g.values.get('q4')!.type!.shape };
  try {
    verifyModel(m, { pass: 'fuse-test' });
    assert.unreachable('verifier accepted a wrong dtype');
  } catch (e) {
    assert.instance(e, PlancError);
    const msg = (e as PlancError).message;
    assert.is((e as PlancError).code, 'PLANC_E104');
    for (const part of ["'split_heads'", 'Reshape', 'fuse-test', 'float32[batch,src_len,8]', 'float16'])
      assert.ok(msg.includes(part), `${part} in ${msg}`);
  }
});

test('verifier: a node removed by a bad rewrite leaves a dangling value', () => {
  const m = importOnnxFile(headSplitModel());
  const g = m.graphs.get('main')!;
  g.nodes = g.nodes.filter((n) => n.name !== 'target');
  try {
    verifyModel(m, { pass: 'bad-pass', types: false });
    assert.unreachable('verifier accepted a dangling value');
  } catch (e) {
    assert.is((e as PlancError).code, 'PLANC_E102');
    assert.ok((e as PlancError).message.includes("'target'") && (e as PlancError).message.includes('bad-pass'));
  }
});

test('feeds are checked against the declared inputs', () => {
  const m = importOnnxFile(headSplitModel());
  const bad = Tensor.fromNumbers('float32', [2, 3, 7], new Array(42).fill(0));
  try {
    evaluate(m, 'main', { x: bad });
    assert.unreachable();
  } catch (e) {
    assert.is((e as PlancError).code, 'PLANC_E204');
    assert.ok((e as PlancError).message.includes("'x'"));
  }
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
