// Parallel Jacobi decoding (runtime/decode/jacobi.ts): pj, pgj(3), hgj(3) and lookup(3) drafts give greedy's tokens at batch 1 and 4 on a
// small random model (with forced, banned and extra eos ids too), on es-en's first 50 test sentences at batch 1 and
// 16 and on the zoo families' references; plans that cannot take the block are refused naming --step-tokens.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { buildPlan } from '../codegen/build-plan.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { DecodingRules } from '../runtime/decode/conventions.ts';
import { greedyBatch } from '../runtime/decode/greedy.ts';
import { jacobiBatch, onJacobiStats, type JacobiBatchStats, type JacobiKind } from '../runtime/decode/jacobi.ts';
import { validateDecodingOptions } from '../runtime/decode/options.ts';
import { planRules, translateIds } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { before } from './helpers/before.ts';
import { failsWith, rejected } from './helpers/expect-error.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';
import { zooFamilies, zooReference, ZOO } from './helpers/zoo.ts';

const KINDS: JacobiKind[] = ['pj', 'pgj', 'hgj', 'lookup'];
const V = 40;
const STEP_TOKENS = 8;

/** Per-sentence caps: ceil(1.5 × source length + 2), at most 40 (so some sentences stop at their cap). */
const CAPS = { maxLength: 40, maxLengthRatio: 1.5, maxLengthConstant: 2 };

/** Sums of a run's batch stats. */
function totals(all: JacobiBatchStats[]): { iterations: number; tokens: number } {
  const s = all.flatMap((b) => b.sentences);
  return { iterations: s.reduce((a, x) => a + x.iterations, 0), tokens: s.reduce((a, x) => a + x.tokens, 0) };
}

/** translateIds with a strategy, collecting the Jacobi stats of its batches. */
async function decodeWith(
  plan: Plan,
  ids: number[][],
  o: Record<string, unknown>,
): Promise<{ out: { ids: number[]; score?: number }[]; stats: JacobiBatchStats[] }> {
  const stats: JacobiBatchStats[] = [];
  onJacobiStats((s) => stats.push(s));
  try {
    return { out: await translateIds(plan, ids, o), stats };
  } finally {
    onJacobiStats(undefined);
  }
}

test('jacobiBlock is a validated option (default 3)', () => {
  assert.is(validateDecodingOptions({}).jacobiBlock, 3);
  assert.is(validateDecodingOptions({ jacobiBlock: 5 }).jacobiBlock, 5);
  failsWith(() => validateDecodingOptions({ jacobiBlock: 0 }), 'PLANC_E411', 'jacobiBlock = 0');
  failsWith(() => validateDecodingOptions({ jacobiBlock: 2.5 }), 'PLANC_E411', 'jacobiBlock = 2.5');
});

const tiny = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
let plan: Plan, onePlan: Plan, planFile: string, sources: number[][];
if (nativeAvailable()) {
  before(test, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-jacobi-'));
    makeModel({
      arch: 'marian',
      d: 64,
      encoderLayers: 1,
      decoderLayers: 2,
      heads: 4,
      ffn: 128,
      vocab: V,
      maxPos: 96,
      activation: 'relu',
      seed: 11,
      out: dir,
    });
    const profile = { target: 'cpu' as const, maxBatch: 4, maxSrcLen: 24, maxTgtLen: 48 };
    const build = (stepTokens: number) => {
      const built = buildPlan(runPipeline(importSeq2SeqDir(dir), { stepTokens }), profile);
      return encodePlan(built.header, built.blob);
    };
    const bytes = build(STEP_TOKENS);
    planFile = path.join(dir, 'jacobi.plan');
    fs.writeFileSync(planFile, bytes);
    plan = loadPlanBytes(bytes, 'jacobi.plan');
    onePlan = loadPlanBytes(build(1), 'one-token.plan');
    sources = Array.from({ length: 16 }, (_, i) => [
      ...Array.from({ length: 3 + (i % 9) }, (_, j) => 1 + ((i * 13 + j * 7) % (V - 1))),
      0,
    ]);
  });
}

tiny('tiny model: pj, pgj(3), hgj(3) = greedy token for token (and scores) at batch 1 and 4', async () => {
  for (const batchSize of [1, 4]) {
    const greedy = await translateIds(plan, sources, { ...CAPS, batchSize, returnScores: true });
    assert.ok(
      greedy.some((r) => r.ids.length >= 10),
      'some sentences decode 10 tokens or more',
    );
    for (const strategy of KINDS) {
      const { out, stats } = await decodeWith(plan, sources, { ...CAPS, batchSize, strategy, returnScores: true });
      assert.equal(
        out.map((r) => r.ids),
        greedy.map((r) => r.ids),
        `${strategy} at batch ${batchSize}`,
      );
      out.forEach((r, i) =>
        assert.ok(
          Math.abs(r.score! - greedy[i]!.score!) < 1e-4,
          `${strategy} batch ${batchSize} sentence ${i}: score ${r.score} vs greedy ${greedy[i]!.score}`,
        ),
      );
      const t = totals(stats);
      assert.is(
        t.tokens,
        greedy.reduce((a, r, i) => a + Math.min(r.ids.length + 1, Math.ceil(1.5 * sources[i]!.length + 2)), 0),
        `${strategy}: tokens counted (eos included)`,
      );
      if (batchSize === 1)
        for (const b of stats)
          for (const s of b.sentences)
            assert.ok(
              s.iterations <= s.tokens,
              `${strategy} at batch 1: ${s.iterations} iterations for ${s.tokens} tokens`,
            );
    }
  }
  for (const maxLength of [1, 2, 3]) {
    const greedy = await translateIds(plan, sources, { maxLength, batchSize: 4 });
    for (const strategy of KINDS)
      assert.equal(
        await translateIds(plan, sources, { maxLength, batchSize: 4, strategy }),
        greedy,
        `${strategy}, maxLength ${maxLength}`,
      );
  }
});

tiny(
  'tiny model: forced bos and eos, suppressed ids, a bad-word sequence and two eos ids apply as greedy applies them',
  () => {
    const base = conventionsOfPlan(plan);
    const rules = new DecodingRules({
      ...base,
      eosIds: [0, 5],
      forcedBosId: 7,
      forcedEosId: 0,
      suppressTokens: [3, 11],
      badWords: [[9], [7, 2]],
    });
    const maxLens = sources.map((s, i) => Math.min(40, 2 * s.length + (i % 3)));
    for (const batch of [1, 4]) {
      for (let at = 0; at < sources.length; at += batch) {
        const src = sources.slice(at, at + batch);
        const caps = maxLens.slice(at, at + batch);
        const greedy = greedyBatch(plan, src, caps, rules, true);
        for (const kind of KINDS) {
          const options = validateDecodingOptions({
            strategy: kind,
            returnScores: true,
            jacobiBlock: kind === 'hgj' ? 2 : 3,
          });
          const got = jacobiBatch({ plan, sources: src, maxLens: caps, rules, options }, kind);
          assert.equal(
            got.map((h) => h.ids),
            greedy.map((h) => h.ids),
            `${kind} batch ${batch} at ${at}`,
          );
          assert.equal(
            got.map((h) => h.length),
            greedy.map((h) => h.length),
            `${kind} lengths`,
          );
          got.forEach((h, i) =>
            assert.ok(
              Math.abs(h.logProb - greedy[i]!.logProb) < 1e-4,
              `${kind}: log-prob ${h.logProb} vs ${greedy[i]!.logProb}`,
            ),
          );
        }
      }
    }
  },
);

/** The plan's conventions (start, eos, pad) as recorded. */
function conventionsOfPlan(p: Plan) {
  const d = p.header.decoding;
  return { startId: d.decoderStartId!, eosId: d.eosId!, padId: d.padId ?? d.eosId! };
}

tiny(
  'a plan that cannot take the block is refused, naming stepTokens (--step-tokens at the command line)',
  async () => {
    for (const strategy of KINDS) {
      const m = await rejected(translateIds(onePlan, sources.slice(0, 2), { strategy, maxLength: 10 }));
      assert.match(m, /PLANC_E411/);
      assert.match(m, new RegExp(`strategy '${strategy}'.*takes exactly 1 token per row; optimize it with stepTokens`));
    }
    const nine = await rejected(
      translateIds(plan, sources.slice(0, 2), { strategy: 'pgj', jacobiBlock: 9, maxLength: 10 }),
    );
    assert.match(
      nine,
      /PLANC_E411.*strategy 'pgj' feeds blocks of 9 tokens.*takes 1 to 8 tokens.*stepTokens 9 or more/,
    );
    // pj's block (the sentence) is chunked by the plan's step tokens: a cap of 40 on an 8-token plan decodes
    assert.is((await translateIds(plan, sources.slice(0, 2), { strategy: 'pj', maxLength: 40 })).length, 2);
    const rules = await planRules(plan);
    failsWith(
      () =>
        jacobiBatch(
          {
            plan: onePlan,
            sources: [sources[0]!],
            maxLens: [5],
            rules,
            options: validateDecodingOptions({ jacobiBlock: 2 }),
          },
          'pgj',
        ),
      'PLANC_E411',
      'stepTokens 2 or more',
    );
    assert.match(
      await rejected(translateIds(plan, sources.slice(0, 2), { strategy: 'hgj', beamSize: 2 })),
      /PLANC_E411.*strategy 'hgj'.*beamSize = 2/,
    );
  },
);

tiny("planc translate --strategy pgj --jacobi-block 2 prints greedy's ids", () => {
  const input = sources.map((s) => s.join(' ')).join('\n') + '\n';
  const greedy = planc(['translate', planFile, '--ids', '--max-length', '20', '--batch', '4', '--quiet'], input);
  assert.is(greedy.status, 0, greedy.stderr);
  const pgj = planc(
    [
      'translate',
      planFile,
      '--ids',
      '--max-length',
      '20',
      '--batch',
      '4',
      '--strategy',
      'pgj',
      '--jacobi-block',
      '2',
      '--quiet',
    ],
    input,
  );
  assert.is(pgj.status, 0, pgj.stderr);
  assert.is(pgj.stdout, greedy.stdout);
  const bad = planc(['translate', planFile, '--ids', '--strategy', 'pgj', '--jacobi-block', '0', '--quiet'], input);
  assert.is.not(bad.status, 0);
  assert.match(bad.stderr, /PLANC_E301: --jacobi-block 0: it must be an integer in \[1, 256\]/);
});

// ---- es-en: the first 50 test sentences, a --step-tokens 8 plan with the translation top-k ----

const ES_EN =
  'es-en (--step-tokens 8, top-k): pj, pgj(3), hgj(3), lookup(3) = greedy on 50 test sentences at batch 1 and 16; pgj and lookup need fewer iterations than tokens';
const shared = sharedDir();
const esen = shared ? path.join(shared, 'models', 'es-en') : '';
if (!esen || !fs.existsSync(esen)) skipSuite(test, needsShared('models/es-en'), [ES_EN]);
else if (!nativeAvailable()) skipSuite(test, NEEDS_NATIVE, [ES_EN]);
else {
  test(ES_EN, async () => {
    const ids: number[][] = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')).src_ids.slice(0, 50);
    const built = buildPlan(runPipeline(importSeq2SeqDir(esen), { stepTokens: STEP_TOKENS, topk: TRANSLATE_TOPK }), {
      target: 'cpu',
      maxBatch: 16,
      maxSrcLen: Math.max(...ids.map((s) => s.length)),
      maxTgtLen: 64,
    });
    const p = loadPlanBytes(encodePlan(built.header, built.blob), 'es-en-8.plan');
    try {
      for (const batchSize of [1, 16]) {
        const greedy = (await translateIds(p, ids, { batchSize, maxLength: 64 })).map((r) => r.ids);
        for (const strategy of KINDS) {
          const { out, stats } = await decodeWith(p, ids, { batchSize, maxLength: 64, strategy });
          const differ = out.flatMap((r, i) => (r.ids.join() === greedy[i]!.join() ? [] : [i]));
          assert.equal(differ, [], `${strategy} at batch ${batchSize}: sentences that differ from greedy`);
          const t = totals(stats);
          if (strategy === 'pgj' && batchSize === 1)
            assert.ok(t.iterations < t.tokens, `pgj(3) at batch 1: ${t.iterations} iterations for ${t.tokens} tokens`);
          if (strategy === 'lookup' && batchSize === 1) {
            assert.ok(
              t.iterations < t.tokens,
              `lookup(3) at batch 1: ${t.iterations} iterations for ${t.tokens} tokens`,
            );
            assert.ok(
              stats.some((b) => (b.drafted ?? 0) > 0),
              'lookup found n-gram drafts in es-en',
            );
          }
        }
      }
    } finally {
      p.close();
    }
  });
}

// ---- the zoo families (their 20 reference sources, greedy under each one's generation config, beamSize 1) ----

const ZOO_NAME = 'zoo families (--step-tokens 8, top-k): pj, pgj(3), hgj(3), lookup(3) = greedy at batch 1 and 16';
if (zooFamilies().length === 0) skipSuite(test, needsShared('models/zoo'), [ZOO_NAME]);
else if (!nativeAvailable()) skipSuite(test, NEEDS_NATIVE, [ZOO_NAME]);
else {
  test(ZOO_NAME, async () => {
    for (const family of zooFamilies()) {
      const ids = zooReference(family).src_ids;
      const built = buildPlan(
        runPipeline(importSeq2SeqDir(path.join(ZOO!, family)), { stepTokens: STEP_TOKENS, topk: TRANSLATE_TOPK }),
        { target: 'cpu', maxBatch: 16, maxSrcLen: Math.max(...ids.map((s) => s.length)), maxTgtLen: 48 },
      );
      const p = loadPlanBytes(encodePlan(built.header, built.blob), `${family}-8.plan`);
      try {
        for (const batchSize of [1, 16]) {
          const o = { beamSize: 1, batchSize, maxLength: 48 };
          const greedy = (await translateIds(p, ids, o)).map((r) => r.ids);
          for (const strategy of KINDS)
            assert.equal(
              (await translateIds(p, ids, { ...o, strategy })).map((r) => r.ids),
              greedy,
              `${family} ${strategy} at batch ${batchSize}`,
            );
        }
      } finally {
        p.close();
      }
    }
  });
}

test.run();
