// POST /v1/translate: texts → source ids → the model's scheduler → translations in input order, or streamed as each
// sentence ends (NDJSON or server-sent events). One bad sentence fails alone, at its index.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PlancError } from '../compiler/diagnostics.ts';
import type { DecodingOptions } from '../runtime/decode/options.ts';
import { planDefaults, prepareDecoding } from '../runtime/decode/translate-ids.ts';
import { answerStream, streamKind } from './answer-stream.ts';
import { errorBody, requestError } from './errors.ts';
import type { ServeMetrics } from './metrics.ts';
import type { ServedModel } from './models.ts';
import { translateTexts, type AnswerFacts, type Translation } from './translate-texts.ts';

export type { Translation };

/** What a client may ask (serve/schemas.ts OPTIONS_SCHEMA; validated there). */
export interface ClientOptions {
  beam?: number;
  maxLength?: number;
  nBest?: number;
  scores?: boolean;
  targetLang?: string;
  truncate?: boolean;
  strategy?: string;
  /** generate()'s beam and processor options, as DecodingOptions names them. */
  lengthPenalty?: number;
  earlyStopping?: boolean | 'never';
  minNewTokens?: number;
  noRepeatNgramSize?: number;
  encoderNoRepeatNgramSize?: number;
  repetitionPenalty?: number;
  /** generate()'s sampling options and the seed. */
  doSample?: boolean;
  temperature?: number;
  topK?: number;
  topP?: number;
  seed?: number;
}
export interface TranslateBody {
  text: string | string[];
  model?: string;
  options?: ClientOptions;
}

export interface RouteLimits {
  maxQueue: number;
  maxSentences: number;
  timeoutMs: number;
}

/** Client options with DecodingOptions' own names and meanings (checked there, with the option named). */
const PASSED_THROUGH = [
  'lengthPenalty',
  'earlyStopping',
  'minNewTokens',
  'noRepeatNgramSize',
  'encoderNoRepeatNgramSize',
  'repetitionPenalty',
  'doSample',
  'temperature',
  'topK',
  'topP',
  'seed',
] as const;

/** The client's options as DecodingOptions (as planc translate maps its flags: nBest widens the beam and implies scores). */
export function decodingOptions(o: ClientOptions, m: ServedModel): Partial<DecodingOptions> {
  const d: Partial<DecodingOptions> = {};
  if (o.strategy !== undefined) d.strategy = o.strategy;
  if (o.beam !== undefined) {
    if (o.nBest !== undefined && o.nBest > o.beam)
      throw new PlancError(
        'PLANC_E701',
        `options.nBest ${o.nBest} needs a beam of at least ${o.nBest} (options.beam ${o.beam} keeps fewer hypotheses)`,
      );
    d.beamSize = o.beam;
  } else if (o.nBest !== undefined && o.nBest > 1) d.beamSize = Math.max(o.nBest, planDefaults(m.plan).beamSize ?? 1);
  if (o.maxLength !== undefined) d.maxLength = o.maxLength;
  if (o.targetLang !== undefined) d.targetLang = o.targetLang;
  if (o.truncate !== undefined) d.truncate = o.truncate;
  for (const k of PASSED_THROUGH) if (o[k] !== undefined) (d as Record<string, unknown>)[k] = o[k];
  if (o.scores === true || o.nBest !== undefined) d.returnScores = true;
  if (o.nBest !== undefined) d.returnAlternatives = o.nBest;
  return d;
}

/** The model a request names, or the only one. */
export function pickModel(models: Map<string, ServedModel>, name: string | undefined): ServedModel {
  if (name === undefined) {
    if (models.size === 1) return models.values().next().value!;
    throw new PlancError(
      'PLANC_E705',
      `this server has ${models.size} models; name one in "model" (${[...models.keys()].join(', ')})`,
    );
  }
  const m = models.get(name);
  if (!m)
    throw new PlancError('PLANC_E705', `unknown model '${name}'; this server has ${[...models.keys()].join(', ')}`);
  return m;
}

export function translateHandler(models: Map<string, ServedModel>, metrics: ServeMetrics, limits: RouteLimits) {
  return async (request: FastifyRequest<{ Body: TranslateBody }>, reply: FastifyReply) => {
    const t0 = performance.now();
    const body = request.body;
    const m = pickModel(models, body.model);
    (request as { plancModel?: string }).plancModel = m.name;
    const texts = typeof body.text === 'string' ? [body.text] : body.text;
    if (texts.length > limits.maxSentences)
      throw new PlancError(
        'PLANC_E703',
        (opt) =>
          `${texts.length} sentences in one request; this server takes at most ${limits.maxSentences} (${opt('maxSentences')}): split the request`,
      );
    const options = decodingOptions(body.options ?? {}, m);
    if (m.scheduler.queued + texts.length > limits.maxQueue) {
      reply.header('retry-after', '1');
      throw new PlancError(
        'PLANC_E702',
        (opt) =>
          `the queue of model '${m.name}' is full (${m.scheduler.queued} sentences waiting, at most ${limits.maxQueue}: ${opt('maxQueue')}); retry later`,
      );
    }
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), limits.timeoutMs);
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) abort.abort();
    });
    const count = (index: number, _t: Translation, f: AnswerFacts) => {
      if (f.code) {
        metrics.sentences.inc({ model: m.name, status: f.code === 'PLANC_E704' ? 'cancelled' : 'error' });
        metrics.errors.inc({ code: f.code });
        if (f.internal) request.log.error({ err: f.internal, index }, 'sentence failed with an internal error');
        return;
      }
      metrics.sentences.inc({ model: m.name, status: 'ok' });
      metrics.sourceTokens.inc({ model: m.name }, f.sourceTokens);
      metrics.targetTokens.inc({ model: m.name }, f.targetTokens);
    };
    const kind = streamKind(request.headers.accept);
    const done = () => {
      clearTimeout(timer);
      metrics.requestSeconds.observe({ model: m.name }, (performance.now() - t0) / 1000);
    };
    if (kind) {
      await prepareDecoding(m.plan, options); // bad options fail the whole request before the stream starts
      const { out, write } = answerStream(reply, kind);
      out.on('close', () => abort.abort());
      const finished = translateTexts(m, texts, options, {
        signal: abort.signal,
        onAnswer: (index, t, f) => {
          count(index, t, f);
          write({ index, ...t });
        },
      });
      finished
        .then(
          () => write({ done: true }),
          (e: unknown) => write({ error: errorBody(requestError(e), m).error }),
        )
        .finally(() => {
          out.end();
          done();
        });
      return reply.send(out);
    }
    try {
      const translations = await translateTexts(m, texts, options, { signal: abort.signal, onAnswer: count });
      if (abort.signal.aborted && !reply.raw.destroyed)
        throw new PlancError(
          'PLANC_E704',
          (opt) =>
            `the request passed its deadline of ${limits.timeoutMs} ms (${opt('timeoutMs')}) before every sentence was translated`,
        );
      return { translations };
    } finally {
      done();
    }
  };
}
