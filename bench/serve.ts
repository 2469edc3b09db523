// `npm run bench -- serve`: planc serve (a child process on 127.0.0.1) under closed-loop load, one es-en test sentence per
// request, at 1, 8, 32 and 64 clients; against offline translate --batch 32 and a single in-process translate() per
// sentence, and against the same server with --no-continuous (32 clients), --no-row-join (cohorts, 64 clients) and --async-steps (64 clients). Latency percentiles and batch occupancy per level.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { loadPlan } from '../runtime/plan.ts';
import { translate } from '../runtime/translate.ts';
import { collectGarbage } from './gc.ts';
import { machineFacts } from './machine.ts';

const PLANC = path.join(REPO_ROOT, 'bin', 'planc.js');
/** Sentences per level (the test set has 1,000); the 1-client level and the latency pairs use the first LATENCY_N. */
const N = Number(process.env.PLANC_BENCH_SERVE_N ?? 1000);
const LATENCY_N = Math.min(N, Number(process.env.PLANC_BENCH_SERVE_LATENCY_N ?? 200));
const MAX_TGT = 64;

export interface Level { clients: number; sentences: number; seconds: number; sentencesPerS: number; p50: number; p90: number; p99: number; occupancy: number; meanRows: number; cpuSeconds: number }

/** CPU seconds (user + system) a process has used, from /proc (0 where there is none). */
function cpuSecondsOf(pid: number): number {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return 0;
  }
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};

/** Starts `planc serve PLAN --port 0` (no PLAN when plan is '': gateway mode) and resolves with its base URL once it listens. */
export async function startServer(plan: string, extra: string[]): Promise<{ child: ChildProcess; base: string }> {
  const child = spawn(process.execPath, [PLANC, 'serve', ...(plan ? [plan] : []), '--port', '0', '--log-level', 'warn', ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
  for (let i = 0; i < 1200; i++) {
    const m = /on (http:\/\/\S+)/.exec(err);
    if (m) return { child, base: m[1]! };
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill();
  throw new Error(`planc serve did not start: ${err}`);
}

export async function stopServer(child: ChildProcess): Promise<void> {
  const done = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await done;
}

/** A Prometheus histogram's _sum and _count. */
async function histogram(base: string, name: string): Promise<{ sum: number; count: number }> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const read = (suffix: string) => text.split('\n').filter((l) => l.startsWith(`${name}_${suffix}`)).reduce((s, l) => s + Number(l.split(' ').pop()), 0);
  return { sum: read('sum'), count: read('count') };
}

/**
 * One POST over a keep-alive agent: its status and parsed body. node:http rather than fetch: the load generator shares
 * the machine's cores with the server, and fetch took 1.3-2.0 ms of CPU a request here (a quarter of a core at 64
 * clients), node:http far less.
 */
function postJson(agent: http.Agent, url: URL, body: string): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        } catch (e) {
          reject(e);
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Closed loop: `clients` clients, each sending the next sentence as soon as its last one is answered. */
export async function load(base: string, pid: number, texts: string[], clients: number, maxRows: number): Promise<{ level: Level; answers: string[]; latencies: number[] }> {
  const answers = new Array<string>(texts.length);
  const latencies = new Array<number>(texts.length);
  const before = await histogram(base, 'planc_batch_occupancy');
  let next = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
  const url = new URL(`${base}/v1/translate`);
  const cpu0 = cpuSecondsOf(pid);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < texts.length) {
      const i = next++;
      const s = performance.now();
      const res = await postJson(agent, url, JSON.stringify({ text: texts[i] }));
      const body = res.json as { translations?: { text?: string }[] };
      latencies[i] = performance.now() - s;
      if (res.status !== 200 || typeof body.translations?.[0]?.text !== 'string') throw new Error(`request ${i}: ${res.status} ${JSON.stringify(body)}`);
      answers[i] = body.translations[0].text;
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  const cpuSeconds = cpuSecondsOf(pid) - cpu0;
  agent.destroy();
  const after = await histogram(base, 'planc_batch_occupancy');
  const occupancy = (after.sum - before.sum) / Math.max(1, after.count - before.count);
  return {
    level: { clients, sentences: texts.length, seconds, sentencesPerS: texts.length / seconds, p50: pct(latencies, 0.5), p90: pct(latencies, 0.9), p99: pct(latencies, 0.99), occupancy, meanRows: occupancy * maxRows, cpuSeconds },
    answers, latencies,
  };
}

export async function benchServe(): Promise<void> {
  const shared = sharedDir();
  const dir = shared ? path.join(shared, 'models', 'es-en') : '';
  if (!dir || !fs.existsSync(dir)) {
    console.log('serve bench skipped: ../shared/models/es-en is missing');
    return;
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-bench-serve-'));
  const planFile = path.join(tmp, 'es-en.plan');
  const opt = spawn(process.execPath, [PLANC, 'optimize', dir, '-o', planFile, '--quiet', '--max-batch', '32', '--max-tgt-len', String(MAX_TGT)], { stdio: 'inherit' });
  await new Promise((r) => opt.once('exit', r));
  const texts = fs.readFileSync(path.join(dir, 'test.es'), 'utf8').split('\n').filter((l) => l.trim() !== '').slice(0, N);
  const maxRows = 32;

  // offline: translate --batch 32 on the same sentences, and one translate() per sentence (the latency reference)
  const plan = await loadPlan(planFile);
  await translate(plan, texts.slice(0, 16), { batchSize: 32 }); // warm-up
  collectGarbage();
  // offline is measured before the levels and again after them (the machine's speed drifts over minutes: on one
  // quiet 2-core VM, 166 and 207 sent/s a few minutes apart); the ratios use both runs
  const offlineRun = async () => {
    collectGarbage();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const out = await translate(plan, texts, { batchSize: 32 });
    const cpu = process.cpuUsage(cpu0);
    return { out, seconds: (performance.now() - t0) / 1000, cpu: (cpu.user + cpu.system) / 1e6 };
  };
  const before = await offlineRun();
  const offline = before.out;
  let t0 = performance.now();
  const single: number[] = [];
  for (const t of texts.slice(0, LATENCY_N)) {
    t0 = performance.now();
    await translate(plan, [t]);
    single.push(performance.now() - t0);
  }
  console.log(`offline translate --batch 32: ${texts.length} sentences in ${before.seconds.toFixed(2)} s (${(texts.length / before.seconds).toFixed(1)} sent/s); single translate() median ${pct(single, 0.5).toFixed(2)} ms; ${(before.cpu * 1000 / texts.length).toFixed(1)} CPU ms a sentence`);
  const offlineSeconds1 = before.seconds;

  const levels: Level[] = [];
  let identical = 0;
  let compared = 0;
  let latencyPairs: { server: number; single: number }[] = [];
  const server = await startServer(planFile, []);
  try {
    for (const clients of [1, 8, 32, 64]) {
      const sub = clients === 1 ? texts.slice(0, LATENCY_N) : texts;
      collectGarbage();
      const r = await load(server.base, server.child.pid!, sub, clients, maxRows);
      levels.push(r.level);
      r.answers.forEach((a, i) => { compared++; if (a === offline[i]) identical++; });
      if (clients === 1) latencyPairs = r.latencies.map((l, i) => ({ server: l, single: single[i]! }));
      console.log(`  ${String(clients).padStart(2)} clients: ${r.level.sentencesPerS.toFixed(1)} sent/s (${(r.level.sentencesPerS / (texts.length / offlineSeconds1)).toFixed(2)}x the first offline run), p50 ${r.level.p50.toFixed(1)} ms, p90 ${r.level.p90.toFixed(1)} ms, p99 ${r.level.p99.toFixed(1)} ms, mean rows per step ${r.level.meanRows.toFixed(1)} of ${maxRows}, ${(r.level.cpuSeconds * 1000 / sub.length).toFixed(1)} CPU ms a sentence`);
    }
  } finally {
    await stopServer(server.child);
  }
  const after = await offlineRun();
  plan.close();
  const offlineSeconds = (before.seconds + after.seconds) / 2;
  const offlineCpu = (before.cpu + after.cpu) / 2;
  console.log(`offline translate --batch 32 again: ${(texts.length / after.seconds).toFixed(1)} sent/s (before the levels: ${(texts.length / before.seconds).toFixed(1)}); the ratios below use their mean time`);
  /** A fresh server with `flags` under `clients` clients; its answers counted against offline's when `compare`. */
  const levelWith = async (flags: string[], clients: number, compare: boolean): Promise<Level> => {
    const other = await startServer(planFile, flags);
    try {
      collectGarbage();
      const r = await load(other.base, other.child.pid!, texts, clients, maxRows);
      if (compare) r.answers.forEach((a, i) => { compared++; if (a === offline[i]) identical++; });
      return r.level;
    } finally {
      await stopServer(other.child);
    }
  };
  const noCont = await levelWith(['--no-continuous'], 32, false);
  // the same server with greedy sentences in cohorts instead of joining the running batch row by row
  const cohorts64 = await levelWith(['--no-row-join'], 64, true);
  // joins and steps off the event loop (--async-steps): the choice the default makes, measured
  const async64 = await levelWith(['--async-steps'], 64, true);
  const at = (c: number) => levels.find((l) => l.clients === c)!;
  const offlineRate = texts.length / offlineSeconds;
  const latencyRatio = pct(latencyPairs.map((p) => p.server), 0.5) / pct(latencyPairs.map((p) => p.single), 0.5);
  const summary = {
    throughput64VsOffline: at(64).sentencesPerS / offlineRate,
    latency1VsSingle: latencyRatio,
    continuousVsAlone32: at(32).sentencesPerS / noCont.sentencesPerS,
    /** Rows joining the running batch against cohorts (--no-row-join), 64 clients. */
    rowJoinVsCohorts64: at(64).sentencesPerS / cohorts64.sentencesPerS,
    /** --async-steps against the default (steps on the event loop), 64 clients. */
    asyncStepsVsDefault64: async64.sentencesPerS / at(64).sentencesPerS,
    /** Sentences per CPU second of the server process at 64 clients against offline's (robust to other load on the machine). */
    cpuEfficiency64VsOffline: (offlineCpu / texts.length) / (at(64).cpuSeconds / at(64).sentences),
  };
  console.log(`  --no-continuous, 32 clients: ${noCont.sentencesPerS.toFixed(1)} sent/s, p50 ${noCont.p50.toFixed(1)} ms`);
  console.log(`  --no-row-join (cohorts), 64 clients: ${cohorts64.sentencesPerS.toFixed(1)} sent/s, p50 ${cohorts64.p50.toFixed(1)} ms, mean rows per step ${cohorts64.meanRows.toFixed(1)}; rows joining: ${summary.rowJoinVsCohorts64.toFixed(2)}x`);
  console.log(`  --async-steps, 64 clients: ${async64.sentencesPerS.toFixed(1)} sent/s (${summary.asyncStepsVsDefault64.toFixed(2)}x the default), p50 ${async64.p50.toFixed(1)} ms`);
  console.log(`64 clients vs offline --batch 32: ${summary.throughput64VsOffline.toFixed(2)}x (target ≥ 0.85); 1 client median latency vs one in-process translate(): ${latencyRatio.toFixed(2)}x (target ≤ 1.15); continuous vs --no-continuous at 32 clients: ${summary.continuousVsAlone32.toFixed(2)}x (target ≥ 4); CPU per sentence at 64 clients vs offline: ${summary.cpuEfficiency64VsOffline.toFixed(2)}x as efficient; identical to offline: ${identical}/${compared}`);
  const out = path.join(REPO_ROOT, 'bench', 'results', 'serve.jsonl');
  fs.appendFileSync(out, JSON.stringify({
    bench: 'serve', model: 'es-en', plan: 'fp32, --max-batch 32, --max-tgt-len 64', sentences: texts.length, latencySentences: LATENCY_N,
    offline: { seconds: offlineSeconds, sentencesPerS: offlineRate, singleMedianMs: pct(single, 0.5), cpuSeconds: offlineCpu, runs: [before.seconds, after.seconds] }, levels, noContinuous32: noCont, cohorts64, async64, summary, identical, compared,
    ...machineFacts(),
  }) + '\n');
  console.log(`appended to ${path.relative(REPO_ROOT, out)}`);
  fs.rmSync(tmp, { recursive: true, force: true });
}
