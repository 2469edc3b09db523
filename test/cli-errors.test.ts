// Bad inputs are named (a PLANC_E code, the file or feed) without a stack trace: output folders, plans, feeds.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { REPO_ROOT } from '../compiler/paths.ts';
import { readFeeds } from '../cli/feeds.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { tensorFrom } from '../runtime/tensor.ts';
import { before } from './helpers/before.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';
import { makeTinyTextPlan } from './helpers/tiny-text-plan.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-cli-errors-'));
const noStack = (stderr: string) => assert.not.match(stderr, /\n\s+at /, `no stack trace: ${stderr}`);

/** Runs planc with stdin left open (as a terminal or a slow pipe): the error must come without waiting for input. */
function withOpenStdin(args: string[]): Promise<{ status: number | null; stderr: string }> {
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => {
    stderr += s;
  });
  // a deadline for a planc that waits for stdin to close, not a speed check
  const timer = setTimeout(() => child.kill(), 30_000);
  return new Promise((resolve) =>
    child.on('close', (status) => {
      clearTimeout(timer);
      child.stdin.destroy();
      resolve({ status, stderr });
    }),
  );
}

const expectPlanc = async (p: Promise<unknown>, code: string, ...parts: string[]) => {
  try {
    await p;
    assert.unreachable('accepted');
  } catch (e) {
    assert.instance(e, PlancError);
    assert.is((e as PlancError).code, code, (e as Error).message);
    for (const s of parts) assert.ok((e as Error).message.includes(s), `'${s}' in ${(e as Error).message}`);
  }
};

test('an output folder that does not exist is PLANC_E006 naming it, before any work', () => {
  const r = planc(['optimize', path.join(tmp, 'no-model'), '-o', path.join(tmp, 'missing-dir', 'x.plan')]);
  assert.is(r.status, 2);
  assert.match(r.stderr, /PLANC_E006: -o .*x\.plan: the folder .*missing-dir does not exist/);
  noStack(r.stderr);
});

test('translate: a missing plan is named at once, while stdin stays open', async () => {
  const missing = await withOpenStdin(['translate', path.join(tmp, 'missing.plan')]);
  assert.is(missing.status, 2, missing.stderr);
  assert.match(missing.stderr, /PLANC_E006: no such plan file: .*missing\.plan/);
  noStack(missing.stderr);
});

test('feeds from JSON: values vs dims, non-integers in integer feeds, unknown dtypes are PLANC_E405 naming the feed', () => {
  const inputs = [
    { name: 'input_ids', dtype: 'int64', dims: ['batch_size', 'encoder_sequence_length'] },
    { name: 'scale', dtype: 'float32', dims: ['1'] },
  ];
  const write = (name: string, j: unknown) => {
    const f = path.join(tmp, name);
    fs.writeFileSync(f, JSON.stringify(j));
    return f;
  };
  const fails = (file: string, ...parts: string[]) => {
    try {
      readFeeds(file, inputs);
      assert.unreachable(`${file} was accepted`);
    } catch (e) {
      assert.instance(e, PlancError);
      assert.is((e as PlancError).code, 'PLANC_E405');
      for (const s of parts) assert.ok((e as Error).message.includes(s), `'${s}' in ${(e as Error).message}`);
    }
  };
  fails(
    write('short.json', { input_ids: { dims: [1, 3], data: [1, 2] } }),
    "feed 'input_ids'",
    '2 values for dims [1,3]',
  );
  fails(write('frac.json', { input_ids: [[5.5, 2, 0]] }), "feed 'input_ids' is int64 but holds 5.5 at 0");
  fails(
    write('frac2.json', { input_ids: { dtype: 'int32', dims: [2], data: [1, 2.25] } }),
    'int32 but holds 2.25 at 1',
  );
  fails(write('dtype.json', { input_ids: { dtype: 'complex64', dims: [1], data: [1] } }), 'dtype "complex64"');
  fails(write('text.json', { input_ids: [['a']] }), 'must hold numbers');
  const ok = readFeeds(write('good.json', { input_ids: [[5, 2, 0]], scale: [0.5] }), inputs);
  assert.equal(Array.from(ok.input_ids!.data as BigInt64Array, Number), [5, 2, 0]);
  assert.equal(Array.from(ok.scale!.data as Float32Array), [0.5]);
});

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [
    'plans: an empty feed is named at the feed (Node API and planc run), a folder is not a plan',
  ]);
} else {
  let planFile = '';
  let plan: Plan;
  before(test, async () => {
    planFile = makeTinyTextPlan(tmp);
    plan = await loadPlan(planFile);
  });

  test('plans: an empty feed is named at the feed (Node API and planc run), a folder is not a plan', async () => {
    const ids = (n: number) => tensorFrom('int64', [1, n], new Array(n).fill(5));
    const mask = (n: number) => tensorFrom('int64', [1, n], new Array(n).fill(1));
    await expectPlanc(
      plan.run('encoder', { input_ids: ids(0), attention_mask: mask(0) }),
      'PLANC_E405',
      "feed 'input_ids' is empty (dims [1,0])",
    );
    const out = await plan.run('encoder', { input_ids: ids(3), attention_mask: mask(3) });
    assert.equal(out.last_hidden_state!.dims, [1, 3, 16], 'a good feed still runs');
    await expectPlanc(loadPlan(tmp), 'PLANC_E006', 'is a folder');
    const feeds = path.join(tmp, 'empty.json');
    fs.writeFileSync(feeds, JSON.stringify({ input_ids: [[]], attention_mask: [[]] }));
    const r = planc(['run', planFile, '--graph', 'encoder', '-i', feeds]);
    assert.is(r.status, 2);
    assert.match(r.stderr, /PLANC_E405: feed 'input_ids' is empty \(dims \[1,0\]\)/);
    noStack(r.stderr);
  });

  test.after(() => plan?.close());
}

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
