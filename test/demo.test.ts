// The README's first command ends in `npm run demo`: it must run, and planc's output must equal onnxruntime's.
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';

testIf(test, !nativeAvailable() && NEEDS_NATIVE)(
  'npm run demo: the synthetic model (and es-en where ../shared exists) decodes as onnxruntime does',
  () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'scripts', 'demo.ts')], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 300_000,
    });
    assert.is(r.status, 0, r.stderr);
    const same = r.stdout.match(/\(same as onnxruntime\)/g) ?? [];
    assert.is(same.length, 2, r.stdout);
    assert.not.match(r.stdout, /differs from onnxruntime|\(onnxruntime:/);
  },
);

test.run();
