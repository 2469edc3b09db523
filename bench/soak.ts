// `npm run bench -- soak [--n N] [--interval S] [--plan FILE] [--planc PATH]`: a soak of ONE `planc translate` process.
// es-en optimized with --max-batch 32 (built once into .scratch/soak/ when --plan is not given), translate --batch 32
// on N lines (default 100,000): the es-en test, dev and train sources mixed with blank and whitespace-only lines and
// over-long lines (over the plan's --max-src-len: each fails alone with PLANC_E408 and gives an empty line), cycled to
// N. Checks that exactly N lines come out and that the failures are the over-long lines; samples the child's RSS
// (VmRSS in /proc/PID/status) every few seconds with how many lines are out; reports the RSS growth between 10% and
// 100% of the input (must be < 5%). Appends the summary and every sample to bench/results/soak.jsonl.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { machineFacts } from './machine.ts';

export interface SoakOptions {
  n: number;
  interval: number;
  plan?: string;
  planc: string;
  record: boolean;
}

/** RSS growth allowed between 10% and 100% of the input. */
export const MAX_GROWTH = 0.05;

function parse(argv: string[]): SoakOptions {
  const o: SoakOptions = { n: 100_000, interval: 5, planc: path.join(REPO_ROOT, 'bin', 'planc.js'), record: true };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const v = argv[++i];
    if (a === '--n' && v && /^\d+$/.test(v)) o.n = Number(v);
    else if (a === '--interval' && v && /^\d+(\.\d+)?$/.test(v)) o.interval = Number(v);
    else if (a === '--plan' && v) o.plan = path.resolve(v);
    else if (a === '--planc' && v) o.planc = path.resolve(v);
    else if (a === '--no-record') {
      o.record = false;
      i--;
    } else
      throw new Error(
        `bench soak: bad argument ${a} ${v ?? ''} (--n N, --interval S, --plan FILE, --planc PATH, --no-record)`,
      );
  }
  return o;
}

/** The input lines: real sources with a blank line every 17th, a whitespace-only one every 97th, an over-long one every 50th. */
export function soakLines(dir: string, n: number): { lines: string[]; overLong: number; blank: number } {
  const read = (f: string) =>
    fs
      .readFileSync(path.join(dir, f), 'utf8')
      .split('\n')
      .filter((l) => l.trim());
  const src = [...read('test.es'), ...read('dev.es'), ...read('train.es')];
  const lines: string[] = [];
  let overLong = 0;
  let blank = 0;
  for (let i = 0, s = 0; lines.length < n; i++) {
    if (i % 17 === 16) {
      lines.push('');
      blank++;
    } else if (i % 97 === 96) {
      lines.push(' \t ');
      blank++;
    } else if (i % 50 === 49) {
      // ~40 sentences joined: far over 128 subwords
      lines.push(Array.from({ length: 40 }, (_, k) => src[(s + k * 7919) % src.length]).join(' '));
      overLong++;
    } else lines.push(src[s++ % src.length]!);
  }
  return { lines, overLong, blank };
}

interface Sample {
  t: number;
  lines: number;
  rssMB: number;
  hwmMB: number;
}

function readRss(pid: number): { rss: number; hwm: number } | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN);
    return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 };
  } catch {
    return undefined;
  }
}

function ensurePlan(o: SoakOptions, esen: string): string {
  if (o.plan) return o.plan;
  const plan = path.join(REPO_ROOT, '.scratch', 'soak', 'es-en-b32.plan');
  if (fs.existsSync(plan)) return plan;
  fs.mkdirSync(path.dirname(plan), { recursive: true });
  process.stdout.write(`building ${path.relative(REPO_ROOT, plan)} (planc optimize es-en --max-batch 32)\n`);
  const r = spawnSync(process.execPath, [o.planc, 'optimize', esen, '-o', plan, '--max-batch', '32'], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (r.status !== 0) throw new Error(`bench soak: planc optimize failed (${r.status ?? r.signal})`);
  return plan;
}

export async function soak(o: SoakOptions): Promise<Record<string, unknown>> {
  const shared = sharedDir();
  const esen = shared && path.join(shared, 'models', 'es-en');
  if (!esen || !fs.existsSync(path.join(esen, 'encoder_model.onnx')))
    throw new Error('bench soak: needs ../shared/models/es-en');
  const plan = ensurePlan(o, esen);
  const { lines, overLong, blank } = soakLines(esen, o.n);
  const child = spawn(process.execPath, [o.planc, 'translate', plan, '--batch', '32'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const pid = child.pid!;
  let out = 0;
  let stderrLines = 0;
  let e408 = 0;
  const otherErrors: string[] = [];
  let summary = '';
  let errTail = '';
  child.stdout.on('data', (b: Buffer) => {
    for (const x of b) if (x === 10) out++;
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s: string) => {
    const parts = (errTail + s).split('\n');
    errTail = parts.pop()!;
    for (const l of parts) {
      stderrLines++;
      if (/PLANC_E408/.test(l)) e408++;
      else if (/^translated \d+ sentences/.test(l) || / lines failed/.test(l)) summary += `${l}\n`;
      else if (otherErrors.length < 20) otherErrors.push(l.slice(0, 300));
    }
  });
  const t0 = performance.now();
  const samples: Sample[] = [];
  const sample = () => {
    const r = readRss(pid);
    if (r)
      samples.push({
        t: Number(((performance.now() - t0) / 1000).toFixed(1)),
        lines: out,
        rssMB: Number(r.rss.toFixed(1)),
        hwmMB: Number(r.hwm.toFixed(1)),
      });
  };
  let lastLog = 0;
  const timer = setInterval(() => {
    sample();
    const s = samples[samples.length - 1];
    if (s && s.t - lastLog >= 60) {
      lastLog = s.t;
      process.stdout.write(
        `  ${s.t.toFixed(0)} s: ${s.lines}/${o.n} lines, RSS ${s.rssMB} MB (${(s.lines / s.t).toFixed(0)} lines/s)\n`,
      );
    }
  }, o.interval * 1000);
  let closed = false;
  const exited = new Promise<{ code: number | null; signal: string | null }>((res) =>
    child.on('close', (code, signal) => {
      closed = true;
      res({ code, signal });
    }),
  );
  // SIGTERM/SIGINT to the bench: stop the child and record what finished (interrupted: true)
  let interrupted = false;
  const stop = () => {
    interrupted = true;
    child.kill('SIGTERM');
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  child.stdin.on('error', () => {}); // the child gone: writes fail, the loop ends below
  // write with backpressure, in blocks
  for (let i = 0; i < lines.length && !interrupted && !closed; i += 256) {
    const block = `${lines.slice(i, i + 256).join('\n')}\n`;
    if (!child.stdin.write(block))
      await new Promise<void>((res) => {
        child.stdin.once('drain', res);
        child.once('close', res);
      });
  }
  child.stdin.end();
  const { code, signal } = await exited;
  clearInterval(timer);
  const seconds = (performance.now() - t0) / 1000;
  // RSS at 10% of the input (first sample at or past it) and at 100% (the last sample taken while running)
  const at10 = samples.find((s) => s.lines >= 0.1 * o.n);
  const end = samples[samples.length - 1];
  const window = samples.filter((s) => at10 && s.t >= at10.t);
  const growth = at10 && end ? (end.rssMB - at10.rssMB) / at10.rssMB : NaN;
  const maxInWindow = window.length ? Math.max(...window.map((s) => s.rssMB)) : NaN;
  const maxGrowth = at10 ? (maxInWindow - at10.rssMB) / at10.rssMB : NaN;
  const checks = {
    linesOut: out === o.n,
    // every failed line is a source over the plan's length (the over-long lines put in, and real sources over 128 subwords)
    failedAreOverLong: e408 >= overLong && otherErrors.length === 0,
    exit: code === (overLong > 0 ? 2 : 0) && signal === null,
    rssGrowthUnder5pct: growth < MAX_GROWTH,
    complete: !interrupted,
  };
  const result = {
    kind: 'soak',
    n: o.n,
    interrupted,
    batch: 32,
    maxBatch: 32,
    plan: path.relative(REPO_ROOT, plan),
    overLong,
    blank,
    linesOut: out,
    stderrLines,
    e408,
    otherErrors,
    exit: code,
    signal,
    summary: summary.trim(),
    seconds: Math.round(seconds),
    linesPerSecond: Number((o.n / seconds).toFixed(1)),
    rssAt10pctMB: at10?.rssMB,
    rssAt10pctLines: at10?.lines,
    rssEndMB: end?.rssMB,
    rssEndLines: end?.lines,
    rssMaxAfter10pctMB: maxInWindow,
    growth: Number(growth.toFixed(4)),
    maxGrowth: Number(maxGrowth.toFixed(4)),
    hwmMB: end?.hwmMB,
    checks,
    pass: Object.values(checks).every(Boolean),
    intervalS: o.interval,
    samples,
    machine: machineFacts({
      planc: o.planc === path.join(REPO_ROOT, 'bin', 'planc.js') ? 'bin/planc.js' : o.planc,
      commit: gitHead(),
    }),
  };
  return result;
}

function gitHead(): string {
  const r = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: REPO_ROOT, encoding: 'utf8' });
  const dirty =
    spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO_ROOT, encoding: 'utf8' })
      .stdout?.trim()
      .split('\n')
      .filter(Boolean).length ?? 0;
  return `${r.stdout?.trim() ?? '?'}${dirty ? ` + ${dirty} files edited` : ''}`;
}

export async function benchSoak(argv = process.argv.slice(3)): Promise<void> {
  const o = parse(argv);
  process.stdout.write(`soak: ${o.n} lines through one planc translate --batch 32, RSS every ${o.interval} s\n`);
  const r = await soak(o);
  const { samples, ...summary } = r as Record<string, unknown> & { samples: Sample[] };
  process.stdout.write(`${JSON.stringify(summary, null, 1)}\n${samples.length} samples\n`);
  process.stdout.write(
    `lines out ${r.linesOut}/${o.n}; RSS ${r.rssAt10pctMB} MB at 10% -> ${r.rssEndMB} MB at the end: growth ${(100 * (r.growth as number)).toFixed(2)}% (max ${(100 * (r.maxGrowth as number)).toFixed(2)}%), limit ${100 * MAX_GROWTH}%: ${r.pass ? 'PASS' : 'FAIL'}\n`,
  );
  if (o.record) fs.appendFileSync(path.join(REPO_ROOT, 'bench', 'results', 'soak.jsonl'), `${JSON.stringify(r)}\n`);
  if (!r.pass) process.exitCode = 1;
}

if (import.meta.url === `file://${process.argv[1]}`) await benchSoak(process.argv.slice(2));
