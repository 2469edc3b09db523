// Decoding strategies (runtime/decode/strategy.ts): chosen by name, checked against the options, and driven so that
// translateIds returns to the event loop while a batch decodes.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { buildPlan } from '../codegen/build-plan.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
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
import { turnCounter, withFakeClock } from './helpers/fake-clock.ts';

const V = 500;
const MAX_LEN = 120;

test('runYielding returns to the event loop between steps once YIELD_EVERY_MS has passed', async () => {
  // steps of exactly 1 ms on a fake clock: the event loop runs after every YIELD_EVERY_MS-th step, and only then
  const n = 10 * YIELD_EVERY_MS;
  const seen: number[] = []; // event-loop turns counted before each step
  const loop = turnCounter();
  const result = await withFakeClock(0, (clock) => {
    function* steps() {
      for (let i = 0; i < n; i++) {
        seen.push(loop.turns);
        clock.advance(1);
        yield;
      }
      return n;
    }
    return loop.during(() => runYielding(steps()));
  });
  assert.is(result, n);
  const want = Array.from({ length: n }, (_, i) => Math.floor(i / YIELD_EVERY_MS));
  assert.equal(seen, want, `one event-loop turn per ${YIELD_EVERY_MS} ms of steps`);
  assert.is(
    runToEnd(
      (function* () {
        yield;
        yield;
        yield;
        return 3;
      })(),
    ),
    3,
  );
});

test('strategyFor: auto is greedy for one beam and beam search for more; names are checked against the options', () => {
  assert.is(strategyFor(validateDecodingOptions({})).name, 'greedy');
  assert.is(strategyFor(validateDecodingOptions({ beamSize: 4 })).name, 'beam');
  assert.is(strategyFor(validateDecodingOptions({ strategy: 'beam', beamSize: 1 })).name, 'beam');
  assert.match(
    thrown(() => strategyFor(validateDecodingOptions({ strategy: 'greedy', beamSize: 3 }))),
    /PLANC_E411.*strategy 'greedy'.*beamSize = 3/,
  );
  const unknown = thrown(() => strategyFor(validateDecodingOptions({ strategy: 'sampling' })));
  assert.match(unknown, /PLANC_E411.*strategy = "sampling"/);
  for (const name of STRATEGIES.keys()) assert.ok(unknown.includes(name), `the error lists ${name}`);
  assert.match(
    thrown(() => validateDecodingOptions({ strategy: 3 as unknown as string })),
    /strategy = 3/,
  );
});

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [
    'explicit strategies equal auto',
    'planc translate --strategy: a name from the list, or an error naming the choices',
    'translateIds returns to the event loop while a long batch decodes',
  ]);
} else {
  let plan: Plan;
  let planFile: string;
  let sources: number[][];
  before(test, () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-strategy-'));
    makeModel({
      arch: 'marian',
      d: 256,
      encoderLayers: 1,
      decoderLayers: 2,
      heads: 4,
      ffn: 512,
      vocab: V,
      maxPos: 160,
      activation: 'relu',
      seed: 5,
      out: dir,
    });
    const model = importSeq2SeqDir(dir);
    const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK }), {
      target: 'cpu',
      maxBatch: 8,
      maxSrcLen: 16,
      maxTgtLen: MAX_LEN,
    });
    const bytes = encodePlan(built.header, built.blob);
    planFile = path.join(dir, 'strategy.plan');
    fs.writeFileSync(planFile, bytes);
    plan = loadPlanBytes(bytes, 'strategy.plan');
    sources = Array.from({ length: 8 }, (_, i) => [
      ...Array.from({ length: 3 + i }, (_, j) => 1 + ((i * 37 + j * 11) % (V - 1))),
      0,
    ]);
  });

  test('explicit strategies equal auto', async () => {
    const auto1 = await translateIds(plan, sources, { maxLength: 30 });
    assert.equal(await translateIds(plan, sources, { maxLength: 30, strategy: 'greedy' }), auto1);
    const auto3 = await translateIds(plan, sources, { maxLength: 30, beamSize: 3 });
    assert.equal(await translateIds(plan, sources, { maxLength: 30, beamSize: 3, strategy: 'beam' }), auto3);
    const rules = await planRules(plan);
    const sync = greedyBatch(
      plan,
      sources,
      sources.map(() => 30),
      rules,
      false,
    );
    assert.equal(
      auto1.map((r) => r.ids),
      sync.map((h) => h.ids),
      'translateIds (yielding) = the synchronous loop',
    );
  });

  test('planc translate --strategy: a name from the list, or an error naming the choices', () => {
    const input = sources.map((s) => s.join(' ')).join('\n') + '\n';
    const auto = planc(['translate', planFile, '--ids', '--max-length', '20', '--quiet'], input);
    assert.is(auto.status, 0, auto.stderr);
    const greedy = planc(
      ['translate', planFile, '--ids', '--max-length', '20', '--strategy', 'greedy', '--quiet'],
      input,
    );
    assert.is(greedy.stdout, auto.stdout);
    const bad = planc(['translate', planFile, '--ids', '--strategy', 'nucleus', '--quiet'], input);
    assert.is.not(bad.status, 0);
    assert.match(bad.stderr, /PLANC_E301: --strategy nucleus: it must be auto or one of greedy, beam/);
    assert.not.match(bad.stderr, /\n\s+at /, 'no stack trace');
  });

  test('translateIds returns to the event loop while a long batch decodes', async () => {
    // on a fake clock where every read sees YIELD_EVERY_MS pass, decoding must give the event loop a turn per step
    const loop = turnCounter();
    const decode = () => translateIds(plan, sources, { maxLength: MAX_LEN, batchSize: 8 });
    const out = await withFakeClock(YIELD_EVERY_MS, () => loop.during(decode));
    const steps = Math.max(...out.map((r) => r.ids.length));
    assert.ok(steps > 20, `the batch decodes for many steps (${steps})`);
    assert.ok(loop.turns >= steps - 1, `the event loop had ${loop.turns} turns during ${steps} decoder steps`);
  });
}

test.run();
