// `npm run bench -- vocab-large`: clusters on the synthetic d 1024 / vocab 250,000 model (random weights, calibrated on
// its own states): the projection step and end-to-end greedy at batch 1 and 32, full vs clusters, recorded.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { specialIdsOf } from '../compiler/vocab/header.ts';
import { buildClusters, calibrateIds, exposePlan } from '../optimize/vocab-calibrate.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { planRules } from '../runtime/decode/translate-ids.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { DEFAULTS, makeModel } from '../scripts/make-model/generate.ts';
import { machineFacts } from './machine.ts';
import { measure, type Run } from './vocab.ts';

const VOCAB = 250000,
  D = 1024,
  MAX_LEN = 24;
const R = Number(process.env.PLANC_VOCAB_R ?? 250),
  K = Number(process.env.PLANC_VOCAB_K ?? 5),
  CAL = Number(process.env.PLANC_VOCAB_CAL ?? 640);
const RUNS: [number, number][] = [
  [1, 16],
  [32, 64],
];

/** Deterministic pseudo-random source sentences of 6..20 ids (ending with eos), avoiding the special ids. */
function sources(n: number, seed: number, eos: number): number[][] {
  let x = seed;
  const next = () => (x = (x * 1103515245 + 12345) >>> 0) / 2 ** 32;
  return Array.from({ length: n }, () => [
    ...Array.from({ length: 6 + Math.floor(next() * 15) }, () => 2 + Math.floor(next() * (VOCAB - 2))),
    eos,
  ]);
}

export async function benchVocabLarge(): Promise<void> {
  const dir = path.join(os.tmpdir(), 'planc-bench-models', 'large-vocab');
  if (!fs.existsSync(path.join(dir, 'decoder_with_past_model.onnx'))) {
    console.log(`generating the synthetic model (d ${D}, 6+6 layers, vocab ${VOCAB}) in ${dir}`);
    makeModel({
      ...DEFAULTS,
      out: dir,
      d: D,
      encoderLayers: 6,
      decoderLayers: 6,
      heads: 16,
      ffn: 4096,
      vocab: VOCAB,
      maxPos: 512,
    });
  }
  const model = importSeq2SeqDir(dir);
  const profile = { maxBatch: 32, maxSrcLen: 32, maxTgtLen: MAX_LEN, maxDims: { decoder_sequence_length: 1 } };
  const { plan: exposed } = exposePlan(model, { topk: TRANSLATE_TOPK }, { target: 'cpu', ...profile });
  const rules = await planRules(exposed);
  const specials = specialIdsOf(exposed.header.decoding);
  const t0 = performance.now();
  const cal = calibrateIds(exposed, sources(CAL, 7, rules.c.eosId), K, rules, profile.maxSrcLen, MAX_LEN);
  exposed.close();
  console.log(
    `calibrated on ${cal.sentences} random sentences: ${cal.states} states (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );
  const cl = buildClusters(cal, R, K, VOCAB, specials);
  console.log(
    `clusters: R ${cl.km.clusters}, K ${K}, calibration active fraction ${(100 * cl.activeMean).toFixed(2)}%`,
  );
  const test = sources(Math.max(...RUNS.map(([, n]) => n)), 99, rules.c.eosId);
  const rows: Record<string, Run[]> = {};
  let ref: Record<number, number[][]> = {};
  for (const [name, vocab] of [
    ['full', undefined],
    ['clusters', cl.rewrite],
  ] as const) {
    const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK, vocab }), { target: 'cpu', ...profile });
    const plan = loadPlanBytes(encodePlan(built.header, built.blob), `large-vocab-${name}.plan`);
    try {
      await measure(plan, test.slice(0, 4), 4, undefined, MAX_LEN);
      rows[name] = [];
      for (const [batch, n] of RUNS) {
        const { run, out } = await measure(plan, test.slice(0, n), batch, ref[batch], MAX_LEN);
        if (name === 'full') ref = { ...ref, [batch]: out };
        rows[name]!.push(run);
        const base = rows.full?.find((r) => r.batch === batch);
        console.log(
          `${name.padEnd(9)} batch ${String(batch).padStart(2)} (${n} sentences): ${run.sentencesPerS.toFixed(2)} sent/s, projection ${run.projectionMsPerStep.toFixed(2)} ms/step` +
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
      bench: 'vocab-large',
      model: `synthetic d ${D} 6+6 vocab ${VOCAB} (random weights)`,
      maxLength: MAX_LEN,
      clusters: {
        R: cl.km.clusters,
        K,
        calibrationSentences: cal.sentences,
        states: cal.states,
        assignNative: cl.assignNative,
        activeMean: cl.activeMean,
      },
      rows,
      ...machineFacts(),
    }) + '\n',
  );
  console.log(`appended to ${path.relative(process.cwd(), out)}`);
}
