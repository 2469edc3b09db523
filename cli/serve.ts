// `planc serve PLAN [PLAN...]`: the HTTP translation service (serve/server.ts) until SIGTERM or SIGINT, then a drain.
import { PlancError } from '../compiler/diagnostics.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { readApiKeys } from '../serve/auth.ts';
import { DEFAULT_QUEUE } from '../serve/queue/jobs.ts';
import { safeUrl } from '../serve/queue/redis.ts';
import { createServer } from '../serve/server.ts';
import { intOption, parseArgs, type CommandSpec } from './args.ts';
import { drainOnSignal } from './stop-signal.ts';
import { applyThreads, THREADS_OPTION } from './threads.ts';

export const SERVE: CommandSpec = {
  name: 'serve',
  args: 'PLAN [PLAN...] | --redis URL',
  positional: [0, 64],
  summary:
    "Serves plans over HTTP: POST /v1/translate (JSON, or streamed as NDJSON / server-sent events), GET /v1/models, /health, /ready, /metrics (Prometheus), /openapi.json. Sentences of all requests share each plan's decoding loop (continuous batching: they start at the next decoder step and leave as soon as they end), and each gets the translation planc translate gives it. A model is named by its plan's file name without .plan. SIGTERM or SIGINT stops taking requests, finishes those in flight and exits 0.",
  options: {
    host: { kind: 'string', value: 'ADDR', help: 'listen address (default 127.0.0.1; any other needs --api-key-file)' },
    port: { kind: 'number', value: 'N', help: 'listen port (default 8080; 0 picks a free one, printed at start)' },
    'max-queue': {
      kind: 'number',
      value: 'N',
      help: 'sentences that may wait per model; a request that would go over is answered 429 with Retry-After (default 1024)',
    },
    'batch-tokens': {
      kind: 'number',
      value: 'N',
      help: "source tokens of the sentences decoding at once, per model (default: no limit beyond the plan's max batch)",
    },
    'max-rows': {
      kind: 'number',
      value: 'N',
      help: "rows (sentences × beams) of one decoder step per model; twice that may be in flight over the cohorts (default and cap: the plan's --max-batch)",
    },
    'max-sentences': {
      kind: 'number',
      value: 'N',
      help: 'sentences in one request; more is answered 413 (default 512)',
    },
    'max-body-bytes': { kind: 'number', value: 'N', help: 'request body size; more is answered 413 (default 1048576)' },
    'timeout-ms': {
      kind: 'number',
      value: 'N',
      help: 'a request not answered within N ms is cancelled and answered 504 (default 120000)',
    },
    'no-continuous': {
      kind: 'boolean',
      help: 'decode every request alone, one after another (no batching across requests; for comparison)',
    },
    'no-row-join': {
      kind: 'boolean',
      help: 'greedy sentences start in cohorts that step separately instead of joining the running batch row by row (for comparison; plans without the per-row step graph always use cohorts)',
    },
    'async-steps': {
      kind: 'boolean',
      help: "the running batch's starts (encoder and encoder K/V) and decoder steps run on the runtime's worker thread while the event loop serves sockets (on 2 cores it was slower: the event loop then competes with the kernels' threads; for machines with cores to spare)",
    },
    'api-key-file': {
      kind: 'string',
      value: 'FILE',
      help: 'API keys, one a line (at least 16 characters each): every route but /health and /ready then needs Authorization: Bearer KEY',
    },
    'log-level': {
      kind: 'string',
      value: 'LEVEL',
      help: 'JSON log level on standard output: fatal, error, warn, info (default), debug, trace, silent',
    },
    redis: {
      kind: 'string',
      value: 'URL',
      help: 'gateway mode: no plans here; each request becomes a job for planc worker processes on this Redis (redis://[user:password@]host:port), answered when one finishes it; 503 while Redis is unreachable',
    },
    queue: {
      kind: 'string',
      value: 'NAME',
      help: `gateway mode: the queue prefix the workers use (default ${DEFAULT_QUEUE})`,
    },
    threads: THREADS_OPTION,
  },
  notes: `Example:
  planc serve es-en.plan --port 8080 &
  curl -s localhost:8080/v1/translate -H 'content-type: application/json' -d '{"text": ["Hola mundo.", "¿Qué tal?"]}'
  curl -sN localhost:8080/v1/translate -H 'accept: application/x-ndjson' -H 'content-type: application/json' -d '{"text": ["Hola.", "Adiós."]}'
Options per request: beam, maxLength, nBest, scores, targetLang, truncate, strategy, and generate()'s lengthPenalty, earlyStopping, minNewTokens, noRepeatNgramSize, encoderNoRepeatNgramSize, repetitionPenalty (README, Serving).`,
};

const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export async function runServe(argv: string[]): Promise<number> {
  const { positional, flags } = parseArgs(SERVE, argv);
  const level = flags['log-level'] === undefined ? 'info' : String(flags['log-level']);
  if (!LEVELS.includes(level))
    throw new PlancError('PLANC_E301', `--log-level ${level}: want one of ${LEVELS.join(', ')}`);
  const apiKeys = flags['api-key-file'] === undefined ? undefined : readApiKeys(String(flags['api-key-file']));
  const options = {
    host: flags.host === undefined ? undefined : String(flags.host),
    port: intOption(flags, 'port', 0, 65535),
    maxQueue: intOption(flags, 'max-queue', 1, 1 << 24),
    batchTokens: intOption(flags, 'batch-tokens', 1, 1 << 24),
    maxRows: intOption(flags, 'max-rows', 1, 1 << 16),
    maxSentences: intOption(flags, 'max-sentences', 1, 1 << 20),
    maxBodyBytes: intOption(flags, 'max-body-bytes', 1024, 1 << 30),
    timeoutMs: intOption(flags, 'timeout-ms', 1, 86_400_000),
    continuous: flags['no-continuous'] !== true,
    joinRows: flags['no-row-join'] !== true,
    asyncSteps: flags['async-steps'] === true,
    apiKeys,
    logger: { level },
    queue:
      flags.redis === undefined
        ? undefined
        : { redis: String(flags.redis), prefix: flags.queue === undefined ? DEFAULT_QUEUE : String(flags.queue) },
  };
  if (!options.queue && positional.length === 0)
    throw new PlancError(
      'PLANC_E301',
      'planc serve needs at least one PLAN (or --redis URL: gateway mode, the workers hold the plans)',
    );
  if (options.queue && positional.length > 0)
    throw new PlancError(
      'PLANC_E301',
      'planc serve --redis (gateway mode) takes no PLAN: start planc worker PLAN --redis URL for each model',
    );
  applyThreads(flags);
  const plans: Plan[] = [];
  try {
    for (const p of positional) plans.push(await loadPlan(p));
    const server = await createServer(plans, options);
    const address = await server.listen();
    const what = options.queue
      ? `gateway to queue ${options.queue.prefix} at ${safeUrl(options.queue.redis)}`
      : [...server.models.keys()].join(', ');
    console.error(
      `planc serve: ${what} on ${address}${options.continuous ? '' : ' (--no-continuous: each request decoded alone)'}`,
    );
    await drainOnSignal('serve', 'finishing the requests in flight', () => server.close());
    return 0;
  } finally {
    for (const p of plans) p.close();
  }
}
