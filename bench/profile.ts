// `node --import tsx bench/profile.ts MODEL_DIR GRAPH BATCH [--no-fuse]`: where a graph's time goes, per kernel kind and kernel.
import { importSeq2SeqDir } from '../compiler/onnx/import-model.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';

const args = process.argv.slice(2).filter((a) => a !== '--no-fuse');
const [dir, graph = 'encoder', batchArg = '1'] = args;
if (!dir) throw new Error('usage: bench/profile.ts MODEL_DIR [GRAPH] [BATCH]');
const b = Number(batchArg);
const model = importSeq2SeqDir(dir);
const fuse = !process.argv.includes('--no-fuse');
const built = buildPlan(fuse ? runPipeline(model, { topk: TRANSLATE_TOPK, disable: (process.env.PLANC_DISABLE ?? '').split(',').filter((x) => x) }) : model, { target: 'cpu', maxBatch: b, maxSrcLen: 32, maxTgtLen: 33 });
const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'profile');
const feeds: Record<string, RtTensor> = {};
for (const io of plan.inputs(graph)) {
  const dims = io.dims.map((d) => (/batch/.test(d) ? b : /past/.test(d) ? 32 : /cache_capacity/.test(d) ? 33 : /encoder/.test(d) ? 32 : /decoder_sequence/.test(d) ? 1 : Number(d)));
  const n = dims.reduce((x, y) => x * y, 1);
  feeds[io.name] = io.dtype === 'int64'
    ? { dtype: 'int64', dims, data: new BigInt64Array(n).fill(io.name === 'input_ids' ? 5n : io.name === 'past_sequence_length' ? 32n : 1n) }
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
console.log(`${graph} batch ${b}: ${wall.toFixed(3)} ms per run (kernels ${total.toFixed(3)} ms, overhead ${(wall - total).toFixed(3)} ms)`);
for (const [k, ms] of [...byKind].sort((x, y) => y[1] - x[1])) console.log(`  ${k.padEnd(14)} ${ms.toFixed(3).padStart(8)} ms  ${((100 * ms) / total).toFixed(1)}%`);
console.log('top kernels:');
for (const p of [...prof].sort((x, y) => y.ms - x.ms).slice(0, Number(process.env.PLANC_PROFILE_TOP ?? 12))) console.log(`  ${(p.ms / runs).toFixed(3).padStart(8)} ms  ${p.kernel.padEnd(12)} ${p.node}`);
plan.close();
