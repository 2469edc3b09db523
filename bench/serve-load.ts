// The closed-loop load generator of the serve benches: `clients` clients over keep-alive node:http, each posting the
// next sentence as soon as its last one is answered, with latency percentiles, batch occupancy and CPU per level; and
// the same loop in this process through the server's translation path, without HTTP (loadInProcess).
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { ServedModel } from '../serve/models.ts';
import { translateTexts } from '../serve/translate-texts.ts';

export interface Level {
  clients: number;
  sentences: number;
  seconds: number;
  sentencesPerS: number;
  p50: number;
  p90: number;
  p99: number;
  occupancy: number;
  meanRows: number;
  cpuSeconds: number;
  /** The load generator's own CPU (user + system) per request, ms (where it was measured apart from other work). */
  clientCpuMs?: number;
}

/** CPU seconds (user + system) a process has used, from /proc (0 where there is none). */
export function cpuSecondsOf(pid: number): number {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return 0;
  }
}

export const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};

/** A Prometheus histogram's _sum and _count. */
export async function histogram(base: string, name: string): Promise<{ sum: number; count: number }> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const read = (suffix: string) =>
    text
      .split('\n')
      .filter((l) => l.startsWith(`${name}_${suffix}`))
      .reduce((s, l) => s + Number(l.split(' ').pop()), 0);
  return { sum: read('sum'), count: read('count') };
}

/**
 * One POST over a keep-alive agent: its status and parsed body. node:http rather than fetch: the load generator shares
 * the machine's cores with the server, and fetch took 1.3-2.0 ms of CPU a request here (a quarter of a core at 64
 * clients), node:http far less.
 */
export function postJson(agent: http.Agent, url: URL, body: string): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
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
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export interface LoadResult {
  level: Level;
  answers: string[];
  latencies: number[];
}

/** `clients` workers that each take the next of `count` items as soon as their last one is done. */
async function closedLoop(clients: number, count: number, one: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < count) await one(next++);
    }),
  );
}

/** Closed loop: `clients` clients, each sending the next sentence as soon as its last one is answered. */
export async function load(
  base: string,
  pid: number,
  texts: string[],
  clients: number,
  maxRows: number,
): Promise<LoadResult> {
  const answers = new Array<string>(texts.length);
  const latencies = new Array<number>(texts.length);
  const before = await histogram(base, 'planc_batch_occupancy');
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
  const url = new URL(`${base}/v1/translate`);
  const cpu0 = cpuSecondsOf(pid);
  const own0 = process.cpuUsage();
  const t0 = performance.now();
  await closedLoop(clients, texts.length, async (i) => {
    const s = performance.now();
    const res = await postJson(agent, url, JSON.stringify({ text: texts[i] }));
    const body = res.json as { translations?: { text?: string }[] };
    latencies[i] = performance.now() - s;
    if (res.status !== 200 || typeof body.translations?.[0]?.text !== 'string')
      throw new Error(`request ${i}: ${res.status} ${JSON.stringify(body)}`);
    answers[i] = body.translations[0].text;
  });
  const seconds = (performance.now() - t0) / 1000;
  const cpuSeconds = cpuSecondsOf(pid) - cpu0;
  const own = process.cpuUsage(own0);
  agent.destroy();
  const after = await histogram(base, 'planc_batch_occupancy');
  const occupancy = (after.sum - before.sum) / Math.max(1, after.count - before.count);
  return {
    level: {
      clients,
      sentences: texts.length,
      seconds,
      sentencesPerS: texts.length / seconds,
      p50: pct(latencies, 0.5),
      p90: pct(latencies, 0.9),
      p99: pct(latencies, 0.99),
      occupancy,
      meanRows: occupancy * maxRows,
      cpuSeconds,
      clientCpuMs: (own.user + own.system) / 1000 / texts.length,
    },
    answers,
    latencies,
  };
}

/**
 * The same closed loop without HTTP or a load generator: `clients` submitters in this process, each through the
 * server's own translation path (serve/translate-texts.ts: tokenizer, scheduler, detokenizer) of `m`. Throughput and
 * this process's CPU seconds (it does nothing else meanwhile).
 */
export async function loadInProcess(
  m: ServedModel,
  texts: string[],
  clients: number,
): Promise<{ sentencesPerS: number; cpuSeconds: number; answers: string[] }> {
  const answers = new Array<string>(texts.length);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await closedLoop(clients, texts.length, async (i) => {
    const [t] = await translateTexts(m, [texts[i]!], {});
    if (!t || !('text' in t)) throw new Error(`in-process sentence ${i}: ${JSON.stringify(t)}`);
    answers[i] = t.text;
  });
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { sentencesPerS: texts.length / seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6, answers };
}
