// Vocabulary rewrite (issue 6): ProjectTopK's active mask and planc.ClusterMask in the evaluator, the pass golden, the
// --vocab option's errors, and on es-en a small calibration and the real Bergamot shortlist (native runs once the
// cluster_mask kernel exists; a counted skip before).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import { importOnnxFile, importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan, decodePlan } from '../compiler/plan/format.ts';
import { printModel } from '../model/printer.ts';
import { Tensor } from '../compiler/tensor.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { readSentences, shortlistVocab, specialIdsOf } from '../compiler/vocab/header.ts';
import { AUTO_CLUSTERS, AUTO_TOPK, parseVocabSpec } from '../compiler/vocab/spec.ts';
import { autoClusters } from '../optimize/vocab-auto.ts';
import { formatVocabReport, vocabInspect } from '../cli/vocab.ts';
import { buildClusters, calibrate, exposePlan } from '../optimize/vocab-calibrate.ts';
import { evaluateQuality, outputLayer } from '../optimize/vocab-evaluate.ts';
import { FUSE_PROJECT_TOPK } from '../passes/fuse-project-topk.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { VOCAB_REWRITE } from '../passes/vocab-rewrite.ts';
import { planRules, translateIds } from '../runtime/decode/translate-ids.ts';
import { kernelIds, nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { loadTokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit } from './helpers/onnx-build.ts';
import { NEEDS_NATIVE, needsShared, testIf } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-vocab-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.7 + seed) * 0.5);

function logitsModel() {
  const p = path.join(tmp, 'logits.onnx');
  fs.writeFileSync(
    p,
    buildModel({
      inputs: [['x', 'float32', ['batch', 'len', 4]]],
      outputs: [['logits', 'float32', ['batch', 'len', 10]]],
      initializers: [floatInit('w', [4, 10], vals(40, 3)), floatInit('b', [10], vals(10, 4))],
      nodes: [
        { op: 'MatMul', inputs: ['x', 'w'], outputs: ['mm'], name: 'lm_head' },
        { op: 'Add', inputs: ['mm', 'b'], outputs: ['logits'], name: 'lm_bias' },
      ],
    }),
  );
  const m = importOnnxFile(p);
  inferModel(m);
  const f = FUSE_PROJECT_TOPK.run(m, { topk: 3 });
  inferModel(f);
  return f;
}

test('ProjectTopK: an all-ones mask computes what no mask does; a partial mask renormalizes over the active ids', () => {
  const m = logitsModel();
  const x = Tensor.fromNumbers(
    'float32',
    [2, 3, 4],
    vals(24, 7).map((v) => v * 3),
  );
  const full = evaluate(m, 'main', { x });
  const g = m.graphs.get('main')!;
  const withMask = (active: number[]) => {
    const c = VOCAB_REWRITE.run(m, { vocab: { method: 'shortlist' } });
    inferModel(c);
    return evaluate(c, 'main', { x, vocab_active: Tensor.fromNumbers('uint8', [10], active) });
  };
  const ones = withMask(new Array(10).fill(1));
  assert.equal(Array.from(ones.topk_ids!.nums, Number), Array.from(full.topk_ids!.nums, Number));
  ones.topk_logprobs!.nums.forEach((v, i) =>
    assert.ok(Math.abs(Number(v) - Number(full.topk_logprobs!.nums[i])) < 1e-6),
  );
  const active = [0, 1, 0, 1, 0, 0, 1, 0, 1, 0];
  const part = withMask(active);
  const ids = Array.from(part.topk_ids!.nums, Number);
  assert.ok(
    ids.every((j) => active[j] === 1),
    `only active ids: ${ids}`,
  );
  // Probabilities over the 4 active ids sum to 1: the top 3 leave less than the whole mass.
  for (let r = 0; r < 6; r++) {
    const s = [0, 1, 2].reduce((a, t) => a + Math.exp(Number(part.topk_logprobs!.nums[r * 3 + t])), 0);
    assert.ok(s < 1 && s > 0.5, `row ${r}: mass ${s}`);
  }
  // Fewer active ids than k: the free slots are -inf, index 0.
  const two = withMask([0, 0, 1, 0, 0, 0, 0, 0, 0, 1]);
  assert.equal(Number(two.topk_logprobs!.nums[2]), -Infinity);
  assert.equal(Number(two.topk_ids!.nums[2]), 0);
  void g;
});

test('vocab-rewrite: golden IR (shortlist and clusters); W stored transposed; ClusterMask picks the nearest centroid', () => {
  const m = logitsModel();
  matchGolden('vocab-rewrite.before.txt', printModel(m));
  assert.is(VOCAB_REWRITE.run(m, {}), m, 'without vocab the pass does nothing');
  const s = VOCAB_REWRITE.run(m, { vocab: { method: 'shortlist' } });
  inferModel(s);
  matchGolden('vocab-rewrite.shortlist.after.txt', printModel(s));
  // Two clusters in D = 4: cluster 0 around +e0 keeps ids {0, 5}, cluster 1 around −e0 keeps {7, 9}.
  const c = VOCAB_REWRITE.run(m, {
    vocab: {
      method: 'clusters',
      clusters: 2,
      dim: 4,
      centroids: Float32Array.from([1, 0, 0, 0, -1, 0, 0, 0]),
      cnorm: Float32Array.from([1, 1]),
      offsets: Int32Array.from([0, 2, 4]),
      ids: Int32Array.from([0, 5, 7, 9]),
    },
  });
  inferModel(c);
  matchGolden('vocab-rewrite.clusters.after.txt', printModel(c));
  const node = c.graphs.get('main')!.nodes.find((n) => n.op === 'ProjectTopK')!;
  assert.equal(node.attrs.transposed, { kind: 'int', value: 1 });
  const x = Tensor.fromNumbers('float32', [1, 2, 4], [2, 0.1, 0, 0, -2, 0, 0.3, 0]);
  const got = evaluate(c, 'main', { x });
  const ids = Array.from(got.topk_ids!.nums, Number);
  // Batch union: both rows read ids {0, 5, 7, 9}; k = 3 of those 4.
  assert.ok(
    ids.every((j) => [0, 5, 7, 9].includes(j)),
    `ids ${ids}`,
  );
  const one = evaluate(c, 'main', { x: Tensor.fromNumbers('float32', [1, 1, 4], [2, 0.1, 0, 0]) });
  assert.equal(Array.from(one.topk_ids!.nums, Number).slice(0, 2).sort(), [0, 5]);
  assert.equal(Number(one.topk_logprobs!.nums[2]), -Infinity);
});

test('--vocab parsing and bad calibration input', () => {
  assert.equal(parseVocabSpec('clusters=500,3'), { method: 'clusters', clusters: 500, topK: 3 });
  assert.equal(parseVocabSpec('shortlist=a,b.bin,first=10,best=20'), {
    method: 'shortlist',
    file: 'a,b.bin',
    first: 10,
    best: 20,
  });
  assert.throws(
    () => parseVocabSpec('clusters=0,3'),
    (e: unknown) => e instanceof PlancError && /R must be/.test(e.message),
  );
  assert.throws(
    () => parseVocabSpec('kmeans=3'),
    (e: unknown) => e instanceof PlancError,
  );
  assert.equal(parseVocabSpec('auto'), { method: 'auto', clusters: [...AUTO_CLUSTERS], topK: [...AUTO_TOPK] });
  assert.equal(parseVocabSpec('auto=256:64:64,8:2'), { method: 'auto', clusters: [64, 256], topK: [2, 8] });
  assert.throws(
    () => parseVocabSpec('auto=64,99'),
    (e: unknown) => e instanceof PlancError && /K must be integers in \[1, 64\]/.test(e.message),
  );
  assert.throws(
    () => parseVocabSpec('auto=x,2'),
    (e: unknown) => e instanceof PlancError && /R must be integers/.test(e.message),
  );
  const empty = path.join(tmp, 'empty.txt');
  fs.writeFileSync(empty, '\n\n');
  assert.throws(
    () => readSentences(empty, '--calibrate'),
    (e: unknown) => e instanceof PlancError && /has no sentences/.test(e.message),
  );
});

const dir = sharedDir() ? path.join(sharedDir()!, 'models', 'es-en') : '';
const haveEsEn = !!dir && fs.existsSync(path.join(dir, 'lex.50.50.esen.s2t.bin')) && nativeAvailable();

testIf(test, !haveEsEn && (nativeAvailable() ? needsShared('models/es-en') : NEEDS_NATIVE))(
  'es-en: small calibration, clusters and the Bergamot shortlist; quality report; native greedy when the kernels exist',
  async () => {
    const model = importSeq2SeqDir(dir);
    const profile = { maxBatch: 32, maxSrcLen: 128, maxTgtLen: 64, maxDims: { decoder_sequence_length: 1 } };
    const { plan, optimized } = exposePlan(model, { topk: TRANSLATE_TOPK }, { target: 'cpu', ...profile });
    const spm = fs.readFileSync(path.join(dir, 'vocab.esen.spm'));
    const tok = await loadTokenizer(spm, 'spm');
    const rules = await planRules(plan);
    const d = rules.c;
    const V = 32000;
    const specials = specialIdsOf(plan.header.decoding);
    const train = fs.readFileSync(path.join(dir, 'train.es'), 'utf8').split('\n').slice(0, 200);
    const src = fs.readFileSync(path.join(dir, 'test.es'), 'utf8').split('\n').slice(0, 40);
    const ref = fs.readFileSync(path.join(dir, 'test.en'), 'utf8').split('\n').slice(0, 40);
    try {
      const cal = calibrate(plan, tok, train, 3, rules, 128, 64);
      assert.ok(cal.states > 1000, `states ${cal.states}`);
      // R larger than the states is lowered (a documented adjustment, not a crash).
      const tiny = buildClusters(
        { ...cal, states: 5, hidden: cal.hidden.subarray(0, 5 * cal.d), topK: cal.topK.subarray(0, 15) },
        50,
        3,
        V,
        specials,
      );
      assert.is(tiny.km.clusters, 5);
      assert.match(tiny.adjustments.join(), /lowered to 5/);
      const c = buildClusters(cal, 20, 3, V, specials);
      const layer = outputLayer(optimized);
      const qc = evaluateQuality(plan, tok, layer, rules, src, ref, { kind: 'clusters', c: c.rewrite }, 128, 64);
      assert.ok(qc.activeMean > 0 && qc.activeMean < 0.2, `clusters active ${qc.activeMean}`);
      assert.ok(qc.top1Agreement > 0.5, `clusters agreement ${qc.top1Agreement}`);
      const sl = shortlistVocab(
        { method: 'shortlist', file: path.join(dir, 'lex.50.50.esen.s2t.bin') },
        { bytes: spm, kind: 'spm' },
        V,
        specials,
      );
      const qs = evaluateQuality(plan, tok, layer, rules, src, ref, { kind: 'shortlist', v: sl }, 128, 64);
      assert.ok(qs.activeMean > 0 && qs.activeMean < 0.2, `shortlist active ${qs.activeMean}`);
      assert.ok(qs.bleu !== undefined && qs.bleuFull !== undefined);
      console.log(
        `  es-en (40 test sentences): clusters R 20 K 3 active ${(100 * qc.activeMean).toFixed(1)}% agreement ${(100 * qc.top1Agreement).toFixed(1)}%; shortlist active ${(100 * qs.activeMean).toFixed(1)}% agreement ${(100 * qs.top1Agreement).toFixed(1)}%`,
      );
      // The plan stores the shortlist and the report; inspect's vocab entry reads it back.
      const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK, vocab: { method: 'shortlist' } }), {
        target: 'cpu',
        ...profile,
      });
      built.header.vocab = {
        ...sl,
        activeMean: qs.activeMean,
        top1Agreement: qs.top1Agreement,
        hasBleu: true,
        bleu: qs.bleu!,
        bleuFull: qs.bleuFull!,
      };
      const bytes = encodePlan(built.header, built.blob);
      const back = decodePlan(bytes).header.vocab!;
      assert.equal(back.targets.length, sl.targets.length);
      assert.is(back.method, 'shortlist');
      assert.ok(kernelIds().has('cluster_mask'), 'the addon has the cluster_mask kernel (npm run build:native)');
      const ids = src.map((s) => [...tok.encode(s), d.eosId]);
      const fullPlan = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK }), { target: 'cpu', ...profile });
      const pf = loadPlanBytes(encodePlan(fullPlan.header, fullPlan.blob));
      const ps = loadPlanBytes(bytes);
      const cb = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK, vocab: c.rewrite }), {
        target: 'cpu',
        ...profile,
      });
      const pc = loadPlanBytes(encodePlan(cb.header, cb.blob));
      try {
        const full = await translateIds(pf, ids, { maxLength: 64, batchSize: 1 });
        const viaSl = await translateIds(ps, ids, { maxLength: 64, batchSize: 1 });
        const viaCl = await translateIds(pc, ids, { maxLength: 64, batchSize: 1 });
        const same = (a: { ids: number[] }[]) =>
          a.filter((r, i) => r.ids.join() === full[i]!.ids.join()).length / ids.length;
        console.log(
          `  native greedy batch 1: identical to full — shortlist ${(100 * same(viaSl)).toFixed(0)}% (emulated ${(100 * qs.identicalSentences).toFixed(0)}%), clusters ${(100 * same(viaCl)).toFixed(0)}% (emulated ${(100 * qc.identicalSentences).toFixed(0)}%)`,
        );
        assert.ok(
          Math.abs(same(viaSl) - qs.identicalSentences) <= 0.05,
          'native shortlist decode matches the emulation',
        );
        assert.ok(
          Math.abs(same(viaCl) - qc.identicalSentences) <= 0.05,
          'native clusters decode matches the emulation',
        );
      } finally {
        pf.close();
        ps.close();
        pc.close();
      }
    } finally {
      plan.close();
    }
  },
);

testIf(test, !haveEsEn && (nativeAvailable() ? needsShared('models/es-en') : NEEDS_NATIVE))(
  'es-en --vocab auto: every R × K point measured, the cheapest that holds the gate kept (none: the full projection), the curve in the plan and its report',
  async () => {
    const model = importSeq2SeqDir(dir);
    const { plan, optimized } = exposePlan(
      model,
      { topk: 16 },
      { target: 'cpu', maxBatch: 32, maxSrcLen: 128, maxTgtLen: 64, maxDims: { decoder_sequence_length: 1 } },
    );
    const tok = await loadTokenizer(fs.readFileSync(path.join(dir, 'vocab.esen.spm')), 'spm');
    const rules = await planRules(plan);
    const specials = specialIdsOf(plan.header.decoding);
    const lines = (f: string, n: number) => fs.readFileSync(path.join(dir, f), 'utf8').split('\n').slice(0, n);
    try {
      const cal = calibrate(plan, tok, lines('train.es', 300), 12, rules, 128, 64);
      const setup = {
        cal,
        calibrationFile: 'train.es',
        plan,
        tok,
        layer: outputLayer(optimized),
        rules,
        evalSrc: lines('test.es', 40),
        evalRef: lines('test.en', 40),
        evalSource: 'test.es',
        specials,
        vocabSize: 32000,
        maxSrcLen: 128,
        maxTgtLen: 64,
      };
      const r = autoClusters({ method: 'auto', clusters: [8, 24], topK: [1, 12] }, setup);
      const curve = r.header.curve;
      assert.is(curve.length, 4);
      for (const p of curve) {
        assert.ok(p.activeMean > 0 && p.activeMean <= p.activeMax && p.activeMax < 0.5, JSON.stringify(p));
        assert.is(p.cost, p.clusters + p.activeMean * 32000);
        assert.is(
          p.gatePassed,
          p.identicalSentences >= 0.97 && p.bleu >= r.header.bleuFull - 0.3,
          `the gate of ${JSON.stringify(p)}`,
        );
      }
      // more ids per cluster never lowers quality at the same R
      for (const rr of [8, 24]) {
        const [a, b] = [1, 12].map((k) => curve.find((p) => p.clusters === rr && p.topK === k)!);
        assert.ok(
          b.activeMean > a.activeMean && b.top1Agreement >= a.top1Agreement,
          `R ${rr}: K 12 ${JSON.stringify(b)} vs K 1 ${JSON.stringify(a)}`,
        );
      }
      const passing = curve.filter((p) => p.gatePassed);
      if (passing.length) {
        const best = passing.reduce((x, y) => (y.cost < x.cost ? y : x));
        assert.ok(r.rewrite, 'a point held the gate: the plan is rewritten');
        assert.is(r.header.clusters, best.clusters);
        assert.is(r.header.topK, best.topK);
        assert.is(r.rewrite!.clusters, best.clusters);
        assert.match(r.header.choice, /the cheapest of \d+ of 4 points that hold the gate/);
      } else {
        assert.is(r.rewrite, undefined);
        assert.match(r.header.choice, /none of the 4 points holds the gate/);
      }
      // a grid where no point can hold the gate (one id per state, 300 calibration sentences): the full projection is kept
      const none = autoClusters({ method: 'auto', clusters: [24], topK: [1] }, setup);
      assert.is(none.rewrite, undefined, `R 24 K 1 held the gate? ${JSON.stringify(none.header.curve)}`);
      assert.match(none.header.choice, /none of the 1 points holds the gate .* the full projection is kept/);
      assert.match(
        formatVocabReport(none.header).join('\n'),
        /vocab: auto, 1 R × K points measured on 40 sentences of test\.es: none/,
      );
      // the curve survives the plan file and is in the report lines and inspect --json
      const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK }), {
        target: 'cpu',
        maxBatch: 2,
        maxSrcLen: 16,
        maxTgtLen: 8,
      });
      built.header.vocab = r.header;
      const back = decodePlan(encodePlan(built.header, built.blob)).header.vocab!;
      assert.equal(back.curve, curve);
      assert.is(back.choice, r.header.choice);
      const report = formatVocabReport(back).join('\n');
      for (const p of curve) assert.match(report, new RegExp(`R +${p.clusters} K +${p.topK}: active`));
      assert.equal(vocabInspect(back).curve, curve);
    } finally {
      plan.close();
    }
  },
);

test.run();
