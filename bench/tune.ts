// `npm run bench -- tune`: tunes es-en on this machine (cold cache, then warm twice: time, byte-identical plans), then
// translates the test ids with the untuned and the tuned plans in the same run at batch 1 and 32, at batch 4 and with a
// beam of 4 (interleaved, best of 3; plans tuned for 1, 8 and 32 rows, for 32 only, and for 4 and 8 rows; and a second
// load of the untuned plan, the noise), with
// the per-kernel table of choices; then precision alternatives under the gate: `--quantize auto --tune` (gate measured on
// dev.es/dev.en) against the untuned float32 plan in the same interleaved runs; and the vocabulary alternatives in
// float32: `--vocab auto --tune` (R × K clusters calibrated on the first PLANC_TUNE_CAL (5000) lines of train.es, the
// gate on dev.es/dev.en); appends to bench/results/tune.jsonl.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import type { PlanTuningDecision } from '../compiler/plan/types.ts';
import { AUTO_CLUSTERS, AUTO_TOPK } from '../compiler/vocab/spec.ts';
import { compile, type Compiled } from '../optimize/compile.ts';
import { measureInRounds } from '../optimize/tune-measure.ts';
import { TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { collectGarbage } from './gc.ts';
import { machineFacts } from './machine.ts';

const MAX_LEN = 64;
/**
 * [batch size, sentences, beam]: greedy at batch 1 on the first 40 test sentences and at batch 32 on the first 320; and
 * the rows a plan tuned for 4 and 8 rows is for: greedy at batch 4 on the first 200, beam 4 at batch 1 on the first 50.
 */
const RUNS: [number, number, number][] = [
  [1, Number(process.env.PLANC_TUNE_B1 ?? 40), 1],
  [32, Number(process.env.PLANC_TUNE_B32 ?? 320), 1],
  [4, Number(process.env.PLANC_TUNE_B4 ?? 200), 1],
  [1, Number(process.env.PLANC_TUNE_BEAM4 ?? 50), 4],
];

/** Prints a tuned plan's choices counted per graph, kernel and variant, then the reasons of its confirmations and of the
 * calls that keep a prepared weight; returns the counts. */
function printChoices(title: string, tuning: PlanTuningDecision[]): Map<string, number> {
  const table = new Map<string, number>();
  for (const r of tuning) {
    const [graph, call, kernel] = r.key.split(':');
    const k = call === 'confirm' ? `${graph} end to end → ${r.choice}` : `${graph} ${kernel} → ${r.choice}`;
    table.set(k, (table.get(k) ?? 0) + 1);
  }
  console.log(title);
  for (const [k, n] of [...table].sort()) console.log(`  ${String(n).padStart(4)}  ${k}`);
  for (const r of tuning.filter((x) => x.key.endsWith(':confirm') || x.reason?.includes(' it keeps ')))
    console.log(`  ${r.reason}`);
  return table;
}

export async function benchTune(): Promise<void> {
  const shared = sharedDir();
  if (!shared) throw new Error('bench tune needs ../shared/models/es-en (or PLANC_SHARED)');
  const dir = path.join(shared, 'models', 'es-en');
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(dir, 'test_ids.json'), 'utf8')).src_ids;
  const cacheFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'planc-bench-tune-')), 'tuning.json');
  const options = {
    target: 'cpu' as const,
    maxBatch: 32,
    maxSrcLen: Math.max(128, ...ids.map((s) => s.length)),
    maxTgtLen: MAX_LEN,
    topk: TRANSLATE_TOPK,
  };
  const build = async (tune: boolean, batches?: number[]): Promise<{ c: Compiled; seconds: number; bytes: Buffer }> => {
    const t0 = performance.now();
    const c = await compile(importSeq2SeqDir(dir), {
      ...options,
      ...(tune ? { tune: { cacheFile, ...(batches ? { batches } : {}) } } : {}),
    });
    return { c, seconds: (performance.now() - t0) / 1000, bytes: Buffer.from(encodePlan(c.header, c.blob)) };
  };
  const untuned = await build(false);
  console.log(`untuned build ${untuned.seconds.toFixed(1)} s`);
  const cold = await build(true);
  const warm1 = await build(true);
  const warm2 = await build(true);
  const s = cold.c.tuning!;
  // a plan tuned for batch 32 only (a server that batches): choices may lose at batch 1, where it is not meant to run
  const b32 = await build(true, [32]);
  console.log(
    `tuned for batch 32 only: ${b32.seconds.toFixed(1)} s, ${b32.c.tuning!.changed} calls changed, rolled back: ${b32.c.tuning!.rolledBack.join(', ') || 'none'}`,
  );
  // a plan tuned for 4 and 8 rows (a few sentences at a time, or a beam of 4 or 8): where project_topk packed pays
  const b48 = await build(true, [4, 8]);
  console.log(
    `tuned for 4 and 8 rows: ${b48.seconds.toFixed(1)} s, ${b48.c.tuning!.changed} calls changed, rolled back: ${b48.c.tuning!.rolledBack.join(', ') || 'none'}`,
  );
  const identical = warm1.bytes.equals(warm2.bytes) && warm1.bytes.equals(cold.bytes);
  console.log(
    `tuning es-en: cold ${cold.seconds.toFixed(1)} s (tuning ${s.seconds.toFixed(1)} s, ${s.measurements} measurements), warm ${warm1.seconds.toFixed(1)} s / ${warm2.seconds.toFixed(1)} s (tuning ${warm1.c.tuning!.seconds.toFixed(2)} s, ${warm1.c.tuning!.hits} hits, ${warm1.c.tuning!.misses} misses); plans byte-identical: ${identical}`,
  );
  // per-kernel tables of choices
  const table = printChoices('choices (calls):', cold.c.header.tuning);
  const table32 = printChoices('choices tuned for batch 32 (calls):', b32.c.header.tuning);
  const table48 = printChoices('choices tuned for 4 and 8 rows (calls):', b48.c.header.tuning);
  // the noise floor: the untuned plan against itself, as the tuner's confirmation measures (alternated runs), in one
  // round (both loaded once) and in the tuner's 3 rounds (loaded anew each round, the fastest round counts)
  const aaPoints = [1, 8, 32].map((batch) => ({ batch, srcLen: 24, past: 12 }));
  const self = { header: untuned.c.header, blob: untuned.c.blob };
  const aa = ['encoder', 'decoder', 'decoder_with_past'].flatMap((graph) =>
    [1, 3].map((rounds) => {
      const r = measureInRounds([self, self], graph, aaPoints, { warmup: 2, runs: 9, rounds });
      const ratios = r.map(([a, b]) => Math.round((b!.micros / a!.micros) * 1000) / 1000);
      console.log(
        `A/A ${graph}, ${rounds} round${rounds > 1 ? 's' : ''}: B/A ${ratios.map((x, i) => `batch ${aaPoints[i]!.batch} ${x.toFixed(3)}`).join(', ')}`,
      );
      return { graph, rounds, ratios };
    }),
  );
  // precision alternatives under the gate: --quantize auto (measured on the dev set, not the test ids) and --tune
  const t0q = performance.now();
  const quant = await compile(importSeq2SeqDir(dir), {
    ...options,
    tokenizer: { bytes: fs.readFileSync(path.join(dir, 'vocab.esen.spm')), kind: 'spm' },
    quantize: { mode: 'auto', evalSrc: path.join(dir, 'dev.es'), evalRef: path.join(dir, 'dev.en') },
    tune: { cacheFile },
  });
  const q = quant.quantization!;
  const kept = [...new Set(q.layers.map((l) => l.precision))].join('/');
  console.log(
    `--quantize auto --tune: ${((performance.now() - t0q) / 1000).toFixed(1)} s; kept ${kept} (gate ${q.gate} on ${q.evalSentences} dev sentences: identical ${(100 * q.identicalSentences).toFixed(1)}%, BLEU ${q.bleu.toFixed(2)} vs ${q.bleuFp32.toFixed(2)}: ${q.gatePassed ? 'holds' : 'FAILS'}), ${quant.tuning!.changed} calls changed by tuning`,
  );
  // vocabulary alternatives under the gate, float32 products: --vocab auto --tune
  const cal = path.join(path.dirname(cacheFile), 'calibrate.es');
  fs.writeFileSync(
    cal,
    fs
      .readFileSync(path.join(dir, 'train.es'), 'utf8')
      .split('\n')
      .slice(0, Number(process.env.PLANC_TUNE_CAL ?? 5000))
      .join('\n'),
  );
  const t0v = performance.now();
  const vocab = await compile(importSeq2SeqDir(dir), {
    ...options,
    tokenizer: { bytes: fs.readFileSync(path.join(dir, 'vocab.esen.spm')), kind: 'spm' },
    vocab: {
      spec: { method: 'auto', clusters: [...AUTO_CLUSTERS], topK: [...AUTO_TOPK] },
      calibrate: cal,
      evalSrc: path.join(dir, 'dev.es'),
      evalRef: path.join(dir, 'dev.en'),
    },
    tune: { cacheFile },
  });
  const vocabSeconds = (performance.now() - t0v) / 1000;
  const v = vocab.vocab!;
  console.log(`--vocab auto --tune: ${vocabSeconds.toFixed(1)} s; ${v.choice}`);
  // end to end, interleaved: untuned, tuned, untuned, tuned
  // untunedAgain: a second load of the untuned plan, whose ratio to the first is this run's noise (A/A)
  const plans: Record<
    'untuned' | 'untunedAgain' | 'tuned' | 'tunedB32' | 'tuned48' | 'quantTuned' | 'vocabTuned',
    Plan
  > = {
    untuned: loadPlanBytes(untuned.bytes, 'untuned'),
    untunedAgain: loadPlanBytes(untuned.bytes, 'untuned-again'),
    tuned: loadPlanBytes(cold.bytes, 'tuned'),
    tunedB32: loadPlanBytes(b32.bytes, 'tuned-b32'),
    tuned48: loadPlanBytes(b48.bytes, 'tuned-4-8'),
    quantTuned: loadPlanBytes(encodePlan(quant.header, quant.blob), 'quantize-auto-tuned'),
    vocabTuned: loadPlanBytes(encodePlan(vocab.header, vocab.blob), 'vocab-auto-tuned'),
  };
  const rows = [];
  for (const [batch, n, beam] of RUNS) {
    const src = ids.slice(0, n);
    const secs = {
      untuned: [] as number[],
      untunedAgain: [] as number[],
      tuned: [] as number[],
      tunedB32: [] as number[],
      tuned48: [] as number[],
      quantTuned: [] as number[],
      vocabTuned: [] as number[],
    };
    const outs: Record<string, number[][]> = {};
    const o = { batchSize: batch, maxLength: MAX_LEN, beamSize: beam };
    await translateIds(plans.tuned, src.slice(0, Math.min(batch, 8)), o); // warm-up
    for (let rep = 0; rep < 3; rep++) {
      for (const which of [
        'untuned',
        'tuned',
        'tunedB32',
        'tuned48',
        'quantTuned',
        'vocabTuned',
        'untunedAgain',
      ] as const) {
        collectGarbage();
        const t0 = performance.now();
        outs[which] = (await translateIds(plans[which], src, o)).map((r) => r.ids);
        secs[which].push((performance.now() - t0) / 1000);
      }
    }
    const best = (xs: number[]) => Math.min(...xs);
    const same = outs.untuned!.filter((o, i) => o.join() === outs.tuned![i]!.join()).length;
    const same32 = outs.untuned!.filter((o, i) => o.join() === outs.tunedB32![i]!.join()).length;
    const row = {
      batch,
      beam,
      sentences: n,
      untunedS: best(secs.untuned),
      aa: best(secs.untuned) / best(secs.untunedAgain),
      tunedS: best(secs.tuned),
      speedup: best(secs.untuned) / best(secs.tuned),
      identical: same,
      tunedB32S: best(secs.tunedB32),
      speedupB32: best(secs.untuned) / best(secs.tunedB32),
      identicalB32: same32,
      tuned48S: best(secs.tuned48),
      speedup48: best(secs.untuned) / best(secs.tuned48),
      identical48: outs.untuned!.filter((o, i) => o.join() === outs.tuned48![i]!.join()).length,
      quantTunedS: best(secs.quantTuned),
      speedupQuant: best(secs.untuned) / best(secs.quantTuned),
      identicalQuant: outs.untuned!.filter((o, i) => o.join() === outs.quantTuned![i]!.join()).length,
      vocabTunedS: best(secs.vocabTuned),
      speedupVocab: best(secs.untuned) / best(secs.vocabTuned),
      identicalVocab: outs.untuned!.filter((o, i) => o.join() === outs.vocabTuned![i]!.join()).length,
    };
    rows.push(row);
    console.log(
      `batch ${batch}${beam > 1 ? ` beam ${beam}` : ''}, ${n} sentences: untuned ${row.untunedS.toFixed(2)} s (its second load → ${row.aa.toFixed(3)}x: the noise), tuned ${row.tunedS.toFixed(2)} s → ${row.speedup.toFixed(3)}x (${same}/${n} identical); tuned for batch 32 ${row.tunedB32S.toFixed(2)} s → ${row.speedupB32.toFixed(3)}x (${same32}/${n} identical); tuned for 4 and 8 rows ${row.tuned48S.toFixed(2)} s → ${row.speedup48.toFixed(3)}x (${row.identical48}/${n} identical); --quantize auto --tune ${row.quantTunedS.toFixed(2)} s → ${row.speedupQuant.toFixed(3)}x (${row.identicalQuant}/${n} identical); --vocab auto --tune (float32) ${row.vocabTunedS.toFixed(2)} s → ${row.speedupVocab.toFixed(3)}x (${row.identicalVocab}/${n} identical)`,
    );
  }
  for (const p of Object.values(plans)) p.close();
  const record = {
    ...machineFacts({ device: s.device }),
    model: 'es-en',
    coldSeconds: cold.seconds,
    tuneSeconds: s.seconds,
    warmSeconds: [warm1.seconds, warm2.seconds],
    warmTuneSeconds: warm1.c.tuning!.seconds,
    measurements: s.measurements,
    calls: s.calls,
    changed: s.changed,
    rolledBack: s.rolledBack,
    quantizeAuto: {
      kept,
      gate: q.gate,
      evalSentences: q.evalSentences,
      identical: q.identicalSentences,
      bleu: q.bleu,
      bleuFp32: q.bleuFp32,
      gatePassed: q.gatePassed,
      tuneChanged: quant.tuning!.changed,
    },
    vocabAuto: {
      seconds: vocabSeconds,
      clusters: v.clusters,
      topK: v.topK,
      choice: v.choice,
      evalSentences: v.evalSentences,
      identical: v.identicalSentences,
      bleu: v.bleu,
      bleuFull: v.bleuFull,
      curve: v.curve,
      tuneChanged: vocab.tuning!.changed,
    },
    byteIdentical: identical,
    aa,
    choices: Object.fromEntries(table),
    choicesB32: Object.fromEntries(table32),
    rolledBackB32: b32.c.tuning!.rolledBack,
    choices48: Object.fromEntries(table48),
    rolledBack48: b48.c.tuning!.rolledBack,
    rows,
  };
  const out = path.join(REPO_ROOT, 'bench', 'results', 'tune.jsonl');
  fs.appendFileSync(out, `${JSON.stringify(record)}\n`);
  console.log(`appended to ${out}`);
  fs.rmSync(path.dirname(cacheFile), { recursive: true, force: true });
}
