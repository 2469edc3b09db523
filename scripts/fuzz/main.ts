// `npm run fuzz -- onnx|folder|plan|feeds|cli|all [--n N] [--seed S] [--out DIR] [--timeout S] [--case I] [--record] [--quiet]`
// Mutates a tiny synthetic model, its folder, its plan, feeds for `planc run` and command lines; runs every case in child
// processes; prints a summary table; saves every failing case (wrong-but-silent, internal error, uncaught, crash, hang)
// under OUT/repro/ as its files and a repro.sh. --record appends the counts to bench/results/fuzz.jsonl.
import { execSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT, sharedDir } from '../../compiler/paths.ts';
import { buildBase, type Base } from './base.ts';
import { caseSeed, rng } from './mutate.ts';
import { CLASSES, FAILING, runCase, saveRepro, type CaseResult, type Class } from './runner.ts';
import { makeCase, TARGETS, type Target } from './targets.ts';

export const USAGE = `usage: npm run fuzz -- onnx|folder|plan|feeds|cli|all [--n N (100)] [--seed S (1)] [--out DIR (.scratch/fuzz)]
       [--timeout SECONDS (30, per command)] [--from I (0: first case index)] [--case I (only case I: replays one reproduction)] [--record] [--quiet]
       [--planc PATH (the planc entry the cases run: bin/planc.js of this checkout, or of a built snapshot)]
       [--fail-on CLASS,... (exit 1 when any case is of these classes; default crash,hang,uncaught)]
Each case runs planc in a child process; classes: named (a PLANC_Exxx error, exit 2), ok, silent (exit 0 but wrong where
detectable: known-invalid input accepted, missing output lines or outputs, NaN in outputs), internal ("internal error",
or an error line without a code), uncaught (another exit status), crash (a signal), hang (past --timeout).`;

export interface FuzzOptions {
  targets: Target[];
  n: number;
  seed: number;
  out: string;
  timeout: number;
  only?: number;
  /** the first case index (a long run continued in rounds: --from 400 --n 400 runs cases 400..799) */
  from?: number;
  record: boolean;
  quiet: boolean;
  failOn: Class[];
  planc?: string;
}

export interface Failure {
  target: Target;
  index: number;
  cls: Class;
  note: string;
  desc: string;
  repro: string;
}
export interface FuzzReport {
  counts: Record<Target, Record<Class, number>>;
  failures: Failure[];
  /** distinct failures: one per class and normalized message, with how many cases gave it */
  distinct: (Failure & { cases: number })[];
  seconds: number;
}

function parse(argv: string[]): FuzzOptions {
  const o: FuzzOptions = {
    targets: [],
    n: 100,
    seed: 1,
    out: path.join(REPO_ROOT, '.scratch', 'fuzz'),
    timeout: 30,
    record: false,
    quiet: false,
    failOn: ['crash', 'hang', 'uncaught'],
  };
  const num = (f: string, v: string | undefined) => {
    if (v === undefined || !/^\d+$/.test(v))
      throw new Error(`${f} needs a non-negative integer, got ${v ?? 'nothing'}`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--n') o.n = num(a, argv[++i]);
    else if (a === '--seed') o.seed = num(a, argv[++i]);
    else if (a === '--timeout') o.timeout = Math.max(1, num(a, argv[++i]));
    else if (a === '--case') o.only = num(a, argv[++i]);
    else if (a === '--from') o.from = num(a, argv[++i]);
    else if (a === '--out') {
      const v = argv[++i];
      if (!v) throw new Error('--out needs a folder');
      o.out = path.resolve(v);
    } else if (a === '--planc') {
      const v = argv[++i];
      if (!v) throw new Error('--planc needs the path of a planc entry (bin/planc.js)');
      o.planc = path.resolve(v);
    } else if (a === '--record') o.record = true;
    else if (a === '--quiet') o.quiet = true;
    else if (a === '--fail-on') {
      const v = (argv[++i] ?? '').split(',').filter(Boolean) as Class[];
      for (const c of v)
        if (!CLASSES.includes(c)) throw new Error(`--fail-on: unknown class ${c} (${CLASSES.join(', ')})`);
      o.failOn = v;
    } else if (a === 'all') o.targets.push(...TARGETS);
    else if ((TARGETS as readonly string[]).includes(a)) o.targets.push(a as Target);
    else throw new Error(`unknown argument ${a}`);
  }
  if (!o.targets.length) throw new Error('name a target');
  return o;
}

/** A message with its numbers, paths and quoted names blurred, to group failures that are the same defect. */
function normalize(s: string): string {
  return s
    .replace(/line \d+/g, 'line N')
    .replace(/'[^']*'/g, "'…'")
    .replace(/\/[\w./-]+/g, 'PATH')
    .replace(/-?\d+(\.\d+)?(e[+-]?\d+)?/g, 'N')
    .slice(0, 160);
}

function machine() {
  const cpu = os.cpus()[0]?.model ?? 'unknown';
  const git = (cmd: string) => {
    try {
      return execSync(cmd, { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return '';
    }
  };
  return {
    cpu,
    cores: os.availableParallelism(),
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    commit: git('git rev-parse --short HEAD'),
    dirtyFiles: git('git status --porcelain --untracked-files=no').split('\n').filter(Boolean).length,
  };
}

export function fuzz(o: FuzzOptions, log: (s: string) => void = (s) => process.stdout.write(s)): FuzzReport {
  const planc = o.planc ?? path.join(REPO_ROOT, 'bin', 'planc.js');
  const t0 = performance.now();
  fs.mkdirSync(o.out, { recursive: true });
  fs.rmSync(path.join(o.out, 'cases.jsonl'), { force: true });
  fs.rmSync(path.join(o.out, 'failures.jsonl'), { force: true });
  fs.rmSync(path.join(o.out, 'repro'), { recursive: true, force: true });
  const base: Base = buildBase(path.join(o.out, 'base'), planc, sharedDir());
  const work = path.join(o.out, 'work');
  const counts = Object.fromEntries(
    o.targets.map((t) => [t, Object.fromEntries(CLASSES.map((c) => [c, 0]))]),
  ) as FuzzReport['counts'];
  const failures: Failure[] = [];
  let slow = 0; // cases past --timeout once that finished when run again with 4x the limit
  const byKey = new Map<string, Failure & { cases: number }>();
  for (const target of o.targets) {
    const indices = o.only !== undefined ? [o.only] : Array.from({ length: o.n }, (_, i) => (o.from ?? 0) + i);
    for (const index of indices) {
      const c = makeCase(target, base, rng(caseSeed(o.seed, target, index)), index);
      let res: CaseResult;
      try {
        res = runCase(c, work, { planc, timeout: o.timeout });
        // a timeout counts as a hang only if the case also passes 4x the time limit alone: on a loaded machine a
        // one-second case can miss 30 s, and the record must not call that a hang
        if (res.cls === 'hang') {
          const again = runCase(c, work, { planc, timeout: 4 * o.timeout });
          if (again.cls !== 'hang') {
            slow++;
            res = again;
          }
        }
      } catch (e) {
        throw new Error(`fuzz: case ${target} ${index} (${c.desc}) could not run: ${(e as Error).stack}`);
      }
      counts[target][res.cls]++;
      fs.appendFileSync(
        path.join(o.out, 'cases.jsonl'),
        `${JSON.stringify({ seed: o.seed, target, index, cls: res.cls, ms: Math.round(res.ms), note: res.note.slice(0, 300), desc: c.desc.slice(0, 300) })}\n`,
      );
      if (FAILING.includes(res.cls)) {
        const repro = path.join(o.out, 'repro', `${target}-${index}-${res.cls}`);
        saveRepro(c, res, work, repro, { seed: o.seed, planc: path.join(REPO_ROOT, 'bin', 'planc.js') });
        const f: Failure = { target, index, cls: res.cls, note: res.note, desc: c.desc, repro };
        failures.push(f);
        const key = `${res.cls} ${normalize(res.note)}`;
        const d = byKey.get(key);
        if (d) d.cases++;
        else byKey.set(key, { ...f, cases: 1 });
        fs.appendFileSync(path.join(o.out, 'failures.jsonl'), `${JSON.stringify({ seed: o.seed, ...f })}\n`);
        if (!o.quiet)
          log(
            `  ${target} #${index} ${res.cls}: ${res.note.slice(0, 200)}\n    ${c.desc.slice(0, 200)}\n    ${path.relative(process.cwd(), repro)}/repro.sh\n`,
          );
      } else if (!o.quiet && o.only !== undefined)
        log(`  ${target} #${index} ${res.cls}: ${res.note}\n    ${c.desc}\n`);
      const done = indices.indexOf(index) + 1;
      if (!o.quiet && done % 50 === 0)
        log(`${target}: ${done}/${indices.length} (${((performance.now() - t0) / 1000).toFixed(0)} s)\n`);
    }
  }
  fs.rmSync(work, { recursive: true, force: true });
  const seconds = (performance.now() - t0) / 1000;
  const report: FuzzReport = { counts, failures, distinct: [...byKey.values()], seconds };
  log(table(report));
  if (slow)
    log(
      `${slow} case${slow === 1 ? '' : 's'} passed --timeout ${o.timeout} s once and finished when run again with ${4 * o.timeout} s: counted by that run, not as hangs\n`,
    );
  if (o.record) {
    const total = Object.fromEntries(CLASSES.map((c) => [c, o.targets.reduce((s, t) => s + counts[t][c], 0)]));
    const line = {
      date: new Date().toISOString(),
      kind: 'fuzz',
      seed: o.seed,
      from: o.from ?? 0,
      n: o.n,
      targets: o.targets,
      cases: Object.values(total).reduce((a, b) => a + b, 0),
      total,
      counts,
      distinct: report.distinct.map((d) => ({
        cls: d.cls,
        target: d.target,
        cases: d.cases,
        note: d.note.slice(0, 240),
        example: `npm run fuzz -- ${d.target} --seed ${o.seed} --case ${d.index}`,
      })),
      planc: planc === path.join(REPO_ROOT, 'bin', 'planc.js') ? 'bin/planc.js' : planc,
      slowRetried: slow,
      seconds: Math.round(seconds),
      casesPerSecond: Number((Object.values(total).reduce((a, b) => a + b, 0) / seconds).toFixed(2)),
      timeoutS: o.timeout,
      machine: machine(),
    };
    fs.appendFileSync(path.join(REPO_ROOT, 'bench', 'results', 'fuzz.jsonl'), `${JSON.stringify(line)}\n`);
  }
  return report;
}

export function table(r: FuzzReport): string {
  const rows = Object.entries(r.counts);
  const w = 9;
  const head = `${'target'.padEnd(8)}${CLASSES.map((c) => c.padStart(w)).join('')}${'total'.padStart(w)}`;
  const line = (name: string, c: Record<Class, number>) =>
    `${name.padEnd(8)}${CLASSES.map((k) => String(c[k]).padStart(w)).join('')}${String(CLASSES.reduce((s, k) => s + c[k], 0)).padStart(w)}`;
  const total = Object.fromEntries(CLASSES.map((k) => [k, rows.reduce((s, [, c]) => s + c[k], 0)])) as Record<
    Class,
    number
  >;
  const out = [
    '',
    head,
    ...rows.map(([t, c]) => line(t, c)),
    ...(rows.length > 1 ? [line('all', total)] : []),
    `(${r.seconds.toFixed(0)} s)`,
  ];
  if (r.distinct.length) {
    out.push('', `distinct failures (${r.distinct.length}):`);
    for (const d of r.distinct)
      out.push(
        `  ${d.cls.padEnd(8)} ${String(d.cases).padStart(4)} × ${d.target}: ${d.note.slice(0, 160)}`,
        `           e.g. ${path.relative(process.cwd(), d.repro)}/repro.sh`,
      );
  }
  return `${out.join('\n')}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  let o: FuzzOptions;
  try {
    o = parse(process.argv.slice(2));
  } catch (e) {
    console.error(`fuzz: ${(e as Error).message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (process.argv.includes('--help')) {
    console.log(USAGE);
    process.exit(0);
  }
  const r = fuzz(o);
  const bad = o.failOn.filter((c) => Object.values(r.counts).some((k) => k[c] > 0));
  if (bad.length) {
    console.error(`fuzz: ${bad.join(', ')} found (fails the run: --fail-on ${o.failOn.join(',')})`);
    process.exit(1);
  }
}
