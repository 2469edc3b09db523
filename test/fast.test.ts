// planc optimize --fast: one gated search over quantization rungs × vocabulary points; the plan records every measured
// combination and is the fastest that holds the gate. Its refusals (no --eval-src, --quantize / --vocab with it).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { readPlanFile } from '../compiler/plan/format.ts';
import { importModel } from '../model/onnx/import-model.ts';
import { compile } from '../optimize/compile.ts';
import { FAST_RUNGS, wilsonLower } from '../optimize/fast.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';
import { ZOO, zooReference } from './helpers/zoo.ts';
import { tinyGateSetup, tinyWords } from './helpers/tiny-text-plan.ts';

const NAMES = [
  '--fast with --calibrate: every rung and vocabulary point measured is in the curve, the choice holds the gate and is the fastest that does',
  '--fast without --calibrate: only the full projection is measured, and the output says why',
  '--fast is refused without --eval-src, with --quantize or --vocab, for cuda and with --no-fuse',
];
const ZOO_NAME =
  'zoo marian (a Hugging Face export): --fast over the default clusters grid, calibrated on other sentences than the gate';
const zooDir = ZOO ? path.join(ZOO, 'marian') : '';
const haveZoo = !!zooDir && fs.existsSync(path.join(zooDir, 'reference.json'));

interface Point {
  rung: string;
  clusters: number;
  topK: number;
  shortlist: boolean;
  identicalSentences: number;
  bleu: number | null;
  gatePassed: boolean;
  seconds: number | null;
  speedup: number | null;
  chosen: boolean;
}

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [...NAMES, ZOO_NAME]);
} else {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-fast-'));
  // 80 sentences: enough for the search's gate (its lower bound) to be held by a combination at 100% identical
  const { model, src, ref, base } = tinyGateSetup(dir, 80);
  const cal = path.join(dir, 'cal.src');
  fs.writeFileSync(cal, `${Array.from({ length: 40 }, (_, i) => tinyWords(i + 100, 3 + (i % 6))).join('\n')}\n`);

  /** The plan's fast record (inspect --json) after checking what every search must hold. */
  const checkFast = (plan: string, stdout: string, sentences = 80, batch = 4) => {
    const j = JSON.parse(planc(['inspect', plan, '--json']).stdout);
    const f = j.fast;
    const curve = f.curve as Point[];
    assert.is(f.evalSentences, sentences);
    assert.match(
      f.gate,
      /^identical >= 0.97, bleu within 0.3, identical at the lower end of a one-sided 90% Wilson interval/,
    );
    // the reference itself, then every rung on the full projection (int8-mixed unless it is int8's layers again)
    assert.equal(curve[0], { ...curve[0]!, rung: 'float32', clusters: 0, identicalSentences: 1 });
    const full = curve.filter((p) => p.clusters === 0 && !p.shortlist).map((p) => p.rung);
    for (const r of FAST_RUNGS)
      assert.ok(
        full.includes(r.id) || (r.id === 'int8-mixed' && /int8-mixed: the same layers/.test(f.notes)),
        `rung ${r.id} on the full projection: ${full}`,
      );
    for (const p of curve) {
      assert.is(
        p.gatePassed,
        p.rung === 'float32' && p.clusters === 0 && !p.shortlist
          ? true
          : wilsonLower(p.identicalSentences, sentences) >= 0.97 && p.bleu! >= f.bleuFp32 - 0.3 - 1e-9,
        `the gate of ${JSON.stringify(p)}`,
      );
      assert.is(p.seconds !== null, p.gatePassed, `timed exactly when the gate holds: ${JSON.stringify(p)}`);
    }
    const chosen = curve.filter((p) => p.chosen);
    assert.is(chosen.length, 1);
    const c = chosen[0]!;
    assert.ok(c.gatePassed, 'the choice holds the gate');
    for (const p of curve) if (p.gatePassed) assert.ok(c.seconds! <= p.seconds!, `${JSON.stringify(p)} is faster`);
    // what the plan is, is what was chosen
    const v = readPlanFile(plan).header.vocab;
    if (c.clusters) assert.equal([v?.method, v?.clusters, v?.topK], ['clusters', c.clusters, c.topK]);
    else if (c.shortlist) assert.is(v?.method, 'shortlist');
    else assert.is(v, undefined);
    if (c.rung === 'float32') assert.is(j.quantization, undefined);
    else assert.is(j.quantization.mode, `fast: ${c.rung}`);
    // optimize's summary: the choice with what was traded, and a line per measured combination
    assert.match(
      stdout,
      new RegExp(
        `fast: ${curve.length} combinations measured against the float32 plan on ${sentences} sentences of .*\\.src, timed on ${sentences} at batch ${batch}`,
      ),
    );
    assert.match(
      stdout,
      new RegExp(
        `chosen: .*: \\d+\\.\\d% identical to the float32 plan on ${sentences} sentences .*BLEU [+−]\\d+\\.\\d\\d .*× the float32 plan's speed at batch ${batch}`,
      ),
    );
    const rows = stdout
      .split('\n')
      .filter((l) => /^ {2}[* ] \S+ \+ (full projection|shortlist|clusters R\d+ K\d+) +identical/.test(l));
    assert.is(rows.length, curve.length, rows.join('\n'));
    // and the report's data carries the curve
    const report = JSON.parse(planc(['report', plan, '--json', '--no-profile']).stdout);
    assert.is(report.fast.curve.length, curve.length);
    return { f, curve, c };
  };

  test(NAMES[0]!, () => {
    const plan = path.join(dir, 'fast.plan');
    // a Marian text shortlist (target source probability) over the tiny model's words: one more vocabulary point
    const lex = path.join(dir, 'lex.txt');
    const pairs = Array.from({ length: 99 }, (_, i) =>
      Array.from({ length: 20 }, (_, j) => `w${2 + ((i * 7 + j * 5) % 99)} w${i + 2} ${(1 / (j + 1)).toFixed(3)}`),
    );
    fs.writeFileSync(lex, `${pairs.flat().join('\n')}\n`);
    const gate = ['--eval-src', src, '--eval-ref', ref, '--calibrate', cal, '--vocab', `shortlist=${lex}`];
    const r = planc(['optimize', model, '-o', plan, ...base, '--fast', ...gate]);
    assert.is(r.status, 0, r.stderr);
    const { f, curve } = checkFast(plan, r.stdout);
    assert.match(f.calibrationFile, /cal\.src$/);
    // the grid was screened on float32 products; only points holding the gate there were measured on the rungs
    const screen = f.screen as { clusters: number; topK: number; gatePassed: boolean }[];
    assert.ok(screen.length > 0, 'the clusters grid was screened');
    for (const p of curve.filter((x) => x.clusters))
      assert.ok(
        screen.some((x) => x.clusters === p.clusters && x.topK === p.topK && x.gatePassed),
        `R${p.clusters} K${p.topK} held the screen`,
      );
    assert.match(
      r.stdout,
      /clusters screened on float32 products \(emulated, batch-1 masks; identical, gate\): R\d+ K\d+ /,
    );
    // the shortlist was measured on every rung that held on the full projection, as was a clusters point
    const listed = new Set(curve.filter((p) => p.shortlist).map((p) => p.rung));
    for (const p of curve) if (p.clusters === 0 && !p.shortlist && p.gatePassed) assert.ok(listed.has(p.rung), p.rung);
    assert.ok(/ \+ shortlist +identical/.test(r.stdout), 'shortlist rows printed');
    const clustered = new Set(curve.filter((p) => p.clusters).map((p) => p.rung));
    for (const p of curve)
      if (p.clusters === 0 && p.gatePassed) assert.ok(clustered.has(p.rung), `${p.rung} with clusters`);
    // the plan translates
    const t = planc(['translate', plan], 'w5 w7 w9\n');
    assert.is(t.status, 0, t.stderr);
  });

  test('--fast gate: the identical share at its sample lower bound (one-sided 90% Wilson)', () => {
    assert.ok(wilsonLower(0.978, 500) < 0.97, '97.8% of 500 does not hold 97%');
    assert.ok(wilsonLower(0.984, 500) >= 0.97, '98.4% of 500 does');
    assert.ok(wilsonLower(1, 53) < 0.97 && wilsonLower(1, 54) >= 0.97, '100% needs 54 sentences');
    assert.ok(wilsonLower(79 / 80, 80) < 0.97 && wilsonLower(1, 80) >= 0.97, 'the tiny text: only 80 of 80 holds');
  });

  test(NAMES[1]!, () => {
    const plan = path.join(dir, 'fast-full.plan');
    const r = planc(['optimize', model, '-o', plan, ...base, '--fast', '--eval-src', src, '--eval-ref', ref]);
    assert.is(r.status, 0, r.stderr);
    const { f, curve } = checkFast(plan, r.stdout);
    assert.ok(
      curve.every((p) => p.clusters === 0),
      'no vocabulary point without calibration text',
    );
    assert.is(f.calibrationFile, null);
    assert.equal(f.screen, []);
    assert.match(r.stdout, /no calibration text \(fast\.calibrate\): no clusters point was measured/);
  });

  test(NAMES[2]!, async () => {
    const out = path.join(dir, 'bad.plan');
    for (const [args, want] of [
      [
        ['--fast'],
        /PLANC_E301: --fast measures every candidate plan against float32 on held-out text: give --eval-src FILE/,
      ],
      [['--fast', '--calibrate', cal], /PLANC_E301: --fast .*give --eval-src FILE/],
      [
        ['--fast', '--eval-src', src, '--quantize', 'int16'],
        /PLANC_E301: --fast chooses the quantization and the vocabulary itself: drop --quantize/,
      ],
      [
        ['--fast', '--eval-src', src, '--calibrate', cal, '--vocab', 'auto'],
        /PLANC_E301: --fast chooses the quantization and the vocabulary itself: drop --vocab/,
      ],
      [['--fast', '--eval-src', src, '--target', 'cuda'], /PLANC_E301: --fast measures cpu plans/],
      [['--fast', '--eval-src', src, '--no-fuse'], /PLANC_E301: --fast quantizes planc\.FusedMatMul/],
    ] as [string[], RegExp][]) {
      const r = planc(['optimize', model, '-o', out, ...base, ...args]);
      assert.is(r.status, 2, `${args.join(' ')}: status ${r.status}\n${r.stderr}`);
      assert.match(r.stderr, want);
      assert.not.match(r.stderr, /\n\s+at /, 'no stack trace');
    }
    assert.not.ok(fs.existsSync(out));
    // the library names its option fields, not flags
    const m = importModel(model);
    const opts = { target: 'cpu' as const, maxBatch: 4, maxSrcLen: 16, maxTgtLen: 8, fast: { evalSrc: src } };
    for (const [extra, want] of [
      [
        { quantize: { mode: 'int8' } },
        /PLANC_E302: fast chooses the quantization and the vocabulary itself: it excludes quantize/,
      ],
      [{ fast: { evalSrc: '' } }, /PLANC_E302: the fast search measures plans on text: it needs evalSrc/],
    ] as [object, RegExp][]) {
      let err: Error | undefined;
      try {
        await compile(m, { ...opts, ...extra });
      } catch (e) {
        err = e as Error;
      }
      assert.ok(err && want.test(err.message), err?.message);
      assert.not.match(err!.message, /--\w/);
    }
  });

  testIf(test, !haveZoo && needsShared('models/zoo/marian'))(ZOO_NAME, () => {
    const text = zooReference('marian').src_text;
    const src = path.join(dir, 'zoo-eval.src'),
      ref = path.join(dir, 'zoo-eval.ref'),
      cal = path.join(dir, 'zoo-cal.src');
    fs.writeFileSync(src, `${text.slice(8).join('\n')}\n`);
    fs.writeFileSync(ref, `${text.slice(8).join('\n')}\n`);
    fs.writeFileSync(cal, `${text.slice(0, 8).join('\n')}\n`);
    const plan = path.join(dir, 'zoo-fast.plan');
    const gate = ['--eval-src', src, '--eval-ref', ref, '--calibrate', cal];
    const r = planc(['optimize', zooDir, '-o', plan, '--max-batch', '8', '--max-tgt-len', '32', '--fast', ...gate]);
    assert.is(r.status, 0, r.stderr);
    const { f } = checkFast(plan, r.stdout, 12, 8);
    assert.is(f.screen.length, 12, 'the default grid: R 64, 128, 256 × K 4, 8, 16, 32 (R clamped to the states)');
    // 12 evaluation sentences are too few for any combination but float32 to hold the gate at its lower bound
    assert.match(f.notes, /the evaluation text has 12 sentences: too few/);
  });
}

test.run();
