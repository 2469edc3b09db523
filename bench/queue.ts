// `npm run bench -- queue`: planc submit of the es-en test sentences through 1 and 2 planc workers on a private
// redis-server, against offline translate --batch 32 in the same run; the per-job overhead measured, and from it a
// paper estimate of 10 and 100 workers on separate machines against one Redis. Appends to bench/results/queue.jsonl.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { loadPlan } from '../runtime/plan.ts';
import { translate } from '../runtime/translate.ts';
import { startPlancWorker } from '../test/helpers/planc-cli.ts';
import { RedisServer, redisMissing } from '../test/helpers/redis-server.ts';
import { machineFacts } from './machine.ts';
import { type Level, load } from './serve-load.ts';
import { startServer, stopServer } from './serve.ts';

const PLANC = path.join(REPO_ROOT, 'bin', 'planc.js');
const JOB_LINES = 10;

const startWorker = (
  plan: string,
  url: string,
  queue: string,
  threads: number,
  extra: string[] = [],
): Promise<ChildProcess> =>
  startPlancWorker([plan, '--redis', url, '--queue', queue, '--threads', String(threads), ...extra]);

/** Runs planc submit; its own seconds (from its summary line: connection to the last line written, no process start). */
async function submitSeconds(url: string, input: string, out: string, queue: string): Promise<number> {
  const s = spawn(
    process.execPath,
    [PLANC, 'submit', '--redis', url, '-i', input, '-o', out, '--queue', queue, '--job-lines', String(JOB_LINES)],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  s.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const code = await new Promise((r) => s.once('exit', r));
  const m = /^submitted .* in ([\d.]+) s/m.exec(err);
  if (code !== 0 || !m) throw new Error(`planc submit exited ${code}: ${err}`);
  return Number(m[1]);
}

export async function benchQueue(): Promise<void> {
  const shared = sharedDir();
  const dir = shared ? path.join(shared, 'models', 'es-en') : '';
  const missing = !dir || !fs.existsSync(dir) ? '../shared/models/es-en is missing' : redisMissing();
  if (missing) {
    console.log(`queue bench skipped: ${missing}`);
    return;
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-bench-queue-'));
  const planFile = path.join(tmp, 'es-en.plan');
  const opt = spawn(
    process.execPath,
    [PLANC, 'optimize', dir, '-o', planFile, '--quiet', '--max-batch', '32', '--max-tgt-len', '64'],
    { stdio: 'inherit' },
  );
  await new Promise((r) => opt.once('exit', r));
  const texts = fs
    .readFileSync(path.join(dir, 'test.es'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '');
  const input = path.join(tmp, 'test.es');
  fs.writeFileSync(input, `${texts.join('\n')}\n`);

  const plan = await loadPlan(planFile);
  await translate(plan, texts.slice(0, 16), { batchSize: 32 });
  const t0 = performance.now();
  const offline = await translate(plan, texts, { batchSize: 32 });
  const offlineSeconds = (performance.now() - t0) / 1000;
  plan.close();
  console.log(
    `offline translate --batch 32: ${texts.length} sentences in ${offlineSeconds.toFixed(1)} s (${(texts.length / offlineSeconds).toFixed(1)} sent/s)`,
  );

  const redis = await RedisServer.start(path.join(tmp, 'redis'));
  let reuseSeconds = 0;
  const runs: { workers: number; seconds: number; sentencesPerS: number; vsOffline: number; identical: number }[] = [];
  try {
    for (const n of [1, 2]) {
      const queue = `bench${n}`; // a fresh queue per run: no job is re-used
      const threads = Math.max(1, Math.floor(os.availableParallelism() / n));
      const live = await Promise.all(Array.from({ length: n }, () => startWorker(planFile, redis.url, queue, threads)));
      const out = path.join(tmp, `out${n}.en`);
      const seconds = await submitSeconds(redis.url, input, out, queue);
      const got = fs.readFileSync(out, 'utf8').split('\n');
      const identical = offline.filter((t, i) => t === got[i]).length;
      if (n === 1) {
        // per-job overhead of Redis alone: the same submission again, every job found finished (no translation)
        reuseSeconds = await submitSeconds(redis.url, input, path.join(tmp, 'again.en'), queue);
      }
      for (const w of live) w.kill('SIGTERM');
      await Promise.all(live.map((w) => new Promise((r) => (w.exitCode !== null ? r(0) : w.once('exit', r)))));
      runs.push({
        workers: n,
        seconds,
        sentencesPerS: texts.length / seconds,
        vsOffline: offlineSeconds / seconds,
        identical,
      });
      console.log(
        `  ${n} worker${n > 1 ? 's' : ''}: ${texts.length} sentences in ${seconds.toFixed(1)} s (${(texts.length / seconds).toFixed(1)} sent/s, ${(offlineSeconds / seconds).toFixed(2)}x offline); identical to offline ${identical}/${texts.length}`,
      );
    }
    // gateway + 1 worker against in-process planc serve, 32 closed-loop clients, one sentence a request
    const at32: Record<string, Level> = {};
    const inProcess = await startServer(planFile, []);
    try {
      at32.serve = (await load(inProcess.base, inProcess.child.pid!, texts, 32, 32)).level;
    } finally {
      await stopServer(inProcess.child);
    }
    // one-sentence jobs: the worker holds 64 at once so their rows can fill the batch as planc serve's do
    const worker = await startWorker(planFile, redis.url, 'gateway', os.availableParallelism(), [
      '--concurrency',
      '64',
    ]);
    const gateway = await startServer('', ['--redis', redis.url, '--queue', 'gateway']);
    try {
      at32.gateway = (await load(gateway.base, gateway.child.pid!, texts, 32, 32)).level;
    } finally {
      await stopServer(gateway.child);
      worker.kill('SIGTERM');
      await new Promise((r) => (worker.exitCode !== null ? r(0) : worker.once('exit', r)));
    }
    const gatewayOverhead = at32.serve!.sentencesPerS / at32.gateway!.sentencesPerS - 1;
    console.log(
      `  32 clients: planc serve ${at32.serve!.sentencesPerS.toFixed(1)} sent/s (p50 ${at32.serve!.p50.toFixed(0)} ms); gateway + 1 worker ${at32.gateway!.sentencesPerS.toFixed(1)} sent/s (p50 ${at32.gateway!.p50.toFixed(0)} ms): the queue costs ${(gatewayOverhead * 100).toFixed(0)}% (goal ≤ 15%)`,
    );
    const jobs = Math.ceil(texts.length / JOB_LINES);
    const overheadMsPerJob = ((runs[0]!.seconds - offlineSeconds) / jobs) * 1000;
    // paper estimate: W workers each as fast as one here, Redis serving jobs at the measured re-use rate
    const redisJobsPerS = jobs / reuseSeconds;
    const perWorker = runs[0]!.sentencesPerS;
    const estimate = [10, 100].map((w) => ({
      workers: w,
      sentencesPerS: Math.min(w * perWorker, redisJobsPerS * JOB_LINES),
    }));
    console.log(
      `  re-used submission (${jobs} jobs found finished): ${reuseSeconds.toFixed(2)} s (${redisJobsPerS.toFixed(0)} jobs/s from one client); queue overhead with 1 worker ${overheadMsPerJob.toFixed(0)} ms a job of ${JOB_LINES} lines (${((runs[0]!.seconds / offlineSeconds - 1) * 100).toFixed(0)}% over offline)`,
    );
    console.log(
      `  paper estimate: ${estimate.map((e) => `${e.workers} workers ~${e.sentencesPerS.toFixed(0)} sent/s`).join(', ')} (each worker as one here; capped by the job rate one Redis gave one client)`,
    );
    const file = path.join(REPO_ROOT, 'bench', 'results', 'queue.jsonl');
    fs.appendFileSync(
      file,
      `${JSON.stringify({
        bench: 'queue',
        model: 'es-en',
        plan: 'fp32, --max-batch 32, --max-tgt-len 64',
        sentences: texts.length,
        jobLines: JOB_LINES,
        offline: { seconds: offlineSeconds, sentencesPerS: texts.length / offlineSeconds },
        runs,
        reuse: { seconds: reuseSeconds, jobs, jobsPerS: redisJobsPerS },
        overheadMsPerJob,
        estimate,
        clients32: at32,
        gatewayOverhead,
        ...machineFacts(),
      })}\n`,
    );
    console.log(`appended to ${path.relative(REPO_ROOT, file)}`);
  } finally {
    await redis.stop();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
