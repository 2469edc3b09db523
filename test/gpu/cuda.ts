// `npm run test:gpu`: cuda plans on a real GPU against the CPU backend: every graph of es-en and of the opus-base shape
// (fp32, 1e-4 relative; w8, fp16 and bf16 plans of opus-base against the cpu plans of the same precision), again through
// CUDA-graph replay, and greedy es-en translation identical to the CPU's.
// Without a GPU it prints "skipped: no GPU (reason)" and exits 0.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Model } from '../../compiler/ir.ts';
import { importSeq2SeqDir } from '../../model/onnx/import-model.ts';
import { sharedDir } from '../../compiler/paths.ts';
import { encodePlan } from '../../compiler/plan/format.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import { buildPlan } from '../../codegen/build-plan.ts';
import { fromRt } from '../reference/rt-tensors.ts';
import { PAST_LENGTH_INPUT } from '../../compiler/plan/io-names.ts';
import { cudaStatus, nativeAvailable } from '../../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../../runtime/plan.ts';
import type { RtTensor } from '../../runtime/tensor.ts';
import { runPipeline } from '../../passes/pipeline.ts';
import { DEFAULTS, makeModel } from '../../scripts/make-model/generate.ts';
import { cacheRows } from '../helpers/cache-feeds.ts';
import { relErr } from '../helpers/ort.ts';
import { cloneFeeds, randomFeeds } from '../helpers/random-feeds.ts';
import type { LayerPrecision } from '../../compiler/quant/layers.ts';

const TOL = 1e-4;

const GRAPHS = ['encoder', 'decoder', 'decoder_with_past'];

function skip(reason: string): never {
  console.log(`test:gpu skipped: no GPU (${reason.replace(/^no GPU: /, '')})`);
  process.exit(0);
}

if (!nativeAvailable()) skip('the native addon is not built: npm run build:native');
const status = cudaStatus();
if (!status.available) skip(status.reason);
console.log(`test:gpu on ${status.reason}`);
process.env.PLANC_CUDA_POISON = '1'; // cuda arenas start as NaN: an output element no kernel writes fails the comparison

interface Row {
  model: string;
  check: string;
  worst: number;
  ok: boolean;
  note: string;
}
const rows: Row[] = [];

function plans(
  model: Model,
  name: string,
  topk?: number,
  precision?: LayerPrecision,
): { cpu: Plan; cuda: Plan; cudaGraph: Plan } {
  const m = runPipeline(model, { topk, ...(precision ? { quantize: { precision } } : {}) });
  const opts = { maxBatch: 8, maxSrcLen: 48, maxTgtLen: 64 };
  const cpu = buildPlan(m, { ...opts, target: 'cpu' });
  const cuda = buildPlan(m, { ...opts, target: 'cuda' });
  const bytes = encodePlan(cuda.header, cuda.blob);
  const prev = process.env.PLANC_CUDA_GRAPH;
  process.env.PLANC_CUDA_GRAPH = '1';
  const cudaGraph = loadPlanBytes(bytes, `${name}-cuda-graph.plan`);
  if (prev === undefined) delete process.env.PLANC_CUDA_GRAPH;
  else process.env.PLANC_CUDA_GRAPH = prev;
  return {
    cpu: loadPlanBytes(encodePlan(cpu.header, cpu.blob), `${name}-cpu.plan`),
    cuda: loadPlanBytes(bytes, `${name}-cuda.plan`),
    cudaGraph,
  };
}

/** Runs a graph on a copy of the feeds; the valid rows of in-place caches (STATE feeds) join the outputs. */
function run(plan: Plan, graph: string, feeds: Record<string, RtTensor>): Record<string, Tensor> {
  const rt = cloneFeeds(feeds);
  const out = plan.runSync(graph, rt);
  const res: Record<string, Tensor> = Object.fromEntries(Object.entries(out).map(([k, v]) => [k, fromRt(v)]));
  const pastFeed = rt[PAST_LENGTH_INPUT];
  if (pastFeed) {
    const past = Number((pastFeed.data as BigInt64Array)[0]);
    for (const [k, v] of Object.entries(rt))
      if (k.startsWith('kv_cache.'))
        res[`${k} (rows 0..${past})`] = cacheRows(v.data as Float32Array, v.dims, past + 1);
  }
  return res;
}

function compare(model: string, check: string, want: Record<string, Tensor>, got: Record<string, Tensor>): void {
  let worst = 0;
  let note = '';
  for (const [k, w] of Object.entries(want)) {
    const g = got[k];
    // Integer outputs (top-k ids) must be equal; floats within TOL relative to the largest magnitude.
    const e = !g
      ? Infinity
      : w.dtype.startsWith('int')
        ? g.nums.every((x, i) => x === w.nums[i]) && g.dims.join() === w.dims.join()
          ? 0
          : Infinity
        : relErr(g, w);
    if (!(e <= worst)) {
      worst = e;
      note = k;
    }
  }
  rows.push({ model, check, worst, ok: worst < TOL, note });
}

/** Every graph at batch 1 and 5 on random feeds (NaN in the cache rows a step must not read): CUDA vs CPU. */
function checkModel(name: string, dir: string, vocab: number, topk?: number, precision?: LayerPrecision): Plan[] {
  const model = importSeq2SeqDir(dir); // fresh: the passes rewrite the model they get
  const p = plans(model, name, topk, precision);
  for (const g of GRAPHS) {
    for (const batch of [1, 5]) {
      const feeds = randomFeeds(p.cpu, g, { batch, srcLen: 23, past: 5, vocab, seed: batch * 31 + g.length });
      const want = run(p.cpu, g, feeds);
      compare(name, `${g} b=${batch}: cuda vs cpu`, want, run(p.cuda, g, feeds));
      compare(name, `${g} b=${batch}: cuda graph capture`, want, run(p.cudaGraph, g, feeds));
      compare(name, `${g} b=${batch}: cuda graph replay`, want, run(p.cudaGraph, g, feeds));
    }
  }
  return [p.cpu, p.cuda, p.cudaGraph];
}

const open: Plan[] = [];
const shared = sharedDir();
const esen = shared && path.join(shared, 'models', 'es-en');
if (esen && fs.existsSync(esen)) {
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')).src_ids;
  open.push(...checkModel('es-en', esen, 32000));
  open.push(...checkModel('es-en --topk 4', esen, 32000, 4));
  // Greedy translation of test sentences: identical ids on CUDA and CPU (a difference is reported with its position).
  const cpu = open[0]!;
  const cuda = open[1]!;
  const src = ids.slice(0, 200);
  const a = await cpu.translateIds(src);
  const b = await cuda.translateIds(src);
  const diff = a.map((r, i) => (r.ids.join() === b[i]!.ids.join() ? -1 : i)).filter((i) => i >= 0);
  rows.push({
    model: 'es-en',
    check: `greedy, ${src.length} test sentences`,
    worst: diff.length,
    ok: diff.length === 0,
    note: diff.length ? `differ at ${diff.slice(0, 5).join(', ')}` : 'identical',
  });
} else {
  console.log(
    'es-en skipped: ../shared/models/es-en is not here (its 93 MB do not fit a device carry; the opus-base shape is generated here)',
  );
}

const synth = path.join(os.tmpdir(), 'planc-gpu-models', 'opus-base');
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
open.push(...checkModel('opus-base', synth, 58101, 4));
// int8 weight-only (--quantize w8): the device's quantized kernels against the cpu w8 plan
open.push(...checkModel('opus-base w8', synth, 58101, 4, 'w8'));
// fp16 / bf16 on the tensor cores against the cpu reference plans of the same precision (inputs rounded alike)
for (const p of ['fp16', 'bf16'] as const) {
  open.push(...checkModel(`opus-base ${p}`, synth, 58101, 4, p));
  for (const plan of open.splice(-3)) plan.close();
}
for (const p of open) p.close();

console.log('\nmodel            check                               worst rel. error   ok   note');
for (const r of rows)
  console.log(
    `${r.model.padEnd(16)} ${r.check.padEnd(35)} ${r.worst.toExponential(2).padStart(16)}   ${r.ok ? 'yes' : 'NO '}  ${r.note}`,
  );
const failed = rows.filter((r) => !r.ok).length;
console.log(
  failed ? `\ntest:gpu: ${failed} of ${rows.length} checks FAILED` : `\ntest:gpu: all ${rows.length} checks passed`,
);
process.exitCode = failed ? 1 : 0;
