// What travels through the job queue: a translation job (a model, its texts, client options), its result, the queue a
// model's jobs wait in, and content-addressed job ids (the same job submitted twice is one job, never two outputs).
import { createHash } from 'node:crypto';
import { PlancError } from '../../compiler/diagnostics.ts';
import type { ClientOptions } from '../translate-route.ts';
import type { Translation } from '../translate-texts.ts';

/** The queue prefix when --queue is not given. */
export const DEFAULT_QUEUE = 'planc';

export interface TranslateJob { model: string; texts: string[]; options?: ClientOptions }
export interface TranslateJobResult { model: string; translations: Translation[] }

/** The client options a job may carry (as POST /v1/translate's options) and their types. */
const OPTION_TYPES: Record<string, 'integer' | 'number' | 'boolean' | 'string' | 'boolean|never'> = {
  beam: 'integer', maxLength: 'integer', nBest: 'integer', scores: 'boolean', targetLang: 'string', truncate: 'boolean', strategy: 'string',
  lengthPenalty: 'number', earlyStopping: 'boolean|never', minNewTokens: 'integer', noRepeatNgramSize: 'integer', encoderNoRepeatNgramSize: 'integer', repetitionPenalty: 'number',
};

const NAME = /^[A-Za-z0-9_.-]{1,100}$/;

/** The BullMQ queue of one model's jobs: workers take only the models they hold, so none gets a job it cannot run. */
export function queueName(prefix: string, model: string): string {
  if (!NAME.test(prefix)) throw new PlancError('PLANC_E301', `--queue ${prefix}: want 1-100 letters, digits, '_', '.' or '-'`);
  if (!NAME.test(model)) throw new PlancError('PLANC_E705', `model name '${model}' cannot name a queue: want 1-100 letters, digits, '_', '.' or '-' (rename the plan file)`);
  return `${prefix}-${model}`;
}

/** Redis key under which a live worker lists its models (expires unless the worker refreshes it). */
export const workerKey = (prefix: string, id: string): string => `${prefix}:workers:${id}`;

/** The job's id: a hash of what it asks, so a retry or a resumed submit finds the job instead of adding a second. */
export function jobId(job: TranslateJob): string {
  const canonical = JSON.stringify([job.model, job.texts, Object.entries(job.options ?? {}).sort(([a], [b]) => a.localeCompare(b))]);
  return `t${createHash('sha256').update(canonical).digest('hex').slice(0, 40)}`;
}

/** A job's data checked (it came over the network): PLANC_E701 naming what is wrong. */
export function checkJob(data: unknown): TranslateJob {
  const d = data as Partial<TranslateJob> | null;
  if (!d || typeof d !== 'object') throw new PlancError('PLANC_E701', 'job data is not an object');
  if (typeof d.model !== 'string') throw new PlancError('PLANC_E701', 'job data.model is not a string');
  if (!Array.isArray(d.texts) || d.texts.some((t) => typeof t !== 'string')) throw new PlancError('PLANC_E701', 'job data.texts is not an array of strings');
  if (d.options !== undefined && (typeof d.options !== 'object' || d.options === null || Array.isArray(d.options))) throw new PlancError('PLANC_E701', 'job data.options is not an object');
  for (const [k, v] of Object.entries(d.options ?? {})) {
    const want = OPTION_TYPES[k];
    if (!want) throw new PlancError('PLANC_E701', `unknown option '${k}' in job data.options (known: ${Object.keys(OPTION_TYPES).join(', ')})`);
    const ok = want === 'integer' ? Number.isSafeInteger(v) : want === 'number' ? Number.isFinite(v) : want === 'boolean|never' ? typeof v === 'boolean' || v === 'never' : typeof v === want;
    if (!ok) throw new PlancError('PLANC_E701', `job data.options.${k} must be ${want === 'integer' ? 'an integer' : want === 'boolean|never' ? 'true, false or "never"' : `a ${want}`}, not ${JSON.stringify(v)}`);
  }
  return { model: d.model, texts: d.texts, options: d.options };
}
