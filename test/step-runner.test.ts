// StepRunner over resident buffers: truncate(len) then re-stepping the same tokens gives the outputs of never having
// stepped further (in-place caches and carried past alike), reordered rows keep their caches, and multi-token steps
// a plan was not built for are refused with a clear error.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { buildPlan } from '../codegen/build-plan.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { hasInPlaceCache } from '../runtime/decode/kv-cache.ts';
import { StepRunner, stepTokenRange, type DecodeIds } from '../runtime/decode/step-runner.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { before } from './helpers/before.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';
import { thrown } from './helpers/expect-error.ts';

const IDS: DecodeIds = { startId: 0, eosId: 1, padId: 0 };
const SOURCES = [
  [5, 9, 14, 22, 2],
  [31, 7, 2],
  [12, 40, 41, 3, 8, 2],
];
/** Tokens of steps 1..5 for the three rows. */
const STEPS = [
  [4, 6, 8],
  [10, 12, 14],
  [16, 18, 20],
  [22, 24, 26],
  [28, 30, 32],
];

/** A step's outputs as plain numbers (a copy: the next step replaces them). */
const snapshot = (out: Record<string, RtTensor>) =>
  Object.fromEntries(
    Object.entries(out).map(([k, t]) => [k, Array.from(t.data as ArrayLike<number | bigint>, Number)]),
  );

/** Steps 1..5, truncates to 3 positions (start + 2 steps), re-steps steps 3..5: each must equal its first run. */
function checkTruncate(plan: Plan, label: string): void {
  const runner = new StepRunner(plan, SOURCES, IDS, 3, 8);
  assert.is(runner.length, 1, `${label}: the start token is cached`);
  const seen = STEPS.map((tokens) => {
    runner.step(tokens);
    return snapshot(runner.out);
  });
  assert.is(runner.length, 6);
  assert.not.equal(seen[2], seen[3], `${label}: different steps give different outputs`);
  runner.truncate(3);
  assert.is(runner.length, 3);
  for (let s = 2; s < STEPS.length; s++) {
    runner.step(STEPS[s]!);
    assert.equal(snapshot(runner.out), seen[s], `${label}: step ${s + 1} after truncate(3)`);
  }
  runner.truncate(0);
  assert.is(runner.length, 0);
  assert.match(
    thrown(() => runner.truncate(1)),
    /PLANC_E405: truncate: length 1 must be an integer in \[0, 0\]/,
  );
  runner.release();
  assert.match(
    thrown(() => runner.step(STEPS[0]!)),
    /PLANC_E412: this StepRunner was released/,
  );
}

/** Rows reordered (beam style, through the spare) and then shrunk (in place) keep their own caches and sources. */
function checkSelect(plan: Plan, label: string): void {
  const a = new StepRunner(plan, SOURCES, IDS, 4, 8);
  a.step(STEPS[0]!);
  a.select([2, 0, 0, 1]);
  a.step([STEPS[1]![2]!, STEPS[1]![0]!, STEPS[1]![0]!, STEPS[1]![1]!]);
  const reordered = snapshot(a.out);
  a.select([1, 3]);
  a.step([STEPS[2]![0]!, STEPS[2]![1]!]);
  const shrunk = snapshot(a.out);
  const b = new StepRunner(plan, SOURCES, IDS, 3, 8);
  b.step(STEPS[0]!);
  b.step(STEPS[1]!);
  const plain = snapshot(b.out);
  b.step(STEPS[2]!);
  const third = snapshot(b.out);
  for (const [k, v] of Object.entries(plain)) {
    const n = v.length / 3;
    const row = (x: number[], r: number) => x.slice(r * n, (r + 1) * n);
    assert.equal(
      [row(reordered[k]!, 0), row(reordered[k]!, 1), row(reordered[k]!, 2), row(reordered[k]!, 3)],
      [row(v, 2), row(v, 0), row(v, 0), row(v, 1)],
      `${label}: ${k} after reordering`,
    );
    assert.equal(
      [row(shrunk[k]!, 0), row(shrunk[k]!, 1)],
      [row(third[k]!, 0), row(third[k]!, 1)],
      `${label}: ${k} after shrinking`,
    );
  }
  a.release();
  b.release();
}

const NAMES = [
  'in-place caches: truncate then re-step gives the same outputs as before',
  'carried past (no in-place caches): truncate then re-step gives the same outputs as before',
  'rows reordered through the spare and shrunk in place keep their caches and sources',
  'steps of more tokens than the plan takes, ragged rows, wrong row counts and overfull caches are refused',
  'a runner on buffers another batch released (dirty) steps as one on fresh buffers',
  'a plan built for 3-token steps: one step of n tokens per row (after a truncate too) ends where n single steps do',
];
const ES_EN = 'es-en (fused): truncate then re-step gives the same top-k as before';

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [...NAMES, ES_EN]);
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-step-runner-'));
  let inPlace: Plan;
  let carried: Plan;
  let multi: Plan;
  before(test, () => {
    const dir = path.join(tmp, 'model');
    makeModel({
      arch: 'marian',
      d: 32,
      encoderLayers: 1,
      decoderLayers: 2,
      heads: 2,
      ffn: 64,
      vocab: 60,
      maxPos: 64,
      activation: 'relu',
      seed: 11,
      out: dir,
    });
    const profile = { target: 'cpu' as const, maxBatch: 4, maxSrcLen: 8, maxTgtLen: 8 };
    const fused = buildPlan(runPipeline(importSeq2SeqDir(dir)), profile);
    inPlace = loadPlanBytes(encodePlan(fused.header, fused.blob), 'in-place.plan');
    const plain = buildPlan(importSeq2SeqDir(dir), profile);
    carried = loadPlanBytes(encodePlan(plain.header, plain.blob), 'carried.plan');
    const steps3 = buildPlan(runPipeline(importSeq2SeqDir(dir), { stepTokens: 3 }), profile);
    multi = loadPlanBytes(encodePlan(steps3.header, steps3.blob), 'steps3.plan');
    assert.ok(hasInPlaceCache(inPlace) && !hasInPlaceCache(carried));
  });
  test.after(() => {
    inPlace?.close();
    carried?.close();
    multi?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test(NAMES[0]!, () => checkTruncate(inPlace, 'in-place'));
  test(NAMES[1]!, () => checkTruncate(carried, 'carried'));
  test(NAMES[2]!, () => {
    checkSelect(inPlace, 'in-place');
    checkSelect(carried, 'carried');
  });

  test(NAMES[3]!, () => {
    assert.equal(stepTokenRange(inPlace), [1, 1]);
    const runner = new StepRunner(inPlace, SOURCES, IDS, 3, 4);
    assert.match(
      thrown(() =>
        runner.step([
          [4, 5],
          [6, 7],
          [8, 9],
        ]),
      ),
      /PLANC_E405: step: 2 tokens per row, but this plan's decoder_with_past takes exactly 1 token per row \(its input_ids dims\); optimize the plan for multi-token steps/,
    );
    assert.match(
      thrown(() => runner.step([[4], [6, 7], [8]])),
      /PLANC_E405: step: every row must take the same number of tokens/,
    );
    assert.match(
      thrown(() => runner.step([4, 6])),
      /PLANC_E405: step: 2 rows of tokens, but the batch has 3/,
    );
    assert.match(
      thrown(() => runner.select([0, 3])),
      /PLANC_E405: select: row 1 continues row 3, which is not one of the 3 rows/,
    );
    assert.match(
      thrown(() => runner.select([0, 1, 2, 0])),
      /PLANC_E405: select: 4 rows, but this batch was set up for at most 3/,
    );
    runner.step([[4], [6], [8]]);
    runner.step([4, 6, 8]);
    runner.step([4, 6, 8]);
    assert.is(runner.length, 4);
    assert.match(
      thrown(() => runner.step([4, 6, 8])),
      /PLANC_E405: step: 4 cached positions \+ 1 exceed the cache capacity 4/,
    );
    runner.release();
  });

  test(NAMES[4]!, () => {
    for (const plan of [inPlace, carried]) {
      const run = () => {
        const r = new StepRunner(plan, SOURCES, IDS, 3, 8);
        const outs = STEPS.map((t) => {
          r.step(t);
          return snapshot(r.out);
        });
        return { r, outs };
      };
      const first = run();
      const other = new StepRunner(
        plan,
        [
          [50, 51, 52, 53, 54, 55, 2],
          [3, 2],
          [9, 2],
        ],
        IDS,
        3,
        8,
      );
      for (const t of STEPS) other.step(t.map((x) => x + 1));
      other.release();
      first.r.release();
      const again = run();
      again.r.release();
      assert.equal(again.outs, first.outs);
    }
  });

  test(NAMES[5]!, () => {
    assert.equal(stepTokenRange(multi), [1, 3]);
    /** Row r's logits at the last position of a step's output. */
    const last = (out: Record<string, RtTensor>, r: number) => {
      const [, n, v] = out.logits!.dims as [number, number, number];
      return Array.from((out.logits!.data as Float32Array).subarray((r * n + n - 1) * v, (r * n + n) * v));
    };
    const close = (a: number[], b: number[], what: string) =>
      assert.ok(
        a.every((x, i) => Math.abs(x - b[i]!) <= 1e-5),
        what,
      );
    const single = new StepRunner(multi, SOURCES, IDS, 3, 8);
    const singles = STEPS.slice(0, 3).map((t) => {
      single.step(t);
      return [0, 1, 2].map((r) => last(single.out, r));
    });
    const many = new StepRunner(multi, SOURCES, IDS, 3, 8);
    many.step([0, 1, 2].map((r) => STEPS.slice(0, 3).map((t) => t[r]!)));
    assert.equal(many.out.logits!.dims, [3, 3, 60]);
    assert.is(many.length, 4);
    [0, 1, 2].forEach((r) => close(last(many.out, r), singles[2]![r]!, `row ${r} after one 3-token step`));
    many.truncate(2);
    many.step([0, 1, 2].map((r) => STEPS.slice(1, 3).map((t) => t[r]!)));
    assert.is(many.length, 4);
    [0, 1, 2].forEach((r) =>
      close(last(many.out, r), singles[2]![r]!, `row ${r} after truncate(2) and a 2-token step`),
    );
    assert.match(
      thrown(() =>
        many.step([
          [4, 5, 6, 7],
          [4, 5, 6, 7],
          [4, 5, 6, 7],
        ]),
      ),
      /step: 4 tokens per row, but this plan's decoder_with_past takes 1 to 3 tokens per row/,
    );
    single.release();
    many.release();
  });

  const shared = sharedDir();
  const esen = shared ? path.join(shared, 'models', 'es-en') : '';
  testIf(test, !esen || !fs.existsSync(esen) ? needsShared('models/es-en') : false)(ES_EN, () => {
    const ids: number[][] = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')).src_ids;
    const built = buildPlan(runPipeline(importSeq2SeqDir(esen), { topk: 8 }), {
      target: 'cpu',
      maxBatch: 4,
      maxSrcLen: 64,
      maxTgtLen: 16,
    });
    const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'es-en.plan');
    try {
      const runner = new StepRunner(plan, ids.slice(0, 3), IDS, 3, 16);
      const steps = [
        [100, 200, 300],
        [101, 201, 301],
        [102, 202, 302],
        [103, 203, 303],
      ];
      const seen = steps.map((t) => {
        runner.step(t);
        return snapshot(runner.out);
      });
      runner.truncate(2);
      for (let s = 1; s < steps.length; s++) {
        runner.step(steps[s]!);
        assert.equal(snapshot(runner.out), seen[s], `step ${s + 1} after truncate(2)`);
      }
    } finally {
      plan.close();
    }
  });
}

test.run();
