// What travels through the job queue: a translation job (a model, its texts, client options), its result, the queue a
// model's jobs wait in, and content-addressed job ids (the same job submitted twice is one job, never two outputs).
import { createHash } from 'node:crypto';
import { PlancError } from '../../compiler/diagnostics.ts';
import { fail } from '../../compiler/diagnostics-catalog.ts';
import { OPTIONS_SCHEMA } from '../schemas.ts';
import type { ClientOptions } from '../translate-route.ts';
import type { Translation } from '../translate-texts.ts';

/** The queue prefix when --queue is not given. */
export const DEFAULT_QUEUE = 'planc';

export interface TranslateJob {
  model: string;
  texts: string[];
  options?: ClientOptions;
}
export interface TranslateJobResult {
  model: string;
  translations: Translation[];
}
/** One sentence's answer tagged with its index in the job. */
export type JobAnswer = { index: number } & Translation;
/** A job's progress: the answers known since the last update (the gateway streams them before the job completes). */
export interface JobProgress {
  answers: JobAnswer[];
}

/** The answers a progress event carries (nothing from anything else: progress is untrusted data from Redis). */
export function progressAnswers(progress: unknown, count: number): JobAnswer[] {
  const answers = (progress as Partial<JobProgress> | null)?.answers;
  if (!Array.isArray(answers)) return [];
  return answers.filter(
    (a): a is JobAnswer =>
      !!a &&
      typeof a === 'object' &&
      Number.isInteger(a.index) &&
      a.index >= 0 &&
      a.index < count &&
      ('text' in a || 'error' in a),
  );
}

/** One property of OPTIONS_SCHEMA (POST /v1/translate's options: the one definition a job's options are checked by). */
interface OptionSchema {
  type?: string;
  enum?: readonly unknown[];
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  maxLength?: number;
  anyOf?: readonly OptionSchema[];
}

function fits(v: unknown, p: OptionSchema): boolean {
  if (p.anyOf) return p.anyOf.some((q) => fits(v, q));
  const typed =
    p.type === 'integer'
      ? Number.isSafeInteger(v)
      : p.type === 'number'
        ? typeof v === 'number' && Number.isFinite(v)
        : typeof v === p.type;
  if (!typed || (p.enum && !p.enum.includes(v))) return false;
  if (
    typeof v === 'number' &&
    ((p.minimum !== undefined && v < p.minimum) ||
      (p.exclusiveMinimum !== undefined && v <= p.exclusiveMinimum) ||
      (p.maximum !== undefined && v > p.maximum))
  )
    return false;
  return !(typeof v === 'string' && p.maxLength !== undefined && v.length > p.maxLength);
}

function wanted(p: OptionSchema): string {
  if (p.anyOf) return p.anyOf.map(wanted).join(' or ');
  if (p.enum) return p.enum.map((e) => JSON.stringify(e)).join(' or ');
  const low = p.exclusiveMinimum !== undefined ? `(${p.exclusiveMinimum}` : `[${p.minimum ?? '-inf'}`;
  const range =
    p.minimum !== undefined || p.exclusiveMinimum !== undefined || p.maximum !== undefined
      ? ` in ${low}, ${p.maximum ?? 'inf'}]`
      : '';
  const chars = p.maxLength !== undefined ? ` of at most ${p.maxLength} characters` : '';
  return `${p.type === 'integer' ? 'an integer' : `a ${p.type}`}${range}${chars}`;
}

const NAME = /^[A-Za-z0-9_.-]{1,100}$/;

/** The BullMQ queue of one model's jobs: workers take only the models they hold, so none gets a job it cannot run. */
export function queueName(prefix: string, model: string): string {
  if (!NAME.test(prefix))
    fail('badOption', { option: 'queue', value: prefix, expected: "1-100 letters, digits, '_', '.' or '-'" });
  if (!NAME.test(model))
    throw new PlancError(
      'PLANC_E705',
      `model name '${model}' cannot name a queue: want 1-100 letters, digits, '_', '.' or '-' (rename the plan file)`,
    );
  return `${prefix}-${model}`;
}

/** A job refused for its data or options keeps its PLANC code first in BullMQ's failure reason ... */
export const failureReason = (e: PlancError): string => `${e.code}: ${e.message.replace(/^PLANC_E\d+: /, '')}`;

/** ... which reads back as the error of each of its sentences; undefined for a reason without a code (internal). */
export function failureOf(reason: string): { code: string; message: string } | undefined {
  const m = /^(PLANC_E\d+): ([\s\S]*)$/.exec(reason);
  return m ? { code: m[1]!, message: m[2]! } : undefined;
}

/** Redis key under which a live worker lists its models (expires unless the worker refreshes it). */
export const workerKey = (prefix: string, id: string): string => `${prefix}:workers:${id}`;

/** The job's id: a hash of what it asks, so a retry or a resumed submit finds the job instead of adding a second. */
export function jobId(job: TranslateJob): string {
  const canonical = JSON.stringify([
    job.model,
    job.texts,
    Object.entries(job.options ?? {}).sort(([a], [b]) => a.localeCompare(b)),
  ]);
  return `t${createHash('sha256').update(canonical).digest('hex').slice(0, 40)}`;
}

/** A job's data checked (it came over the network): PLANC_E701 naming what is wrong. */
export function checkJob(data: unknown): TranslateJob {
  const d = data as Partial<TranslateJob> | null;
  if (!d || typeof d !== 'object') throw new PlancError('PLANC_E701', 'job data is not an object');
  if (typeof d.model !== 'string') throw new PlancError('PLANC_E701', 'job data.model is not a string');
  if (!Array.isArray(d.texts) || d.texts.some((t) => typeof t !== 'string'))
    throw new PlancError('PLANC_E701', 'job data.texts is not an array of strings');
  if (d.options !== undefined && (typeof d.options !== 'object' || d.options === null || Array.isArray(d.options)))
    throw new PlancError('PLANC_E701', 'job data.options is not an object');
  const props = OPTIONS_SCHEMA.properties as Record<string, OptionSchema>;
  for (const [k, v] of Object.entries(d.options ?? {})) {
    const p = props[k];
    if (!p)
      throw new PlancError(
        'PLANC_E701',
        `unknown option '${k}' in job data.options (known: ${Object.keys(props).join(', ')})`,
      );
    if (!fits(v, p))
      throw new PlancError('PLANC_E701', `job data.options.${k} must be ${wanted(p)}, not ${JSON.stringify(v)}`);
  }
  return { model: d.model, texts: d.texts, options: d.options };
}
