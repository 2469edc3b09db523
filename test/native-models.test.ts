// Real models optimized for CPU and run by the native runtime match onnxruntime-node within 1e-4 (es-en, opus-base shape).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import type { Model } from '../compiler/ir.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { DEFAULTS, makeModel } from '../scripts/make-model/generate.ts';
import { checkGraph } from './helpers/cache-feeds.ts';
import { seq2seqCases, type GraphCase } from './helpers/seq2seq-feeds.ts';
import { before } from './helpers/before.ts';
import { NEEDS_NATIVE, needsShared, skipSuite } from './helpers/skip.ts';

const TOL = 1e-4;
const GRAPHS = ['encoder', 'decoder', 'decoder_with_past'];

function planFor(model: Model, name: string, fuse = true): Plan {
  const built = buildPlan(fuse ? runPipeline(model) : model, {
    target: 'cpu',
    maxBatch: 8,
    maxSrcLen: 48,
    maxTgtLen: 8,
  });
  return loadPlanBytes(encodePlan(built.header, built.blob), name);
}

const esenNames = GRAPHS.flatMap((g) => [
  `es-en ${g}: native CPU plan (fused) matches onnxruntime within ${TOL}`,
  `es-en ${g}: native CPU plan (no fusion) matches onnxruntime within ${TOL}`,
]);
if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [
    ...esenNames,
    'synthetic opus-base (d 512, 6+6, vocab 58101): every graph matches onnxruntime',
  ]);
} else {
  const shared = sharedDir();
  const esen = shared && path.join(shared, 'models', 'es-en');
  if (esen && fs.existsSync(esen)) {
    const model = importSeq2SeqDir(esen);
    const ids: number[][] = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')).src_ids;
    let cases: Record<string, GraphCase>;
    let plan: Plan;
    let unfused: Plan;
    before(test, async () => {
      cases = await seq2seqCases(model.sources, [ids[0]!, ids[1]!, ids[5]!, ids[17]!, ids[40]!]);
      plan = planFor(model, 'es-en.plan');
      unfused = planFor(model, 'es-en-unfused.plan', false);
    });
    for (const g of GRAPHS) {
      test(`es-en ${g}: native CPU plan (fused) matches onnxruntime within ${TOL}`, async () =>
        await checkGraph(plan, g, cases[g]!, TOL, 8));
      test(`es-en ${g}: native CPU plan (no fusion) matches onnxruntime within ${TOL}`, async () =>
        await checkGraph(unfused, g, cases[g]!, TOL, 8));
    }
    test.after(() => {
      plan?.close();
      unfused?.close();
    });
  } else {
    skipSuite(test, needsShared('models/es-en'), esenNames);
  }

  const synthDir = path.join(os.tmpdir(), 'planc-test-models', 'opus-base');
  test('synthetic opus-base (d 512, 6+6, vocab 58101): every graph matches onnxruntime', async () => {
    if (!fs.existsSync(path.join(synthDir, 'decoder_with_past_model.onnx'))) {
      makeModel({
        ...DEFAULTS,
        out: synthDir,
        d: 512,
        encoderLayers: 6,
        decoderLayers: 6,
        heads: 8,
        ffn: 2048,
        vocab: 58101,
        maxPos: 512,
      });
    }
    const model = importSeq2SeqDir(synthDir);
    const cases = await seq2seqCases(model.sources, [
      [5, 77, 1234, 40000, 9, 0],
      [300, 58000, 0],
    ]);
    const plan = planFor(model, 'opus-base.plan');
    try {
      for (const g of GRAPHS) await checkGraph(plan, g, cases[g]!, TOL, 8);
    } finally {
      plan.close();
    }
  });
}

test.run();
