// The C++ kernel tests of native/test: built with cmake into native/build-tests (incremental), each program run once.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../compiler/paths.ts';
import { skipPart, skipSuite } from './helpers/skip.ts';

const SRC = path.join(REPO_ROOT, 'native', 'test');
const BUILD = path.join(REPO_ROOT, 'native', 'build-tests');
const names = fs
  .readdirSync(SRC)
  .filter((f) => f.endsWith('_test.cc'))
  .map((f) => f.slice(0, -3))
  .sort();
const jobs = Math.max(1, Math.min(4, os.availableParallelism()));
const found = (cmd: string, args = ['--version']) => spawnSync(cmd, args, { encoding: 'utf8' }).status === 0;
const compiler = [process.env.CXX, 'c++', 'g++', 'clang++'].find((c) => c && found(c));
const missing = !found('cmake')
  ? 'need cmake for the C++ kernel tests'
  : !compiler
    ? 'need a C++ compiler for the C++ kernel tests'
    : undefined;

interface Result {
  code: number | null;
  out: string;
  checks: number;
  failures: number;
  skips: Skip[];
  ms: number;
}
/** A part of a program this machine cannot run (test::skip in native/test/test_util.h prints "SKIP what: why"). */
interface Skip {
  what: string;
  why: string;
}

/** The SKIP lines of a program's output. */
const skipsIn = (out: string): Skip[] =>
  [...out.matchAll(/^SKIP (.+?): (.+)$/gm)].map((m) => ({ what: m[1]!, why: m[2]! }));

/** Runs one test program; resolves with its exit code, output and "N checks, M failures" line. */
function runProgram(name: string): Promise<Result> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn(path.join(BUILD, name), [], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', (e) =>
      resolve({ code: -1, out: String(e), checks: 0, failures: -1, skips: [], ms: Date.now() - t0 }),
    );
    child.on('close', (code, signal) => {
      const m = /: (\d+) checks, (\d+) failures/.exec(out);
      resolve({
        code: signal ? -1 : code,
        out: signal ? `${out}\nkilled by ${signal}` : out,
        checks: m ? Number(m[1]) : 0,
        failures: m ? Number(m[2]) : -1,
        skips: skipsIn(out),
        ms: Date.now() - t0,
      });
    });
  });
}

if (missing) {
  skipSuite(test, missing, ['cmake builds native/test', ...names]);
} else {
  const runs = new Map<string, Promise<Result>>();
  let built = false;
  const timing = { buildMs: 0, start: 0 };

  test('cmake builds native/test', () => {
    const t0 = Date.now();
    const cxx = compiler !== 'c++' ? [`-DCMAKE_CXX_COMPILER=${compiler}`] : [];
    if (!fs.existsSync(path.join(BUILD, 'CMakeCache.txt'))) {
      const cfg = spawnSync('cmake', ['-S', SRC, '-B', BUILD, '-DCMAKE_BUILD_TYPE=Release', ...cxx], {
        encoding: 'utf8',
      });
      assert.is(cfg.status, 0, `cmake configure failed:\n${cfg.stdout}\n${cfg.stderr}`);
    }
    const b = spawnSync('cmake', ['--build', BUILD, '--parallel', String(jobs)], {
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    assert.is(b.status, 0, `cmake --build failed:\n${(b.stdout + b.stderr).slice(-8000)}`);
    timing.buildMs = Date.now() - t0;
    built = true;
    // Start every program now, `jobs` at a time; each test below awaits its own.
    timing.start = Date.now();
    let next = 0;
    const slots: Promise<void>[] = [];
    const resolvers = new Map<string, (r: Result) => void>();
    for (const n of names) runs.set(n, new Promise((res) => resolvers.set(n, res)));
    for (let j = 0; j < jobs; j++) {
      slots.push(
        (async () => {
          while (next < names.length) {
            const n = names[next++]!;
            resolvers.get(n)!(await runProgram(n));
          }
        })(),
      );
    }
  });

  let checks = 0;
  let skipped = 0;
  for (const name of names) {
    test(`${name}: exits 0 with no failed check`, async () => {
      assert.ok(built, 'the build failed (see above)');
      const r = await runs.get(name)!;
      const tail = r.out
        .split('\n')
        .filter((l) => !l.startsWith('bench'))
        .slice(-40)
        .join('\n');
      assert.is(r.code, 0, `${name} exited with ${r.code}:\n${tail}`);
      assert.is(r.failures, 0, `${name}: ${r.failures} failed checks:\n${tail}`);
      assert.ok(r.checks > 0, `${name} reported no checks:\n${tail}`);
      checks += r.checks;
      // what this machine cannot run (a variant its CPU lacks) is counted in npm test's skip summary, with its reason
      for (const s of r.skips) skipPart(s.why, `${name}: ${s.what}`);
      skipped += r.skips.length;
    });
  }

  test.after(() => {
    if (built)
      console.log(
        `\n  native/test: ${names.length} programs, ${checks} checks, ${skipped} parts skipped; build ${(timing.buildMs / 1000).toFixed(1)} s, runs ${((Date.now() - timing.start) / 1000).toFixed(1)} s (${jobs} at a time)`,
      );
  });
}

test.run();
