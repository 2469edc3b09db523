// POST /v1/translate: texts → source ids → the model's scheduler → translations in input order, or streamed as each
// sentence ends (NDJSON or server-sent events). One bad sentence fails alone, at its index.
import { PassThrough } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PlancError } from '../compiler/diagnostics.ts';
import type { DecodingOptions } from '../runtime/decode/options.ts';
import type { SentenceOutcome } from '../runtime/decode/scheduler.ts';
import { planDefaults, prepareDecoding } from '../runtime/decode/translate-ids.ts';
import { sourceIds } from '../runtime/translate.ts';
import { errorBody, publicMessage, requestError } from './errors.ts';
import type { ServeMetrics } from './metrics.ts';
import type { ServedModel } from './models.ts';

/** What a client may ask (serve/schemas.ts OPTIONS_SCHEMA; validated there). */
export interface ClientOptions { beam?: number; maxLength?: number; nBest?: number; scores?: boolean; targetLang?: string; truncate?: boolean; strategy?: string }
export interface TranslateBody { text: string | string[]; model?: string; options?: ClientOptions }

/** One sentence's answer. */
export type Translation = { text: string; tokens: number; score?: number; nBest?: { text: string; score: number }[] } | { error: { code: string; message: string } };

export interface RouteLimits { maxQueue: number; maxSentences: number; timeoutMs: number }

/** The client's options as DecodingOptions (as planc translate maps its flags: nBest widens the beam and implies scores). */
export function decodingOptions(o: ClientOptions, m: ServedModel): Partial<DecodingOptions> {
  const d: Partial<DecodingOptions> = {};
  if (o.strategy !== undefined) d.strategy = o.strategy;
  if (o.beam !== undefined) {
    if (o.nBest !== undefined && o.nBest > o.beam) throw new PlancError('PLANC_E701', `options.nBest ${o.nBest} needs a beam of at least ${o.nBest} (options.beam ${o.beam} keeps fewer hypotheses)`);
    d.beamSize = o.beam;
  } else if (o.nBest !== undefined && o.nBest > 1) d.beamSize = Math.max(o.nBest, planDefaults(m.plan).beamSize ?? 1);
  if (o.maxLength !== undefined) d.maxLength = o.maxLength;
  if (o.targetLang !== undefined) d.targetLang = o.targetLang;
  if (o.truncate !== undefined) d.truncate = o.truncate;
  if (o.scores === true || o.nBest !== undefined) d.returnScores = true;
  if (o.nBest !== undefined) d.returnAlternatives = o.nBest;
  return d;
}

/** The model a request names, or the only one. */
export function pickModel(models: Map<string, ServedModel>, name: string | undefined): ServedModel {
  if (name === undefined) {
    if (models.size === 1) return models.values().next().value!;
    throw new PlancError('PLANC_E705', `this server has ${models.size} models; name one in "model" (${[...models.keys()].join(', ')})`);
  }
  const m = models.get(name);
  if (!m) throw new PlancError('PLANC_E705', `unknown model '${name}'; this server has ${[...models.keys()].join(', ')}`);
  return m;
}

/** How the client wants the answer: one JSON body, NDJSON lines or server-sent events. */
function streamKind(accept: string | undefined): 'ndjson' | 'sse' | undefined {
  if (!accept) return undefined;
  if (/application\/x-ndjson/i.test(accept)) return 'ndjson';
  if (/text\/event-stream/i.test(accept)) return 'sse';
  return undefined;
}

export function translateHandler(models: Map<string, ServedModel>, metrics: ServeMetrics, limits: RouteLimits) {
  return async (request: FastifyRequest<{ Body: TranslateBody }>, reply: FastifyReply) => {
    const t0 = performance.now();
    const body = request.body;
    const m = pickModel(models, body.model);
    (request as { plancModel?: string }).plancModel = m.name;
    const texts = typeof body.text === 'string' ? [body.text] : body.text;
    if (texts.length > limits.maxSentences) throw new PlancError('PLANC_E703', `${texts.length} sentences in one request; this server takes at most ${limits.maxSentences} (--max-sentences): split the request`);
    const options = decodingOptions(body.options ?? {}, m);
    if (m.scheduler.queued + texts.length > limits.maxQueue) {
      reply.header('retry-after', '1');
      throw new PlancError('PLANC_E702', `the queue of model '${m.name}' is full (${m.scheduler.queued} sentences waiting, at most ${limits.maxQueue}: --max-queue); retry later`);
    }
    // tokenize: a sentence the tokenizer cannot take fails alone
    const max = options.truncate === true ? m.plan.header.profile.maxSrcLen : undefined;
    const sources: number[][] = [];
    const at: number[] = [];
    const early: SentenceOutcome[] = [];
    texts.forEach((t, i) => {
      try {
        sources.push(sourceIds(m.tokenizer, t, max));
        at.push(i);
      } catch (e) {
        early.push({ index: i, error: e as Error });
      }
    });
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), limits.timeoutMs);
    reply.raw.on('close', () => { if (!reply.raw.writableFinished) abort.abort(); });
    const answer = (o: SentenceOutcome): Translation => {
      const index = o.index;
      if (o.error) {
        const code = o.error instanceof PlancError ? o.error.code : 'PLANC_E707';
        metrics.sentences.inc({ model: m.name, status: code === 'PLANC_E704' ? 'cancelled' : 'error' });
        metrics.errors.inc({ code });
        if (!(o.error instanceof PlancError)) request.log.error({ err: o.error, index }, 'sentence failed with an internal error');
        return { error: { code, message: publicMessage(o.error, m) } };
      }
      const r = o.result;
      metrics.sentences.inc({ model: m.name, status: 'ok' });
      metrics.sourceTokens.inc({ model: m.name }, sources[at.indexOf(index)]?.length ?? 0);
      metrics.targetTokens.inc({ model: m.name }, r.ids.length);
      const t: Translation = { text: m.tokenizer.decode(r.ids), tokens: r.ids.length };
      if (r.score !== undefined) t.score = r.score;
      if (r.alternatives) t.nBest = r.alternatives.map((a) => ({ text: m.tokenizer.decode(a.ids), score: a.score }));
      return t;
    };
    const kind = streamKind(request.headers.accept);
    const done = () => {
      clearTimeout(timer);
      metrics.requestSeconds.observe({ model: m.name }, (performance.now() - t0) / 1000);
    };
    if (kind) {
      await prepareDecoding(m.plan, options); // bad options fail the whole request before the stream starts
      const out = new PassThrough();
      const write = (obj: object) => out.write(kind === 'sse' ? `data: ${JSON.stringify(obj)}\n\n` : `${JSON.stringify(obj)}\n`);
      const onOutcome = (o: SentenceOutcome) => write({ index: o.index, ...answer(o) });
      out.on('close', () => abort.abort());
      reply.header('content-type', kind === 'sse' ? 'text/event-stream' : 'application/x-ndjson').header('cache-control', 'no-cache');
      early.forEach((o) => onOutcome(o));
      const finished = sources.length === 0 ? Promise.resolve([]) : m.scheduler.submit(sources, options, {
        signal: abort.signal, onOutcome: (o) => onOutcome({ ...o, index: at[o.index]! } as SentenceOutcome),
      });
      finished.then(() => write({ done: true }), (e: unknown) => write({ error: errorBody(requestError(e), m).error })).finally(() => {
        out.end();
        done();
      });
      return reply.send(out);
    }
    try {
      const outcomes = sources.length === 0 ? [] : await m.scheduler.submit(sources, options, { signal: abort.signal });
      if (abort.signal.aborted && !reply.raw.destroyed) throw new PlancError('PLANC_E704', `the request passed its deadline of ${limits.timeoutMs} ms (--timeout-ms) before every sentence was translated`);
      const all: SentenceOutcome[] = [...early, ...outcomes.map((o) => ({ ...o, index: at[o.index]! }) as SentenceOutcome)];
      const translations = new Array<Translation>(texts.length);
      for (const o of all) translations[o.index] = answer(o);
      return { translations };
    } finally {
      done();
    }
  };
}
