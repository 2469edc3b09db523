// PLANC_ISA caps the CPU kernels' run-time dispatch (native/src/cpu/isa.h): at every level this machine supports, a
// child process checks kernels against references (test/helpers/isa-check.ts), and nativeInfo() reports the cap, the
// effective level and only the variants the cap allows; a value that is not a level stops the addon from loading.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../compiler/paths.ts';
import { ISA_LEVELS, nativeAvailable, nativeInfo, type IsaLevel, type NativeInfo } from '../runtime/native.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';

const it = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
const CHECK = path.join(REPO_ROOT, 'test', 'helpers', 'isa-check.ts');
const rank = (l: IsaLevel) => ISA_LEVELS.indexOf(l);

/** The level each variant needs (variants not named here run at every level). */
const VARIANT_LEVEL: Record<string, Record<string, IsaLevel>> = {
  qmatmul: { avx2: 'avx2', avxvnni: 'avx2', avx512bw: 'avx512', avx512vnni: 'avx512vnni', amx: 'amx' },
  qproject_topk: { avx2: 'avx2', avxvnni: 'avx2', avx512bw: 'avx512', avx512vnni: 'avx512vnni', amx: 'amx' },
  matmul: { avx512: 'avx512' },
  gemm: { avx512: 'avx512' },
  fused_matmul: { avx512: 'avx512' },
  project_topk: { packed: 'avx512' },
};

interface Child {
  isa: NativeInfo['isa'];
  simd: string;
  variants: NativeInfo['variants'];
  variantsUnavailable: NativeInfo['variantsUnavailable'];
  checks: number;
  failures: string[];
}

/** Runs the check with PLANC_ISA = cap (undefined: unset); OPENBLAS_CORETYPE is left to runtime/native.ts. */
function child(cap: string | undefined) {
  const env: NodeJS.ProcessEnv = { ...process.env, PLANC_ISA: cap };
  if (cap === undefined) delete env.PLANC_ISA;
  delete env.OPENBLAS_CORETYPE;
  const r = spawnSync(process.execPath, ['--import', 'tsx', CHECK], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    env,
    timeout: 120_000,
  });
  return {
    status: r.status,
    stderr: r.stderr,
    out: r.status === 0 ? (JSON.parse(r.stdout.trim().split('\n').pop()!) as Child) : undefined,
  };
}

it('under each PLANC_ISA level this machine supports the kernels match their references, and nativeInfo reports the cap', () => {
  const machine = nativeInfo().isa.machine;
  const levels = ISA_LEVELS.slice(0, rank(machine) + 1);
  for (const level of levels) {
    const r = child(level);
    assert.is(r.status, 0, `PLANC_ISA=${level}: the check exited with ${r.status}:\n${r.stderr.slice(-4000)}`);
    const c = r.out!;
    assert.equal(c.isa, { machine, cap: level, effective: level }, `PLANC_ISA=${level}: nativeInfo().isa`);
    assert.ok(c.simd.endsWith(`; PLANC_ISA ${level}`), `PLANC_ISA=${level}: simd names the cap: ${c.simd}`);
    assert.equal(c.failures, [], `PLANC_ISA=${level}: ${c.failures.join('\n')}`);
    assert.ok(c.checks >= 5, `PLANC_ISA=${level}: ${c.checks} checks`);
    for (const [kernel, needs] of Object.entries(VARIANT_LEVEL)) {
      const runs = c.variants[kernel]!;
      assert.ok(runs.includes('auto'), `${kernel} auto runs at ${level}`);
      for (const [variant, need] of Object.entries(needs)) {
        if (rank(need) > rank(level)) {
          assert.not.ok(
            runs.includes(variant),
            `PLANC_ISA=${level}: ${kernel} ${variant} (needs ${need}) is not listed as runnable`,
          );
          // the machine has what the variant needs, so the cap is the reason it gives
          if (rank(need) <= rank(machine) && variant !== 'avxvnni')
            assert.match(c.variantsUnavailable[kernel]![variant]!, `PLANC_ISA=${level}`);
        }
      }
    }
    if (level === 'baseline') assert.equal(c.variants.qmatmul, ['auto', 'ref'], 'baseline: qmatmul has no vector path');
  }
});

it('a cap above this machine leaves its own level; without PLANC_ISA there is no cap', () => {
  const machine = nativeInfo().isa.machine;
  const none = child(undefined);
  assert.is(none.status, 0, none.stderr);
  assert.equal(none.out!.isa, { machine, cap: null, effective: machine });
  assert.not.match(none.out!.simd, 'PLANC_ISA');
  if (machine !== 'amx') {
    const above = child('amx');
    assert.is(above.status, 0, above.stderr);
    assert.equal(above.out!.isa, { machine, cap: 'amx', effective: machine });
    assert.equal(above.out!.variants, none.out!.variants, 'the same variants as with no cap');
  }
});

it('a PLANC_ISA that is not a level: the addon does not load, and the error names the variable and the levels', () => {
  const r = child('avx3');
  assert.is.not(r.status, 0);
  assert.match(
    r.stderr,
    /PLANC_E302: PLANC_ISA=avx3 is not an instruction-set level: use one of baseline, avx2, avx512, avx512vnni, amx/,
  );
});

test.run();
