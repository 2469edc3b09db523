// Decoding strategies (runtime/decode/strategy.ts): chosen by name, checked against the options, and driven so that
// translateIds returns to the event loop while a batch decodes.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { buildPlan } from '../codegen/build-plan.ts';
import { importSeq2SeqDir } from '../compiler/onnx/import-model.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { greedyBatch } from '../runtime/decode/greedy.ts';
import { validateDecodingOptions } from '../runtime/decode/options.ts';
import { STRATEGIES, strategyFor } from '../runtime/decode/strategy.ts';
import { runToEnd, runYielding, YIELD_EVERY_MS } from '../runtime/decode/steps.ts';
import { planRules, translateIds } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { before } from './helpers/before.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';
import { thrown } from './helpers/expect-error.ts';

const V = 500;
const MAX_LEN = 120;

test('runYielding returns to the event loop between steps once YIELD_EVERY_MS has passed', async () => {
  function* busySteps(n: number) {
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      while (performance.now() - t < 1) { /* one 1 ms step */ }
      yield;
    }
    return n;
  }
  let turns = 0;
  const count = () => { turns++; if (!done) setImmediate(count); };
  let done = false;
  setImmediate(count);
  const n = await runYielding(busySteps(10 * YIELD_EVERY_MS));
  done = true;
  assert.is(n, 10 * YIELD_EVERY_MS);
  // about one turn per YIELD_EVERY_MS (10 here); a loaded machine stretches steps, so the bounds are loose: it does
  // yield during the run, and not after every step
  assert.ok(turns >= 4 && turns <= n / 2, `about one event-loop turn per ${YIELD_EVERY_MS} ms of steps (${turns} turns in ${n} steps of 1 ms)`);
  assert.is(runToEnd(busySteps(3)), 3);
});

test('strategyFor: auto is greedy for one beam and beam search for more; names are checked against the options', () => {
  assert.is(strategyFor(validateDecodingOptions({})).name, 'greedy');
  assert.is(strategyFor(validateDecodingOptions({ beamSize: 4 })).name, 'beam');
  assert.is(strategyFor(validateDecodingOptions({ strategy: 'beam', beamSize: 1 })).name, 'beam');
  assert.match(thrown(() => strategyFor(validateDecodingOptions({ strategy: 'greedy', beamSize: 3 }))), /PLANC_E405.*strategy 'greedy'.*beamSize = 3/);
  const unknown = thrown(() => strategyFor(validateDecodingOptions({ strategy: 'sampling' })));
  assert.match(unknown, /PLANC_E405.*strategy = "sampling"/);
  for (const name of STRATEGIES.keys()) assert.ok(unknown.includes(name), `the error lists ${name}`);
  assert.match(thrown(() => validateDecodingOptions({ strategy: 3 as unknown as string })), /strategy = 3/);
});

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, ['explicit strategies equal auto', 'planc translate --strategy: a name from the list, or an error naming the choices', 'translateIds returns to the event loop while a long batch decodes']);
} else {
  let plan: Plan;
  let planFile: string;
  let sources: number[][];
  before(test, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-strategy-'));
    makeModel({ arch: 'marian', d: 256, encoderLayers: 1, decoderLayers: 2, heads: 4, ffn: 512, vocab: V, maxPos: 160, activation: 'relu', seed: 5, out: dir });
    const model = importSeq2SeqDir(dir);
    const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK }), { target: 'cpu', maxBatch: 8, maxSrcLen: 16, maxTgtLen: MAX_LEN });
    const bytes = encodePlan(built.header, built.blob);
    planFile = path.join(dir, 'strategy.plan');
    fs.writeFileSync(planFile, bytes);
    plan = loadPlanBytes(bytes, 'strategy.plan');
    sources = Array.from({ length: 8 }, (_, i) => [...Array.from({ length: 3 + i }, (_, j) => 1 + ((i * 37 + j * 11) % (V - 1))), 0]);
  });

  test('explicit strategies equal auto', async () => {
    const auto1 = await translateIds(plan, sources, { maxLength: 30 });
    assert.equal(await translateIds(plan, sources, { maxLength: 30, strategy: 'greedy' }), auto1);
    const auto3 = await translateIds(plan, sources, { maxLength: 30, beamSize: 3 });
    assert.equal(await translateIds(plan, sources, { maxLength: 30, beamSize: 3, strategy: 'beam' }), auto3);
    const rules = await planRules(plan);
    const sync = greedyBatch(plan, sources, sources.map(() => 30), rules, false);
    assert.equal(auto1.map((r) => r.ids), sync.map((h) => h.ids), 'translateIds (yielding) = the synchronous loop');
  });

  test('planc translate --strategy: a name from the list, or an error naming the choices', () => {
    const input = sources.map((s) => s.join(' ')).join('\n') + '\n';
    const auto = planc(['translate', planFile, '--ids', '--max-length', '20', '--quiet'], input);
    assert.is(auto.status, 0, auto.stderr);
    const greedy = planc(['translate', planFile, '--ids', '--max-length', '20', '--strategy', 'greedy', '--quiet'], input);
    assert.is(greedy.stdout, auto.stdout);
    const bad = planc(['translate', planFile, '--ids', '--strategy', 'nucleus', '--quiet'], input);
    assert.is.not(bad.status, 0);
    assert.match(bad.stderr, /PLANC_E301: --strategy nucleus: it must be auto or one of greedy, beam/);
    assert.not.match(bad.stderr, /\n\s+at /, 'no stack trace');
  });

  test('translateIds returns to the event loop while a long batch decodes', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const t0 = performance.now();
    const out = await translateIds(plan, sources, { maxLength: MAX_LEN, batchSize: 8 });
    const ms = performance.now() - t0;
    clearInterval(timer);
    const steps = Math.max(...out.map((r) => r.ids.length));
    assert.ok(steps > 20, `the batch decodes for many steps (${steps})`);
    // one batch: every tick happened between decoder steps (the model is sized so a batch takes far longer than YIELD_EVERY_MS: 119 steps in 44 ms at d 128 here)
    assert.ok(ms > 20, `long enough to need yields (${ms.toFixed(0)} ms)`);
    assert.ok(ticks > 0, `a 1 ms timer fired ${ticks} times during ${ms.toFixed(0)} ms of decoding`);
  });
}

test.run();
