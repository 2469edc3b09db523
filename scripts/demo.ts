// `npm run demo`: makes a synthetic Marian model, imports and checks it, and greedy-decodes with planc's evaluator
// next to onnxruntime; with ../shared present, also translates real Spanish sentences with the es-en model.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import ort from 'onnxruntime-node';
import { evaluate } from '../compiler/eval/evaluate.ts';
import { inferModel } from '../compiler/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import { importSeq2SeqDir } from '../compiler/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { Tensor } from '../compiler/tensor.ts';
import { verifyModel } from '../compiler/verify.ts';
import { greedyDecode, type GraphRunner } from '../bench/reference/greedy.ts';
import { formatReport, modelReport } from '../cli/inspect.ts';
import { DEFAULTS, makeModel } from './make-model/generate.ts';
import { detokenize, readSpmPieces } from './spm-pieces.ts';

const plancRunner = (model: Model): GraphRunner => (g, feeds) => evaluate(model, g, feeds);

async function ortRunner(model: Model): Promise<GraphRunner> {
  const sessions = new Map<string, ort.InferenceSession>();
  for (const [g, file] of Object.entries(model.sources)) sessions.set(g, await ort.InferenceSession.create(file));
  return async (g, feeds) => {
    const f: Record<string, ort.Tensor> = {};
    for (const [k, t] of Object.entries(feeds)) {
      f[k] = t.dtype === 'int64' ? new ort.Tensor('int64', BigInt64Array.from(t.nums, (x) => BigInt(x)), [...t.dims]) : new ort.Tensor('float32', Float32Array.from(t.nums), [...t.dims]);
    }
    const out = await sessions.get(g)!.run(f);
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, Tensor.fromNumbers('float32', v.dims.map(Number), v.data as Float32Array)]));
  };
}

function step(msg: string): void { console.log(`\n== ${msg}`); }

async function main(): Promise<void> {
  const dir = path.join(os.tmpdir(), 'planc-demo', 'synthetic-marian');
  step(`1. synthetic Marian model (d 64, 2+2 layers, 4 heads, vocab 1000) → ${dir}`);
  const made = makeModel({ ...DEFAULTS, out: dir, d: 64, encoderLayers: 2, decoderLayers: 2, heads: 4, ffn: 256, vocab: 1000, maxPos: 128 });
  console.log(`   ${made.parameters.toLocaleString('en-US')} parameters in ${made.seconds.toFixed(2)} s`);

  step('2. import, verify, infer symbolic shapes (planc inspect)');
  const model = importSeq2SeqDir(dir);
  verifyModel(model);
  inferModel(model);
  console.log(formatReport(modelReport(dir, model)).split('\n').map((l) => `   ${l}`).join('\n'));

  step('3. greedy decoding: planc reference evaluator vs onnxruntime-node on the same ONNX files');
  const sources = [[5, 17, 256, 33, 0], [901, 44, 12, 0]];
  const opts = { startId: 0, eosId: 0, padId: 0, maxLength: 12 };
  const mine = await greedyDecode(plancRunner(model), sources, opts);
  const theirs = await greedyDecode(await ortRunner(model), sources, opts);
  mine.forEach((ids, i) => console.log(`   source ${JSON.stringify(sources[i])} → planc ${JSON.stringify(ids)} ${JSON.stringify(ids) === JSON.stringify(theirs[i]) ? '(same as onnxruntime)' : `(onnxruntime: ${JSON.stringify(theirs[i])})`}`));

  const shared = sharedDir();
  const esen = shared && path.join(shared, 'models', 'es-en');
  if (!esen || !fs.existsSync(esen)) {
    console.log('\n(no ../shared/models/es-en here: the real-model part of the demo is skipped)');
    return;
  }
  step('4. real es→en model: greedy translation of test sentences with planc\'s evaluator');
  const real = importSeq2SeqDir(esen);
  const test = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')) as { src_text: string[]; src_ids: number[][] };
  const pieces = readSpmPieces(path.join(esen, 'vocab.esen.spm'));
  const pick = [0, 1, 2, 3, 4, 5];
  const ropts = { startId: real.decoding.decoderStartId ?? 0, eosId: real.decoding.eosId ?? 0, padId: real.decoding.padId ?? 0, maxLength: 32 };
  const t0 = performance.now();
  const out = await greedyDecode(plancRunner(real), pick.map((i) => test.src_ids[i]!), ropts);
  const ms = performance.now() - t0;
  const ref = await greedyDecode(await ortRunner(real), pick.map((i) => test.src_ids[i]!), ropts);
  pick.forEach((k, i) => {
    console.log(`   es: ${test.src_text[k]}`);
    console.log(`   en: ${detokenize(pieces, out[i]!)}${JSON.stringify(out[i]) === JSON.stringify(ref[i]) ? '   [= onnxruntime]' : '   [differs from onnxruntime]'}`);
  });
  console.log(`   (${pick.length} sentences in ${(ms / 1000).toFixed(1)} s with the reference evaluator; the fast native runtime comes with plans)`);
}

await main();
