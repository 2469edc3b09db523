// Runs one fuzz case in child processes (one per step: a crash or a hang cannot hide the next case), classifies it and
// saves failing cases as reproductions (the input files and a repro.sh with the command).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export const CLASSES = ['named', 'ok', 'silent', 'internal', 'uncaught', 'crash', 'hang'] as const;
export type Class = (typeof CLASSES)[number];
/** Classes that are defects (saved as reproductions). */
export const FAILING: readonly Class[] = ['silent', 'internal', 'uncaught', 'crash', 'hang'];

/** What a step's success must look like to count as ok rather than wrong-but-silent. */
export interface Check {
  /** The input is known to be invalid (why): exit 0 is a silent acceptance. */
  mustFail?: string;
  /** translate: the number of output lines (one per input line). */
  lines?: number;
  /** run --json: the output names expected (exactly), and whether every value must be finite. */
  outputs?: string[];
  finite?: boolean;
}

export interface Step {
  /** planc's arguments (paths relative to the case folder). */
  args: string[];
  /** a file of the case folder given on standard input */
  stdin?: string;
  check?: Check;
}

/** A file of the case folder: bytes or text, a link to a base file (copied into reproductions), or a folder. */
export type FileSpec = Uint8Array | string | { link: string } | { dir: true };

export interface Case {
  target: string;
  index: number;
  desc: string;
  files: Record<string, FileSpec>;
  /** run in order; the next only when the previous one exits 0 and passes its check */
  steps: Step[];
}

export interface StepResult {
  args: string[];
  status: number | null;
  signal: string | null;
  ms: number;
  stdout: string;
  stderr: string;
  cls: Class;
  note: string;
}
export interface CaseResult {
  cls: Class;
  note: string;
  steps: StepResult[];
  ms: number;
}

export interface RunnerOptions {
  /** the planc entry (bin/planc.js) */
  planc: string;
  /** per step, seconds */
  timeout: number;
  env?: Record<string, string>;
}

function writeFiles(dir: string, files: Record<string, FileSpec>): void {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, f] of Object.entries(files)) {
    const p = path.join(dir, name);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    if (typeof f === 'string' || f instanceof Uint8Array) fs.writeFileSync(p, f);
    else if ('link' in f) fs.symlinkSync(f.link, p);
    else fs.mkdirSync(p, { recursive: true });
  }
}

/** A translate error line ("planc translate: line N: message") that carries no PLANC code: a leaked internal error. */
const UNNAMED_LINE_ERROR = /^planc [a-z-]+: line \d+: (?!.*PLANC_E\d{3}).*$/m;

/** The class of one finished step. */
export function classify(
  step: Step,
  r: { status: number | null; signal: string | null; timedOut: boolean; stdout: string; stderr: string },
): [Class, string] {
  const firstErr =
    r.stderr
      .split('\n')
      .find((l) => l.trim() && !/^\s+(importing|verifying|pass|lowering|planning|packing|writing)\b/.test(l))
      ?.slice(0, 300) ?? '';
  if (r.timedOut) return ['hang', 'timed out'];
  if (r.signal) return ['crash', `killed by ${r.signal}: ${firstErr}`];
  if (/internal error/i.test(r.stderr))
    return [
      'internal',
      r.stderr
        .split('\n')
        .find((l) => /internal error/i.test(l))!
        .slice(0, 300),
    ];
  const unnamed = UNNAMED_LINE_ERROR.exec(r.stderr);
  if (unnamed) return ['internal', `error without a PLANC code: ${unnamed[0].slice(0, 300)}`];
  if (r.status === 0) return checkOk(step.check ?? {}, r.stdout);
  if (r.status === 2 && /PLANC_E\d{3}/.test(r.stderr)) return ['named', firstErr];
  return ['uncaught', `exit ${r.status} without a PLANC code: ${firstErr}`];
}

function checkOk(c: Check, stdout: string): [Class, string] {
  if (c.mustFail) return ['silent', `accepted: ${c.mustFail}`];
  if (c.lines !== undefined) {
    const n = stdout === '' ? 0 : stdout.replace(/\n$/, '').split('\n').length;
    if (n !== c.lines) return ['silent', `exit 0 with ${n} output lines for ${c.lines} input lines`];
  }
  if (c.outputs) {
    if (!stdout.trim()) return ['silent', 'exit 0 with empty output'];
    let j: Record<string, { data?: unknown[] }>;
    try {
      j = JSON.parse(stdout);
    } catch {
      return ['silent', 'exit 0, output is not the JSON asked for'];
    }
    const names = Object.keys(j).sort();
    if (names.join(',') !== [...c.outputs].sort().join(','))
      return ['silent', `exit 0 with outputs [${names.join(', ')}], expected [${c.outputs.join(', ')}]`];
    // JSON has no NaN or Infinity: JSON.stringify writes them as null
    if (c.finite !== false && Object.values(j).some((t) => t.data?.some((x) => x === null)))
      return ['silent', 'exit 0 with NaN or Inf in the outputs'];
  }
  return ['ok', ''];
}

/** Runs a case's steps in `dir` (emptied first). */
export function runCase(c: Case, dir: string, o: RunnerOptions): CaseResult {
  writeFiles(dir, c.files);
  const steps: StepResult[] = [];
  const t0 = performance.now();
  for (const step of c.steps) {
    const s0 = performance.now();
    const r = spawnSync(process.execPath, [o.planc, ...step.args], {
      cwd: dir,
      input: step.stdin === undefined ? '' : fs.readFileSync(path.join(dir, step.stdin)),
      timeout: o.timeout * 1000,
      killSignal: 'SIGKILL',
      maxBuffer: 256 << 20,
      env: { ...process.env, PLANC_NUM_THREADS: '1', ...o.env },
    });
    const timedOut = (r.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT';
    const res = {
      status: r.status,
      signal: r.signal,
      timedOut,
      stdout: r.stdout?.toString('utf8') ?? '',
      stderr: r.stderr?.toString('utf8') ?? '',
    };
    if (r.error && !timedOut) res.stderr += `\n[fuzz: spawn failed: ${r.error.message}]`;
    const [cls, note] = classify(step, res);
    steps.push({
      args: step.args,
      status: r.status,
      signal: r.signal,
      ms: performance.now() - s0,
      stdout: res.stdout,
      stderr: res.stderr,
      cls,
      note,
    });
    if (cls !== 'ok') break;
  }
  const last = steps[steps.length - 1]!;
  return { cls: last.cls, note: last.note, steps, ms: performance.now() - t0 };
}

const shq = (s: string) => (/^[\w./=,:+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** Copies the case folder (links resolved) to `dest` with repro.sh and case.json. */
export function saveRepro(
  c: Case,
  res: CaseResult,
  dir: string,
  dest: string,
  meta: { seed: number; planc: string },
): void {
  fs.rmSync(dest, { recursive: true, force: true });
  fs.cpSync(dir, dest, { recursive: true, dereference: true });
  const lines = [
    '#!/bin/sh',
    `# planc fuzz: ${c.target} case ${c.index} (seed ${meta.seed}): ${c.desc.replace(/\n/g, ' ')}`,
    `# class ${res.cls}: ${res.note.replace(/\n/g, ' ')}`,
    `# replay the generator: npm run fuzz -- ${c.target} --seed ${meta.seed} --case ${c.index}`,
    'cd "$(dirname "$0")"',
    `PLANC="\${PLANC:-node ${meta.planc}}"`,
    'export PLANC_NUM_THREADS=1',
    'set -e',
    ...res.steps.map(
      (s, i) => `$PLANC ${s.args.map(shq).join(' ')}${c.steps[i]!.stdin ? ` < ${shq(c.steps[i]!.stdin!)}` : ''}`,
    ),
  ];
  fs.writeFileSync(path.join(dest, 'repro.sh'), `${lines.join('\n')}\n`, { mode: 0o755 });
  const tail = (s: string) => (s.length > 4000 ? `...${s.slice(-4000)}` : s);
  fs.writeFileSync(
    path.join(dest, 'case.json'),
    `${JSON.stringify(
      {
        target: c.target,
        index: c.index,
        seed: meta.seed,
        desc: c.desc,
        cls: res.cls,
        note: res.note,
        steps: res.steps.map((s) => ({
          args: s.args,
          status: s.status,
          signal: s.signal,
          ms: Math.round(s.ms),
          cls: s.cls,
          note: s.note,
          stdout: tail(s.stdout),
          stderr: tail(s.stderr),
        })),
      },
      null,
      2,
    )}\n`,
  );
}
