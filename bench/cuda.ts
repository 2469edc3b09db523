// `npm run bench -- cuda`: per-graph latency of cuda plans next to the CPU backend (same process, same feeds), at
// batch 1 and 32, with each decoder step's weight bytes / time (effective weight bandwidth). Skips without a GPU.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { cudaStatus, nativeAvailable, native } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { DEFAULTS, makeModel } from '../scripts/make-model/generate.ts';
import { machineFacts } from './machine.ts';
import { rng } from '../test/reference/rng.ts';
import type { LayerPrecision } from '../compiler/quant/layers.ts';

const SRC_LEN = 32;
const PAST_LEN = 32;
const BATCHES = [1, 32];

interface Row {
  model: string;
  graph: string;
  batch: number;
  cudaMs: number;
  cudaGraphMs: number;
  cpuMs: number;
  weightGBps: number;
}

/** Feeds from the plan's declared inputs: ids in the vocabulary, masks of ones, past length PAST_LEN, floats else. */
function feedsFor(plan: Plan, graph: string, b: number, vocab: number, r: () => number): Record<string, RtTensor> {
  const feeds: Record<string, RtTensor> = {};
  const max = plan.header.profile.symbolMax;
  for (const io of plan.inputs(graph)) {
    const dims = io.dims.map((d) =>
      /^\d+$/.test(d)
        ? Number(d)
        : /batch/.test(d)
          ? b
          : /past/.test(d)
            ? PAST_LEN
            : /encoder/.test(d)
              ? SRC_LEN
              : /decoder_sequence/.test(d)
                ? 1
                : (max[d] ?? 1),
    );
    const n = dims.reduce((x, y) => x * y, 1);
    if (io.dtype === 'int64') {
      const v = /input_ids/.test(io.name)
        ? () => BigInt(2 + Math.floor(r() * (vocab - 2)))
        : /past/.test(io.name)
          ? () => BigInt(PAST_LEN)
          : () => 1n;
      feeds[io.name] = { dtype: 'int64', dims, data: BigInt64Array.from({ length: n }, v) };
    } else {
      feeds[io.name] = {
        dtype: 'float32',
        dims,
        data: Float32Array.from({ length: n }, () => (r() + r() + r() - 1.5) * 0.5),
      };
    }
  }
  return feeds;
}

function median(run: () => unknown): number {
  for (let i = 0; i < 3; i++) run();
  const times: number[] = [];
  const start = performance.now();
  while (times.length < 10 || (times.length < 200 && performance.now() - start < 1500)) {
    const t0 = performance.now();
    run();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

/** One model's cuda plan (float32, or the weights in a --quantize precision) against the float32 cpu plan. */
function benchModel(name: string, dir: string, vocab: number, rows: Row[], precision?: LayerPrecision): void {
  const opts = { maxBatch: Math.max(...BATCHES), maxSrcLen: SRC_LEN, maxTgtLen: PAST_LEN + 1 };
  const cpuBuilt = buildPlan(runPipeline(importSeq2SeqDir(dir)), { ...opts, target: 'cpu' });
  const cudaBuilt = buildPlan(runPipeline(importSeq2SeqDir(dir), precision ? { quantize: { precision } } : {}), {
    ...opts,
    target: 'cuda',
  });
  if (precision) name = `${name} ${precision}`;
  const cpu = loadPlanBytes(encodePlan(cpuBuilt.header, cpuBuilt.blob), `${name}-cpu.plan`);
  const cudaBytes = encodePlan(cudaBuilt.header, cudaBuilt.blob);
  const cuda = loadPlanBytes(cudaBytes, `${name}-cuda.plan`);
  process.env.PLANC_CUDA_GRAPH = '1';
  const cudaGraph = loadPlanBytes(cudaBytes, `${name}-cuda-graph.plan`);
  delete process.env.PLANC_CUDA_GRAPH;
  const weightBytes = cudaBuilt.header.weights.reduce((a, w) => a + w.length, 0);
  try {
    for (const graph of ['encoder', 'decoder_with_past']) {
      for (const b of BATCHES) {
        const feeds = feedsFor(cpu, graph, b, vocab, rng(b * 7 + graph.length));
        const cudaMs = median(() => cuda.runSync(graph, feeds));
        const cudaGraphMs = median(() => cudaGraph.runSync(graph, feeds));
        const cpuMs = median(() => cpu.runSync(graph, feeds));
        const row = {
          model: name,
          graph,
          batch: b,
          cudaMs,
          cudaGraphMs,
          cpuMs,
          weightGBps: weightBytes / (Math.min(cudaMs, cudaGraphMs) * 1e6),
        };
        rows.push(row);
        console.log(
          `${name.padEnd(15)} ${graph.padEnd(18)} b=${String(b).padEnd(3)} cuda ${cudaMs.toFixed(3).padStart(8)} ms  graph ${cudaGraphMs.toFixed(3).padStart(8)} ms  cpu ${cpuMs.toFixed(2).padStart(8)} ms  weights ${(weightBytes / 1e6).toFixed(0)} MB → ${row.weightGBps.toFixed(0)} GB/s`,
        );
      }
    }
  } finally {
    cpu.close();
    cuda.close();
    cudaGraph.close();
  }
}

export async function benchCuda(): Promise<void> {
  if (!nativeAvailable()) {
    console.log('bench cuda skipped: the native addon is not built (npm run build:native)');
    return;
  }
  const status = cudaStatus();
  if (!status.available) {
    console.log(`bench cuda skipped: no GPU (${status.reason.replace(/^no GPU: /, '')})`);
    return;
  }
  console.log(
    `planc cuda plans vs the CPU backend on ${status.reason} — encoder src ${SRC_LEN}, decoder_with_past past ${PAST_LEN}; times include feed upload and output download`,
  );
  const rows: Row[] = [];
  const shared = sharedDir();
  const esen = shared && path.join(shared, 'models', 'es-en');
  if (esen && fs.existsSync(esen)) benchModel('es-en', esen, 32000, rows);
  else console.log('(es-en skipped: ../shared/models/es-en not here)');
  const synth = path.join(os.tmpdir(), 'planc-bench', 'opus-base');
  if (!fs.existsSync(path.join(synth, 'decoder_with_past_model.onnx'))) {
    makeModel({
      ...DEFAULTS,
      out: synth,
      d: 512,
      encoderLayers: 6,
      decoderLayers: 6,
      heads: 8,
      ffn: 2048,
      vocab: 58101,
      maxPos: 512,
    });
  }
  benchModel('opus-base', synth, 58101, rows);
  // the weights in int8 (weight-only), float16 and bfloat16 (tensor cores): the decoder step reads half or a quarter
  for (const p of ['w8', 'fp16', 'bf16'] as const) benchModel('opus-base', synth, 58101, rows, p);
  const result = { bench: 'cuda', machine: machineFacts({ gpu: status.reason, native: native().info() }), rows };
  const out = process.env.PLANC_BENCH_OUT ?? path.join(REPO_ROOT, 'bench', 'results', 'cuda.jsonl');
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.appendFileSync(out, JSON.stringify(result) + '\n');
  console.log(`appended to ${path.relative(process.cwd(), out)}`);
}
