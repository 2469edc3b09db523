// POST /v1/translate in gateway mode (planc serve --redis): the request's texts as one queue job (serve/queue/
// gateway.ts); the answer once a worker finishes it, as one JSON body or, streamed, every sentence then done.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PlancError } from '../../compiler/diagnostics.ts';
import { answerStream, streamKind } from '../answer-stream.ts';
import type { ServeMetrics } from '../metrics.ts';
import type { RouteLimits, TranslateBody } from '../translate-route.ts';
import type { Gateway } from './gateway.ts';

export function gatewayTranslateHandler(gw: Gateway, metrics: ServeMetrics, limits: RouteLimits) {
  return async (request: FastifyRequest<{ Body: TranslateBody }>, reply: FastifyReply) => {
    const t0 = performance.now();
    const body = request.body;
    const texts = typeof body.text === 'string' ? [body.text] : body.text;
    if (texts.length > limits.maxSentences) throw new PlancError('PLANC_E703', `${texts.length} sentences in one request; this server takes at most ${limits.maxSentences} (--max-sentences): split the request`);
    const { model, translations } = await gw.translate(body.model, texts, body.options ?? {}, limits.timeoutMs);
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
    const kind = streamKind(request.headers.accept);
    if (!kind) return { translations };
    const { out, write } = answerStream(reply, kind);
    translations.forEach((t, index) => write({ index, ...t }));
    write({ done: true });
    out.end();
    return reply.send(out);
  };
}
