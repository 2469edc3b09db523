// `npm run demo`: optimizes a synthetic Marian model into a plan and greedy-decodes with planc's native runtime next
// to onnxruntime; with ../shared present, also translates real Spanish sentences with the es-en model's plan.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import ort from 'onnxruntime-node';
import type { Model } from '../compiler/ir.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { writePlanFile } from '../compiler/plan/format.ts';
import { Tensor } from '../compiler/tensor.ts';
import { greedyDecode, type GraphRunner } from '../test/reference/greedy.ts';
import { conventionsOf } from '../runtime/decode/conventions.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { formatPlanReport, planReport } from '../cli/inspect.ts';
import { loadPlan } from '../runtime/plan.ts';
import { native, nativeAvailable } from '../runtime/native.ts';
import { DEFAULTS, makeModel } from './make-model/generate.ts';
import { detokenize, readSpmPieces } from './spm-pieces.ts';

async function ortRunner(model: Model): Promise<GraphRunner> {
  const sessions = new Map<string, ort.InferenceSession>();
  for (const [g, file] of Object.entries(model.sources)) sessions.set(g, await ort.InferenceSession.create(file));
  return async (g, feeds) => {
    const f: Record<string, ort.Tensor> = {};
    for (const [k, t] of Object.entries(feeds)) {
      f[k] =
        t.dtype === 'int64'
          ? new ort.Tensor(
              'int64',
              BigInt64Array.from(t.nums, (x) => BigInt(x)),
              [...t.dims],
            )
          : new ort.Tensor('float32', Float32Array.from(t.nums), [...t.dims]);
    }
    const out = await sessions.get(g)!.run(f);
    return Object.fromEntries(
      Object.entries(out).map(([k, v]) => [
        k,
        Tensor.fromNumbers('float32', v.dims.map(Number), v.data as Float32Array),
      ]),
    );
  };
}

function step(msg: string): void {
  console.log(`\n== ${msg}`);
}
const indent = (s: string) =>
  s
    .split('\n')
    .map((l) => `   ${l}`)
    .join('\n');

/** planc optimize, in-process: model folder → passes (as for translation: top-k output layer) → plan file. */
function optimize(model: Model, file: string, maxSrcLen: number, maxTgtLen: number): void {
  const t0 = performance.now();
  const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK }), {
    target: 'cpu',
    maxBatch: 8,
    maxSrcLen,
    maxTgtLen,
    maxDims: { decoder_sequence_length: 1 },
  });
  writePlanFile(file, built.header, built.blob);
  console.log(indent(formatPlanReport(planReport(file, built.header))));
  console.log(`   optimized in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

async function main(): Promise<void> {
  if (!nativeAvailable()) {
    console.error('the native runtime is not built: run `npm run build:native` first (see README.md)');
    process.exitCode = 2;
    return;
  }
  const info = native().info();
  console.log(
    `planc native runtime: ${info.threads} threads, BLAS ${info.blas}, ${native().cudaStatus().reason || 'GPU available'}`,
  );
  const work = path.join(os.tmpdir(), 'planc-demo');
  const dir = path.join(work, 'synthetic-marian');
  step(`1. a synthetic Marian model (d 64, 2+2 layers, 4 heads, vocab 1000) → ${dir}`);
  const made = makeModel({
    ...DEFAULTS,
    out: dir,
    d: 64,
    encoderLayers: 2,
    decoderLayers: 2,
    heads: 4,
    ffn: 256,
    vocab: 1000,
    maxPos: 128,
  });
  console.log(`   ${made.parameters.toLocaleString('en-US')} parameters in ${made.seconds.toFixed(2)} s`);

  step('2. planc optimize → synthetic.plan');
  const model = importSeq2SeqDir(dir);
  const planFile = path.join(work, 'synthetic.plan');
  optimize(model, planFile, 32, 24);

  step('3. greedy decoding with the plan on the native runtime, next to onnxruntime-node on the ONNX files');
  const plan = await loadPlan(planFile);
  const sources = [
    [5, 17, 256, 33, 0],
    [901, 44, 12, 0],
  ];
  const opts = { ...conventionsOf(model.decoding), maxLength: 12 };
  const mine = (await plan.translateIds(sources, { maxLength: opts.maxLength })).map((r) => r.ids);
  const theirs = await greedyDecode(await ortRunner(model), sources, opts);
  mine.forEach((ids, i) =>
    console.log(
      `   source ${JSON.stringify(sources[i])} → planc ${JSON.stringify(ids)} ${JSON.stringify(ids) === JSON.stringify(theirs[i]) ? '(same as onnxruntime)' : `(onnxruntime: ${JSON.stringify(theirs[i])})`}`,
    ),
  );
  plan.close();

  const shared = sharedDir();
  const esen = shared && path.join(shared, 'models', 'es-en');
  if (!esen || !fs.existsSync(esen)) {
    console.log('\n(no ../shared/models/es-en here: the real-model part of the demo is skipped)');
    return;
  }
  step('4. the real es→en model: planc optimize, then greedy translation of test sentences with the plan');
  const real = importSeq2SeqDir(esen);
  const realPlan = path.join(work, 'es-en.plan');
  optimize(real, realPlan, 64, 40);
  const test = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')) as {
    src_text: string[];
    src_ids: number[][];
  };
  const pieces = readSpmPieces(path.join(esen, 'vocab.esen.spm'));
  const pick = [0, 1, 2, 3, 4, 5, 6, 7];
  const ropts = { ...conventionsOf(real.decoding), maxLength: 32 };
  const p = await loadPlan(realPlan);
  const t0 = performance.now();
  const out = (
    await p.translateIds(
      pick.map((i) => test.src_ids[i]!),
      { maxLength: ropts.maxLength },
    )
  ).map((r) => r.ids);
  const ms = performance.now() - t0;
  p.close();
  const ref = await greedyDecode(
    await ortRunner(real),
    pick.map((i) => test.src_ids[i]!),
    ropts,
  );
  pick.forEach((k, i) => {
    console.log(`   es: ${test.src_text[k]}`);
    console.log(
      `   en: ${detokenize(pieces, out[i]!)}${JSON.stringify(out[i]) === JSON.stringify(ref[i]) ? '   [= onnxruntime]' : '   [differs from onnxruntime]'}`,
    );
  });
  console.log(`   ${pick.length} sentences, one batch, in ${ms.toFixed(0)} ms on the native CPU runtime`);
}

await main();
