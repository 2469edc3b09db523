// ONNX's conformance suite as a test: the node-test floor, no crashes, and every supported multi-node model passing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sharedDir } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { NEEDS_NATIVE, needsShared, testIf } from './helpers/skip.ts';
import { listTests, runTest, type TestResult } from './conformance/conformance.ts';

const shared = sharedDir();
const suites = shared ? path.join(shared, 'onnx-tests') : undefined;

const noSuites = !suites || !fs.existsSync(suites) ? needsShared('onnx-tests') : undefined;
const t = testIf(test, noSuites);
const run = (suite: string): TestResult[] => listTests(path.join(suites!, suite)).map((t) => runTest(t));
const bad = (rs: TestResult[]) =>
  rs.filter((r) => r.status === 'failed' || r.status === 'crashed').map((r) => `${r.name}: ${r.reason}`);

t('node tests: at least 1,150 pass, none crash', () => {
  const rs = run('node');
  const passed = rs.filter((r) => r.status === 'passed').length;
  const crashed = rs.filter((r) => r.status === 'crashed');
  assert.equal(
    crashed.map((r) => `${r.name}: ${r.reason}`),
    [],
  );
  assert.ok(passed >= 1150, `${passed} node tests passed; failures:\n${bad(rs).join('\n')}`);
  // Tests planc supports must not regress: a failing supported test is a bug even above the floor.
  assert.equal(bad(rs), []);
});

t('with the optimization passes applied first, every supported node test still passes', () => {
  const rs = listTests(path.join(suites!, 'node')).map((t) => runTest(t, 'eval', true));
  assert.equal(bad(rs), []);
});

testIf(test, noSuites || (!nativeAvailable() && NEEDS_NATIVE))(
  'native backend: every test the CPU backend lowers passes through optimize + native run',
  () => {
    const rs = ['node', 'simple', 'pytorch-operator', 'pytorch-converted'].flatMap((s) =>
      listTests(path.join(suites!, s)).map((t) => runTest(t, 'native')),
    );
    assert.equal(bad(rs), []);
    const passed = rs.filter((r) => r.status === 'passed').length;
    console.log(`  native backend: ${passed} conformance tests pass through optimize + native run`);
    assert.ok(passed >= 600, `only ${passed} tests run natively`);
  },
);

for (const suite of ['simple', 'pytorch-operator', 'pytorch-converted']) {
  t(`${suite}: every test whose ops are supported passes`, () => {
    const rs = run(suite);
    assert.equal(bad(rs), []);
    assert.ok(
      rs.some((r) => r.status === 'passed'),
      'some tests ran',
    );
  });
}

test.run();
