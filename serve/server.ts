// createServer: planc's translation service on Fastify: /v1/translate (continuous batching through each plan's
// scheduler), /v1/models, /health, /ready, /metrics, /openapi.json; limits, API keys, JSON logs, graceful drain.
import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { PlancError } from '../compiler/diagnostics.ts';
import { fail } from '../compiler/diagnostics-catalog.ts';
import { plancVersion } from '../compiler/version.ts';
import type { Plan } from '../runtime/plan.ts';
import { bearerChecker, isLoopback } from './auth.ts';
import { errorBody, requestError, statusOf } from './errors.ts';
import { ServeMetrics } from './metrics.ts';
import { serveModels, warmUp, type ServedModel } from './models.ts';
import { TRANSLATE_ROUTE_SCHEMA } from './schemas.ts';
import { openGateway, type Gateway } from './queue/gateway.ts';
import { gatewayTranslateHandler } from './queue/gateway-route.ts';
import { checkRedis } from './queue/redis.ts';
import { translateHandler, type TranslateBody } from './translate-route.ts';

export interface ServeOptions {
  /** Listen address. Default 127.0.0.1; any other than loopback needs apiKeys. */
  host?: string;
  /** Default 8080; 0 picks a free port. */
  port?: number;
  /** Sentences that may wait per model; a request that would go over is answered 429 with Retry-After. Default 1024. */
  maxQueue?: number;
  /** Sentences in one request; more is answered 413. Default 512. */
  maxSentences?: number;
  /** Request body bytes; more is answered 413. Default 1 MiB. */
  maxBodyBytes?: number;
  /** A request not answered within this is cancelled and answered 504 (streams: its remaining sentences fail). Default 120 s. */
  timeoutMs?: number;
  /** Rows of one decoder step per plan (default: its maxBatch; twice that in flight) and the source tokens in flight (0: no limit). */
  maxRows?: number;
  batchTokens?: number;
  /** false: every request decodes alone, one after another (the comparison point of bench serve). Default true. */
  continuous?: boolean;
  /** false: greedy sentences start in cohorts instead of joining the running batch row by row (SchedulerOptions.joinRows). Default true. */
  joinRows?: boolean;
  /** true: the running batch's joins and steps run off the event loop (SchedulerOptions.asyncSteps). Default false. */
  asyncSteps?: boolean;
  /** Bearer tokens a client must send (Authorization: Bearer KEY) to every route but /health and /ready. */
  apiKeys?: string[];
  /** pino options for Fastify's logger, or false for none. Default: JSON lines at level info on standard output. */
  logger?: FastifyServerOptions['logger'];
  /** Gateway mode: requests become jobs on this Redis for planc worker processes (no plans are loaded here). */
  queue?: { redis: string; prefix: string };
}

export interface PlancServer {
  app: FastifyInstance;
  models: Map<string, ServedModel>;
  metrics: ServeMetrics;
  /** Starts listening (after warming every plan); resolves with the address, e.g. http://127.0.0.1:8080. */
  listen(): Promise<string>;
  /** Stops taking requests, lets the ones in flight finish, drains every scheduler. The plans stay open (the caller's). */
  close(): Promise<void>;
}

const OPEN_ROUTES = new Set(['/health', '/ready']);

/** A request id from the client's x-request-id when it is a plain token, else a new UUID. */
function requestId(req: { headers: Record<string, string | string[] | undefined> }): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
}

export async function createServer(plans: Plan[], options: ServeOptions = {}): Promise<PlancServer> {
  const host = options.host ?? '127.0.0.1';
  const keys = options.apiKeys ?? [];
  if (!isLoopback(host) && keys.length === 0) {
    throw new PlancError(
      'PLANC_E302',
      (opt) =>
        `binding ${host} exposes the server beyond this machine: give API keys (${opt('apiKeyFile')} FILE) or bind 127.0.0.1`,
    );
  }
  const limits = {
    maxQueue: options.maxQueue ?? 1024,
    maxSentences: options.maxSentences ?? 512,
    timeoutMs: options.timeoutMs ?? 120_000,
  };
  for (const [k, v] of Object.entries(limits)) {
    if (!Number.isInteger(v) || v < 1) fail('badOption', { option: k, value: v, expected: 'a positive integer' });
  }
  let gw: Gateway | undefined;
  if (options.queue) {
    if (plans.length)
      throw new PlancError(
        'PLANC_E302',
        (opt) =>
          `a gateway (${opt('redis')}) loads no plans: the workers hold them (planc worker PLAN ${opt('redis')} URL)`,
      );
    await checkRedis(options.queue.redis);
    gw = openGateway(options.queue.redis, options.queue.prefix);
  }
  let metrics: ServeMetrics | undefined;
  const models = gw
    ? new Map<string, ServedModel>()
    : await serveModels(
        plans,
        {
          maxRows: options.maxRows,
          batchTokens: options.batchTokens,
          continuous: options.continuous,
          joinRows: options.joinRows,
          asyncSteps: options.asyncSteps,
        },
        {
          onStep: (model, rows, ms) => {
            const m = models.get(model);
            metrics?.stepSeconds.observe({ model }, ms / 1000);
            if (m) metrics?.occupancy.observe({ model }, rows / m.scheduler.maxRows);
          },
          onStart: (model, _sentences, ms) => metrics?.startSeconds.observe({ model }, ms / 1000),
        },
      );
  metrics = new ServeMetrics(
    [...models.values()].map((m) => ({
      model: m.name,
      queued: () => m.scheduler.queued,
      runningRows: () => m.scheduler.runningRows,
    })),
    gw && (() => gw.jobCounts()),
  );
  const app = Fastify({
    logger: options.logger ?? { level: 'info' },
    bodyLimit: options.maxBodyBytes ?? 1 << 20,
    genReqId: requestId,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false } },
    forceCloseConnections: 'idle',
  });
  let closing = false;
  await app.register(swagger, {
    openapi: {
      info: {
        title: 'planc serve',
        version: plancVersion(),
        description: 'Translation with continuous batching over planc plans',
      },
    },
  });
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    if (closing)
      throw new PlancError(
        'PLANC_E702',
        'the server is shutting down; send the request to another instance or retry later',
      );
    const route = req.url.split('?')[0]!;
    if (keys.length > 0 && !OPEN_ROUTES.has(route) && !checkKey(req.headers.authorization)) {
      reply.header('www-authenticate', 'Bearer');
      throw new PlancError(
        'PLANC_E706',
        req.headers.authorization
          ? "the API key is not one of this server's"
          : 'this server needs an API key: send Authorization: Bearer KEY',
      );
    }
  });
  const checkKey = bearerChecker(keys);
  app.setErrorHandler((e, req, reply) => {
    const err = requestError(e);
    const model = models.get((req as { plancModel?: string }).plancModel ?? '');
    if (err.code === 'PLANC_E707') req.log.error({ err: e }, 'internal error');
    metrics!.errors.inc({ code: err.code });
    const status = err.code === 'PLANC_E702' && closing ? 503 : statusOf(err.code);
    reply.status(status).send(errorBody(err, model));
  });
  app.setNotFoundHandler((req, reply) => {
    reply.status(404).send({
      error: { code: 'PLANC_E701', message: `no route ${req.method} ${req.url.split('?')[0]}: see /openapi.json` },
    });
  });
  app.addHook('onResponse', async (req, reply) => {
    const model = (req as { plancModel?: string }).plancModel;
    if (req.routeOptions.url === '/v1/translate')
      metrics!.requests.inc({ model: model ?? '', status: String(reply.statusCode) });
  });

  app.post<{ Body: TranslateBody }>(
    '/v1/translate',
    { schema: TRANSLATE_ROUTE_SCHEMA },
    gw ? gatewayTranslateHandler(gw, metrics, limits) : translateHandler(models, metrics, limits),
  );
  app.get(
    '/v1/models',
    { schema: { summary: 'The loaded models (gateway mode: those live workers hold)' } },
    async () => ({
      models: gw ? (await gw.models()).map((name) => ({ name })) : [...models.values()].map((m) => m.description),
    }),
  );
  app.get('/health', { schema: { summary: 'Liveness: the process answers' } }, async () => ({ status: 'ok' }));
  app.get(
    '/ready',
    {
      schema: { summary: 'Readiness: every plan loaded and warmed (gateway mode: Redis reachable), not shutting down' },
    },
    async (_req, reply) => {
      if (gw) {
        const up = !closing && (await gw.reachable());
        return reply.status(up ? 200 : 503).send({
          status: up ? 'ready' : closing ? 'draining' : 'redis unreachable',
          models: up ? (await gw.models()).map((name) => ({ name, ready: true })) : [],
        });
      }
      const ready = !closing && [...models.values()].every((m) => m.ready);
      return reply.status(ready ? 200 : 503).send({
        status: ready ? 'ready' : closing ? 'draining' : 'warming',
        models: [...models.values()].map((m) => ({ name: m.name, ready: m.ready })),
      });
    },
  );
  app.get('/metrics', { schema: { summary: 'Prometheus metrics' } }, async (_req, reply) => {
    reply.header('content-type', metrics!.registry.contentType);
    return metrics!.registry.metrics();
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  return {
    app,
    models,
    metrics,
    async listen() {
      await warmUp(models);
      return app.listen({ host, port: options.port ?? 8080 });
    },
    async close() {
      closing = true;
      await app.close();
      await Promise.all([...models.values()].map((m) => m.scheduler.drain()));
      await gw?.close();
    },
  };
}
