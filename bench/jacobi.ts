// Parallel Jacobi decoding on es-en: pj, pgj(3), hgj(3) and lookup(3) drafts vs greedy (iterations per token, wall clock, identical outputs)
// at batch 1 and 16, same run, and the cost of one decoder step of n = 1..8 new tokens.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { onJacobiStats, type JacobiBatchStats } from '../runtime/decode/jacobi.ts';
import { StepRunner } from '../runtime/decode/step-runner.ts';
import { decodeIds, translateIds } from '../runtime/decode/translate-ids.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { machineFacts } from './machine.ts';
import { esenDir } from './shared-models.ts';

const MAX_LEN = 64;
const STEP_TOKENS = 8;
const BLOCK = 3;
/** [batch size, sentences]: all 1,000 test sentences at batch 1 and 16 (`npm run bench -- jacobi N` caps both at N). */
const RUNS: [number, number][] = [
  [1, 1000],
  [16, 1000],
];
const STRATEGIES = ['pj', 'pgj', 'hgj', 'lookup'];
/** Step-cost measurement: repetitions per n (median taken), cached positions before the step. */
const STEP_REPS = 15;
const STEP_PAST = 16;

interface Row {
  batch: number;
  sentences: number;
  strategy: string;
  plan: string;
  seconds: number;
  /** greedy's seconds on the one-token plan / this run's seconds (> 1: faster than greedy). */
  speedup: number;
  tokens: number;
  /** Decoder runs each sentence took part in, per token (greedy: 1). */
  iterationsPerToken: number;
  /** Decoder runs of the batches, per token (greedy at batch b: about 1 / b). */
  stepsPerToken: number;
  /** Token rows computed per token kept (greedy: 1). */
  rowsPerToken: number;
  identical: number;
}

interface StepCost {
  batch: number;
  n: number;
  ms: number;
  perToken: number;
  vsOne: number;
}

function plan(dir: string, stepTokens: number, maxSrcLen: number, name: string): Plan {
  const built = buildPlan(runPipeline(importSeq2SeqDir(dir), { stepTokens, topk: TRANSLATE_TOPK }), {
    target: 'cpu',
    maxBatch: 16,
    maxSrcLen,
    maxTgtLen: MAX_LEN,
  });
  return loadPlanBytes(encodePlan(built.header, built.blob), name);
}

/** One strategy over `ids` at a batch size: outputs, seconds and the Jacobi stats of its batches. */
async function decode(p: Plan, ids: number[][], batchSize: number, strategy: string) {
  const stats: JacobiBatchStats[] = [];
  onJacobiStats((s) => stats.push(s));
  try {
    const t0 = performance.now();
    const out = (await translateIds(p, ids, { batchSize, maxLength: MAX_LEN, strategy, jacobiBlock: BLOCK })).map(
      (r) => r.ids,
    );
    return { out, seconds: (performance.now() - t0) / 1000, stats };
  } finally {
    onJacobiStats(undefined);
  }
}

/** Median ms of one decoder step of n tokens per row at `batch` rows, STEP_PAST positions cached (truncated back each time). */
function stepCosts(p: Plan, src: number[], batch: number): StepCost[] {
  const runner = new StepRunner(
    p,
    Array.from({ length: batch }, () => src),
    decodeIds(p),
    batch,
    STEP_PAST + STEP_TOKENS + 1,
  );
  try {
    for (let i = 1; i < STEP_PAST; i++) runner.step(Array.from({ length: batch }, () => 100 + i));
    const out: StepCost[] = [];
    for (let n = 1; n <= STEP_TOKENS; n++) {
      const tokens = Array.from({ length: batch }, () => Array.from({ length: n }, (_, i) => 200 + i));
      const ms: number[] = [];
      for (let r = 0; r < STEP_REPS; r++) {
        const t0 = performance.now();
        runner.step(tokens);
        ms.push(performance.now() - t0);
        runner.truncate(STEP_PAST);
      }
      const med = ms.sort((a, b) => a - b)[Math.floor(ms.length / 2)]!;
      out.push({ batch, n, ms: med, perToken: med / n, vsOne: med / (out[0]?.ms ?? med) });
    }
    return out;
  } finally {
    runner.release();
  }
}

export async function benchJacobi(): Promise<void> {
  const dir = esenDir('jacobi');
  if (!dir) return;
  const cap = process.argv[3] === undefined ? Infinity : Number(process.argv[3]);
  if (!(cap >= 1)) throw new Error(`usage: npm run bench -- jacobi [SENTENCES], got ${process.argv[3]}`);
  const all: number[][] = JSON.parse(fs.readFileSync(path.join(dir, 'test_ids.json'), 'utf8')).src_ids;
  const maxSrc = Math.max(...all.map((s) => s.length));
  const multi = plan(dir, STEP_TOKENS, maxSrc, 'es-en-step8.plan');
  const one = plan(dir, 1, maxSrc, 'es-en.plan');
  const rows: Row[] = [];
  const steps: StepCost[] = [];
  console.log(
    `es-en, max length ${MAX_LEN}, plan --step-tokens ${STEP_TOKENS} --topk ${TRANSLATE_TOPK}; pgj/hgj block ${BLOCK}; speed-up = greedy on the one-token plan / strategy, same run`,
  );
  console.log(
    'batch  sentences  strategy      plan    seconds  speed-up  iter/token  steps/token  rows/token  identical',
  );
  try {
    await decode(multi, all.slice(0, 8), 8, 'pgj'); // warm-up
    await decode(one, all.slice(0, 8), 8, 'greedy');
    for (const [batch, n] of RUNS) {
      const ids = all.slice(0, Math.min(n, cap));
      const ref = await decode(one, ids, batch, 'greedy');
      const tokens = ref.out.reduce((a, o) => a + o.length + 1, 0);
      const runs: [string, Plan, string][] = [
        ['greedy', one, 'step1'],
        ['greedy', multi, 'step8'],
        ...STRATEGIES.map((s): [string, Plan, string] => [s, multi, 'step8']),
      ];
      for (const [strategy, p, planName] of runs) {
        const r = strategy === 'greedy' && p === one ? ref : await decode(p, ids, batch, strategy);
        const sentences = r.stats.flatMap((b) => b.sentences);
        const kept = sentences.length ? sentences.reduce((a, s) => a + s.tokens, 0) : tokens;
        const row: Row = {
          batch,
          sentences: ids.length,
          strategy,
          plan: planName,
          seconds: r.seconds,
          speedup: ref.seconds / r.seconds,
          tokens: kept,
          iterationsPerToken: sentences.length ? sentences.reduce((a, s) => a + s.iterations, 0) / kept : 1,
          stepsPerToken: r.stats.length ? r.stats.reduce((a, b) => a + b.steps, 0) / kept : NaN,
          rowsPerToken: r.stats.length ? r.stats.reduce((a, b) => a + b.tokenRows, 0) / kept : 1,
          identical: r.out.filter((o, i) => o.join() === ref.out[i]!.join()).length,
        };
        rows.push(row);
        const f = (x: number, d = 3) => (Number.isNaN(x) ? '-' : x.toFixed(d));
        console.log(
          `${String(batch).padStart(5)}  ${String(ids.length).padStart(9)}  ${strategy.padEnd(8)}  ${planName.padStart(8)}  ${row.seconds.toFixed(2).padStart(9)}  ${f(row.speedup, 2).padStart(8)}  ${f(row.iterationsPerToken).padStart(10)}  ${f(row.stepsPerToken).padStart(11)}  ${f(row.rowsPerToken, 2).padStart(10)}  ${row.identical}/${ids.length}`,
        );
      }
    }
    console.log(`decoder step cost, ${STEP_PAST} positions cached, median of ${STEP_REPS}: n new tokens per row`);
    for (const batch of [1, 16]) {
      const c = stepCosts(multi, all[0]!, batch);
      steps.push(...c);
      console.log(
        `  batch ${batch}: ${c.map((s) => `n=${s.n} ${s.ms.toFixed(2)} ms (x${s.vsOne.toFixed(2)})`).join(', ')}`,
      );
    }
  } finally {
    multi.close();
    one.close();
  }
  const out = path.join(REPO_ROOT, 'bench', 'results', 'jacobi.jsonl');
  fs.appendFileSync(
    out,
    JSON.stringify({
      bench: 'jacobi',
      model: 'es-en',
      maxLength: MAX_LEN,
      stepTokens: STEP_TOKENS,
      block: BLOCK,
      rows,
      steps,
      ...machineFacts(),
    }) + '\n',
  );
  console.log(`appended to ${path.relative(process.cwd(), out)}`);
}
