// Rows joining a running batch (runtime/decode/row-batch.ts, row-loop.ts, the scheduler's row loop): sentences that
// arrive while others decode join the same batch at the next step with their own cached length, and every sentence
// gets exactly what offline translateIds gives it; on the tiny synthetic plan, the zoo exports and the real es-en model.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { canJoinRows, RowBatch } from '../runtime/decode/row-batch.ts';
import { StepRunner } from '../runtime/decode/step-runner.ts';
import { Scheduler, type SentenceOutcome } from '../runtime/decode/scheduler.ts';
import { decodeIds, translateIds } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { sharedDir } from '../compiler/paths.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, testIf } from './helpers/skip.ts';
import { makeTinyTextPlan } from './helpers/tiny-text-plan.ts';
import { ZOO, zooReference } from './helpers/zoo.ts';

const it = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
const shared = sharedDir();
const ESEN = shared ? path.join(shared, 'models', 'es-en') : undefined;
const withShared = testIf(test, (!nativeAvailable() && NEEDS_NATIVE) || (!ESEN && needsShared('models/es-en')));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-row-join-'));
let tiny: Plan;
/** Sources of 2 to 15 ids (the tiny plan takes 16), each ending in the eos 0. */
const sources = Array.from({ length: 40 }, (_, i) => [
  ...Array.from({ length: 1 + ((i * 5) % 14) }, (_, j) => 2 + ((i * 7 + j * 3) % 99)),
  0,
]);

test.before(async () => {
  if (!nativeAvailable()) return;
  tiny = await loadPlan(makeTinyTextPlan(tmp));
});

test.after(() => {
  tiny?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const ids = (o: SentenceOutcome) => (o.error ? `error ${o.error.message}` : o.result.ids.join(' '));

/**
 * Submits each source alone, `gapMs` after the one before (so most arrive while others decode), through a scheduler
 * that joins rows; returns the outcomes and how many joins found rows already decoding (at other lengths).
 */
async function staggered(
  plan: Plan,
  srcs: number[][],
  gapMs: number,
  options: Record<string, unknown> = {},
  maxRows?: number,
  asyncSteps = false,
) {
  let s: Scheduler;
  let midFlight = 0;
  let most = 0;
  s = new Scheduler(plan, {
    maxRows,
    minJoinRows: 1,
    asyncSteps,
    onJoin: (joined, running) => {
      if (joined > 0 && running > 0) midFlight++;
    }, // rows joined while others were decoding
    onStep: () => {
      most = Math.max(most, s.runningRows);
    },
  });
  const outcomes = await Promise.all(
    srcs.map(async (src, i) => {
      await new Promise((r) => setTimeout(r, i * gapMs));
      return (await s.submit([src], options))[0]!;
    }),
  );
  assert.is(s.runningRows, 0, 'every row left the batch');
  assert.is(s.cohortCount, 0, 'greedy sentences never opened a cohort');
  return { outcomes, midFlight, most };
}

it('the tiny plan has the per-row step graph', () => {
  assert.ok(canJoinRows(tiny), `graphs: ${tiny.graphs.join(', ')}`);
});

it('tiny plan: the batch is laid out for its longest live source; when that row leaves, the others move to a shorter layout unchanged', () => {
  const d = decodeIds(tiny);
  const long = sources.find((x) => x.length === 15)!;
  const short = sources.find((x) => x.length === 3)!;
  const both = new RowBatch(tiny, 4, tiny.header.profile.maxTgtLen);
  const alone = new RowBatch(tiny, 4, tiny.header.profile.maxTgtLen);
  const a = new StepRunner(tiny, [long, short], d, 2, 1);
  const b = new StepRunner(tiny, [short], d, 1, 1);
  try {
    both.join(a, [0, 1], [15, 3]);
    alone.join(b, [0], [3]);
    assert.is(both.sourceLength, 15);
    assert.is(alone.sourceLength, 3);
    // the same token choices and the same scores up to the last float bits: the cross-attention runs over the layout's
    // length (padding masked), and its exp and sums take SIMD or scalar paths by that length
    const same = (x: RowBatch, rx: number, y: RowBatch, ry: number, what: string) => {
      for (const [k, t] of Object.entries(x.out)) {
        const u = y.out[k]!;
        const n = t.data.length / t.dims[0]!;
        for (let i = 0; i < n; i++) {
          const p = Number(t.data[rx * n + i]);
          const q = Number(u.data[ry * n + i]);
          assert.ok(Math.abs(p - q) <= 1e-5 * Math.max(1, Math.abs(q)), `${what}: ${k}[${i}] ${p} vs ${q}`);
        }
      }
    };
    both.step([5, 7]);
    alone.step([7]);
    same(both, 1, alone, 0, 'the short row beside the long one steps as it does alone');
    both.leave([1]);
    assert.is(both.sourceLength, 3, 'laid out again for the short row');
    both.step([9]);
    alone.step([9]);
    same(both, 0, alone, 0, 'after the move it steps as it does alone');
    assert.throws(() => both.join(a, [0], [16]), /source lengths \[16\] must be in \[1, 15\]/);
    assert.throws(() => both.join(a, [2]), /row 2 is not a distinct row/);
  } finally {
    a.release();
    b.release();
    both.close();
    alone.close();
  }
});

it('tiny plan: sentences arriving one by one join the running batch and equal translateIds (greedy, with scores)', async () => {
  const offline = await translateIds(tiny, sources, { returnScores: true });
  const { outcomes, midFlight } = await staggered(tiny, sources, 1, { returnScores: true });
  assert.equal(
    outcomes.map(ids),
    offline.map((r) => r.ids.join(' ')),
  );
  outcomes.forEach((o, i) =>
    assert.ok(
      Math.abs(o.result!.score! - offline[i]!.score!) < 1e-5 * Math.abs(offline[i]!.score!) + 1e-7,
      `score ${i}: ${o.result!.score} vs ${offline[i]!.score}`,
    ),
  );
  assert.ok(midFlight >= 5, `rows joined while others decoded (${midFlight} times)`);
});

it('tiny plan: joins and row steps off the event loop (asyncSteps: true) give the same results as on it', async () => {
  const offline = await translateIds(tiny, sources);
  const { outcomes, midFlight } = await staggered(tiny, sources, 1, {}, undefined, true);
  assert.equal(
    outcomes.map(ids),
    offline.map((r) => r.ids.join(' ')),
  );
  assert.ok(midFlight >= 5, `rows joined while others decoded (${midFlight} times)`);
});

it('tiny plan: sampled sentences joining mid-flight draw what translateIds draws with the same seed and index', async () => {
  const opts = { doSample: true, seed: 7, topK: 5, temperature: 1.3 };
  const offline = await translateIds(tiny, sources.slice(0, 16), {
    ...opts,
    sampleIndices: sources.slice(0, 16).map((_, i) => i),
  });
  let s!: Scheduler;
  const outs = await Promise.all(
    sources.slice(0, 16).map(async (src, i) => {
      await new Promise((r) => setTimeout(r, i));
      s ??= new Scheduler(tiny, { minJoinRows: 1 });
      return (await s.submit([src], { ...opts, sampleIndices: [i] }))[0]!;
    }),
  );
  assert.equal(
    outs.map(ids),
    offline.map((r) => r.ids.join(' ')),
  );
});

it('tiny plan: a cancelled sentence leaves the batch at the next step and the others finish unchanged', async () => {
  const s = new Scheduler(tiny, { minJoinRows: 1 });
  const abort = new AbortController();
  const kept = s.submit(sources.slice(0, 3), {});
  const dropped = s.submit(sources.slice(3, 6), {}, { signal: abort.signal });
  await new Promise((r) => setImmediate(r));
  abort.abort();
  const [a, b] = await Promise.all([kept, dropped]);
  assert.equal(
    a.map(ids),
    (await translateIds(tiny, sources.slice(0, 3))).map((r) => r.ids.join(' ')),
  );
  assert.ok(
    b.every((o) => o.error && /PLANC_E704/.test(o.error.message)) || b.some((o) => o.result),
    'the dropped ones say they were cancelled (or had finished)',
  );
  assert.is(s.runningRows, 0);
});

it('tiny plan: sentences beyond the free rows start with the joiners (one encoder run) and join at later steps, equal to translateIds', async () => {
  let s!: Scheduler;
  const starts: { rows: number; free: number }[] = [];
  let firstSteps = 0;
  s = new Scheduler(tiny, {
    maxRows: 6,
    minJoinRows: 1,
    onStart: (rows) => {
      starts.push({ rows, free: 6 - s.runningRows });
    },
    onStep: (_rows, _ms, first) => {
      if (first) firstSteps++;
    },
  });
  const first = s.submit(sources.slice(0, 3), {});
  await new Promise((r) => setImmediate(r));
  const rest = s.submit(sources.slice(3, 20), {});
  const out = [...(await first), ...(await rest)];
  assert.equal(
    out.map(ids),
    (await translateIds(tiny, sources.slice(0, 20))).map((r) => r.ids.join(' ')),
  );
  assert.is(
    starts.reduce((n, x) => n + x.rows, 0),
    20,
    `each sentence started once (starts: ${JSON.stringify(starts)})`,
  );
  assert.ok(
    starts.some((x) => x.rows > x.free),
    `a start ran more sentences than the rows free then (starts: ${JSON.stringify(starts)})`,
  );
  assert.is(firstSteps, 0, 'starts are heard as starts, not as (first) decoder steps');
  assert.is(s.runningRows, 0);
  assert.is(s.startedWaiting, 0);
});

it('tiny plan: a submission cancelled while its sentences are started but not joined gives their rows up; the others finish unchanged', async () => {
  const abort = new AbortController();
  let starts = 0;
  const s = new Scheduler(tiny, {
    maxRows: 6,
    minJoinRows: 1,
    onStart: () => {
      if (++starts === 2) abort.abort();
    },
  });
  const kept = s.submit(sources.slice(0, 3), {});
  await new Promise((r) => setImmediate(r));
  const dropped = s.submit(sources.slice(3, 15), {}, { signal: abort.signal });
  const [a, b] = await Promise.all([kept, dropped]);
  assert.equal(
    a.map(ids),
    (await translateIds(tiny, sources.slice(0, 3))).map((r) => r.ids.join(' ')),
  );
  assert.ok(
    b.every((o) => o.error && /PLANC_E704/.test(o.error.message)),
    `every dropped sentence says it was cancelled: ${b.map(ids).join('; ')}`,
  );
  assert.is(s.runningRows, 0);
  assert.is(s.queued, 0);
  assert.is(s.startedWaiting, 0, 'no started sentence still holds its runner');
});

it('joinRows: false decodes greedy sentences in cohorts, with the same results', async () => {
  const s = new Scheduler(tiny, { joinRows: false });
  let most = 0;
  const watch = setInterval(() => {
    most = Math.max(most, s.cohortCount);
  }, 0);
  const out = await Promise.all([0, 1, 2].map((k) => s.submit(sources.slice(k * 5, k * 5 + 5), {})));
  clearInterval(watch);
  assert.ok(most >= 1);
  assert.equal(
    out.flat().map(ids),
    (await translateIds(tiny, sources.slice(0, 15))).map((r) => r.ids.join(' ')),
  );
});

for (const family of ['marian', 'bart', 'mbart', 't5']) {
  const zooIt = testIf(test, (!nativeAvailable() && NEEDS_NATIVE) || (!ZOO && needsShared('models/zoo')));
  zooIt(
    `zoo ${family}: rows joining mid-flight equal translateIds (or the plan has no per-row graph and cohorts run)`,
    async () => {
      const planFile = path.join(tmp, `${family}.plan`);
      const r = planc([
        'optimize',
        path.join(ZOO!, family),
        '-o',
        planFile,
        '--quiet',
        '--max-batch',
        '8',
        '--max-tgt-len',
        '24',
      ]);
      assert.is(r.status, 0, r.stderr);
      const plan = await loadPlan(planFile);
      try {
        const srcs = zooReference(family).src_ids.slice(0, 12);
        if (family === 't5') assert.not.ok(canJoinRows(plan), 't5 (relative position bias) has no per-row step graph');
        else assert.ok(canJoinRows(plan), `${family} has the per-row step graph`);
        const offline = await translateIds(plan, srcs);
        const s = new Scheduler(plan, { minJoinRows: 1 });
        const outs = await Promise.all(
          srcs.map(async (src, i) => {
            await new Promise((res) => setTimeout(res, i * 2));
            return (await s.submit([src], {}))[0]!;
          }),
        );
        assert.equal(
          outs.map(ids),
          offline.map((x) => x.ids.join(' ')),
        );
      } finally {
        plan.close();
      }
    },
  );
}

withShared('es-en: 48 test sentences arriving while others decode equal offline translateIds at batch 16', async () => {
  const planFile = path.join(tmp, 'es-en.plan');
  const r = planc(['optimize', ESEN!, '-o', planFile, '--quiet', '--max-batch', '16', '--max-tgt-len', '96']);
  assert.is(r.status, 0, r.stderr);
  const plan = await loadPlan(planFile);
  try {
    const srcs = (
      JSON.parse(fs.readFileSync(path.join(ESEN!, 'test_ids.json'), 'utf8')) as { src_ids: number[][] }
    ).src_ids.slice(0, 48);
    const offline = await translateIds(plan, srcs, { batchSize: 16 });
    const { outcomes, midFlight, most } = await staggered(plan, srcs, 3, {}, 16);
    assert.equal(
      outcomes.map(ids),
      offline.map((x) => x.ids.join(' ')),
    );
    assert.ok(midFlight >= 5, `rows joined while others decoded (${midFlight} times)`);
    assert.ok(most >= 8, `up to ${most} rows decoded at once`);
  } finally {
    plan.close();
  }
});

test.run();
