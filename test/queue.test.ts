// planc worker and planc submit over a private redis-server: bad input named, the gateway and the Node API client,
// and the fault test — workers SIGKILLed and restarted at four points of progress, Redis restarted once — where every
// line still arrives exactly once, in order, equal to offline translate.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan } from '../runtime/plan.ts';
import { translate } from '../runtime/translate.ts';
import { Queue } from 'bullmq';
import { DEFAULT_QUEUE, queueName } from '../serve/queue/jobs.ts';
import { submit as submitClient, submitStream } from '../serve/queue/submit.ts';
import { createServer } from '../serve/server.ts';
import { redisOptions } from '../serve/queue/redis.ts';
import { planc, startPlancWorker } from './helpers/planc-cli.ts';
import { RedisServer, redisMissing } from './helpers/redis-server.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';
import { makeTinyTextPlan } from './helpers/tiny-text-plan.ts';

const NAMES = [
  'queue: bad input is named (URL, password, model, options, over-long line) and nothing else is disturbed',
  'planc serve --redis (gateway): requests become jobs, answered as offline translate; 503 PLANC_E708 while Redis is down, then back',
  'queue fault test: 3 workers, one SIGKILLed at 10%, 25%, 40% and 70% of the jobs, Redis restarted at 55%: every line once, in order, as offline translate',
];
const shared = sharedDir();
const ESEN = shared ? path.join(shared, 'models', 'es-en') : undefined;
const missing = !nativeAvailable() ? NEEDS_NATIVE : redisMissing();
const BIN = path.join(REPO_ROOT, 'bin', 'planc.js');

if (missing && !(process.env.CI && missing !== NEEDS_NATIVE)) {
  skipSuite(test, missing, NAMES);
} else if (missing) {
  test('redis-server is installed (CI runs the queue tests)', () => assert.unreachable(missing));
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-queue-'));
  let planFile = '';
  let sentences: string[] = [];
  let model = '';
  let redis: RedisServer;
  const children = new Set<ChildProcess>();

  /** Starts a worker; resolves once it takes jobs. */
  const startWorker = async (url: string, extra: string[] = []): Promise<ChildProcess> => {
    const w = await startPlancWorker([planFile, '--redis', url, '--lock-ms', '3000', '--threads', '1', ...extra]);
    children.add(w);
    w.on('exit', () => children.delete(w));
    return w;
  };
  const submit = (args: string[]) =>
    new Promise<{ status: number | null; stderr: string }>((resolve) => {
      const s = spawn(process.execPath, [BIN, 'submit', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      s.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      s.on('exit', (status) => resolve({ status, stderr }));
    });

  test.before(async () => {
    if (ESEN) {
      planFile = path.join(tmp, 'es-en.plan');
      const r = planc(['optimize', ESEN, '-o', planFile, '--quiet', '--max-batch', '32', '--max-tgt-len', '64']);
      if (r.status !== 0) throw new Error(r.stderr);
      const read = (f: string) =>
        fs
          .readFileSync(path.join(ESEN, f), 'utf8')
          .split('\n')
          .filter((l) => l.trim());
      sentences = [...read('test.es'), ...read('dev.es'), ...read('train.es').slice(0, 500)].slice(0, 2000);
      model = 'es-en';
    } else {
      planFile = makeTinyTextPlan(tmp);
      sentences = Array.from({ length: 2000 }, (_, i) =>
        Array.from({ length: 1 + ((i * 7) % 12) }, (_, j) => `w${2 + ((i * 13 + j * 5) % 99)}`).join(' '),
      );
      model = 'tiny';
    }
    redis = await RedisServer.start(path.join(tmp, 'redis'));
  });

  test(NAMES[0]!, async () => {
    const w = await startWorker(redis.url);
    const input = path.join(tmp, 'bad.txt');
    const long = Array.from({ length: 400 }, () => (model === 'tiny' ? 'w5' : 'hola')).join(' ');
    fs.writeFileSync(input, [sentences[0], long, sentences[1]].join('\n') + '\n');
    const out = path.join(tmp, 'bad.out');
    // a truncated URL, nothing listening, a password Redis refuses
    let r = await submit(['--redis', `redis://127.0.0.1:`, '-i', input]);
    assert.is(r.status, 2);
    assert.match(r.stderr, /PLANC_E708: --redis redis:\/\/127\.0\.0\.1:: the port is empty/);
    const locked = await RedisServer.start(path.join(tmp, 'redis-auth'), ['--requirepass', 'right-password']);
    try {
      r = await submit(['--redis', `redis://:wrong-password@127.0.0.1:${locked.port}`, '-i', input]);
      assert.is(r.status, 2);
      assert.match(r.stderr, /PLANC_E708: Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ refused the credentials/);
      assert.not.match(r.stderr, /wrong-password/, 'the password is not echoed');
    } finally {
      await locked.stop();
    }
    // an unknown model, bad options: named, and the queue still works after them
    r = await submit(['--redis', redis.url, '-i', input, '--model', 'no-such-model']);
    assert.is(r.status, 2);
    assert.match(
      r.stderr,
      new RegExp(`PLANC_E705: no live worker on queue 'planc' holds model 'no-such-model' \\(held: ${model}\\)`),
    );
    r = await submit(['--redis', redis.url, '-i', input, '-o', out, '--target-lang', 'xx_XX', '--quiet']);
    assert.is(r.status, 2);
    assert.is((r.stderr.match(/PLANC_E409: unknown target language 'xx_XX'/g) ?? []).length, 3, r.stderr);
    assert.is(fs.readFileSync(out, 'utf8'), '\n\n\n', 'a failed line gives an empty line');
    // the over-long line fails alone
    r = await submit(['--redis', redis.url, '-i', input, '-o', out, '--quiet']);
    assert.is(r.status, 2);
    assert.match(r.stderr, /line 2: PLANC_E408/);
    const lines = fs.readFileSync(out, 'utf8').split('\n');
    const plan = await loadPlan(planFile);
    try {
      assert.equal(lines, [
        ...(await translate(plan, [sentences[0]!, sentences[1]!])).flatMap((t, i) => (i === 1 ? ['', t] : [t])),
        '',
      ]);
    } finally {
      plan.close();
    }
    // the poison job failed once (bad options are not retried), and is the only failed job
    const q = new Queue(queueName(DEFAULT_QUEUE, model), { connection: redisOptions(redis.url) });
    try {
      const failed = await q.getFailed();
      assert.equal(
        failed.map((j) => [j.attemptsMade, /^PLANC_E409/.test(j.failedReason)]),
        [[1, true]],
      );
    } finally {
      await q.close();
    }
    w.kill('SIGTERM');
    const code = await new Promise((resolve) => w.on('exit', resolve));
    assert.is(code, 0, 'SIGTERM: the worker finishes and exits 0');
  });

  test(NAMES[1]!, async () => {
    const w = await startWorker(redis.url);
    const server = await createServer([], {
      port: 0,
      logger: false,
      queue: { redis: redis.url, prefix: DEFAULT_QUEUE },
    });
    const url = await server.listen();
    const post = (body: object, accept = 'application/json') =>
      fetch(`${url}/v1/translate`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept },
        body: JSON.stringify(body),
      });
    try {
      const texts = sentences.slice(0, 12);
      const plan = await loadPlan(planFile);
      const offline = await translate(plan, texts);
      const translateOnce = (t: string[]) => translate(plan, t);
      let res = await post({ text: texts });
      assert.is(res.status, 200);
      assert.equal(
        ((await res.json()) as { translations: { text: string }[] }).translations.map((t) => t.text),
        offline,
      );
      // streamed: each sentence as the worker reports it (a short one well before a long one), then done
      const longest = texts.reduce((a, b) => (b.length > a.length ? b : a));
      const streamed = [longest, 'Hola.', texts[0]!];
      const expect = [offline[texts.indexOf(longest)], ...(await translateOnce(['Hola.'])), offline[0]];
      res = await post({ text: streamed, model }, 'application/x-ndjson');
      const chunks: string[] = [];
      for await (const c of res.body!) chunks.push(Buffer.from(c).toString());
      const lines = chunks
        .join('')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { index?: number; text?: string; done?: boolean });
      assert.equal(lines.at(-1), { done: true });
      assert.equal(
        lines
          .slice(0, -1)
          .sort((a, b) => a.index! - b.index!)
          .map((l) => l.text),
        expect,
      );
      assert.ok(
        chunks.length >= 2,
        `the answers came in one piece (${chunks.length} chunk): not streamed before the job completed`,
      );
      // the Node API client (index.ts: submit, submitStream): the same answers, in input order
      assert.equal(
        (await submitClient(texts.slice(5, 9), { redis: redis.url, model })).map((t) =>
          'text' in t ? t.text : t.error.code,
        ),
        offline.slice(5, 9),
      );
      const order: number[] = [];
      await submitStream(texts.slice(0, 4), { redis: redis.url, jobLines: 2 }, (index) => order.push(index));
      assert.equal(order, [0, 1, 2, 3]);
      // the queue's jobs by state, read from Redis when scraped (nothing waits now: every request was answered)
      const metrics = await (await fetch(`${url}/metrics`)).text();
      for (const state of ['waiting', 'active', 'delayed'])
        assert.match(metrics, new RegExp(`planc_queue_jobs\\{model="${model}",state="${state}"\\} 0`));
      res = await post({ text: 'x', model: 'no-such-model' });
      assert.is(res.status, 404);
      assert.match(await res.text(), /PLANC_E705.*unknown model 'no-such-model'/);
      // Redis down: 503 at once, /ready 503; back up: answered again
      await redis.stop();
      res = await post({ text: texts[3], model });
      assert.is(res.status, 503);
      assert.match(await res.text(), /PLANC_E708/);
      assert.is((await fetch(`${url}/ready`)).status, 503);
      await redis.up();
      for (let i = 0; i < 100 && (await fetch(`${url}/ready`)).status !== 200; i++)
        await new Promise((r) => setTimeout(r, 100));
      res = await post({ text: [texts[3], texts[4]], model });
      assert.is(res.status, 200);
      assert.equal(
        ((await res.json()) as { translations: { text: string }[] }).translations.map((t) => t.text),
        [offline[3], offline[4]],
      );
      plan.close();
    } finally {
      await server.close();
    }
    w.kill('SIGTERM');
    assert.is(await new Promise((resolve) => w.on('exit', resolve)), 0);
  });

  test(NAMES[2]!, async () => {
    const input = path.join(tmp, 'fault.txt');
    const out = path.join(tmp, 'fault.out');
    fs.writeFileSync(input, sentences.join('\n') + '\n');
    const workers = await Promise.all([0, 1, 2].map(() => startWorker(redis.url)));
    const t0 = Date.now();
    const run = submit(['--redis', redis.url, '-i', input, '-o', out, '--job-lines', '10']);
    let finished = false;
    run.then(() => {
      finished = true;
    });
    let kills = 0;
    let redisRestarts = 0;
    // faults by progress, not by the clock (a fast machine could finish before a timed fault): a worker SIGKILLed (and
    // a new one started) when 10%, 25%, 40% and 70% of the jobs are complete, Redis down for a second at 55%
    const jobs = new Queue(queueName(DEFAULT_QUEUE, model), {
      connection: { ...redisOptions(redis.url), enableOfflineQueue: false },
    });
    jobs.on('error', () => {});
    const written = async () => 10 * (await jobs.getCompletedCount().catch(() => 0)); // 10 lines a job
    const marks = [0.1, 0.25, 0.4, 0.55, 0.7];
    let next = 0;
    while (!finished) {
      await Promise.race([run, new Promise((r) => setTimeout(r, 100))]);
      if (finished || next >= marks.length || (await written()) < marks[next]! * sentences.length) continue;
      if (marks[next] === 0.55) {
        await redis.stop();
        await new Promise((r) => setTimeout(r, 1000));
        await redis.up();
        redisRestarts++;
      } else {
        const victim = workers.splice(kills % workers.length, 1)[0]!;
        victim.kill('SIGKILL');
        kills++;
        workers.push(await startWorker(redis.url));
      }
      next++;
    }
    await jobs.close().catch(() => {});
    const r = await run;
    const queueSeconds = (Date.now() - t0) / 1000;
    assert.is(r.status, 0, r.stderr);
    assert.ok(
      kills === 4 && redisRestarts === 1,
      `kills ${kills}, Redis restarts ${redisRestarts} (the run ended before the faults)`,
    );
    const lines = fs.readFileSync(out, 'utf8').split('\n');
    assert.is(lines.pop(), '');
    assert.is(lines.length, sentences.length);
    const plan = await loadPlan(planFile);
    try {
      const t1 = Date.now();
      const offline = await translate(plan, sentences, { batchSize: 32 });
      console.log(
        `  ${sentences.length} lines through the queue in ${queueSeconds.toFixed(0)} s (${kills} workers killed, Redis restarted ${redisRestarts}); offline translate ${((Date.now() - t1) / 1000).toFixed(0)} s`,
      );
      const diff = offline.findIndex((t, i) => t !== lines[i]);
      assert.is(diff, -1, `line ${diff + 1}: queue '${lines[diff]}' vs offline '${offline[diff]}'`);
    } finally {
      plan.close();
    }
    for (const w of workers) w.kill('SIGTERM');
    const codes = await Promise.all(
      workers.map((w) => (w.exitCode !== null ? w.exitCode : new Promise((resolve) => w.on('exit', resolve)))),
    );
    assert.equal(codes, [0, 0, 0], 'SIGTERM: each worker exits 0');
  });

  test.after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await redis?.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });
}

test.run();
