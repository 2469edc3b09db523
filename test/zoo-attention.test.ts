// Zoo exports (optimum, opset 18): every attention block becomes planc.Attention, decoder_with_past appends to
// in-place caches (no K/V Concat), and each fused graph matches onnxruntime on the unmodified files within 1e-4.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Model } from '../compiler/ir.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { checkGraph } from './helpers/cache-feeds.ts';
import { seq2seqCases } from './helpers/seq2seq-feeds.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';

const TOL = 1e-4;
const GRAPHS = ['encoder', 'decoder', 'decoder_with_past'];
const FAMILIES = ['marian', 'mbart', 't5', 'bart'];
const shared = sharedDir();
const zoo = shared && path.join(shared, 'models', 'zoo');

/** Per graph of the unfused model: attention blocks (one Softmax each) and K/V Concats onto a past input. */
function expectedCounts(model: Model): Record<string, { attention: number; cacheWrites: number }> {
  const out: Record<string, { attention: number; cacheWrites: number }> = {};
  for (const [name, g] of model.graphs) {
    const past = new Set(g.inputs.filter((i) => i.startsWith('past_key_values.') && i.includes('.decoder.')));
    out[name] = {
      attention: g.nodes.filter((n) => n.op === 'Softmax').length,
      cacheWrites: g.nodes.filter((n) => n.op === 'Concat' && n.inputs.some((i) => past.has(i))).length,
    };
  }
  return out;
}

if (!zoo || !fs.existsSync(zoo)) {
  skipSuite(
    test,
    needsShared('models/zoo'),
    FAMILIES.flatMap((family) => [
      `${family}: one planc.Attention per attention block, two planc.CacheWrite per decoder layer, no K/V Concat`,
      `${family}: every fused graph matches onnxruntime within ${TOL}`,
    ]),
  );
} else {
  for (const family of FAMILIES) {
    const dir = path.join(zoo, family);
    const model = importSeq2SeqDir(dir);
    const fused = runPipeline(model);
    const built = buildPlan(fused, { target: 'cpu', maxBatch: 4, maxSrcLen: 128, maxTgtLen: 8 });

    test(`${family}: one planc.Attention per attention block, two planc.CacheWrite per decoder layer, no K/V Concat`, () => {
      const want = expectedCounts(model);
      assert.is(
        want.encoder!.attention > 0 && want.decoder_with_past!.cacheWrites > 0,
        true,
        'the export has attention blocks and past K/V Concats',
      );
      for (const g of GRAPHS) {
        const ops = built.header.programs.find((p) => p.graph === g)!.fusedOps;
        const info = `${g}: fused ops ${JSON.stringify(ops)}`;
        assert.is(ops['planc.Attention'], want[g]!.attention, info);
        assert.is(ops['planc.CacheWrite'], want[g]!.cacheWrites || undefined, info);
        assert.not.ok(
          fused.graphs.get(g)!.nodes.some((n) => n.domain === '' && n.op === 'Softmax'),
          `${g}: a Softmax is left`,
        );
      }
      const step = fused.graphs.get('decoder_with_past')!;
      assert.not.ok(
        step.inputs.some((i) => i.startsWith('past_key_values.') && i.includes('.decoder.')),
        'decoder self-attention past inputs are gone',
      );
      assert.not.ok(
        step.outputs.some((o) => o.startsWith('present.')),
        'present outputs are gone',
      );
      assert.not.ok(
        step.nodes.some((n) => n.op === 'Concat' && n.inputs.some((i) => i.startsWith('kv_cache.'))),
        'no Concat reads a cache',
      );
      assert.ok(
        step.inputs.some((i) => i.startsWith('past_key_values.') && i.includes('.encoder.')),
        'cross-attention K/V stay inputs',
      );
    });

    testIf(test, !nativeAvailable() && NEEDS_NATIVE)(
      `${family}: every fused graph matches onnxruntime within ${TOL}`,
      async () => {
        const ref = JSON.parse(fs.readFileSync(path.join(dir, 'reference.json'), 'utf8')) as { src_ids: number[][] };
        const d = model.decoding;
        // mixed lengths up to 67: the shorter rows are padded, T5's relative buckets reach the log-spaced ones
        const cases = await seq2seqCases(
          model.sources,
          [0, 5, 11, 18].map((i) => ref.src_ids[i]!),
          d.decoderStartId ?? 0,
          d.padId ?? 0,
        );
        const plan = loadPlanBytes(encodePlan(built.header, built.blob), `${family}.plan`);
        try {
          for (const g of GRAPHS) await checkGraph(plan, g, cases[g]!, TOL, 8);
        } finally {
          plan.close();
        }
      },
    );
  }
}

test.run();
