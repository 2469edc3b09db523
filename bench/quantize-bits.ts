// `npm run bench -- quantize-bits`: how many bits of weight precision es-en's greedy output needs. Weights are
// quantized and dequantized in place (symmetric, per output channel or per group of K, b bits) and the float32 plan
// translates the first 200 test sentences; identical outputs vs the untouched plan are counted. No kernel is involved:
// this is the model's own sensitivity, the ceiling of any b-bit weight format.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import type { Model } from '../compiler/ir.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { Tensor, transposeMatrix } from '../compiler/tensor.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { TRANSLATE_TOPK, runPipeline } from '../passes/pipeline.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { machineFacts } from './machine.ts';
import { esenDir } from './shared-models.ts';

const SENTENCES = 200;
/** [bits, group along K (0: a whole channel), which weights] */
const CASES: [number, number, 'all' | 'layers' | 'output'][] = [
  [8, 0, 'all'],
  [8, 64, 'all'],
  [8, 32, 'all'],
  [8, 0, 'layers'],
  [8, 0, 'output'],
  [10, 0, 'all'],
  [12, 0, 'all'],
  [16, 0, 'all'],
];

/** W [K, N]: each channel (column), or each group of `group` values of K in it, to b-bit symmetric steps and back. */
function fakeQuant(w: Float32Array, k: number, n: number, bits: number, group: number): Float32Array {
  const out = new Float32Array(w.length),
    lim = 2 ** (bits - 1) - 1,
    g = group || k;
  for (let c = 0; c < n; c++) {
    for (let g0 = 0; g0 < k; g0 += g) {
      const g1 = Math.min(k, g0 + g);
      let max = 0;
      for (let r = g0; r < g1; r++) max = Math.max(max, Math.abs(w[r * n + c]!));
      const s = max / lim || 1;
      for (let r = g0; r < g1; r++) out[r * n + c] = Math.max(-lim, Math.min(lim, Math.round(w[r * n + c]! / s))) * s;
    }
  }
  return out;
}

/** The optimized model with the chosen weights fake-quantized (the output layer's and embeddings' channels are their rows). */
function quantized(m: Model, bits: number, group: number, which: string): { model: Model; count: number } {
  const weights = new Map(m.weights);
  const done = new Set<string>();
  for (const g of m.graphs.values()) {
    for (const n of g.nodes) {
      const output = n.op === 'ProjectTopK' || n.op === 'Gather';
      if (
        !(output || n.op === 'FusedMatMul' || n.op === 'MatMul') ||
        (which === 'layers' && output) ||
        (which === 'output' && !output)
      )
        continue;
      const id = g.initializers.get(n.op === 'Gather' ? n.inputs[0]! : n.inputs[1]!);
      const t = id === undefined ? undefined : weights.get(id)?.tensor;
      if (!t || done.has(id!) || t.rank !== 2 || t.dtype !== 'float32' || (n.op === 'Gather' && t.size < 1 << 18))
        continue;
      done.add(id!);
      const [a, b] = t.dims as [number, number];
      const rows = n.op === 'Gather' || (n.attrs.transposed?.kind === 'int' && n.attrs.transposed.value === 1);
      const w = t.nums as Float32Array;
      const d = rows
        ? transposeMatrix(fakeQuant(transposeMatrix(w, a, b), b, a, bits, group), b, a)
        : fakeQuant(w, a, b, bits, group);
      weights.set(id!, { ...weights.get(id!)!, tensor: new Tensor('float32', [a, b], d) });
    }
  }
  return { model: { ...m, weights }, count: done.size };
}

export async function benchQuantizeBits(): Promise<void> {
  const dir = esenDir('quantize-bits');
  if (!dir) return;
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(dir, 'test_ids.json'), 'utf8')).src_ids.slice(
    0,
    SENTENCES,
  );
  const base = runPipeline(importSeq2SeqDir(dir), { topk: TRANSLATE_TOPK });
  const decode = async (m: Model) => {
    const b = buildPlan(m, {
      target: 'cpu',
      maxBatch: 32,
      maxSrcLen: 256,
      maxTgtLen: 64,
      maxDims: { decoder_sequence_length: 1 },
    });
    const plan = loadPlanBytes(encodePlan(b.header, b.blob), 'bits.plan');
    try {
      return (await translateIds(plan, ids, { batchSize: 32, maxLength: 64 })).map((r) => r.ids.join());
    } finally {
      plan.close();
    }
  };
  const ref = await decode(base);
  const rows = [];
  console.log(`es-en: greedy outputs identical to float32 with fake-quantized weights (${SENTENCES} test sentences)`);
  for (const [bits, group, which] of CASES) {
    const q = quantized(base, bits, group, which);
    const out = await decode(q.model);
    const identical = out.filter((x, i) => x === ref[i]).length;
    rows.push({ bits, group, which, weights: q.count, identical });
    console.log(
      `  ${bits} bits, ${group ? `groups of ${group}` : 'per channel'}, ${which.padEnd(6)} (${q.count} weights): identical ${identical}/${SENTENCES}`,
    );
  }
  const file = path.join(REPO_ROOT, 'bench', 'results', 'quantize-bits.jsonl');
  fs.appendFileSync(
    file,
    JSON.stringify({ bench: 'quantize-bits', model: 'es-en', sentences: SENTENCES, rows, ...machineFacts() }) + '\n',
  );
  console.log(`appended to ${path.relative(process.cwd(), file)}`);
}
