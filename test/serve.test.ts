// planc serve over a real socket: 50 concurrent clients × 20 requests (mixed lengths, arrays, streams) answered exactly
// as offline translate, metrics that count what was sent, cancelled rows freed, 429 past --max-queue, named 4xx errors,
// API keys, and SIGTERM draining the requests in flight (the CLI in a child process).
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { translate } from '../runtime/translate.ts';
import { createServer, type PlancServer } from '../serve/server.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';
import { makeTinyTextPlan } from './helpers/tiny-text-plan.ts';

const it = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-serve-'));
const shared = sharedDir();
const ESEN = shared ? path.join(shared, 'models', 'es-en') : undefined;

/** The plan under test: es-en (batch 32) where ../shared has it, else the tiny synthetic text plan; and its sentences. */
function setup(): { planFile: string; sentences: string[] } {
  if (ESEN && fs.existsSync(ESEN)) {
    const planFile = path.join(tmp, 'es-en.plan');
    const r = planc(['optimize', ESEN, '-o', planFile, '--quiet', '--max-batch', '32', '--max-tgt-len', '64']);
    if (r.status !== 0) throw new Error(`optimize es-en: ${r.stderr}`);
    const lines = fs
      .readFileSync(path.join(ESEN, 'test.es'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '');
    // 1 to 40 words: the test set's lines, cut to a spread of lengths
    return {
      planFile,
      sentences: lines.slice(0, 300).map((l, i) =>
        l
          .split(/\s+/)
          .slice(0, 1 + ((i * 7) % 40))
          .join(' '),
      ),
    };
  }
  const planFile = makeTinyTextPlan(tmp);
  return {
    planFile,
    sentences: Array.from({ length: 300 }, (_, i) =>
      Array.from({ length: 1 + ((i * 7) % 12) }, (_, j) => `w${2 + ((i * 13 + j * 5) % 99)}`).join(' '),
    ),
  };
}

let planFile = '';
let sentences: string[] = [];
let plan: Plan;
let offline: string[] = [];

/** A POST of /v1/translate; the parsed JSON (or NDJSON lines) and the status. */
async function post(
  base: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
  // biome-ignore lint/suspicious/noExplicitAny: the answer's JSON, read field by field by the tests
): Promise<{ status: number; json: any; text: string; headers: Headers }> {
  const res = await fetch(`${base}/v1/translate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

/** Sums a counter of a Prometheus text over the series that match `labels`. */
function counter(metrics: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).some(([k, v]) => !line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.split(' ').pop());
  }
  return sum;
}

async function started(
  options: Parameters<typeof createServer>[1] = {},
): Promise<{ server: PlancServer; base: string }> {
  const server = await createServer([plan], { port: 0, logger: false, ...options });
  const base = await server.listen();
  return { server, base };
}

test.before(async () => {
  if (!nativeAvailable()) return;
  ({ planFile, sentences } = setup());
  plan = await loadPlan(planFile);
  offline = await translate(plan, sentences, { batchSize: 32 });
});

test.after(() => {
  plan?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

it('50 clients × 20 requests (single sentences, arrays, NDJSON and SSE streams): every translation equals offline translate; /metrics counts them', async () => {
  const { server, base } = await started();
  try {
    let sent = 0;
    const failures: string[] = [];
    await Promise.all(
      Array.from({ length: 50 }, async (_, c) => {
        for (let r = 0; r < 20; r++) {
          const n = (c + r) % 5 === 0 ? 2 + (r % 3) : 1; // some multi-sentence requests
          const idx = Array.from({ length: n }, (_, k) => (c * 37 + r * 11 + k * 101) % sentences.length);
          const texts = idx.map((i) => sentences[i]!);
          sent += n;
          const mode = (c * 20 + r) % 7;
          if (mode === 0 || mode === 1) {
            const accept = mode === 0 ? 'application/x-ndjson' : 'text/event-stream';
            const res = await post(base, { text: texts }, { accept });
            const items =
              mode === 0
                ? res.text
                    .trim()
                    .split('\n')
                    .map((l) => JSON.parse(l))
                : res.text
                    .split('\n\n')
                    .filter((e) => e.startsWith('data: '))
                    .map((e) => JSON.parse(e.slice(6)));
            if (res.status !== 200 || !items.at(-1)?.done)
              failures.push(
                `client ${c} request ${r}: stream status ${res.status}, last ${JSON.stringify(items.at(-1))}`,
              );
            for (const it of items.slice(0, -1))
              if (it.text !== offline[idx[it.index]!])
                failures.push(
                  `client ${c} request ${r} (${accept}) sentence ${it.index}: '${it.text}' vs offline '${offline[idx[it.index]!]}'`,
                );
            if (items.length !== n + 1) failures.push(`client ${c} request ${r}: ${items.length - 1} streamed of ${n}`);
          } else {
            const res = await post(base, { text: n === 1 && r % 2 === 0 ? texts[0] : texts });
            if (res.status !== 200) {
              failures.push(`client ${c} request ${r}: status ${res.status} ${res.text}`);
              continue;
            }
            res.json.translations.forEach((t: { text: string }, k: number) => {
              if (t.text !== offline[idx[k]!])
                failures.push(`client ${c} request ${r} sentence ${k}: '${t.text}' vs offline '${offline[idx[k]!]}'`);
            });
          }
        }
      }),
    );
    assert.equal(failures.slice(0, 5), [], `${failures.length} mismatches`);
    const m = await (await fetch(`${base}/metrics`)).text();
    assert.is(counter(m, 'planc_requests_total'), 1000, 'requests counted');
    assert.is(counter(m, 'planc_requests_total', { status: '200' }), 1000, 'all 200');
    // the warm-up's sentence is the scheduler's, not a request's: not counted
    assert.is(counter(m, 'planc_sentences_total', { status: 'ok' }), sent, 'sentences counted');
    assert.ok(counter(m, 'planc_target_tokens_total') > 0, 'tokens counted');
    assert.ok(
      counter(m, 'planc_step_seconds_count') > 0 && counter(m, 'planc_batch_occupancy_count') > 0,
      'step and occupancy histograms',
    );
    // sentences join the running batch: their starts (encoder and encoder K/V) are timed apart from the steps
    assert.ok(counter(m, 'planc_start_seconds_count') > 0, 'start histogram');
    assert.is(counter(m, 'planc_errors_total'), 0, 'no errors');
    assert.is(server.models.values().next().value!.scheduler.runningRows, 0);
  } finally {
    await server.close();
  }
});

it('a client that disconnects mid-request has its queued and running sentences dropped (rows freed)', async () => {
  const { server, base } = await started({ maxRows: 4 });
  try {
    const sched = server.models.values().next().value!.scheduler;
    const texts = Array.from({ length: 40 }, (_, i) => sentences[i * 5]!);
    const abort = new AbortController();
    const gone = post(base, { text: texts }, {}, abort.signal).catch((e: Error) => e);
    const streamAbort = new AbortController();
    const goneStream = post(base, { text: texts }, { accept: 'application/x-ndjson' }, streamAbort.signal).catch(
      (e: Error) => e,
    );
    for (let i = 0; i < 200 && sched.runningRows === 0; i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(sched.runningRows > 0, 'rows running before the disconnect');
    abort.abort();
    streamAbort.abort();
    await gone;
    await goneStream;
    for (let i = 0; i < 400 && (sched.runningRows > 0 || sched.queued > 0); i++)
      await new Promise((r) => setTimeout(r, 10));
    assert.is(sched.runningRows, 0, 'running rows back to 0');
    assert.is(sched.queued, 0, 'queue empty');
    const m = await (await fetch(`${base}/metrics`)).text();
    assert.ok(counter(m, 'planc_sentences_total', { status: 'cancelled' }) > 0, 'cancelled sentences counted');
    // the server still answers
    const ok = await post(base, { text: sentences[3]! });
    assert.is(ok.json.translations[0].text, offline[3]);
  } finally {
    await server.close();
  }
});

it('429 with Retry-After only past --max-queue; a request within it is answered', async () => {
  const { server, base } = await started({ maxQueue: 6, maxRows: 1, continuous: false });
  try {
    const first = post(base, { text: sentences.slice(0, 6) }); // fills the queue (one row decodes at a time)
    await new Promise((r) => setTimeout(r, 20));
    const over = await post(base, { text: sentences.slice(0, 6) });
    assert.is(over.status, 429);
    assert.is(over.json.error.code, 'PLANC_E702');
    assert.ok(Number(over.headers.get('retry-after')) >= 1);
    assert.is((await first).status, 200);
    const within = await post(base, { text: sentences.slice(0, 6) });
    assert.is(within.status, 200);
  } finally {
    await server.close();
  }
});

it('bad input: each a 4xx with a named error, the others unharmed', async () => {
  const { server, base } = await started({ maxSentences: 1000 });
  try {
    const bad = async (body: unknown, status: number, code: string, re?: RegExp) => {
      const r = await post(base, body);
      assert.is(r.status, status, `${JSON.stringify(body).slice(0, 60)} → ${r.text}`);
      assert.is(r.json.error.code, code);
      if (re) assert.match(r.json.error.message, re);
      assert.not.match(r.text, /\/tmp\/|\/work\/|at .*\.ts:\d+/, 'no paths or stack traces');
    };
    await bad('{"text": ', 400, 'PLANC_E701', /not valid JSON/);
    await bad({ text: 5 }, 400, 'PLANC_E701', /string or an array of strings/);
    await bad({ text: ['a', 3] }, 400, 'PLANC_E701');
    await bad({ text: 'a', options: { beam: 'two' } }, 400, 'PLANC_E701', /beam/);
    await bad({ text: 'a', options: { temprature: 1 } }, 400, 'PLANC_E701', /unknown field 'temprature'/); // a misspelt option
    await bad({ text: 'a', extra: 1 }, 400, 'PLANC_E701', /unknown field 'extra'/);
    await bad({ text: 'a', model: 'nope' }, 404, 'PLANC_E705', /unknown model 'nope'/);
    await bad({ text: 'a', options: { strategy: 'sample' } }, 400, 'PLANC_E411', /strategy/);
    await bad({ text: Array.from({ length: 10_000 }, () => 'hola') }, 413, 'PLANC_E703', /10000 sentences/);
    await bad({ text: 'x'.repeat(2 << 20) }, 413, 'PLANC_E703');
    const empty = await post(base, { text: ['', sentences[0]!] });
    assert.is(empty.status, 200);
    assert.equal(empty.json.translations[0], { text: '', tokens: 0 });
    assert.is(empty.json.translations[1].text, offline[0]);
    const long = Array.from({ length: 400 }, (_, i) => sentences[i % 50]).join(' ');
    const mixed = await post(base, { text: [sentences[1]!, long, sentences[2]!] });
    assert.is(mixed.status, 200);
    assert.is(mixed.json.translations[1].error.code, 'PLANC_E408');
    assert.is(mixed.json.translations[0].text, offline[1]);
    assert.is(mixed.json.translations[2].text, offline[2]);
    const cut = await post(base, { text: long, options: { truncate: true } });
    assert.is(cut.status, 200);
    assert.type(cut.json.translations[0].text, 'string');
    const models = (await (await fetch(`${base}/v1/models`)).json()) as {
      models: { name: string; profile: { maxBatch: number } }[];
    };
    assert.is(models.models[0]!.name, path.basename(planFile, '.plan'));
    assert.is((await fetch(`${base}/health`)).status, 200);
    assert.is((await fetch(`${base}/ready`)).status, 200);
    const api = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    assert.ok(api.paths['/v1/translate'] && api.paths['/v1/models'], 'openapi lists the routes');
  } finally {
    await server.close();
  }
});

it('API keys: required beyond loopback, missing or wrong key → 401, the right one answers; /health stays open', async () => {
  const open = await createServer([plan], { host: '0.0.0.0', logger: false }).then(
    () => 'created',
    (e: Error) => e.message,
  );
  assert.match(open, /PLANC_E302.*API keys/);
  const key = 'k'.repeat(32);
  const { server, base } = await started({ apiKeys: [key] });
  try {
    assert.is((await post(base, { text: 'hola' })).status, 401);
    const wrong = await post(base, { text: 'hola' }, { authorization: `Bearer ${'x'.repeat(32)}` });
    assert.is(wrong.status, 401);
    assert.is(wrong.json.error.code, 'PLANC_E706');
    assert.is(
      (await post(base, { text: sentences[0]! }, { authorization: `Bearer ${key}` })).json.translations[0].text,
      offline[0],
    );
    assert.is((await fetch(`${base}/metrics`)).status, 401);
    assert.is((await fetch(`${base}/health`)).status, 200);
  } finally {
    await server.close();
  }
});

it('planc serve (CLI): SIGTERM with requests in flight completes them, then exits 0', async () => {
  const child = spawn(
    process.execPath,
    [path.join(REPO_ROOT, 'bin', 'planc.js'), 'serve', planFile, '--port', '0', '--log-level', 'info'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  let log = '';
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  child.stdout.on('data', (d: Buffer) => {
    log += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const wait = async (ok: () => boolean) => {
    for (let i = 0; i < 600 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
  };
  await wait(() => /on (http:\/\/\S+)/.test(err));
  const base = /on (http:\/\/\S+)/.exec(err)?.[1];
  assert.ok(base, `the server printed its address: ${err}`);
  // half plain, half streamed; SIGTERM once the server has logged every one as arrived (pino JSON lines)
  const inFlight = Array.from({ length: 8 }, (_, i) =>
    post(base!, { text: sentences.slice(i * 10, i * 10 + 10) }, i % 2 ? { accept: 'application/x-ndjson' } : {}),
  );
  await wait(() => (log.match(/"url":"\/v1\/translate"/g) ?? []).length >= 8);
  child.kill('SIGTERM');
  const answers = await Promise.all(inFlight);
  answers.forEach((a, i) => {
    assert.is(a.status, 200, `request ${i}: ${a.text}`);
    const texts =
      i % 2
        ? a.text
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l))
            .filter((x) => !x.done)
            .sort((x, y) => x.index - y.index)
            .map((x) => x.text)
        : a.json.translations.map((t: { text: string }) => t.text);
    assert.equal(texts, offline.slice(i * 10, i * 10 + 10));
  });
  assert.is(await exited, 0, err);
  assert.match(err, /SIGTERM/);
});

test.run();
