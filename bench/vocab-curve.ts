// `npm run bench -- vocab-curve`: cluster quality over R × K on es-en (one calibration, one k-means per R), recorded.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../compiler/paths.ts';
import { activeSetStats, clusterActiveSets } from '../compiler/vocab/clusters.ts';
import { kmeans } from '../compiler/vocab/kmeans.ts';
import { assignFn, calibrate } from '../optimize/vocab-calibrate.ts';
import { prefix } from '../optimize/vocab-auto.ts';
import { evaluateQuality, outputLayer } from '../optimize/vocab-evaluate.ts';
import { machineFacts } from './machine.ts';
import { esEnVocabSetup, MAX_LEN } from './vocab.ts';

const RS = (process.env.PLANC_VOCAB_RS ?? '250,500,1000,2000').split(',').map(Number);
const KS = (process.env.PLANC_VOCAB_KS ?? '1,3,5').split(',').map(Number);
const CAL = Number(process.env.PLANC_VOCAB_CAL ?? 20000);

export async function benchVocabCurve(): Promise<void> {
  const setup = await esEnVocabSetup('vocab-curve');
  if (!setup) return;
  const { profile, tok, lines, exposed: plan, optimized, rules, specials, V, testSrc, testRef } = setup;
  const kMax = Math.max(...KS);
  const t0 = performance.now();
  const cal = calibrate(plan, tok, lines('train.es').slice(0, CAL), kMax, rules, profile.maxSrcLen, MAX_LEN);
  console.log(
    `calibrated on ${cal.sentences} training sentences: ${cal.states} states (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
  const layer = outputLayer(optimized);
  const { assign, native } = assignFn();
  const rows: unknown[] = [];
  for (const r of RS) {
    const t1 = performance.now();
    const km = kmeans(cal.hidden, cal.states, cal.d, { clusters: r, clampClusters: true, assign });
    const kmSeconds = (performance.now() - t1) / 1000;
    for (const k of KS) {
      const sets = clusterActiveSets(km.assignments, prefix(cal.topK, kMax, k), k, km.clusters, specials, V);
      const c = {
        method: 'clusters' as const,
        centroids: km.centroids,
        cnorm: km.cnorm,
        offsets: sets.offsets,
        ids: sets.ids,
        clusters: km.clusters,
        dim: cal.d,
      };
      const q = evaluateQuality(
        plan,
        tok,
        layer,
        rules,
        testSrc,
        testRef,
        { kind: 'clusters', c },
        profile.maxSrcLen,
        MAX_LEN,
      );
      const row = {
        R: km.clusters,
        K: k,
        activeMean: q.activeMean,
        activeMax: q.activeMax,
        calibrationActiveMean: activeSetStats(sets, km.assignments).weightedMeanFraction,
        top1Agreement: q.top1Agreement,
        identicalSentences: q.identicalSentences,
        bleu: q.bleu,
        bleuFull: q.bleuFull,
        kmeansSeconds: kmSeconds,
        kmeansIterations: km.iterations,
      };
      rows.push(row);
      console.log(
        `R ${String(km.clusters).padStart(4)} K ${k}: active ${(100 * q.activeMean).toFixed(2)}% mean / ${(100 * q.activeMax).toFixed(2)}% max, top-1 agreement ${(100 * q.top1Agreement).toFixed(1)}%, identical ${(100 * q.identicalSentences).toFixed(1)}%, BLEU ${q.bleu!.toFixed(2)} (full ${q.bleuFull!.toFixed(2)}); k-means ${kmSeconds.toFixed(1)} s`,
      );
    }
  }
  plan.close();
  const out = path.join(REPO_ROOT, 'bench', 'results', 'vocab-curve.jsonl');
  fs.appendFileSync(
    out,
    JSON.stringify({
      bench: 'vocab-curve',
      model: 'es-en',
      maxLength: MAX_LEN,
      calibrationSentences: cal.sentences,
      states: cal.states,
      assignNative: native,
      evalSentences: testSrc.length,
      rows,
      ...machineFacts(),
    }) + '\n',
  );
  console.log(`appended to ${out}`);
}
