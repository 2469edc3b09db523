// planc translate streams: each line's translation is printed while stdin stays open, lines out = lines in, -i/-o, EPIPE.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan } from '../runtime/plan.ts';
import { translate } from '../runtime/translate.ts';
import { before } from './helpers/before.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';
import { makeTinyTextPlan } from './helpers/tiny-text-plan.ts';

const NAMES = [
  'a slow writer gets each translation before it writes the next line; lines out = lines in',
  '--scores (with -i/-o files) and --n-best: the documented formats, the same translations as the Node API',
  'a reader that closes early (| head -1) ends planc quietly with status 0',
];

/** A running `planc translate`: its stdout lines as they come, stderr, and its exit. */
function startTranslate(args: string[]) {
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), 'translate', ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const out: string[] = [];
  let partial = '';
  let stderr = '';
  let waiter: (() => void) | undefined;
  child.stdout.setEncoding('utf8').on('data', (s: string) => {
    const parts = (partial + s).split('\n');
    partial = parts.pop()!;
    out.push(...parts);
    waiter?.();
  });
  child.stderr.setEncoding('utf8').on('data', (s: string) => {
    stderr += s;
  });
  const exit = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      waiter?.();
      resolve(code);
    }),
  );
  /** Resolves once `n` lines were printed; rejects after `ms` (a deadline for a broken stream, not a speed check). */
  const lines = (n: number, ms: number) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`only ${out.length} of ${n} lines after ${ms} ms; stderr: ${stderr}`)),
        ms,
      );
      const check = () => {
        if (out.length >= n) {
          clearTimeout(timer);
          waiter = undefined;
          resolve();
        } else waiter = check;
      };
      check();
    });
  return { child, out, lines, exit, stderr: () => stderr };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, NAMES);
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-cli-stream-'));
  let plan = '';
  const input = ['w5 w6 w7', '', 'w9 w10', 'w11'];
  let batchOut: string[] = [];

  before(test, async () => {
    plan = makeTinyTextPlan(tmp);
    const p = await loadPlan(plan);
    try {
      batchOut = await translate(p, input);
    } finally {
      p.close();
    }
  });

  test(NAMES[0]!, async () => {
    assert.is(batchOut.length, input.length);
    assert.is(batchOut[1], '', 'an empty line gives an empty line');
    const t = startTranslate([plan, '--quiet']);
    for (const [k, line] of input.entries()) {
      t.child.stdin.write(`${line}\n`);
      // stdin stays open: the translation must come out before the next line is written
      await t.lines(k + 1, 30_000);
      assert.is(t.out.length, k + 1, `after line ${k + 1}`);
      assert.is(t.out[k], batchOut[k], `line ${k + 1} streamed = translated in one batch`);
      await sleep(300); // a slow writer
    }
    t.child.stdin.end();
    assert.is(await t.exit, 0, t.stderr());
    assert.equal(t.out, batchOut);
    assert.is(t.stderr(), '');
  });

  test(NAMES[1]!, () => {
    const text = `${input.join('\n')}\n`;
    const inFile = path.join(tmp, 'in.txt');
    const outFile = path.join(tmp, 'out.txt');
    fs.writeFileSync(inFile, text);
    const scores = planc(['translate', plan, '--quiet', '--scores', '-i', inFile, '-o', outFile]);
    assert.is(scores.status, 0, scores.stderr);
    assert.is(scores.stdout, '', 'all of it went to the --output file');
    const s = fs.readFileSync(outFile, 'utf8').split('\n').slice(0, -1);
    assert.is(s.length, input.length);
    s.forEach((l, i) => {
      const m = / \|\|\| (-?\d+\.\d+)$/.exec(l);
      assert.ok(m, `'${l}' is TEXT ||| SCORE`);
      assert.is(l.slice(0, m!.index), batchOut[i]);
    });
    const nbest = planc(['translate', plan, '--quiet', '--n-best', '2', '--length-penalty', '0'], text);
    assert.is(nbest.status, 0, nbest.stderr);
    const rows = nbest.stdout
      .split('\n')
      .slice(0, -1)
      .map((l) => l.split(' ||| '));
    assert.ok(
      rows.every((r) => r.length === 3),
      nbest.stdout,
    );
    assert.equal([...new Set(rows.map((r) => Number(r[0])))], [0, 1, 2, 3], 'every input line by its index, in order');
    for (const i of [0, 2, 3]) {
      const mine = rows.filter((r) => Number(r[0]) === i).map((r) => Number(r[2]));
      assert.is(mine.length, 2, `line ${i}: 2 hypotheses`);
      assert.ok(mine[0]! >= mine[1]!, `line ${i}: best first (${mine})`);
    }
  });

  test(NAMES[2]!, async () => {
    const t = startTranslate([plan, '--quiet', '--batch', '1']);
    t.child.stdin.on('error', () => {}); // planc may exit before all of it is written
    t.child.stdin.end(Array.from({ length: 400 }, (_, i) => `w${2 + (i % 90)} w7`).join('\n') + '\n');
    await t.lines(1, 30_000);
    t.child.stdout.destroy(); // the reader goes away, as `| head -1` does
    assert.is(await t.exit, 0, t.stderr());
    assert.is(t.stderr(), '', 'no stack trace, no EPIPE message');
  });

  test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
}

test.run();
