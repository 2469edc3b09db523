// planc serve --redis (gateway mode): POST /v1/translate becomes one queue job (content-addressed: the same request
// again is answered from the finished job), answered when a worker completes it; the models are those live workers
// hold. While Redis cannot take the job the answer is 503 PLANC_E708, and the gateway reconnects by itself.
import { type Job, Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { PlancError } from '../../compiler/diagnostics.ts';
import type { ClientOptions } from '../translate-route.ts';
import type { Translation } from '../translate-texts.ts';
import {
  failureOf,
  jobId,
  progressAnswers,
  queueName,
  type JobAnswer,
  type TranslateJob,
  type TranslateJobResult,
} from './jobs.ts';
import { redisOptions, safeUrl } from './redis.ts';
import { liveModels } from './submit.ts';

export interface Gateway {
  /** The models live workers hold (refreshed at most every 2 s). */
  models(): Promise<string[]>;
  /** Jobs per model and state (waiting, active, delayed) of the models live workers hold. */
  jobCounts(): Promise<{ model: string; state: string; jobs: number }[]>;
  /** Whether Redis answers now. */
  reachable(): Promise<boolean>;
  /**
   * One request's texts as a job; every index answered (a failed job fails each of its sentences with its code).
   * onAnswer hears of sentences the worker reports before the job completes (not necessarily all of them).
   */
  translate(
    model: string | undefined,
    texts: string[],
    options: ClientOptions,
    timeoutMs: number,
    onAnswer?: (a: JobAnswer) => void,
  ): Promise<{ model: string; translations: Translation[] }>;
  close(): Promise<void>;
}

/** Waits up to ms for a connection that is reconnecting (Redis just came back); throws if it is not ready by then. */
async function connected(
  client: { status: string; once(e: string, f: () => void): unknown; off(e: string, f: () => void): unknown },
  ms: number,
): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      client.off('ready', ok);
      reject(new Error('not connected'));
    }, ms);
    const ok = () => {
      clearTimeout(timer);
      resolve();
    };
    client.once('ready', ok);
  });
}

export function openGateway(url: string, prefix: string): Gateway {
  const connection = redisOptions(url);
  const redis = new Redis({ ...connection, enableOfflineQueue: false });
  redis.on('error', () => {});
  const queues = new Map<string, { queue: Queue; events: QueueEvents }>();
  let cached: { at: number; models: string[] } | undefined;
  const down = () =>
    new PlancError('PLANC_E708', `the job queue's Redis at ${safeUrl(url)} is not reachable; retry later`);

  const models = async (): Promise<string[]> => {
    if (cached && Date.now() - cached.at < 2000) return cached.models;
    try {
      await connected(redis, 3000);
      cached = { at: Date.now(), models: [...(await liveModels(redis, prefix))].sort() };
    } catch {
      throw down();
    }
    return cached.models;
  };
  const queueOf = (model: string) => {
    let q = queues.get(model);
    if (!q) {
      // commands fail at once while Redis is down (a 503 now, not a request that hangs until it is back)
      q = {
        queue: new Queue(queueName(prefix, model), { connection: { ...connection, enableOfflineQueue: false } }),
        events: new QueueEvents(queueName(prefix, model), { connection }),
      };
      q.queue.on('error', () => {});
      q.events.on('error', () => {});
      queues.set(model, q);
    }
    return q;
  };

  /** Adds the job (or finds it finished) and waits for its answers. */
  const finished = async (
    model: string,
    texts: string[],
    data: TranslateJob,
    id: string,
    queue: Queue,
    events: QueueEvents,
    timeoutMs: number,
  ) => {
    let job: Job;
    try {
      await connected(await queue.client, 3000);
      job = await queue.add('translate', data, {
        jobId: id,
        attempts: 3,
        backoff: { type: 'exponential', delay: 1000 },
        removeOnComplete: { age: 3600 },
        removeOnFail: { age: 3600 },
      });
    } catch {
      throw down();
    }
    let result: TranslateJobResult;
    try {
      result = (await job.waitUntilFinished(events, timeoutMs)) as TranslateJobResult;
    } catch (e) {
      const msg = (e as Error).message ?? '';
      if (/timed out|timeout/i.test(msg))
        throw new PlancError(
          'PLANC_E704',
          (opt) =>
            `the job was not finished within ${timeoutMs} ms (${opt('timeoutMs')}); it stays queued and the same request later is answered from it`,
        );
      const error = failureOf(msg);
      if (error) return { model, translations: texts.map(() => ({ error })) };
      throw new PlancError('PLANC_E709', `job ${job.id} failed: ${msg.split('\n')[0]}`);
    }
    if (!result || !Array.isArray(result.translations) || result.translations.length !== texts.length)
      throw new PlancError('PLANC_E709', `job ${job.id} finished without one answer per sentence`);
    return { model, translations: result.translations };
  };

  return {
    models,
    async jobCounts() {
      const out: { model: string; state: string; jobs: number }[] = [];
      for (const model of await models()) {
        const counts = await queueOf(model).queue.getJobCounts('waiting', 'active', 'delayed');
        for (const [state, jobs] of Object.entries(counts)) out.push({ model, state, jobs });
      }
      return out;
    },
    async reachable() {
      try {
        return (await redis.ping()) === 'PONG';
      } catch {
        return false;
      }
    },
    async translate(name, texts, options, timeoutMs, onAnswer) {
      const live = await models();
      const model = name ?? (live.length === 1 ? live[0]! : undefined);
      if (model === undefined)
        throw new PlancError(
          'PLANC_E705',
          live.length
            ? `the workers hold ${live.length} models; name one in "model" (${live.join(', ')})`
            : (opt) => `no live worker holds a model yet; start planc worker PLAN ${opt('redis')} URL`,
        );
      if (!live.includes(model))
        throw new PlancError(
          'PLANC_E705',
          `unknown model '${model}'; the live workers hold ${live.join(', ') || 'none'}`,
        );
      const data: TranslateJob = { model, texts, ...(Object.keys(options).length ? { options } : {}) };
      const { queue, events } = queueOf(model);
      const id = jobId(data);
      const progress = ({ jobId: of, data: p }: { jobId: string; data: unknown }) => {
        if (of === id) for (const a of progressAnswers(p, texts.length)) onAnswer!(a);
      };
      if (onAnswer) events.on('progress', progress);
      try {
        return await finished(model, texts, data, id, queue, events, timeoutMs);
      } finally {
        events.off('progress', progress);
      }
    },
    async close() {
      // a connection that is down cannot send QUIT (no offline queue): closing it then is disconnecting it
      await Promise.all(
        [...queues.values()].flatMap((q) => [q.queue.close(), q.events.close()].map((p) => p.catch(() => {}))),
      );
      await Promise.all(
        [...queues.values()].flatMap((q) =>
          [q.queue.disconnect(), q.events.disconnect()].map((p) => p.catch(() => {})),
        ),
      );
      redis.disconnect();
    },
  };
}
