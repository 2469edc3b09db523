// The serving scheduler (runtime/decode/scheduler.ts) on a synthetic plan: sentences submitted while others decode
// start at step boundaries and get exactly translateIds' results; per-sentence errors, cancellation, --no-continuous.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Scheduler, type SentenceOutcome } from '../runtime/decode/scheduler.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';
import { makeTinyTextPlan } from './helpers/tiny-text-plan.ts';

const it = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-scheduler-'));
let plan: Plan;
/** Sources of 2 to 15 ids (the tiny plan takes 16), each ending in the eos 0. */
const sources = Array.from({ length: 40 }, (_, i) => [
  ...Array.from({ length: 1 + ((i * 5) % 14) }, (_, j) => 2 + ((i * 7 + j * 3) % 99)),
  0,
]);

test.before(async () => {
  if (!nativeAvailable()) return;
  plan = await loadPlan(makeTinyTextPlan(tmp));
});

test.after(() => {
  plan?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const ids = (o: SentenceOutcome) => (o.error ? `error ${o.error.message}` : o.result.ids.join(' '));

it('sentences submitted one by one while others decode equal translateIds of all at once (greedy, with scores)', async () => {
  const offline = await translateIds(plan, sources, { returnScores: true });
  // cohorts side by side (rows joining one batch instead: test/row-join.test.ts)
  const s = new Scheduler(plan, { maxRows: 4, joinRows: false });
  let submitted = 0;
  let most = 0;
  const watch = setInterval(() => {
    most = Math.max(most, s.cohortCount);
  }, 0);
  // one arrival per turn of the event loop, where the scheduler takes one decoder step: arrivals spread over the
  // decoding of the earlier ones by steps, not by wall-clock time
  const pending: Promise<SentenceOutcome[]>[] = [];
  for (const src of sources) {
    pending.push(s.submit([src], { returnScores: true }));
    submitted++;
    await new Promise((r) => setImmediate(r));
  }
  const outcomes = (await Promise.all(pending)).map((o) => o[0]!);
  clearInterval(watch);
  assert.is(submitted, sources.length);
  assert.equal(
    outcomes.map(ids),
    offline.map((r) => r.ids.join(' ')),
  );
  // the same ids; scores within float32 rounding (a step's row count picks the kernels' code path, as with batch sizes offline)
  outcomes.forEach((o, i) =>
    assert.ok(
      Math.abs(o.result!.score! - offline[i]!.score!) < 1e-5 * Math.abs(offline[i]!.score!) + 1e-7,
      `score ${i}: ${o.result!.score} vs ${offline[i]!.score}`,
    ),
  );
  assert.ok(most >= 2, `cohorts decoded side by side (at most ${most})`);
  assert.is(s.runningRows, 0);
  assert.is(s.queued, 0);
});

it('one submission: results in input order; an over-long source, bad ids and an empty source answer alone', async () => {
  const s = new Scheduler(plan);
  const long = Array.from({ length: 40 }, () => 5);
  const out = await s.submit([sources[0]!, long, [3, -1, 0], [], sources[1]!], {});
  const offline = await translateIds(plan, [sources[0]!, sources[1]!]);
  assert.is(ids(out[0]!), offline[0]!.ids.join(' '));
  assert.match(out[1]!.error!.message, /PLANC_E408/);
  assert.match(out[2]!.error!.message, /PLANC_E405.*id -1/);
  assert.equal(out[3]!.result, { ids: [] });
  assert.is(ids(out[4]!), offline[1]!.ids.join(' '));
  assert.equal(
    out.map((o) => o.index),
    [0, 1, 2, 3, 4],
  );
});

it("bad options reject the submission before anything is queued; beam cohorts give translateIds' beam results", async () => {
  const s = new Scheduler(plan);
  const bad = await s.submit([sources[0]!], { beamSize: 0 }).then(
    () => 'ok',
    (e: Error) => e.message,
  );
  assert.match(bad, /PLANC_E411.*beamSize/);
  // a value JSON cannot say (a program's BigInt) is named like any other, not a TypeError of the message's making
  const bigSeed = await s.submit([sources[0]!], { seed: 5n as unknown as number }).then(
    () => 'ok',
    (e: Error) => e.message,
  );
  assert.match(bigSeed, /PLANC_E411.*seed = 5n/);
  // the same bad options again (a second submission takes the same path: nothing of the first is kept)
  const again = await s.submit([sources[0]!], { beamSize: 0 }).then(
    () => 'ok',
    (e: Error) => e.message,
  );
  assert.match(again, /PLANC_E411.*beamSize/);
  assert.is(s.queued, 0);
  const beam = await translateIds(plan, sources.slice(0, 6), { beamSize: 2 });
  const [greedyOut, beamOut] = await Promise.all([
    s.submit(sources.slice(0, 6), {}),
    s.submit(sources.slice(0, 6), { beamSize: 2 }),
  ]);
  assert.equal(
    beamOut.map(ids),
    beam.map((r) => r.ids.join(' ')),
  );
  assert.equal(
    greedyOut.map(ids),
    (await translateIds(plan, sources.slice(0, 6))).map((r) => r.ids.join(' ')),
  );
});

it('an aborted submission drops its queued sentences at once and its running rows at the next step', async () => {
  const s = new Scheduler(plan, { maxRows: 2 });
  const abort = new AbortController();
  const seen: SentenceOutcome[] = [];
  const p = s.submit(sources.slice(0, 10), {}, { signal: abort.signal, onOutcome: (o) => seen.push(o) });
  await new Promise((r) => setImmediate(r));
  assert.ok(s.runningRows > 0 && s.queued > 0);
  abort.abort();
  assert.is(s.queued, 0, 'queued sentences dropped at once');
  const out = await p;
  assert.ok(
    out.some((o) => o.error && /PLANC_E704/.test(o.error.message)),
    'cancelled sentences say so',
  );
  assert.is(seen.length, 10, 'every outcome heard once');
  assert.is(s.runningRows, 0);
});

it('continuous: false decodes one submission at a time', async () => {
  const s = new Scheduler(plan, { continuous: false });
  let most = 0;
  const watch = setInterval(() => {
    most = Math.max(most, s.cohortCount);
  }, 0);
  const all = await Promise.all([0, 1, 2].map((k) => s.submit(sources.slice(k * 5, k * 5 + 5), {})));
  clearInterval(watch);
  assert.is(most, 1);
  assert.equal(
    all.flat().map(ids),
    (await translateIds(plan, sources.slice(0, 15))).map((r) => r.ids.join(' ')),
  );
  await s.drain();
  const closed = await s.submit([sources[0]!], {}).then(
    () => 'ok',
    (e: Error) => e.message,
  );
  assert.match(closed, /PLANC_E702/);
});

test.run();
