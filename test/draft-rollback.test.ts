// The multi-token step seam on es-en, as a drafting decoder uses it: a plan built with --step-tokens 4 verifies four
// drafted tokens in one step (its logits equal four single steps within 1e-4), rejected drafts are rolled back with
// truncate(len), and re-decoding from there gives exactly the tokens of never having drafted (greedy).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { buildPlan } from '../codegen/build-plan.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { StepRunner, type DecodeIds } from '../runtime/decode/step-runner.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { NEEDS_NATIVE, needsShared, skipSuite } from './helpers/skip.ts';

const N = 4;
const STEPS = 14;
const TOL = 1e-4;
const NAME =
  'es-en --step-tokens 4: drafts verified in one step (logits = single steps within 1e-4), rejected ones truncated, tokens = greedy';

/** Position p of row 0 of a logits output [1, n, V]. */
function logitsAt(out: Record<string, RtTensor>, p: number): Float32Array {
  const t = out.logits!;
  const v = t.dims[2]!;
  return (t.data as Float32Array).subarray(p * v, (p + 1) * v);
}

const argmax = (x: Float32Array) => x.reduce((best, y, i) => (y > x[best]! ? i : best), 0);

/** max |a - b| / max |b|. */
function relErr(a: Float32Array, b: Float32Array): number {
  let d = 0,
    m = 0;
  for (let i = 0; i < b.length; i++) {
    d = Math.max(d, Math.abs(a[i]! - b[i]!));
    m = Math.max(m, Math.abs(b[i]!));
  }
  return d / Math.max(m, 1e-30);
}

/** Greedy, one token per step: the tokens and the logits each step saw (the reference). */
function greedy(plan: Plan, src: number[], ids: DecodeIds): { tokens: number[]; logits: Float32Array[] } {
  const runner = new StepRunner(plan, [src], ids, 1, STEPS + N + 1);
  const tokens: number[] = [];
  const logits: Float32Array[] = [];
  try {
    while (tokens.length < STEPS) {
      const l = logitsAt(runner.out, 0).slice();
      logits.push(l);
      tokens.push(argmax(l));
      if (tokens[tokens.length - 1] === ids.eosId) break;
      runner.step([tokens[tokens.length - 1]!]);
    }
  } finally {
    runner.release();
  }
  return { tokens, logits };
}

/**
 * Drafting: each round feeds the next token plus N - 1 guesses in one step, keeps the guesses the step's own argmaxes
 * confirm, and truncates the cache to the confirmed length. `guess(i)` proposes output token i.
 */
function drafted(
  plan: Plan,
  src: number[],
  ids: DecodeIds,
  ref: { tokens: number[]; logits: Float32Array[] },
  guess: (i: number) => number,
) {
  const runner = new StepRunner(plan, [src], ids, 1, STEPS + N + 1);
  const tokens: number[] = [];
  const stats = { rounds: 0, rejected: 0, accepted: 0, worst: 0 };
  try {
    let next = argmax(logitsAt(runner.out, 0));
    for (;;) {
      tokens.push(next);
      if (next === ids.eosId || tokens.length >= STEPS) break;
      const draft = [next, ...Array.from({ length: N - 1 }, (_, j) => guess(tokens.length + j))];
      const before = runner.length;
      runner.step([draft]);
      stats.rounds++;
      assert.is(runner.length, before + N);
      // position j's logits predict the token after draft[j]; they must be the single-step logits of that position
      let keep = 1;
      for (let j = 0; j < N; j++) {
        const l = logitsAt(runner.out, j);
        const at = tokens.length + j; // the output index position j predicts
        if (j < keep && at < ref.logits.length) stats.worst = Math.max(stats.worst, relErr(l, ref.logits[at]!));
        const best = argmax(l);
        if (j + 1 < N && j + 1 === keep && draft[j + 1] === best && best !== ids.eosId) keep++;
      }
      for (let j = 1; j < keep && tokens.length < STEPS; j++) tokens.push(draft[j]!);
      stats.accepted += keep - 1;
      if (keep < N) stats.rejected++;
      next = argmax(logitsAt(runner.out, keep - 1));
      runner.truncate(before + keep);
      if (tokens.length >= STEPS) break;
    }
  } finally {
    runner.release();
  }
  return { tokens, stats };
}

const shared = sharedDir();
const esen = shared ? path.join(shared, 'models', 'es-en') : '';

if (!esen || !fs.existsSync(esen)) skipSuite(test, needsShared('models/es-en'), [NAME]);
else if (!nativeAvailable()) skipSuite(test, NEEDS_NATIVE, [NAME]);
else {
  test(NAME, () => {
    const srcIds: number[][] = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')).src_ids;
    const profile = { target: 'cpu' as const, maxBatch: 1, maxSrcLen: 64, maxTgtLen: STEPS + N + 1 };
    const toPlan = (stepTokens: number, name: string) => {
      const built = buildPlan(runPipeline(importSeq2SeqDir(esen), { stepTokens }), profile);
      return loadPlanBytes(encodePlan(built.header, built.blob), name);
    };
    const one = toPlan(1, 'es-en-1.plan');
    const four = toPlan(N, 'es-en-4.plan');
    try {
      const d = one.header.decoding;
      const ids: DecodeIds = { startId: d.decoderStartId!, eosId: d.eosId!, padId: d.padId! };
      let accepted = 0,
        rejected = 0;
      for (const s of [0, 3, 7]) {
        const ref = greedy(one, srcIds[s]!, ids);
        assert.ok(ref.tokens.length >= 6, `sentence ${s} decodes ${ref.tokens.length} tokens`);
        // right guesses except every third position: rounds accept some drafts and roll others back
        const { tokens, stats } = drafted(four, srcIds[s]!, ids, ref, (i) =>
          i % 3 === 2 ? (ref.tokens[i] ?? 0) + 1 : (ref.tokens[i] ?? ids.eosId),
        );
        assert.equal(tokens, ref.tokens, `sentence ${s}: drafted tokens = greedy`);
        assert.ok(
          stats.worst < TOL,
          `sentence ${s}: verified logits vs single steps, relative error ${stats.worst.toExponential(2)}`,
        );
        assert.ok(
          stats.rounds < ref.tokens.length - 1,
          `sentence ${s}: ${stats.rounds} steps for ${ref.tokens.length} tokens`,
        );
        accepted += stats.accepted;
        rejected += stats.rejected;
      }
      assert.ok(
        accepted > 0 && rejected > 0,
        `drafts were accepted (${accepted}) and rolled back (${rejected} rounds)`,
      );
    } finally {
      one.close();
      four.close();
    }
  });
}

test.run();
