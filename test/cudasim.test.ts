// The emulated CUDA device's own tests: native/cudasim/test/*.cu built with g++ against cudasim.h (barriers, shuffles,
// ballot/any/all, atomics and the last-block merge, static and dynamic shared memory, fp16/bf16/TF32 and WMMA numerics
// against a CPU reference), deliberately broken kernels it must catch, and the constructs it refuses by name.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { CUDASIM_DIR, simDriverPath } from '../runtime/backends/cudasim.ts';
import { before } from './helpers/before.ts';
import { skipSuite } from './helpers/skip.ts';

const OUT = path.join(CUDASIM_DIR, 'build', 'test');
const CC = path.join(OUT, 'cudasimcc');
const hasGxx = spawnSync('g++', ['--version']).status === 0;

function sh(cmd: string, args: string[], env: Record<string, string> = {}) {
  return spawnSync(cmd, args, { encoding: 'utf8', env: { ...process.env, ...env } });
}

/** native/cudasim/test/NAME.cu → an executable (cudasimcc's rewrite, then g++ with cudasim.h force-included). */
function buildTest(name: string): string {
  const cc = path.join(OUT, `${name}.cc`),
    exe = path.join(OUT, name);
  const prep = sh(CC, [path.join(CUDASIM_DIR, 'test', `${name}.cu`), cc]);
  if (prep.status !== 0) throw new Error(`cudasimcc ${name}.cu: ${prep.stderr}`);
  const r = sh('g++', [
    '-std=c++17',
    '-O1',
    '-w',
    '-I',
    path.join(CUDASIM_DIR, 'include'),
    '-I',
    CUDASIM_DIR,
    '-I',
    path.join(CUDASIM_DIR, 'test'),
    '-include',
    'cudasim.h',
    '-rdynamic',
    '-x',
    'c++',
    cc,
    '-o',
    exe,
    '-ldl',
  ]);
  if (r.status !== 0) throw new Error(`g++ ${name}: ${r.stderr.slice(0, 3000)}`);
  return exe;
}

/** Runs a test program; its "ok NAME" / "FAIL NAME: why" lines. */
function results(exe: string, env: Record<string, string> = {}): { ok: string[]; failed: string[]; notes: string[] } {
  const r = sh(exe, [], env);
  const lines = r.stdout.split('\n');
  const out = {
    ok: lines.filter((l) => l.startsWith('ok ')),
    failed: lines.filter((l) => l.startsWith('FAIL ')),
    notes: lines.filter((l) => l.startsWith('# ')),
  };
  if (r.status !== 0 && out.failed.length === 0) out.failed.push(`exit ${r.status} ${r.signal ?? ''}: ${r.stderr}`);
  return out;
}

const names = [
  'emulator: barrier, shuffles, ballot, atomics, shared memory, fp16/bf16/TF32, WMMA vs a CPU reference',
  'emulator: the same under a shuffled fiber schedule (PLANC_CUDASIM_SEED)',
  'broken kernels: a missing __syncthreads and an off-by-one index are caught',
  'refusals: a construct the emulator cannot model fails the build by name',
  'the emulated libcuda.so.1: module from source, launches, capture and graph replay, an out-of-bounds kernel named',
];

if (!hasGxx) {
  skipSuite(test, 'need g++ (the emulated CUDA device compiles kernels for the CPU)', names);
} else {
  let emulator = '',
    broken = '';
  before(test, () => {
    fs.mkdirSync(OUT, { recursive: true });
    const r = sh('g++', [
      '-std=c++17',
      '-O1',
      `-DCUDASIM_DIR="${CUDASIM_DIR}"`,
      path.join(CUDASIM_DIR, 'cudasimcc.cc'),
      path.join(CUDASIM_DIR, 'compile.cc'),
      '-o',
      CC,
    ]);
    if (r.status !== 0) throw new Error(`cannot build cudasimcc: ${r.stderr}`);
    emulator = buildTest('emulator');
    broken = buildTest('broken');
  });

  test(names[0]!, () => {
    const r = results(emulator);
    assert.equal(r.failed, []);
    assert.ok(r.ok.length >= 18, r.ok.join('\n'));
    assert.ok(r.ok.some((l) => l.includes('3xTF32')));
  });

  test(names[1]!, () => {
    for (const seed of ['1', '99']) {
      const r = results(emulator, { PLANC_CUDASIM_SEED: seed });
      assert.equal(r.failed, [], `seed ${seed}`);
    }
  });

  test(names[2]!, () => {
    const r = results(broken);
    assert.equal(r.failed, [], r.notes.join('\n'));
    assert.is(r.ok.length, 3);
    assert.match(r.notes.join('\n'), /seed 0: 0 wrong; seed 1: [1-9]\d* wrong/);
    assert.match(
      r.notes.join('\n'),
      /out-of-bounds access .* 0 bytes past the end of a 4000-byte device allocation \(kernel scale_off_by_one/,
    );
  });

  test(names[3]!, () => {
    const cases: [string, RegExp][] = [
      ['__global__ void k(int* p) { asm volatile("membar.gl;"); }', /cannot model `asm` \(line 1/],
      ['__global__ void k(int* p) {\n  __nanosleep(100);\n}', /cannot model `__nanosleep` \(line 2/],
      ['__global__ void k(int* p) { *p = __shfl_xor(*p, 1); }', /cannot model `__shfl without _sync`/],
      [
        '#include <cooperative_groups.h>\n__global__ void k(int* p) { cooperative_groups::this_grid().sync(); }',
        /cannot model `cooperative_groups` \(line 2/,
      ],
    ];
    cases.forEach(([src, want], i) => {
      const f = path.join(OUT, `refuse${i}.cu`);
      fs.writeFileSync(f, src);
      const r = sh(CC, [f, `${f}.cc`]);
      assert.is(r.status, 1, src);
      assert.match(r.stderr, want);
    });
    // comments and strings do not count
    const f = path.join(OUT, 'refuse-ok.cu');
    fs.writeFileSync(f, '// asm is not used here\n__global__ void k(const char* s = "asm") {}\n');
    assert.is(sh(CC, [f, `${f}.cc`]).status, 0);
  });

  test(names[4]!, () => {
    const exe = path.join(OUT, 'driver_test');
    const b = sh('g++', ['-std=c++17', '-O1', path.join(CUDASIM_DIR, 'test', 'driver_test.cc'), '-o', exe, '-ldl']);
    assert.is(b.status, 0, b.stderr);
    const r = sh(exe, [simDriverPath()]);
    const failed = r.stdout.split('\n').filter((l) => l.startsWith('FAIL'));
    assert.equal(failed, []);
    assert.is(r.status, 0, r.stdout + r.stderr);
    assert.match(
      r.stderr,
      /out-of-bounds access at 0x[0-9a-f]+: 0 bytes past the end of a 4000-byte device allocation \(kernel off_by_one, block \(3,0,0\), thread \(104,0,0\)\)/,
    );
    assert.match(r.stderr, /cudasim cannot model `asm`/);
  });
}

test.run();
