// `npm run bench -- cpu`: per-graph latency of planc's native CPU runtime vs onnxruntime-node, same process, same inputs.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import ort from 'onnxruntime-node';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir, REPO_ROOT } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { CACHE_INPUT_PREFIX, PAST_LENGTH_INPUT } from '../compiler/plan/io-names.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { native } from '../runtime/native.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { DEFAULTS, makeModel } from '../scripts/make-model/generate.ts';
import { machineFacts } from './machine.ts';
import { rng } from '../test/reference/rng.ts';

const SRC_LEN = 32;
const PAST_LEN = 32;
const BATCHES = [1, 16];

interface Row {
  model: string;
  graph: string;
  batch: number;
  plancMs: number;
  ortMs: number;
  ratio: number;
  plancRounds: number[];
  ortRounds: number[];
}

function ids(b: number, len: number, vocab: number, r: () => number): RtTensor {
  return {
    dtype: 'int64',
    dims: [b, len],
    data: BigInt64Array.from({ length: b * len }, () => BigInt(2 + Math.floor(r() * (vocab - 2)))),
  };
}
function ones(b: number, len: number): RtTensor {
  return { dtype: 'int64', dims: [b, len], data: new BigInt64Array(b * len).fill(1n) };
}
function normal(dims: number[], r: () => number, scale = 1): RtTensor {
  const n = dims.reduce((a, c) => a * c, 1);
  return { dtype: 'float32', dims, data: Float32Array.from({ length: n }, () => (r() + r() + r() - 1.5) * scale) };
}

/** Feeds for one graph at a batch size, built from the plan's declared inputs. */
function feedsFor(plan: Plan, graph: string, b: number, vocab: number, r: () => number): Record<string, RtTensor> {
  const feeds: Record<string, RtTensor> = {};
  for (const io of plan.inputs(graph)) {
    const dims = io.dims.map((d) =>
      /batch/.test(d)
        ? b
        : /past/.test(d)
          ? PAST_LEN
          : /cache_capacity/.test(d)
            ? PAST_LEN + 1
            : /encoder/.test(d)
              ? SRC_LEN
              : /decoder_sequence|step_tokens/.test(d)
                ? 1
                : Number(d),
    );
    if (io.name === PAST_LENGTH_INPUT)
      feeds[io.name] = { dtype: 'int64', dims: [], data: BigInt64Array.of(BigInt(PAST_LEN)) };
    else if (io.name === 'input_ids') feeds[io.name] = ids(b, dims[1]!, vocab, r);
    else if (io.name.includes('attention_mask')) feeds[io.name] = ones(b, dims[1]!);
    else feeds[io.name] = normal(dims, r, 0.5);
  }
  return feeds;
}

function toOrt(t: RtTensor): ort.Tensor {
  return new ort.Tensor(t.dtype === 'int64' ? 'int64' : 'float32', t.data as Float32Array, t.dims);
}

/**
 * onnxruntime's feeds for the same inputs: a fused plan's in-place caches kv_cache.* [b,H,PAST_LEN+1,D] become the
 * exported graph's past_key_values.* [b,H,PAST_LEN,D] (their first PAST_LEN rows); the past length input goes away.
 */
function ortFeedsOf(feeds: Record<string, RtTensor>): Record<string, ort.Tensor> {
  const out: Record<string, ort.Tensor> = {};
  for (const [k, v] of Object.entries(feeds)) {
    if (k === PAST_LENGTH_INPUT) continue;
    if (!k.startsWith(CACHE_INPUT_PREFIX)) {
      out[k] = toOrt(v);
      continue;
    }
    const [b, h, cap, d] = v.dims as [number, number, number, number];
    const past = new Float32Array(b * h * PAST_LEN * d);
    for (let i = 0; i < b * h; i++)
      past.set((v.data as Float32Array).subarray(i * cap * d, i * cap * d + PAST_LEN * d), i * PAST_LEN * d);
    out[`past_key_values.${k.slice(CACHE_INPUT_PREFIX.length)}`] = new ort.Tensor('float32', past, [b, h, PAST_LEN, d]);
  }
  return out;
}

/** Median of timed runs after warm-up; runs until ~0.8 s or 40 runs (at least 8). */
async function median(run: () => unknown): Promise<number> {
  for (let i = 0; i < 3; i++) await run();
  const times: number[] = [];
  const start = performance.now();
  while (times.length < 8 || (times.length < 40 && performance.now() - start < 800)) {
    const t0 = performance.now();
    await run();
    times.push(performance.now() - t0);
  }
  return middle(times);
}

function middle(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const ROUNDS = 3;
/** Plans through the pass pipeline (fusions, in-place cache; logits kept so every output is onnxruntime's), or not. */
const FUSE = process.env.PLANC_BENCH_NO_FUSE !== '1';

/**
 * Both runtimes keep worker threads spinning for a while after a run, and on 2 cores whoever runs right after the
 * other pays for it; this machine is also a shared VM whose speed drifts. So each round measures planc on every case,
 * then onnxruntime on the same feeds (in the same process), and each case reports the median over the rounds.
 */
async function benchModel(name: string, dir: string, vocab: number, rows: Row[]): Promise<void> {
  const model = importSeq2SeqDir(dir);
  const built = buildPlan(FUSE ? runPipeline(model) : model, {
    target: 'cpu',
    maxBatch: Math.max(...BATCHES),
    maxSrcLen: SRC_LEN,
    maxTgtLen: PAST_LEN + 1,
  });
  const plan = loadPlanBytes(encodePlan(built.header, built.blob), `${name}.plan`);
  const threads = os.cpus().length;
  const graphs = ['encoder', 'decoder', 'decoder_with_past'];
  const sessions = new Map<string, ort.InferenceSession>();
  for (const g of graphs)
    sessions.set(
      g,
      await ort.InferenceSession.create(model.sources[g]!, {
        graphOptimizationLevel: 'all',
        intraOpNumThreads: threads,
      }),
    );
  const cases = graphs.flatMap((graph) =>
    BATCHES.map((b) => {
      const feeds = feedsFor(plan, graph, b, vocab, rng(b * 7 + graph.length));
      const ortFeeds = ortFeedsOf(feeds);
      return { graph, b, feeds, ortFeeds, planc: [] as number[], ort: [] as number[] };
    }),
  );
  try {
    for (let r = 0; r < ROUNDS; r++) {
      for (const c of cases) c.planc.push(await median(() => plan.runSync(c.graph, c.feeds)));
      for (const c of cases) c.ort.push(await median(() => sessions.get(c.graph)!.run(c.ortFeeds)));
    }
  } finally {
    plan.close();
    for (const s of sessions.values()) await s.release();
  }
  for (const c of cases) {
    const plancMs = middle(c.planc);
    const ortMs = middle(c.ort);
    const row = {
      model: name,
      graph: c.graph,
      batch: c.b,
      plancMs,
      ortMs,
      ratio: ortMs / plancMs,
      plancRounds: c.planc,
      ortRounds: c.ort,
    };
    rows.push(row);
    console.log(
      `${name.padEnd(10)} ${c.graph.padEnd(18)} b=${String(c.b).padEnd(3)} planc ${plancMs.toFixed(2).padStart(8)} ms   ort ${ortMs.toFixed(2).padStart(8)} ms   ort/planc ${row.ratio.toFixed(2)}`,
    );
  }
}

export async function benchCpu(): Promise<void> {
  const rows: Row[] = [];
  console.log(
    `planc native CPU runtime (${FUSE ? 'fused plans: the pass pipeline without top-k, logits kept' : 'unfused plans (PLANC_BENCH_NO_FUSE=1)'}) vs onnxruntime-node ${ort.env.versions?.common ?? ''} — encoder src ${SRC_LEN}, decoder_with_past past ${PAST_LEN}; median of ${ROUNDS} rounds of medians`,
  );
  const shared = sharedDir();
  const esen = shared && path.join(shared, 'models', 'es-en');
  if (esen && fs.existsSync(esen)) await benchModel('es-en', esen, 32000, rows);
  else console.log('(es-en skipped: ../shared/models/es-en not here)');
  const synth = path.join(os.tmpdir(), 'planc-bench', 'opus-base');
  if (!fs.existsSync(path.join(synth, 'decoder_with_past_model.onnx'))) {
    console.log(`generating the synthetic opus-mt-base-sized model in ${synth} ...`);
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
  await benchModel('opus-base', synth, 58101, rows);
  const result = {
    bench: 'cpu',
    plans: FUSE ? 'fused' : 'unfused',
    machine: machineFacts({
      native: native().info(),
      ort: 'onnxruntime-node (default options, graphOptimizationLevel all, intraOpNumThreads = cores)',
    }),
    rows,
  };
  const out = path.join(REPO_ROOT, 'bench', 'results', 'cpu.jsonl');
  fs.appendFileSync(out, JSON.stringify(result) + '\n');
  console.log(`appended to ${path.relative(process.cwd(), out)}`);
}
