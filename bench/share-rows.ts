// `npm run bench -- share-rows`: the es-en encoder at int8 and int16 with and without passes/share-quantized-rows.ts
// (one planc.QuantizeRows feeding Q, K and V instead of each product quantizing its A), in one process, rounds
// interleaved (each round times every plan, in alternating order), the fastest round of each kept (other load only
// slows a run) and the median shown, with process CPU time (steadier on a shared machine at PLANC_NUM_THREADS=1);
// outputs compared bit for bit. Appends to bench/results/share-rows.jsonl.
// Environment: PLANC_BENCH_BATCH (32), PLANC_BENCH_ROUNDS (9), PLANC_BENCH_REPS (10 runs a round).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildPlan } from '../codegen/build-plan.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { machineFacts } from './machine.ts';
import { sourceFeeds } from '../runtime/decode/source-feeds.ts';

const env = (name: string, dflt: number) => Number(process.env[name] ?? dflt);

export async function benchShareRows(): Promise<void> {
  const dir = path.join(sharedDir()!, 'models', 'es-en');
  const batch = env('PLANC_BENCH_BATCH', 32),
    rounds = env('PLANC_BENCH_ROUNDS', 9),
    reps = env('PLANC_BENCH_REPS', 10);
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(dir, 'test_ids.json'), 'utf8')).src_ids.slice(0, batch);
  const { ids: input_ids, mask: attention_mask } = sourceFeeds(ids, 0);
  const len = input_ids.dims[1]!;
  const feeds: Record<string, RtTensor> = { input_ids, attention_mask };
  const model = importSeq2SeqDir(dir);
  const plans: { precision: string; share: boolean; plan: Plan; ms: number[]; cpuMs: number[] }[] = [];
  for (const precision of ['int8', 'int16'] as const)
    for (const share of [false, true]) {
      const m = runPipeline(model, {
        topk: TRANSLATE_TOPK,
        quantize: { precision },
        disable: share ? [] : ['share-quantized-rows'],
      });
      const built = buildPlan(m, { target: 'cpu', maxBatch: batch, maxSrcLen: len, maxTgtLen: len + 1 });
      const plan = loadPlanBytes(encodePlan(built.header, built.blob), `${precision}-${share}`);
      for (let i = 0; i < 3; i++) plan.runSync('encoder', feeds);
      plans.push({ precision, share, plan, ms: [], cpuMs: [] });
    }
  // outputs bit for bit
  const identical: Record<string, boolean> = {};
  for (const precision of ['int8', 'int16']) {
    const [a, b] = plans.filter((p) => p.precision === precision).map((p) => p.plan.runSync('encoder', feeds));
    identical[precision] = Object.keys(a!).every((k) => {
      const x = new Uint32Array((a![k]!.data as Float32Array).buffer),
        y = new Uint32Array((b![k]!.data as Float32Array).buffer);
      return x.length === y.length && x.every((v, i) => v === y[i]);
    });
  }
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 ? [...plans].reverse() : plans;
    for (const p of order) {
      const t0 = performance.now(),
        c0 = process.cpuUsage();
      for (let i = 0; i < reps; i++) p.plan.runSync('encoder', feeds);
      p.ms.push((performance.now() - t0) / reps);
      const c = process.cpuUsage(c0);
      p.cpuMs.push((c.user + c.system) / 1000 / reps);
    }
  }
  const min = (x: number[]) => Math.min(...x);
  const median = (x: number[]) => [...x].sort((a, b) => a - b)[Math.floor(x.length / 2)]!;
  const rows = ['int8', 'int16'].map((precision) => {
    const [off, on] = plans.filter((p) => p.precision === precision);
    return {
      precision,
      offMinMs: +min(off!.ms).toFixed(3),
      onMinMs: +min(on!.ms).toFixed(3),
      speedupMin: +(min(off!.ms) / min(on!.ms)).toFixed(4),
      offMedianMs: +median(off!.ms).toFixed(3),
      onMedianMs: +median(on!.ms).toFixed(3),
      speedupMedian: +(median(off!.ms) / median(on!.ms)).toFixed(4),
      offCpuMinMs: +min(off!.cpuMs).toFixed(3),
      onCpuMinMs: +min(on!.cpuMs).toFixed(3),
      speedupCpuMin: +(min(off!.cpuMs) / min(on!.cpuMs)).toFixed(4),
      identical: identical[precision],
    };
  });
  for (const p of plans) p.plan.close();
  console.log(`es-en encoder, batch ${ids.length} × ${len} tokens, ${rounds} rounds of ${reps} runs (ms per run)`);
  console.log(
    'precision  unshared min / median   shared min / median   speedup min / median   CPU-time min unshared / shared (speedup)   identical',
  );
  for (const r of rows)
    console.log(
      `${r.precision.padEnd(9)}  ${r.offMinMs.toFixed(3).padStart(8)} / ${r.offMedianMs.toFixed(3).padStart(8)}   ` +
        `${r.onMinMs.toFixed(3).padStart(8)} / ${r.onMedianMs.toFixed(3).padStart(8)}   ` +
        `${r.speedupMin.toFixed(3)} / ${r.speedupMedian.toFixed(3)}          ` +
        `${r.offCpuMinMs.toFixed(3)} / ${r.onCpuMinMs.toFixed(3)} (${r.speedupCpuMin.toFixed(3)})   ${r.identical}`,
    );
  const record = {
    bench: 'share-rows',
    ...machineFacts({ loadavg: os.loadavg().map((x) => +x.toFixed(2)) }),
    threads: process.env.PLANC_NUM_THREADS ?? 'all',
    batch: ids.length,
    tokens: len,
    rounds,
    reps,
    rows,
  };
  fs.appendFileSync(path.join(REPO_ROOT, 'bench', 'results', 'share-rows.jsonl'), `${JSON.stringify(record)}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) await benchShareRows();
