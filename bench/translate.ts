// End-to-end greedy translation of the es-en test ids: planc translateIds vs the onnxruntime-node reference decoder.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import ort from 'onnxruntime-node';
import { importSeq2SeqDir } from '../compiler/onnx/import-model.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { Tensor } from '../compiler/tensor.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { makeBatches } from '../runtime/decode/batching.ts';
import { validateDecodingOptions } from '../runtime/decode/options.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { conventionsOf, type Conventions } from '../runtime/decode/conventions.ts';
import { greedyDecode, type GraphRunner } from './reference/greedy.ts';
import { machineFacts } from './machine.ts';

const MAX_LEN = 64;
/** [batch size, sentences measured]: batch 1 on the first 200 only (it is slow), batch 32 on all 1,000. */
const RUNS: [number, number][] = [[1, 200], [32, 1000]];

interface Side { seconds: number; sentencesPerS: number; tokensPerS: number; tokens: number }
interface Row { batch: number; sentences: number; planc: Side; ort: Side; ratio: number; identical: number }

/** An onnxruntime runner over evaluator tensors (float32 and int64 only, as the model uses). */
function ortRunner(sessions: Record<string, ort.InferenceSession>): GraphRunner {
  const toOrt = (t: Tensor): ort.Tensor => t.dtype === 'int64'
    ? new ort.Tensor('int64', BigInt64Array.from(t.nums, (x) => BigInt(x)), [...t.dims])
    : new ort.Tensor('float32', t.nums as Float32Array, [...t.dims]);
  const back = (t: ort.Tensor): Tensor => t.type === 'float32'
    ? Tensor.fromNumbers('float32', t.dims.map(Number), t.data as Float32Array)
    : Tensor.fromNumbers('int64', t.dims.map(Number), Array.from(t.data as BigInt64Array, Number));
  return async (graph, feeds) => {
    const out = await sessions[graph]!.run(Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, toOrt(v)])));
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, back(v)]));
  };
}

function side(seconds: number, outputs: number[][]): Side {
  const tokens = outputs.reduce((s, o) => s + o.length + 1, 0);
  return { seconds, sentencesPerS: outputs.length / seconds, tokensPerS: tokens / seconds, tokens };
}

/** planc greedy translation of `ids` at a batch size (sorted by length, batch shrinking). */
async function runPlanc(plan: Plan, ids: number[][], batch: number): Promise<{ s: Side; out: number[][] }> {
  const t0 = performance.now();
  const out = (await translateIds(plan, ids, { batchSize: batch, maxLength: MAX_LEN })).map((r) => r.ids);
  return { s: side((performance.now() - t0) / 1000, out), out };
}

/** The reference decoder over onnxruntime on the same length-sorted batches. */
async function runOrt(run: GraphRunner, ids: number[][], batch: number, conventions: Conventions): Promise<{ s: Side; out: number[][] }> {
  const batches = makeBatches(ids.map((s) => s.length), validateDecodingOptions({ batchSize: batch }), batch);
  const out = new Array<number[]>(ids.length);
  const t0 = performance.now();
  for (const b of batches) {
    const res = await greedyDecode(run, b.map((i) => ids[i]!), { ...conventions, maxLength: MAX_LEN });
    b.forEach((i, j) => (out[i] = res[j]!));
  }
  return { s: side((performance.now() - t0) / 1000, out), out };
}

async function measure(plan: Plan, run: GraphRunner, ids: number[][], batch: number): Promise<Row> {
  const p = await runPlanc(plan, ids, batch);
  const o = await runOrt(run, ids, batch, conventionsOf(plan.header.decoding));
  const identical = p.out.filter((x, i) => x.join() === o.out[i]!.join()).length;
  return { batch, sentences: ids.length, planc: p.s, ort: o.s, ratio: p.s.sentencesPerS / o.s.sentencesPerS, identical };
}

function print(r: Row): void {
  const f = (s: Side) => `${s.sentencesPerS.toFixed(1)} sent/s, ${s.tokensPerS.toFixed(0)} tok/s (${s.seconds.toFixed(2)} s)`;
  console.log(`batch ${r.batch} (${r.sentences} sentences): planc ${f(r.planc)} | onnxruntime ${f(r.ort)} | planc/ort ${r.ratio.toFixed(2)}x | identical ${r.identical}/${r.sentences}`);
}

export async function benchTranslate(): Promise<void> {
  const shared = sharedDir();
  const dir = shared ? path.join(shared, 'models', 'es-en') : '';
  if (!dir || !fs.existsSync(dir)) {
    console.log('translate bench skipped: /work/shared/models/es-en is missing');
    return;
  }
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(dir, 'test_ids.json'), 'utf8')).src_ids;
  const model = importSeq2SeqDir(dir);
  const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK }), { target: 'cpu', maxBatch: 32, maxSrcLen: Math.max(128, ...ids.map((s) => s.length)), maxTgtLen: MAX_LEN });
  const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'es-en.plan');
  const cores = os.cpus().length;
  const sessions: Record<string, ort.InferenceSession> = {};
  for (const g of ['encoder', 'decoder', 'decoder_with_past']) {
    sessions[g] = await ort.InferenceSession.create(model.sources[g]!, { graphOptimizationLevel: 'all', intraOpNumThreads: cores });
  }
  console.log(`es-en greedy translation, max length ${MAX_LEN}; batch 1 on the first 200 test sentences, batch 32 on all 1,000 (sorted by length)`);
  const rows: Row[] = [];
  try {
    await measure(plan, ortRunner(sessions), ids.slice(0, 8), 8);
    for (const [batch, n] of RUNS) {
      rows.push(await measure(plan, ortRunner(sessions), ids.slice(0, n), batch));
      print(rows[rows.length - 1]!);
    }
  } finally {
    plan.close();
    for (const s of Object.values(sessions)) await s.release();
  }
  const out = path.join(REPO_ROOT, 'bench', 'results', 'translate.jsonl');
  fs.appendFileSync(out, JSON.stringify({ bench: 'translate', model: 'es-en', maxLength: MAX_LEN, rows, ...machineFacts() }) + '\n');
  console.log(`appended to ${path.relative(process.cwd(), out)}`);
}
