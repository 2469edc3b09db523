// npm test's runner: the uvu test files split over parallel uvu processes (balanced by test/durations.json), the
// first process's report shown as it runs and the others' when they end, then one summary with the slowest files;
// exit 1 if any process failed. uvu itself runs the files of one process one after another.
// usage: node scripts/run-tests.mjs [PATTERN (\.test\.ts$)] [--jobs N (PLANC_TEST_JOBS, default min(2, cores))]
//        [--record: rewrite test/durations.json with this run's times]
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const testDir = path.join(root, 'test');
const durationsFile = path.join(testDir, 'durations.json');
const args = process.argv.slice(2);
const take = (name, hasValue) => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  return args.splice(i, hasValue ? 2 : 1)[1] ?? true;
};
const record = take('--record', false) === true;
const jobsArg = take('--jobs', true) ?? process.env.PLANC_TEST_JOBS;
const jobs = jobsArg === undefined ? Math.max(1, Math.min(2, os.availableParallelism())) : Number(jobsArg);
if (!Number.isInteger(jobs) || jobs < 1) {
  console.error(`run-tests: --jobs ${jobsArg}: want a positive integer`);
  process.exit(2);
}
const pattern = new RegExp(args[0] ?? '\\.test\\.ts$');
/** Test files under test/ (subfolders too), as uvu names them: relative paths with '/'. */
const listed = fs.readdirSync(testDir, { recursive: true }).map((f) => String(f).split(path.sep).join('/'));
const files = listed.filter((f) => /\.test\.ts$/.test(f) && pattern.test(f)).sort();
if (files.length === 0) {
  console.error(`run-tests: no test file matches ${pattern}`);
  process.exit(2);
}
const escapeRegExp = (f) => f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour codes (ESC [ n m) in uvu's output
const plain = (text) => text.replace(/\x1b\[\d+m/g, '');

/**
 * Runs uvu over `list`; resolves with its exit code, its output, its wall seconds and each file's seconds (uvu prints
 * a file's name as its tests start: a file's time runs to the next name, or to the end). `live`: output as it comes.
 */
function uvu(list, live) {
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(root, 'node_modules', 'uvu', 'bin.js'),
      'test',
      `^(${list.map(escapeRegExp).join('|')})$`,
    ],
    {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? '1' },
    },
  );
  let out = '';
  const fileSeconds = {};
  let current;
  let since = t0;
  const heard = (d) => {
    if (live) process.stdout.write(d);
    out += d;
    for (const line of plain(String(d)).split('\n')) {
      const name = line.trim();
      if (!list.includes(name)) continue;
      const now = performance.now();
      if (current) fileSeconds[current] = (now - since) / 1000;
      current = name;
      since = now;
    }
  };
  child.stdout.on('data', heard);
  child.stderr.on('data', heard);
  return new Promise((resolve) =>
    child.on('close', (code, signal) => {
      const end = performance.now();
      if (current) fileSeconds[current] = (end - since) / 1000;
      resolve({ code: code ?? (signal ? 1 : 0), out, seconds: (end - t0) / 1000, fileSeconds });
    }),
  );
}

// longest first onto the least loaded process (a file not timed yet counts as 10 s)
const durations = fs.existsSync(durationsFile) ? JSON.parse(fs.readFileSync(durationsFile, 'utf8')) : {};
const weight = (f) => durations[f] ?? 10;
const shares = Array.from({ length: Math.min(jobs, files.length) }, () => ({ files: [], load: 0 }));
for (const f of [...files].sort((a, b) => weight(b) - weight(a))) {
  const s = shares.reduce((a, b) => (b.load < a.load ? b : a));
  s.files.push(f);
  s.load += weight(f);
}
for (const s of shares) s.files.sort();
console.log(
  `run-tests: ${files.length} files in ${shares.length} uvu process${shares.length > 1 ? 'es' : ''} (the first shown as it runs, the others when they end)`,
);
const results = await Promise.all(shares.map((s, i) => uvu(s.files, i === 0)));
results.forEach((r, i) => {
  if (i > 0)
    process.stdout.write(`\n== uvu process ${i + 1} of ${shares.length} (${shares[i].files.length} files)\n${r.out}`);
});

/** uvu's own count of one kind (Total, Passed, Skipped) in a process's report; 0 when it printed none (it crashed). */
const count = (r, what) => Number(new RegExp(`${what}:\\s+(\\d+)`).exec(plain(r.out))?.[1] ?? 0);
const sum = (what) => results.reduce((n, r) => n + count(r, what), 0);
console.log(
  `\nrun-tests: ${sum('Total')} tests, ${sum('Passed')} passed, ${sum('Skipped')} skipped; ${shares.map((s, i) => `process ${i + 1}: ${s.files.length} files, ${results[i].seconds.toFixed(0)} s, exit ${results[i].code}`).join('; ')}`,
);
const times = Object.assign({}, ...results.map((r) => r.fileSeconds));
console.log(
  `run-tests: seconds per file, slowest first: ${Object.entries(times)
    .sort((a, b) => b[1] - a[1])
    .map(([f, t]) => `${f.replace(/\.test\.ts$/, '')} ${t.toFixed(0)}`)
    .join(', ')}`,
);
if (record) {
  const merged = { ...durations };
  for (const [f, t] of Object.entries(times)) merged[f] = Math.round(t);
  const sorted = Object.fromEntries(Object.entries(merged).sort(([a], [b]) => a.localeCompare(b)));
  fs.writeFileSync(durationsFile, `${JSON.stringify(sorted, null, 2)}\n`);
  console.log(`run-tests: wrote ${path.relative(root, durationsFile)}`);
}
const failed = results.filter((r) => r.code !== 0).length;
if (failed > 0) console.log(`run-tests: ${failed} uvu process${failed > 1 ? 'es' : ''} failed (see its report above)`);
process.exit(failed > 0 ? 1 : 0);
