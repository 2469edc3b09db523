// The share-quantized-rows pass: golden IR before/after, the evaluator's outputs unchanged bit for bit, and plans with
// and without it giving bit-identical outputs (a tiny model; es-en int8 and int16 encoders and translations).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { buildPlan } from '../codegen/build-plan.ts';
import type { Model } from '../compiler/ir.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { Tensor } from '../compiler/tensor.ts';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import { importOnnxFile, importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { printModel } from '../model/printer.ts';
import { FUSE_MATMUL_EPILOGUE } from '../passes/fuse-matmul-epilogue.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { QUANTIZE } from '../passes/quantize.ts';
import { SHARE_QUANTIZED_ROWS } from '../passes/share-quantized-rows.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit } from './helpers/onnx-build.ts';
import { NEEDS_NATIVE, needsShared, testIf } from './helpers/skip.ts';
import { sourceFeeds } from '../runtime/decode/source-feeds.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-share-rows-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.3 + seed) * 0.5);

/** x → three products over it (q, k, v: one shared A) and a fourth over another value (h → o: its own rows). */
function qkvModel(): string {
  const bytes = buildModel({
    inputs: [['x', 'float32', ['batch', 10]]],
    outputs: [
      ['q', 'float32', ['batch', 12]],
      ['k', 'float32', ['batch', 12]],
      ['o', 'float32', ['batch', 6]],
    ],
    initializers: [
      floatInit('wq', [10, 12], vals(120, 1)),
      floatInit('wk', [10, 12], vals(120, 2)),
      floatInit('wv', [10, 12], vals(120, 3)),
      floatInit('wo', [12, 6], vals(72, 4)),
      floatInit('bv', [12], vals(12, 5)),
    ],
    nodes: [
      { op: 'MatMul', inputs: ['x', 'wq'], outputs: ['q'], name: 'q_proj' },
      { op: 'MatMul', inputs: ['x', 'wk'], outputs: ['k'], name: 'k_proj' },
      { op: 'MatMul', inputs: ['x', 'wv'], outputs: ['v0'], name: 'v_proj' },
      { op: 'Add', inputs: ['v0', 'bv'], outputs: ['v1'], name: 'v_bias' },
      { op: 'Relu', inputs: ['v1'], outputs: ['h'], name: 'v_relu' },
      { op: 'MatMul', inputs: ['h', 'wo'], outputs: ['o'], name: 'o_proj' },
    ],
  });
  const p = path.join(tmp, 'qkv.onnx');
  fs.writeFileSync(p, bytes);
  return p;
}

function quantized(precision: 'int8' | 'int16' | 'w8'): Model {
  const m = importOnnxFile(qkvModel());
  inferModel(m);
  const q = QUANTIZE.run(FUSE_MATMUL_EPILOGUE.run(m, {}), { quantize: { precision } });
  inferModel(q);
  return q;
}

const bits = (t: Tensor | RtTensor) => Array.from(new Uint32Array((t instanceof Tensor ? t.nums : t.data).buffer));

test('golden IR: the three products over x share one planc.QuantizeRows; the product over h keeps its own', () => {
  const q = quantized('int8');
  matchGolden('share-quantized-rows.before.txt', printModel(q));
  const s = SHARE_QUANTIZED_ROWS.run(q, {});
  inferModel(s);
  matchGolden('share-quantized-rows.after.txt', printModel(s));
  const nodes = s.graphs.get('main')!.nodes;
  assert.equal(nodes.filter((n) => n.op === 'QuantizeRows').length, 1);
  assert.equal(nodes.filter((n) => n.op === 'QMatMul' && n.inputs[6]).length, 3);
});

test('the evaluator gives the same bits with and without the pass (int8, int16); w8 products are left alone', () => {
  const x = Tensor.fromNumbers('float32', [3, 10], [...vals(10, 7), ...new Array(10).fill(0), ...vals(10, 8)]);
  for (const p of ['int8', 'int16'] as const) {
    const q = quantized(p);
    const s = SHARE_QUANTIZED_ROWS.run(q, {});
    inferModel(s);
    const a = evaluate(q, 'main', { x }),
      b = evaluate(s, 'main', { x });
    for (const out of ['q', 'k', 'o']) assert.equal(bits(b[out]!), bits(a[out]!), `${p} ${out}`);
  }
  const w8 = quantized('w8');
  assert.not.ok(
    SHARE_QUANTIZED_ROWS.run(w8, {})
      .graphs.get('main')!
      .nodes.some((n) => n.op === 'QuantizeRows'),
  );
});

/** A cpu plan of the model through the IR pipeline, with or without the pass. */
interface Profile {
  maxBatch: number;
  maxSrcLen: number;
  maxTgtLen: number;
}

function plan(model: Model, precision: 'int8' | 'int16', share: boolean, profile: Profile, topk?: number): Plan {
  const m = runPipeline(model, {
    topk,
    quantize: { precision },
    disable: share ? [] : ['share-quantized-rows'],
  });
  const g = m.graphs.get('encoder') ?? m.graphs.get('main')!;
  assert.is(
    g.nodes.some((n) => n.op === 'QuantizeRows'),
    share,
  );
  const built = buildPlan(m, { target: 'cpu', ...profile });
  return loadPlanBytes(encodePlan(built.header, built.blob), `${precision}${share ? '' : '-unshared'}.plan`);
}

testIf(test, nativeAvailable() ? false : NEEDS_NATIVE)(
  'plans with and without the pass give the same bits (tiny model, int8 and int16)',
  () => {
    const x: RtTensor = {
      dtype: 'float32',
      dims: [3, 10],
      data: Float32Array.from([...vals(10, 7), ...new Array(10).fill(0), ...vals(10, 8)]),
    };
    for (const p of ['int8', 'int16'] as const) {
      const [a, b] = [false, true].map((share) =>
        plan(importOnnxFile(qkvModel()), p, share, { maxBatch: 4, maxSrcLen: 4, maxTgtLen: 4 }),
      );
      try {
        const ya = a!.runSync('main', { x }),
          yb = b!.runSync('main', { x });
        for (const out of ['q', 'k', 'o']) assert.equal(bits(yb[out]!), bits(ya[out]!), `${p} ${out}`);
      } finally {
        a!.close();
        b!.close();
      }
    }
  },
);

const shared = sharedDir();
const ESEN = shared && path.join(shared, 'models', 'es-en');
const esenMissing =
  !ESEN || !fs.existsSync(path.join(ESEN, 'encoder_model.onnx')) ? needsShared('models/es-en') : false;

testIf(test, nativeAvailable() ? esenMissing : NEEDS_NATIVE)(
  'es-en: int8 and int16 encoders with and without the pass give the same bits, and the same translations',
  async () => {
    const ids: number[][] = JSON.parse(fs.readFileSync(path.join(ESEN!, 'test_ids.json'), 'utf8')).src_ids;
    const batch = ids.slice(0, 8);
    const { ids: input_ids, mask: attention_mask } = sourceFeeds(batch, 0);
    const feeds: Record<string, RtTensor> = { input_ids, attention_mask };
    const sentences = ids.slice(0, 40);
    for (const p of ['int8', 'int16'] as const) {
      const [a, b] = [false, true].map((share) =>
        plan(importSeq2SeqDir(ESEN!), p, share, { maxBatch: 8, maxSrcLen: 128, maxTgtLen: 129 }, TRANSLATE_TOPK),
      );
      try {
        const ya = a!.runSync('encoder', feeds),
          yb = b!.runSync('encoder', feeds);
        for (const out of Object.keys(ya)) assert.equal(bits(yb[out]!), bits(ya[out]!), `${p} encoder ${out}`);
        const ta = await a!.translateIds(sentences, { beamSize: 1, batchSize: 8 }),
          tb = await b!.translateIds(sentences, { beamSize: 1, batchSize: 8 });
        assert.equal(
          tb.map((r) => r.ids),
          ta.map((r) => r.ids),
          `${p} translations`,
        );
      } finally {
        a!.close();
        b!.close();
      }
    }
  },
);

test.run();
