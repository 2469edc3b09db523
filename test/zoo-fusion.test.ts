// Zoo exports (optimum, opset 18): every biased linear layer becomes planc.FusedMatMul (swish, gelu via Erf, residuals
// included), every norm planc.LayerNorm / planc.RMSNorm, the vocabulary projection planc.ProjectTopK, in the three-file
// and the merged-only layouts, and the fused graphs, top-k outputs included, match onnxruntime on the unmodified files.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Graph } from '../compiler/ir.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { TOPK_IDS_OUTPUT, TOPK_LOGPROBS_OUTPUT } from '../compiler/plan/io-names.ts';
import { fromRt, toRt } from './reference/rt-tensors.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { checkGraph, toCacheFeeds } from './helpers/cache-feeds.ts';
import { seq2seqCases, type GraphCase } from './helpers/seq2seq-feeds.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';

const TOL = 1e-4;
const GRAPHS = ['encoder', 'decoder', 'decoder_with_past'];
const shared = sharedDir();
const zoo = shared && path.join(shared, 'models', 'zoo');

/** 2 + 2 layers: 6 biased linear layers per encoder layer, 10 per decoder layer (8 in a step: cross K/V are past). */
const counts = (
  norm: string,
  enc: [number, number],
  dec: [number, number, number],
): Record<string, Record<string, number>> => ({
  encoder: { 'planc.FusedMatMul': enc[0], [norm]: enc[1] },
  decoder: { 'planc.FusedMatMul': dec[0], [norm]: dec[2], 'planc.ProjectTopK': 1 },
  decoder_with_past: { 'planc.FusedMatMul': dec[1], [norm]: dec[2], 'planc.ProjectTopK': 1 },
});
const WANT: Record<string, Record<string, Record<string, number>>> = {
  marian: counts('planc.LayerNorm', [12, 4], [20, 16, 6]), // post-LN, swish
  mbart: counts('planc.LayerNorm', [12, 6], [20, 16, 8]), // pre-LN + embedding and final norms, gelu (Erf)
  bart: counts('planc.LayerNorm', [12, 5], [20, 16, 7]), // post-LN + embedding norm, gelu (Erf)
  // no biases: FusedMatMul where a residual or the ReLU follows (out projections, FFN in and out)
  t5: counts('planc.RMSNorm', [6, 5], [8, 8, 7]),
};

/** Unfused leftovers: decomposed activations and norms, bias Adds after a MatMul by a constant weight. */
function leftovers(g: Graph): string[] {
  const producer = new Map(g.nodes.flatMap((n) => n.outputs.map((o) => [o, n] as const)));
  const isConst = (v: string): boolean => {
    const p = producer.get(v);
    return g.initializers.has(v) || p?.op === 'Constant' || (p?.op === 'Identity' && isConst(p.inputs[0]!));
  };
  return g.nodes
    .filter(
      (n) =>
        n.domain === '' &&
        (['Erf', 'Sigmoid', 'Sqrt', 'ReduceMean', 'LayerNormalization'].includes(n.op) ||
          (n.op === 'Add' &&
            n.inputs.some(isConst) &&
            n.inputs.some((x) => producer.get(x)?.op === 'MatMul' && isConst(producer.get(x)!.inputs[1]!)))),
    )
    .map((n) => `${n.op} ${n.name}`);
}

/**
 * The plan's top-k outputs against onnxruntime's logits: the k best log-softmax values within TOL (relative to the
 * largest logit, as relErr), and each id's log-prob equal to its value (a near-tie may order ids either way). Returns the case with top-k outputs expected.
 */
function checkTopK(plan: Plan, graph: string, c: GraphCase): GraphCase {
  const feeds = plan.inputs(graph).some((i) => i.name.startsWith('kv_cache.')) ? toCacheFeeds(c.feeds, 8) : c.feeds;
  const out = plan.runSync(graph, Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, toRt(v)])));
  const values = fromRt(out[TOPK_LOGPROBS_OUTPUT]!),
    ids = fromRt(out[TOPK_IDS_OUTPUT]!);
  const { logits, ...rest } = c.expected;
  const v = logits!.dims[logits!.dims.length - 1]!,
    k = TRANSLATE_TOPK;
  const tol = TOL * Array.from(logits!.nums, Math.abs).reduce((a, x) => Math.max(a, x), 1e-6); // relative, as relErr
  for (let r = 0; r < logits!.size / v; r++) {
    const row = Float64Array.from(logits!.nums.slice(r * v, (r + 1) * v));
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((a, x) => a + Math.exp(x - max), 0));
    const best = [...row].sort((a, b) => b - a);
    for (let t = 0; t < k; t++) {
      const got = values.nums[r * k + t]!;
      assert.ok(
        Math.abs(got - (best[t]! - lse)) < tol,
        `${graph}: row ${r} top ${t}: log-prob ${got} vs onnxruntime's ${best[t]! - lse}`,
      );
      assert.ok(
        Math.abs(got - (row[ids.nums[r * k + t]!]! - lse)) < tol,
        `${graph}: row ${r} top ${t}: id ${ids.nums[r * k + t]} is not onnxruntime's`,
      );
    }
  }
  return { ...c, expected: { ...rest, [TOPK_LOGPROBS_OUTPUT]: values, [TOPK_IDS_OUTPUT]: ids } };
}

if (!zoo || !fs.existsSync(zoo)) {
  skipSuite(
    test,
    needsShared('models/zoo'),
    Object.keys(WANT).flatMap((family) => [
      `${family}: fused op counts (FusedMatMul, norms, ProjectTopK) and no unfused leftovers`,
      `${family}: the merged-only layout (encoder + decoder_model_merged) fuses the same`,
      `${family}: every fused graph (top-k outputs included) matches onnxruntime within ${TOL}`,
    ]),
  );
} else {
  for (const [family, want] of Object.entries(WANT)) {
    const dir = path.join(zoo, family);
    const model = importSeq2SeqDir(dir);
    const fused = runPipeline(model, { topk: TRANSLATE_TOPK });
    const built = buildPlan(fused, { target: 'cpu', maxBatch: 4, maxSrcLen: 128, maxTgtLen: 8 });

    test(`${family}: fused op counts (FusedMatMul, norms, ProjectTopK) and no unfused leftovers`, () => {
      for (const g of GRAPHS) {
        const ops = built.header.programs.find((p) => p.graph === g)!.fusedOps;
        for (const [op, n] of Object.entries(want[g]!))
          assert.is(ops[op], n, `${g}: ${op} (fused ops ${JSON.stringify(ops)})`);
        assert.equal(leftovers(fused.graphs.get(g)!), [], `${g}: unfused nodes`);
      }
    });

    test(`${family}: the merged-only layout (encoder + decoder_model_merged) fuses the same`, () => {
      const merged = fs.mkdtempSync(path.join(os.tmpdir(), `planc-zoo-merged-${family}-`));
      try {
        for (const f of fs.readdirSync(dir))
          if (!/^decoder(_with_past)?_model\.onnx$/.test(f)) fs.symlinkSync(path.join(dir, f), path.join(merged, f));
        const m = runPipeline(importSeq2SeqDir(merged), { topk: TRANSLATE_TOPK });
        for (const g of GRAPHS) {
          const ops: Record<string, number> = {};
          for (const n of m.graphs.get(g)!.nodes)
            if (n.domain === 'planc') ops[`planc.${n.op}`] = (ops[`planc.${n.op}`] ?? 0) + 1;
          for (const [op, n] of Object.entries(want[g]!))
            assert.is(ops[op], n, `${g}: ${op} (fused ops ${JSON.stringify(ops)})`);
        }
      } finally {
        fs.rmSync(merged, { recursive: true, force: true });
      }
    });

    testIf(test, !nativeAvailable() && NEEDS_NATIVE)(
      `${family}: every fused graph (top-k outputs included) matches onnxruntime within ${TOL}`,
      async () => {
        const ref = JSON.parse(fs.readFileSync(path.join(dir, 'reference.json'), 'utf8')) as { src_ids: number[][] };
        const d = model.decoding;
        const cases = await seq2seqCases(
          model.sources,
          [0, 5, 11, 18].map((i) => ref.src_ids[i]!),
          d.decoderStartId ?? 0,
          d.padId ?? 0,
        );
        const plan = loadPlanBytes(encodePlan(built.header, built.blob), `${family}.plan`);
        try {
          for (const g of GRAPHS)
            await checkGraph(plan, g, g === 'encoder' ? cases[g]! : checkTopK(plan, g, cases[g]!), TOL, 8);
        } finally {
          plan.close();
        }
      },
    );
  }
}

test.run();
