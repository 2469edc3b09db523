// planc optimize --quantize: the accuracy gate's report (optimize's summary, inspect --json), auto's per-layer errors,
// and bad options named.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseQuantize } from '../cli/quantize.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';
import { tinyGateSetup } from './helpers/tiny-text-plan.ts';

const NAMES = [
  'int8 with --eval-src: the gate measured and reported by optimize and inspect --json',
  'auto: every layer measured, rungs reported, the plan holds the gate',
  'bad --quantize options are named',
];

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, NAMES);
} else {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-quantize-cli-'));
  const { model, src, ref, base } = tinyGateSetup(dir);

  test(NAMES[0]!, () => {
    const plan = path.join(dir, 'q8.plan');
    const r = planc([
      'optimize',
      model,
      '-o',
      plan,
      ...base,
      '--quantize',
      'int8',
      '--eval-src',
      src,
      '--eval-ref',
      ref,
    ]);
    assert.is(r.status, 0, r.stderr);
    assert.match(r.stdout, /quantization: int8; products /);
    assert.match(
      r.stdout,
      /vs float32 on 12 sentences of .*eval\.src: identical \d+(\.\d)?%, top-1 agreement \d+(\.\d)?%, BLEU \d+\.\d\d \(float32 \d+\.\d\d\); gate identical >= 0\.97, bleu within 0\.3: (passed|FAILED)/,
    );
    const j = JSON.parse(planc(['inspect', plan, '--json']).stdout);
    const q = j.quantization;
    assert.is(q.mode, 'int8');
    assert.is(q.evalSentences, 12);
    assert.ok(q.identicalSentences >= 0 && q.identicalSentences <= 1);
    assert.ok(q.top1Agreement > 0.5, `top-1 agreement ${q.top1Agreement}`);
    assert.type(q.bleu, 'number');
    assert.type(q.bleuFp32, 'number');
    assert.ok(q.layers.length >= 8, `${q.layers.length} layers`);
    for (const l of q.layers)
      assert.ok(['int8', 'w8'].includes(l.dtype) || (l.op === 'Gather' && l.dtype === 'int8'), JSON.stringify(l));
    assert.ok(q.weightBytes < q.weightBytesFp32, `${q.weightBytes} vs ${q.weightBytesFp32}`);
  });

  test(NAMES[1]!, () => {
    const plan = path.join(dir, 'auto.plan');
    const r = planc(['optimize', model, '-o', plan, ...base, '--quantize', 'auto', '--eval-src', src]);
    assert.is(r.status, 0, r.stderr);
    assert.match(r.stdout, /measured: \d+ layers, int8 output error median/);
    assert.match(r.stdout, /rung 1 \(int8, w8 where/);
    const q = JSON.parse(planc(['inspect', plan, '--json']).stdout).quantization;
    assert.is(q.mode, 'auto');
    assert.ok(q.gatePassed, 'auto keeps a plan that holds the gate (float32 when no rung does)');
    const measured = q.layers.filter((l: { error: number | null }) => l.error !== null);
    assert.ok(measured.length >= 8, `${measured.length} layers with a measured error`);
    for (const l of measured) assert.ok(l.error >= 0 && l.error < 1, `${l.node}: error ${l.error}`);
  });

  test(NAMES[2]!, () => {
    // the option parser directly, then two through the command line (a parse error and one found by the pass)
    const cases: [() => unknown, RegExp][] = [
      [
        () => parseQuantize('int4', undefined),
        /PLANC_E301: --quantize int4: the modes are int8, w8, int16, fp16, bf16, auto/,
      ],
      [
        () => parseQuantize('int8', 'x=fp8'),
        /PLANC_E301: --quantize-layers wants NODE=PRECISION\[,\.\.\.\] with PRECISION one of int8, w8, int16, fp16, bf16, float32/,
      ],
      [() => parseQuantize('int8', 'x=int3'), /PLANC_E301: --quantize-layers wants NODE=PRECISION/],
      [() => parseQuantize(undefined, 'x=w8'), /PLANC_E301: --quantize-layers needs --quantize MODE/],
    ];
    for (const [f, want] of cases) assert.throws(f, (e: Error) => want.test(e.message));
    assert.equal(parseQuantize('int8', 'a=w8, b:c=float32'), { mode: 'int8', layers: { a: 'w8', 'b:c': 'float32' } });
    const out = path.join(dir, 'bad.plan');
    for (const [args, want] of [
      [['--quantize', 'auto'], /PLANC_E301: --quantize auto measures the plan against float32: give --eval-src FILE/],
      [['--quantize', 'int8', '--quantize-layers', 'nope=w8'], /PLANC_E301: --quantize: no product named 'nope'/],
    ] as [string[], RegExp][]) {
      const r = planc(['optimize', model, '-o', out, ...base, ...args]);
      assert.is(r.status, 2, `${args.join(' ')}: status ${r.status}\n${r.stderr}`);
      assert.match(r.stderr, want);
      assert.not.match(r.stderr, /\n\s+at /, 'no stack trace');
    }
  });
}

test.run();
