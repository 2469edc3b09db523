// POST /v1/translate in gateway mode (planc serve --redis): the request's texts as one queue job (serve/queue/
// gateway.ts); the answer once a worker finishes it as one JSON body, or, streamed, each sentence as the worker reports
// it (job progress), the rest at the job's completion, then done.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PlancError } from '../../compiler/diagnostics.ts';
import { answerStream, streamKind } from '../answer-stream.ts';
import { errorBody, requestError } from '../errors.ts';
import type { ServeMetrics } from '../metrics.ts';
import type { RouteLimits, TranslateBody } from '../translate-route.ts';
import type { Translation } from '../translate-texts.ts';
import type { Gateway } from './gateway.ts';
import type { JobAnswer } from './jobs.ts';

export function gatewayTranslateHandler(gw: Gateway, metrics: ServeMetrics, limits: RouteLimits) {
  return async (request: FastifyRequest<{ Body: TranslateBody }>, reply: FastifyReply) => {
    const t0 = performance.now();
    const body = request.body;
    const texts = typeof body.text === 'string' ? [body.text] : body.text;
    if (texts.length > limits.maxSentences)
      throw new PlancError(
        'PLANC_E703',
        (opt) =>
          `${texts.length} sentences in one request; this server takes at most ${limits.maxSentences} (${opt('maxSentences')}): split the request`,
      );
    const kind = streamKind(request.headers.accept);
    // the stream opens with the first answer a worker reports: errors before it (unknown model, Redis down) stay HTTP errors
    let stream: ReturnType<typeof answerStream> | undefined;
    const open = () => {
      if (!stream) {
        stream = answerStream(reply, kind!);
        void reply.send(stream.out);
      }
      return stream;
    };
    const written = new Set<number>();
    const write = (a: JobAnswer) => {
      if (written.has(a.index)) return;
      written.add(a.index);
      open().write(a);
    };
    let result: { model: string; translations: Translation[] };
    try {
      result = await gw.translate(body.model, texts, body.options ?? {}, limits.timeoutMs, kind ? write : undefined);
    } catch (e) {
      if (!stream) throw e;
      const err = requestError(e);
      metrics.errors.inc({ code: err.code });
      stream.write({ error: errorBody(err).error });
      stream.out.end();
      return reply;
    }
    const { model, translations } = result;
    (request as { plancModel?: string }).plancModel = model;
    for (const t of translations) {
      if ('error' in t) {
        metrics.sentences.inc({ model, status: 'error' });
        metrics.errors.inc({ code: t.error.code });
      } else {
        metrics.sentences.inc({ model, status: 'ok' });
        metrics.targetTokens.inc({ model }, t.tokens);
      }
    }
    metrics.requestSeconds.observe({ model }, (performance.now() - t0) / 1000);
    if (!kind) return { translations };
    translations.forEach((t, index) => write({ index, ...t }));
    open().write({ done: true });
    stream!.out.end();
    return reply;
  };
}
