// The queue worker: BullMQ workers (one per plan, on that model's queue) whose jobs' sentences share the plan's
// decoding loop with each other, exactly as planc serve's requests do. A killed worker's job is taken up by another
// (BullMQ's stalled-job check); a job with bad data or options fails once with its PLANC code and is not retried.
import * as os from 'node:os';
import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { PlancError } from '../../compiler/diagnostics.ts';
import type { SchedulerOptions } from '../../runtime/decode/scheduler.ts';
import { prepareDecoding } from '../../runtime/decode/translate-ids.ts';
import type { Plan } from '../../runtime/plan.ts';
import { serveModels, warmUp, type ServedModel } from '../models.ts';
import { decodingOptions } from '../translate-route.ts';
import { translateTexts } from '../translate-texts.ts';
import {
  checkJob,
  failureReason,
  queueName,
  workerKey,
  type JobAnswer,
  type JobProgress,
  type TranslateJobResult,
} from './jobs.ts';
import { checkRedis, redisOptions, safeUrl } from './redis.ts';

export interface WorkerOptions {
  redis: string;
  queue: string;
  /** Jobs taken at once per model (their sentences share the running batch). */
  concurrency: number;
  /** How long a job's lock lasts without renewal: a killed worker's job is taken up again after about this long. */
  lockMs: number;
  scheduler?: SchedulerOptions;
  log?: (line: string) => void;
}

export interface PlancWorker {
  models: Map<string, ServedModel>;
  /** Stops taking jobs, finishes the running ones, closes the connections. */
  close(): Promise<void>;
}

/** A job's failure that must not be retried (its data or options are wrong): the PLANC code stays in the reason. */
function poison(e: unknown): Error {
  return e instanceof PlancError ? new UnrecoverableError(failureReason(e)) : (e as Error);
}

async function runJob(models: Map<string, ServedModel>, job: Job): Promise<TranslateJobResult> {
  let m: ServedModel | undefined;
  let options: ReturnType<typeof decodingOptions> | undefined;
  try {
    const data = checkJob(job.data);
    m = models.get(data.model);
    if (!m)
      throw new PlancError(
        'PLANC_E705',
        `job ${job.id} asks for model '${data.model}', which this worker does not hold`,
      );
    options = decodingOptions(data.options ?? {}, m);
    await prepareDecoding(m.plan, options);
    // each sentence's answer travels as job progress as soon as it is known (answers of one step in one update): the
    // gateway streams them to its client before the job completes
    let pending: JobAnswer[] = [];
    let answered = 0;
    const translations = await translateTexts(m, data.texts, options, {
      onAnswer: (index, t) => {
        if (pending.length === 0) {
          setImmediate(() => {
            const answers = pending;
            pending = [];
            // the last answers come with the job's completion at once
            if (answered < data.texts.length) job.updateProgress({ answers } satisfies JobProgress).catch(() => {});
          });
        }
        pending.push({ index, ...t });
        answered++;
      },
    });
    return { model: m.name, translations };
  } catch (e) {
    throw poison(e);
  }
}

/** Connects, loads and warms every plan, then takes jobs from each model's queue. */
export async function startWorker(plans: Plan[], o: WorkerOptions): Promise<PlancWorker> {
  await checkRedis(o.redis);
  const connection = redisOptions(o.redis);
  const log = o.log ?? (() => {});
  const models = await serveModels(plans, o.scheduler ?? {});
  await warmUp(models);
  const id = `${os.hostname()}-${process.pid}-${Date.now().toString(36)}`;
  // the registry submit and the gateway read to know which models some live worker holds
  const registry = new Redis(connection);
  registry.on('error', () => {}); // reconnects by itself; jobs keep waiting in Redis meanwhile
  const register = () =>
    registry
      .set(
        workerKey(o.queue, id),
        JSON.stringify({ models: [...models.keys()], pid: process.pid, host: os.hostname() }),
        'EX',
        30,
      )
      .catch(() => {});
  await register();
  const heartbeat = setInterval(register, 10_000);
  const workers = [...models.values()].map((m) => {
    const w = new Worker(queueName(o.queue, m.name), (job) => runJob(models, job), {
      connection,
      concurrency: o.concurrency,
      lockDuration: o.lockMs,
      stalledInterval: Math.max(1000, Math.round(o.lockMs / 2)),
      // jobs are idempotent (content-addressed, deterministic): a job on a worker killed again and again is taken up
      // again, never failed for having stalled
      maxStalledCount: 1000,
    });
    w.on('error', (e) => log(`planc worker: ${m.name}: ${e.message}`));
    w.on('failed', (job, e) => log(`planc worker: ${m.name}: job ${job?.id} failed: ${e.message}`));
    return w;
  });
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  log(
    `planc worker: ${[...models.keys()].join(', ')} from queue ${o.queue} at ${safeUrl(o.redis)} (concurrency ${o.concurrency}, lock ${o.lockMs} ms)`,
  );
  return {
    models,
    async close() {
      clearInterval(heartbeat);
      await Promise.all(workers.map((w) => w.close()));
      await registry.del(workerKey(o.queue, id)).catch(() => {});
      registry.disconnect();
      await Promise.all([...models.values()].map((m) => m.scheduler.drain()));
    },
  };
}
