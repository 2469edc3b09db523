// The fuzzer (scripts/fuzz/): a handful of cases per target run and are classified; a known named-error case and a
// known ok case are classified as such; the classifier's rules on made-up results (crash, hang, internal, uncaught,
// silent). Each planc run is a child process through bin/planc.js.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { buildBase } from '../scripts/fuzz/base.ts';
import { fuzz } from '../scripts/fuzz/main.ts';
import { classify, runCase, type Case } from '../scripts/fuzz/runner.ts';
import { TARGETS } from '../scripts/fuzz/targets.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';

const PLANC = path.join(REPO_ROOT, 'bin', 'planc.js');
const res = (o: Partial<Parameters<typeof classify>[1]>) => ({
  status: 0,
  signal: null,
  timedOut: false,
  stdout: '',
  stderr: '',
  ...o,
});

test('classify: crash, hang, internal, uncaught, named, silent, ok', () => {
  const step = { args: [] };
  assert.is(classify(step, res({ status: null, signal: 'SIGSEGV' }))[0], 'crash');
  assert.is(classify(step, res({ status: null, timedOut: true, signal: 'SIGKILL' }))[0], 'hang');
  assert.is(
    classify(
      step,
      res({ status: 2, stderr: 'planc run: internal error: x is undefined (run with --debug for the stack)\n' }),
    )[0],
    'internal',
  );
  assert.is(
    classify(step, res({ status: 2, stderr: 'planc translate: line 3: Cannot read properties of undefined\n' }))[0],
    'internal',
  );
  assert.is(classify(step, res({ status: 1, stderr: 'TypeError: boom\n    at x (y.js:1:1)\n' }))[0], 'uncaught');
  assert.is(classify(step, res({ status: 2, stderr: 'planc run: PLANC_E405: bad feed\n' }))[0], 'named');
  assert.is(classify({ args: [], check: { mustFail: 'id -1' } }, res({}))[0], 'silent');
  assert.is(classify({ args: [], check: { lines: 2 } }, res({ stdout: '1 2\n' }))[0], 'silent');
  assert.is(classify({ args: [], check: { outputs: ['y'] } }, res({ stdout: '' }))[0], 'silent');
  assert.is(classify({ args: [], check: { outputs: ['y'] } }, res({ stdout: '{"y":{"data":[1,null]}}' }))[0], 'silent');
  assert.is(classify({ args: [], check: { outputs: ['y'] } }, res({ stdout: '{"y":{"data":[1,2]}}' }))[0], 'ok');
  assert.is(classify({ args: [], check: { lines: 2 } }, res({ stdout: '1 2\n\n' }))[0], 'ok');
});

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [
    'a known named-error case and a known ok case',
    'two cases per target run and are classified',
  ]);
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-fuzz-tool-'));

  test('a known named-error case and a known ok case', () => {
    const base = buildBase(path.join(tmp, 'base'), PLANC);
    const mk = (feeds: string): Case => ({
      target: 'feeds',
      index: 0,
      desc: 'fixed',
      files: { 'base.plan': { link: base.plan }, 'feeds.json': feeds },
      steps: [
        {
          args: ['run', 'base.plan', '--graph', 'encoder', '--inputs', 'feeds.json', '--json'],
          check: { outputs: base.outputs.encoder! },
        },
      ],
    });
    const named = runCase(mk('{"input_ids": [[3, 4]], "attention_mask": "x"}'), path.join(tmp, 'work'), {
      planc: PLANC,
      timeout: 60,
    });
    assert.is(named.cls, 'named', named.note);
    assert.match(named.steps[0]!.stderr, /PLANC_E405/);
    const ok = runCase(mk(JSON.stringify(base.feeds.encoder)), path.join(tmp, 'work'), { planc: PLANC, timeout: 60 });
    assert.is(ok.cls, 'ok', `${ok.note} ${ok.steps[0]!.stderr}`);
    // a token id outside the vocabulary must be refused: accepted, it would be wrong-but-silent
    const bad = mk('{"input_ids": [[3, 4, 50]], "attention_mask": [[1, 1, 1]]}');
    bad.steps[0]!.check!.mustFail = 'id 50 of 50';
    assert.is(runCase(bad, path.join(tmp, 'work'), { planc: PLANC, timeout: 60 }).cls, 'named');
  });

  test('two cases per target run and are classified', () => {
    const out = path.join(tmp, 'run');
    const r = fuzz(
      { targets: [...TARGETS], n: 2, seed: 7, out, timeout: 120, record: false, quiet: true, failOn: [] },
      () => {},
    );
    for (const t of TARGETS)
      assert.is(
        Object.values(r.counts[t]).reduce((a, b) => a + b, 0),
        2,
        t,
      );
    const lines = fs.readFileSync(path.join(out, 'cases.jsonl'), 'utf8').trim().split('\n');
    assert.is(lines.length, 10);
    for (const f of r.failures) assert.ok(fs.existsSync(path.join(f.repro, 'repro.sh')), f.repro);
    for (const c of ['crash', 'hang', 'uncaught'] as const)
      assert.is(
        TARGETS.reduce((s, t) => s + r.counts[t][c], 0),
        0,
        c,
      );
  });

  test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
}

test.run();
