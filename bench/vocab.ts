// `npm run bench -- vocab`: the vocabulary rewrite on es-en — projection step alone (the project_topk and cluster_mask
// kernels' time per decoder step, from the per-kernel profile) and end-to-end greedy at batch 1 and 32, for the full
// projection, the Bergamot shortlist and calibrated clusters. The synthetic d 1024 / vocab 250,000 model is not run yet.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import type { PlanVocab } from '../compiler/plan/types.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { shortlistVocab, specialIdsOf } from '../compiler/vocab/header.ts';
import { buildClusters, calibrate, exposePlan } from '../optimize/vocab-calibrate.ts';
import { evaluateQuality, outputLayer } from '../optimize/vocab-evaluate.ts';
import type { VocabRewriteOptions } from '../passes/pass.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { planRules, translateIds } from '../runtime/decode/translate-ids.ts';
import { kernelIds } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { loadTokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { machineFacts } from './machine.ts';

export const MAX_LEN = 64;
const RUNS: [number, number][] = [
  [1, 200],
  [32, 1000],
];
const R = Number(process.env.PLANC_VOCAB_R ?? 250),
  K = Number(process.env.PLANC_VOCAB_K ?? 3),
  CAL = Number(process.env.PLANC_VOCAB_CAL ?? 2000);

export interface Run {
  batch: number;
  sentences: number;
  seconds: number;
  sentencesPerS: number;
  projectionMsPerStep: number;
  steps: number;
  identical: number;
}

/** Greedy translation with the decoder_with_past kernels profiled: wall time, and projection time per decoder step. */
export async function measure(
  plan: Plan,
  ids: number[][],
  batch: number,
  ref?: number[][],
  maxLength = MAX_LEN,
): Promise<{ run: Run; out: number[][] }> {
  plan.profile('decoder_with_past', true);
  const t0 = performance.now();
  const out = (await translateIds(plan, ids, { batchSize: batch, maxLength })).map((r) => r.ids);
  const seconds = (performance.now() - t0) / 1000;
  const prof = plan.profile('decoder_with_past');
  const steps = out.reduce((s, o) => s + o.length, 0);
  const proj = prof
    .filter((k) => k.kernel === 'project_topk' || k.kernel === 'cluster_mask')
    .reduce((s, k) => s + k.ms, 0);
  const identical = ref ? out.filter((o, i) => o.join() === ref[i]!.join()).length : ids.length;
  return {
    run: {
      batch,
      sentences: ids.length,
      seconds,
      sentencesPerS: ids.length / seconds,
      projectionMsPerStep: proj / Math.max(1, steps),
      steps,
      identical,
    },
    out,
  };
}

/** What the es-en vocabulary benches share: the model, its tokenizer and texts, and a plan exposing hidden states. */
export async function esEnVocabSetup(bench: string) {
  const shared = sharedDir();
  const dir = shared ? path.join(shared, 'models', 'es-en') : '';
  if (!dir || !fs.existsSync(dir)) {
    console.log(`${bench} bench skipped: /work/shared/models/es-en is missing`);
    return undefined;
  }
  const model = importSeq2SeqDir(dir);
  const profile = { maxBatch: 32, maxSrcLen: 128, maxTgtLen: MAX_LEN, maxDims: { decoder_sequence_length: 1 } };
  const spm = fs.readFileSync(path.join(dir, 'vocab.esen.spm'));
  const tok = await loadTokenizer(spm, 'spm');
  const lines = (f: string) =>
    fs
      .readFileSync(path.join(dir, f), 'utf8')
      .split('\n')
      .filter((l) => l.trim());
  const { plan: exposed, optimized } = exposePlan(model, { topk: TRANSLATE_TOPK }, { target: 'cpu', ...profile });
  return {
    dir,
    model,
    profile,
    spm,
    tok,
    lines,
    exposed,
    optimized,
    rules: await planRules(exposed),
    specials: specialIdsOf(exposed.header.decoding),
    V: exposed.header.decoding.vocabSize!,
    testSrc: lines('test.es'),
    testRef: lines('test.en'),
  };
}

export async function benchVocab(): Promise<void> {
  const setup = await esEnVocabSetup('vocab');
  if (!setup) return;
  const { dir, model, profile, spm, tok, lines, exposed, optimized, rules, specials, V, testSrc, testRef } = setup;
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(dir, 'test_ids.json'), 'utf8')).src_ids;
  console.log(`es-en vocab bench: calibrating clusters R ${R}, K ${K} on ${CAL} training sentences`);
  const cal = calibrate(exposed, tok, lines('train.es').slice(0, CAL), K, rules, profile.maxSrcLen, MAX_LEN);
  const cl = buildClusters(cal, R, K, V, specials);
  const sl = shortlistVocab(
    { method: 'shortlist', file: path.join(dir, 'lex.50.50.esen.s2t.bin') },
    { bytes: spm, kind: 'spm' },
    V,
    specials,
  );
  const layer = outputLayer(optimized);
  const quality: Record<string, unknown> = {};
  for (const [name, rw] of [
    ['shortlist', { kind: 'shortlist' as const, v: sl }],
    ['clusters', { kind: 'clusters' as const, c: cl.rewrite }],
  ] as const) {
    const q = evaluateQuality(exposed, tok, layer, rules, testSrc, testRef, rw as never, profile.maxSrcLen, MAX_LEN);
    quality[name] = {
      activeMean: q.activeMean,
      activeMax: q.activeMax,
      top1Agreement: q.top1Agreement,
      identicalSentences: q.identicalSentences,
      bleu: q.bleu,
      bleuFull: q.bleuFull,
    };
    console.log(
      `${name} (emulated, batch-1 masks, ${testSrc.length} test sentences): active ${(100 * q.activeMean).toFixed(1)}% mean / ${(100 * q.activeMax).toFixed(1)}% max; top-1 agreement ${(100 * q.top1Agreement).toFixed(1)}%; identical ${(100 * q.identicalSentences).toFixed(1)}%; BLEU ${q.bleu!.toFixed(2)} vs full ${q.bleuFull!.toFixed(2)}`,
    );
  }
  exposed.close();
  const masked = kernelIds().has('cluster_mask');
  const variants: [string, VocabRewriteOptions | undefined, PlanVocab | undefined][] = [['full', undefined, undefined]];
  if (masked) variants.push(['shortlist', { method: 'shortlist' }, sl], ['clusters', cl.rewrite, undefined]);
  else
    console.log(
      'masked plans skipped: the native addon has no cluster_mask kernel yet (native/src/cpu/vocab.cc); timing the full projection only',
    );
  const rows: Record<string, Run[]> = {};
  let ref: Record<number, number[][]> = {};
  for (const [name, vocab, header] of variants) {
    const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK, vocab }), { target: 'cpu', ...profile });
    if (header) built.header.vocab = header;
    const plan = loadPlanBytes(encodePlan(built.header, built.blob), `es-en-${name}.plan`);
    try {
      await measure(plan, ids.slice(0, 8), 8);
      rows[name] = [];
      for (const [batch, n] of RUNS) {
        const { run, out } = await measure(plan, ids.slice(0, n), batch, ref[batch]);
        if (name === 'full') ref = { ...ref, [batch]: out };
        rows[name]!.push(run);
        const base = rows.full?.find((r) => r.batch === batch);
        console.log(
          `${name.padEnd(9)} batch ${String(batch).padStart(2)} (${n} sentences): ${run.sentencesPerS.toFixed(1)} sent/s, projection ${(run.projectionMsPerStep * 1000).toFixed(1)} µs/step` +
            (base && name !== 'full'
              ? `; vs full: end-to-end ${(run.sentencesPerS / base.sentencesPerS).toFixed(2)}x, projection ${(base.projectionMsPerStep / run.projectionMsPerStep).toFixed(2)}x; identical ${run.identical}/${n}`
              : ''),
        );
      }
    } finally {
      plan.close();
    }
  }
  const out = path.join(REPO_ROOT, 'bench', 'results', 'vocab.jsonl');
  fs.appendFileSync(
    out,
    JSON.stringify({
      bench: 'vocab',
      model: 'es-en',
      maxLength: MAX_LEN,
      clusters: { R: cl.km.clusters, K, calibrationSentences: CAL, states: cal.states, assignNative: cl.assignNative },
      quality,
      rows,
      masked,
      synthetic: 'bench vocab-large',
      ...machineFacts(),
    }) + '\n',
  );
  console.log(
    `appended to ${path.relative(process.cwd(), out)} (the synthetic d 1024 / vocab 250,000 model: npm run bench -- vocab-large)`,
  );
}
