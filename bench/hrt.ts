// `npm run bench -- hrt [N]`: the HRT model at k = 1, 2, 3 (greedy) against its autoregressive twin, same run, on the es-en test set: corpus BLEU, sentences/s at batch 1 and 32, decoder steps per sentence; rows appended to bench/results/hrt.jsonl.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { corpusBleu } from '../compiler/vocab/bleu.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { machineFacts } from './machine.ts';

/** The exports of docs/hrt.md section 4 (PLANC_HRT_MODEL, PLANC_AT_MODEL override). */
const HRT_MODEL = process.env.PLANC_HRT_MODEL ?? path.join(REPO_ROOT, '.scratch', 'hrt', 'hrt-onnx');
const AT_MODEL = process.env.PLANC_AT_MODEL ?? path.join(REPO_ROOT, '.scratch', 'hrt', 'at-onnx');
const MAX_LEN = 128;
const RESULTS = path.join(REPO_ROOT, 'bench', 'results', 'hrt.jsonl');

interface Row {
  model: 'hrt' | 'at';
  k: number;
  bleu: number;
  sentencesPerSecondB1: number;
  sentencesPerSecondB32: number;
  /** Decoder graph runs per sentence at batch 1: Skip-AT steps (+ 1 Skip-CMLM pass for k > 1). */
  stepsPerSentence: number;
}

/** The plan of a model folder (planc optimize: top-k, its tokenizer, batch ≤ 32). */
function optimize(dir: string, out: string): void {
  const r = spawnSync(
    process.execPath,
    [
      path.join(REPO_ROOT, 'bin', 'planc.js'),
      'optimize',
      dir,
      '-o',
      out,
      '--max-batch',
      '32',
      '--max-tgt-len',
      String(MAX_LEN),
      '--quiet',
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`planc optimize ${dir}: ${r.stderr}`);
}

/** Counts the plan's decoder graph runs (every graph but the encoder) while `f` runs. */
async function countingSteps<T>(plan: Plan, f: () => Promise<T>): Promise<{ value: T; steps: number }> {
  const run = plan.runSync.bind(plan);
  let steps = 0;
  plan.runSync = (graph, feeds, into) => {
    if (graph !== 'encoder') steps++;
    return run(graph, feeds, into);
  };
  try {
    return { value: await f(), steps };
  } finally {
    plan.runSync = run;
  }
}

/** One configuration: BLEU and steps from the batch-1 run, speed at batch 1 and 32. */
async function measure(plan: Plan, model: Row['model'], k: number, src: string[], ref: string[]): Promise<Row> {
  const options = model === 'hrt' ? { strategy: 'hrt', chunk: k } : {};
  const t1 = performance.now();
  const { value: out, steps } = await countingSteps(plan, () =>
    plan.translate(src, { ...options, batchSize: 1, maxLength: MAX_LEN }),
  );
  const b1 = (performance.now() - t1) / 1000;
  const t32 = performance.now();
  const out32 = await plan.translate(src, { ...options, batchSize: 32, maxLength: MAX_LEN });
  const b32 = (performance.now() - t32) / 1000;
  const same = out.filter((x, i) => x === out32[i]).length;
  const row: Row = {
    model,
    k,
    bleu: corpusBleu(out, ref).score,
    sentencesPerSecondB1: src.length / b1,
    sentencesPerSecondB32: src.length / b32,
    stepsPerSentence: steps / src.length,
  };
  console.log(
    `${model} k=${k}: BLEU ${row.bleu.toFixed(2)}, ${row.sentencesPerSecondB1.toFixed(1)} sent/s at batch 1, ${row.sentencesPerSecondB32.toFixed(1)} at 32, ${row.stepsPerSentence.toFixed(2)} steps/sentence; batch 32 = batch 1 on ${same}/${src.length}`,
  );
  return row;
}

export async function benchHrt(): Promise<void> {
  const n = Number(process.argv[3] ?? 1000);
  const esen = path.join(sharedDir() ?? path.join(REPO_ROOT, '..', 'shared'), 'models', 'es-en');
  const lines = (f: string) =>
    fs
      .readFileSync(path.join(esen, f), 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .slice(0, n);
  const src = lines('test.es');
  const ref = lines('test.en');
  if (!fs.existsSync(path.join(HRT_MODEL, 'decoder_nat_model.onnx')))
    throw new Error(`no HRT export at ${HRT_MODEL} (docs/hrt.md section 4; or PLANC_HRT_MODEL)`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-bench-hrt-'));
  const rows: (Row & Record<string, unknown>)[] = [];
  const training = (dir: string) =>
    (JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as { training?: unknown }).training;
  try {
    for (const [model, dir, ks] of [
      ['hrt', HRT_MODEL, [1, 2, 3]],
      ['at', AT_MODEL, [1]],
    ] as const) {
      if (!fs.existsSync(path.join(dir, 'encoder_model.onnx'))) {
        console.log(`${model}: no export at ${dir}; its rows are left out`);
        continue;
      }
      optimize(dir, path.join(tmp, `${model}.plan`));
      const plan = await loadPlan(path.join(tmp, `${model}.plan`));
      for (const k of ks)
        rows.push({ ...(await measure(plan, model, k, src, ref)), sentences: src.length, training: training(dir) });
      plan.close();
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  const date = new Date().toISOString();
  const machine = machineFacts();
  fs.appendFileSync(RESULTS, rows.map((r) => JSON.stringify({ date, ...r, machine })).join('\n') + '\n');
  const at = rows.find((r) => r.model === 'at');
  const k2 = rows.find((r) => r.model === 'hrt' && r.k === 2);
  if (at && k2)
    console.log(
      `k = 2 vs the twin: BLEU ${(k2.bleu - at.bleu).toFixed(2)} (${Math.abs(k2.bleu - at.bleu) <= 0.5 ? 'within' : 'not within'} 0.5), ${(k2.sentencesPerSecondB1 / at.sentencesPerSecondB1).toFixed(2)}x the twin's speed at batch 1`,
    );
  console.log(`appended ${rows.length} rows to ${path.relative(REPO_ROOT, RESULTS)}`);
}
