// `node --import tsx bench/profile.ts MODEL_DIR GRAPH BATCH [--no-fuse] [--quantize int8|w8|int16] [--variant KERNEL=VARIANT]...`: where a graph's time
// goes, per kernel kind and kernel, and its weight bytes per run against the memory-bandwidth floor measured here.
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { TENSOR_KIND } from '../compiler/plan/types.ts';
import type { LayerPrecision } from '../compiler/quant/layers.ts';

const argv = process.argv.slice(2);
const qAt = argv.indexOf('--quantize');
const quantize = qAt >= 0 ? { precision: argv[qAt + 1] as LayerPrecision } : undefined;
const variants: Record<string, string> = {};
argv.forEach((a, i) => {
  if (a === '--variant') {
    const [k, v] = argv[i + 1]!.split('=');
    variants[k!] = v!;
  }
});
const args = argv.filter(
  (a, i) =>
    a !== '--no-fuse' && a !== '--variant' && argv[i - 1] !== '--variant' && (qAt < 0 || (i !== qAt && i !== qAt + 1)),
);
const [dir, graph = 'encoder', batchArg = '1'] = args;
if (!dir) throw new Error('usage: bench/profile.ts MODEL_DIR [GRAPH] [BATCH]');
const b = Number(batchArg);
const model = importSeq2SeqDir(dir);
const fuse = !process.argv.includes('--no-fuse');
const built = buildPlan(
  fuse
    ? runPipeline(model, {
        topk: TRANSLATE_TOPK,
        quantize,
        disable: (process.env.PLANC_DISABLE ?? '').split(',').filter((x) => x),
      })
    : model,
  { target: 'cpu', maxBatch: b, maxSrcLen: 32, maxTgtLen: 33, variants },
);
const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'profile');
const feeds: Record<string, RtTensor> = {};
for (const io of plan.inputs(graph)) {
  const dims = io.dims.map((d) =>
    /batch/.test(d)
      ? b
      : /past/.test(d)
        ? 32
        : /cache_capacity/.test(d)
          ? 33
          : /encoder/.test(d)
            ? 32
            : /decoder_sequence|step_tokens/.test(d)
              ? 1
              : Number(d),
  );
  const n = dims.reduce((x, y) => x * y, 1);
  feeds[io.name] =
    io.dtype === 'int64'
      ? {
          dtype: 'int64',
          dims,
          data: new BigInt64Array(n).fill(io.name === 'input_ids' ? 5n : io.name === 'past_sequence_length' ? 32n : 1n),
        }
      : { dtype: 'float32', dims, data: Float32Array.from({ length: n }, (_, i) => Math.sin(i) * 0.3) };
}
for (let i = 0; i < 5; i++) plan.runSync(graph, feeds);
plan.profile(graph, true);
const runs = 30;
const t0 = performance.now();
for (let i = 0; i < runs; i++) plan.runSync(graph, feeds);
const wall = (performance.now() - t0) / runs;
const prof = plan.profile(graph, false);
const byKind = new Map<string, number>();
for (const p of prof) byKind.set(p.kernel, (byKind.get(p.kernel) ?? 0) + p.ms / runs);
const total = [...byKind.values()].reduce((a, c) => a + c, 0);
console.log(
  `${graph} batch ${b}: ${wall.toFixed(3)} ms per run (kernels ${total.toFixed(3)} ms, overhead ${(wall - total).toFixed(3)} ms)`,
);
for (const [k, ms] of [...byKind].sort((x, y) => y[1] - x[1]))
  console.log(`  ${k.padEnd(14)} ${ms.toFixed(3).padStart(8)} ms  ${((100 * ms) / total).toFixed(1)}%`);
console.log('top kernels:');
for (const p of [...prof].sort((x, y) => y.ms - x.ms).slice(0, Number(process.env.PLANC_PROFILE_TOP ?? 12)))
  console.log(`  ${(p.ms / runs).toFixed(3).padStart(8)} ms  ${p.kernel.padEnd(12)} ${p.node}`);
// the weights this graph reads per run, and the floor of streaming them at the copy bandwidth measured now
const prog = built.header.programs.find((p) => p.graph === graph)!;
// inputs read by row, not streamed: a gather's table (and a qgather's residual plane) holds the rows asked for, and
// qproject_topk reads the residual rows of its few best ids only
const BY_ROW: Record<string, number[]> = { gather: [0], qgather: [0, 3], qproject_topk: [6] };
const gathered = new Set(
  prog.kernels.flatMap((k) => (BY_ROW[k.name] ?? []).map((i) => k.inputs[i] ?? -1).filter((t) => t >= 0)),
);
const used = new Set(
  prog.tensors.filter((t, i) => t.kind === TENSOR_KIND.WEIGHT && !gathered.has(i)).map((t) => t.ref),
);
const weightBytes = [...used].reduce((a, i) => a + built.header.weights[i]!.length, 0);
const N = 256 << 20,
  src = plan.residentNew(N),
  dst = plan.residentNew(N);
plan.residentCopy(src, dst, [0, 0, N]);
const c0 = performance.now();
for (let i = 0; i < 5; i++) plan.residentCopy(src, dst, [0, 0, N]);
const gbps = (2 * 5 * N) / ((performance.now() - c0) / 1000) / 1e9; // bytes read + written per second
plan.residentFree(src);
plan.residentFree(dst);
const floor = (weightBytes / (gbps * 1e9)) * 1000;
console.log(
  `weights read per run (gather tables and residual planes excluded): ${(weightBytes / 1e6).toFixed(2)} MB; memory bandwidth (memcpy, read + write) ${gbps.toFixed(1)} GB/s; floor ${floor.toFixed(3)} ms per run; this run ${wall.toFixed(3)} ms = ${(wall / floor).toFixed(2)}x the floor`,
);
plan.close();
