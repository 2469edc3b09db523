// Bulk submission through the queue: lines split into jobs (content-addressed, so re-running after an interruption
// finds the finished jobs instead of translating again), then every line's answer handed back in input order as the
// jobs complete. Redis may go away and come back meanwhile: the client waits and carries on.
import { Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { PlancError } from '../../compiler/diagnostics.ts';
import type { ClientOptions } from '../translate-route.ts';
import type { Translation } from '../translate-texts.ts';
import {
  DEFAULT_QUEUE,
  failureOf,
  jobId,
  queueName,
  workerKey,
  type TranslateJob,
  type TranslateJobResult,
} from './jobs.ts';
import { checkRedis, redisOptions } from './redis.ts';

export interface SubmitOptions {
  redis: string;
  queue: string;
  /** The model; may be left out when the live workers hold exactly one. */
  model?: string;
  options?: ClientOptions;
  /** Lines per job. */
  jobLines: number;
  /** Jobs whose results are awaited at once, ahead of the next line to hand back. */
  window?: number;
  /** Progress: jobs done of all. */
  onProgress?(done: number, total: number, reused: number): void;
}

/** The models some live worker holds (from their registry keys). */
export async function liveModels(redis: Redis, queue: string): Promise<Set<string>> {
  const out = new Set<string>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', workerKey(queue, '*'), 'COUNT', 100);
    cursor = next;
    for (const k of keys) {
      const v = await redis.get(k);
      if (v) for (const m of (JSON.parse(v) as { models: string[] }).models) out.add(m);
    }
  } while (cursor !== '0');
  return out;
}

/** The model the jobs go to: the one named, if some live worker holds it, or the only one they hold. */
async function pickModel(redis: Redis, o: SubmitOptions): Promise<string> {
  const live = await liveModels(redis, o.queue);
  const list = [...live].sort().join(', ') || 'none';
  if (o.model !== undefined) {
    if (!live.has(o.model))
      throw new PlancError(
        'PLANC_E705',
        (opt) =>
          `no live worker on queue '${o.queue}' holds model '${o.model}' (held: ${list}); start one with planc worker PLAN ${opt('redis')} URL`,
      );
    return o.model;
  }
  if (live.size === 1) return [...live][0]!;
  throw new PlancError(
    'PLANC_E705',
    live.size
      ? (opt) => `the workers on queue '${o.queue}' hold ${live.size} models (${list}): name one with ${opt('model')}`
      : (opt) => `no live worker on queue '${o.queue}'; start one with planc worker PLAN ${opt('redis')} URL`,
  );
}

/** A finished job's answers, or the failure of all its lines. */
function answers(job: Job, n: number): Translation[] | undefined {
  if (job.finishedOn === undefined) return undefined;
  if (job.failedReason && !(job.returnvalue as TranslateJobResult | null)?.translations) {
    const error = failureOf(job.failedReason) ?? {
      code: 'PLANC_E709',
      message: `job ${job.id} failed: ${job.failedReason}`,
    };
    return Array.from({ length: n }, () => ({ error }));
  }
  const r = job.returnvalue as TranslateJobResult | null;
  if (!r || !Array.isArray(r.translations) || r.translations.length !== n) return undefined;
  return r.translations;
}

/**
 * Submits the lines as jobs and calls onLine(index, answer) for every line in input order. Returns how many jobs were
 * found already finished (re-used, not translated again).
 */
export async function submitLines(
  lines: string[],
  o: SubmitOptions,
  onLine: (index: number, t: Translation) => void,
): Promise<{ jobs: number; reused: number }> {
  await checkRedis(o.redis);
  const connection = redisOptions(o.redis);
  const redis = new Redis(connection);
  redis.on('error', () => {});
  let queue: Queue | undefined;
  try {
    const model = await pickModel(redis, o);
    const q = new Queue(queueName(o.queue, model), { connection });
    queue = q;
    q.on('error', () => {}); // reconnects by itself; calls wait for it
    const chunks: TranslateJob[] = [];
    for (let i = 0; i < lines.length; i += o.jobLines)
      chunks.push({ model, texts: lines.slice(i, i + o.jobLines), ...(o.options ? { options: o.options } : {}) });
    const ids = chunks.map(jobId);
    let reused = 0;
    const existing = await Promise.all(ids.map((id) => Job.fromId(q, id)));
    const toAdd = chunks
      .map((data, k) => ({ data, k }))
      .filter(({ k }) => {
        const e = existing[k];
        if (e && answers(e, chunks[k]!.texts.length) && !e.failedReason) {
          reused++;
          return false;
        }
        return true;
      });
    // a failed job with an internal error is tried again; one refused for its data or options fails the same again
    for (const { k } of toAdd) {
      const e = existing[k];
      const f = e?.failedReason ? failureOf(e.failedReason) : undefined;
      if (e?.failedReason && (!f || f.code === 'PLANC_E707')) await e.retry('failed').catch(() => {});
    }
    await q.addBulk(
      toAdd.map(({ data, k }) => ({
        name: 'translate',
        data,
        opts: {
          jobId: ids[k]!,
          attempts: 3,
          backoff: { type: 'exponential', delay: 1000 },
          removeOnComplete: { age: 7 * 86400 },
          removeOnFail: { age: 7 * 86400 },
        },
      })),
    );
    const window = o.window ?? 64;
    let next = 0;
    let done = 0;
    const ready = new Map<number, Translation[]>();
    o.onProgress?.(0, chunks.length, reused);
    while (next < chunks.length) {
      const pending: number[] = [];
      for (let k = next; k < Math.min(chunks.length, next + window); k++) if (!ready.has(k)) pending.push(k);
      const jobs = await Promise.all(pending.map((k) => Job.fromId(q, ids[k]!)));
      pending.forEach((k, i) => {
        const job = jobs[i];
        if (!job)
          throw new PlancError(
            'PLANC_E709',
            `job ${ids[k]} (lines ${k * o.jobLines + 1}-${k * o.jobLines + chunks[k]!.texts.length}) is gone from queue '${q.name}' (removed, or Redis lost it)`,
          );
        const a = answers(job, chunks[k]!.texts.length);
        if (a) {
          ready.set(k, a);
          done++;
        }
      });
      let moved = false;
      while (ready.has(next)) {
        ready.get(next)!.forEach((t, j) => onLine(next * o.jobLines + j, t));
        ready.delete(next);
        next++;
        moved = true;
      }
      o.onProgress?.(done, chunks.length, reused);
      if (!moved) await new Promise((r) => setTimeout(r, 200));
    }
    return { jobs: chunks.length, reused };
  } finally {
    await queue?.close();
    redis.disconnect();
  }
}

/** The Node API client's options: SubmitOptions with the CLI's defaults (queue 'planc', 10 lines a job). */
export type SubmitClientOptions = Partial<SubmitOptions> & { redis: string };

/**
 * The Node API client: texts translated by the workers on the queue, every answer in input order (a sentence that
 * failed alone is its error object). A job already finished (the same texts and options) is re-used.
 */
export async function submit(texts: string[], o: SubmitClientOptions): Promise<Translation[]> {
  const out = new Array<Translation>(texts.length);
  await submitStream(texts, o, (index, t) => {
    out[index] = t;
  });
  return out;
}

/** The streaming form of submit: onAnswer(index, answer) for each sentence in input order as its job completes. */
export function submitStream(
  texts: string[],
  o: SubmitClientOptions,
  onAnswer: (index: number, t: Translation) => void,
): Promise<{ jobs: number; reused: number }> {
  return submitLines(texts, { queue: DEFAULT_QUEUE, jobLines: 10, ...o }, onAnswer);
}
