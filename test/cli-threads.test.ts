// The thread pool's default size: PLANC_NUM_THREADS, else the CPU affinity mask capped by the cgroup quota; --threads.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { cgroupCpuLimit, defaultThreads } from '../runtime/threads.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-threads-'));

test('cgroup v2 cpu.max: a quota gives its CPUs rounded up; "max" or no file gives none', () => {
  const file = (text: string) => {
    const f = path.join(tmp, `cpu.max.${text.replace(/\W/g, '_')}`);
    fs.writeFileSync(f, text);
    return f;
  };
  assert.is(cgroupCpuLimit(file('200000 100000\n')), 2);
  assert.is(cgroupCpuLimit(file('150000 100000')), 2);
  assert.is(cgroupCpuLimit(file('50000 100000')), 1);
  assert.is(cgroupCpuLimit(file('max 100000\n')), undefined);
  assert.is(cgroupCpuLimit(path.join(tmp, 'none')), undefined);
});

test('PLANC_NUM_THREADS wins; a bad value is PLANC_E302 naming it; the default is within the affinity mask', () => {
  assert.is(defaultThreads({ PLANC_NUM_THREADS: '3' }), 3);
  for (const bad of ['0', '1.5', 'four', '2000'])
    assert.throws(
      () => defaultThreads({ PLANC_NUM_THREADS: bad }),
      (e: Error) => e.message.startsWith('PLANC_E302: PLANC_NUM_THREADS must be an integer in [1, 1024]'),
    );
  const d = defaultThreads({});
  assert.ok(d >= 1 && d <= os.availableParallelism(), `${d} threads`);
  const quota = cgroupCpuLimit();
  if (quota !== undefined) assert.ok(d <= quota, `${d} ≤ cgroup quota ${quota}`);
});

const hasTaskset = spawnSync('taskset', ['-c', '0', 'true']).status === 0;
testIf(test, !nativeAvailable() ? NEEDS_NATIVE : !hasTaskset && 'need taskset (util-linux)')(
  "the addon's pool honours the affinity mask (taskset -c 0: 1 thread) and PLANC_NUM_THREADS",
  () => {
    const script = `import { nativeInfo } from ${JSON.stringify(path.join(REPO_ROOT, 'runtime', 'native.ts'))}; process.stdout.write(String(nativeInfo().threads));`;
    const run = (env: NodeJS.ProcessEnv) =>
      spawnSync('taskset', ['-c', '0', process.execPath, '--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        env: { ...process.env, ...env },
      });
    const one = run({ PLANC_NUM_THREADS: '' });
    assert.is(one.status, 0, one.stderr);
    assert.is(one.stdout.trim(), '1', one.stderr);
    const three = run({ PLANC_NUM_THREADS: '3' });
    assert.is(three.stdout.trim(), '3', three.stderr);
  },
);

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
