// The compile driver (optimize/compile.ts): IR passes then program passes in list order with the same dump hooks, the
// program verifier catching a corrupted state, and --dump-after names checked against both lists.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { emptyQuantization, TENSOR_KIND } from '../compiler/plan/types.ts';
import { buildPlan, programState } from '../codegen/build-plan.ts';
import { PROGRAM_PASSES, printPrograms, runProgramPasses, type ProgramState } from '../codegen/program-passes.ts';
import { verifyProgramState } from '../codegen/program-verify.ts';
import { checkDumpAfter, compile } from '../optimize/compile.ts';
import type { ProgressBar, ProgressReporter } from '../passes/pass.ts';
import { PIPELINE, runPipeline } from '../passes/pipeline.ts';
import { defaultStepTokens } from '../passes/step-tokens.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { planc } from './helpers/planc-cli.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-compile-'));
const dir = path.join(tmp, 'model');
// Head dim 32: the smallest the CUDA attention template takes (select-variants runs its rules).
makeModel({
  arch: 'marian',
  d: 64,
  encoderLayers: 1,
  decoderLayers: 1,
  heads: 2,
  ffn: 128,
  vocab: 120,
  maxPos: 64,
  activation: 'relu',
  seed: 5,
  out: dir,
});
const PROFILE = { maxBatch: 2, maxSrcLen: 8, maxTgtLen: 8 };
const GRAPHS = ['encoder', 'decoder', 'decoder_with_past'];

/** A progress reporter that records what the library reports (and never writes anywhere). */
class Recorder implements ProgressReporter {
  readonly steps: string[] = [];
  start(step: string): void {
    this.steps.push(step);
  }
  finish(): void {}
  bar(label: string): ProgressBar {
    this.steps.push(`bar ${label}`);
    return { tick() {}, done() {} };
  }
}

/** The state after the program passes up to `last` (included) for a target. */
function stateAfter(last: string, target: 'cpu' | 'cuda' = 'cpu'): ProgramState {
  const s = programState(runPipeline(importSeq2SeqDir(dir), { topk: 4 }), {
    target,
    ...PROFILE,
    maxDims: { decoder_sequence_length: 1 },
  });
  for (const pass of PROGRAM_PASSES) {
    if (pass.target && pass.target !== target) continue;
    pass.run(s);
    if (pass.name === last) break;
  }
  return s;
}

test('compile: where the passes fail with the default multi-token step, the plan gets one token, explained', async () => {
  const why: string[] = [];
  const seen: (number | undefined)[] = [];
  const built = await compile(
    importSeq2SeqDir(dir),
    {
      target: 'cpu',
      ...PROFILE,
      topk: 4,
      quantize: { mode: 'int8' },
      explain: (pass, _node, w) => why.push(`${pass}: ${w}`),
    },
    {
      // a quantize service that cannot take multi-token steps: it fails the first attempt only
      quantize: async (_m, request, pipe) => {
        seen.push(pipe.stepTokens);
        if ((pipe.stepTokens ?? 1) > 1) throw new PlancError('PLANC_E404', 'no multi-token steps here (test)');
        return { options: { precision: 'int8', layers: {} }, header: emptyQuantization(request.mode) };
      },
    },
  );
  assert.equal(seen, [defaultStepTokens('cpu'), undefined]);
  assert.is(built.header.decoding.stepTokens ?? 1, 1);
  assert.equal(
    why.filter((w) => w.startsWith('step-tokens')),
    [
      `step-tokens: the default of ${defaultStepTokens('cpu')} step tokens is not taken: PLANC_E404: no multi-token steps here (test)`,
    ],
  );
  // asked for (--step-tokens N), the same failure is the user's error
  let failed: unknown;
  try {
    await compile(
      importSeq2SeqDir(dir),
      { target: 'cpu', ...PROFILE, topk: 4, stepTokens: 2, quantize: { mode: 'int8' } },
      {
        quantize: async () => {
          throw new PlancError('PLANC_E404', 'no multi-token steps here (test)');
        },
      },
    );
  } catch (e) {
    failed = e;
  }
  assert.ok(failed instanceof PlancError && failed.code === 'PLANC_E404', String(failed));
});

test("compile: IR passes then program passes in list order, each dumped; dump after lower lists every graph's kernels", async () => {
  const dumps: { pass: string; text: string; what: string }[] = [];
  const progress = new Recorder();
  const built = await compile(
    importSeq2SeqDir(dir),
    {
      target: 'cpu',
      ...PROFILE,
      topk: 4,
      dumpAfter: 'all',
      onDump: (pass, text, what) => dumps.push({ pass, text, what }),
    },
    { progress },
  );
  const program = PROGRAM_PASSES.filter((p) => p.target !== 'cuda').map((p) => p.name);
  assert.equal(
    dumps.map((d) => d.pass),
    [...PIPELINE.map((p) => p.name).filter((n) => dumps.some((d) => d.pass === n)), ...program],
  );
  assert.equal(
    dumps.filter((d) => d.what === 'programs').map((d) => d.pass),
    program,
  );
  assert.ok(dumps.filter((d) => d.what === 'IR').length >= 5, 'the IR passes were dumped too');
  const afterLower = dumps.find((d) => d.pass === 'lower')!.text;
  for (const [i, g] of GRAPHS.entries()) {
    const p = built.header.programs[i]!;
    assert.is(p.graph, g);
    const section = afterLower.split(/\n\n(?=program )/).find((x) => x.startsWith(`program ${g}:`));
    assert.ok(section, `the dump after lower has program ${g}`);
    const calls = section!.split('\n').filter((l) => /^ {2}k\d+ /.test(l));
    assert.is(calls.length, p.kernels.length, `${g}: one line per kernel call`);
    assert.match(calls[0]!, new RegExp(`^  k0 ${p.kernels[0]!.name}\\(`));
  }
  // Offsets are placed by plan-memory: before it arena tensors show their slot size only, after it their offsets.
  const offsets = (text: string) => [...text.matchAll(/@(\d+)\+\d+/g)].map((m) => Number(m[1]));
  assert.equal(offsets(afterLower), []);
  assert.match(afterLower, / slot \d+\n/);
  assert.ok(offsets(dumps.find((d) => d.pass === 'plan-memory')!.text).some((o) => o > 0));
  // Progress went to the reporter, in pass order: IR passes, lowering, memory, packing.
  const at = (step: string) => progress.steps.indexOf(step);
  assert.ok(at('verifying') === 0 && at('pass fuse-layernorm') > 0, progress.steps.join(', '));
  assert.ok(
    at('pass fuse-project-topk') < at('lowering encoder') &&
      at('lowering decoder_with_past') < at('planning memory of encoder') &&
      at('planning memory of decoder_with_past') < at('packing weights'),
  );
  assert.ok(built.firstStepOnly);
  assert.equal(built.header.tuning, [], 'cpu plans record no launch choice yet');
  // The driver's plan is the library's: the same bytes as runPipeline + buildPlan with the same options (the driver's
  // default step tokens included).
  const stepTokens = defaultStepTokens('cpu');
  assert.is(built.header.decoding.stepTokens, stepTokens);
  const direct = buildPlan(runPipeline(importSeq2SeqDir(dir), { topk: 4, stepTokens, stepTokensDefault: true }), {
    target: 'cpu',
    ...PROFILE,
    maxDims: { decoder_sequence_length: 1 },
    options: { profile: JSON.stringify({ ...PROFILE, maxDims: { decoder_sequence_length: 1 } }) },
  });
  direct.header.created = built.header.created;
  assert.equal(
    Buffer.from(encodePlan(direct.header, direct.blob)).equals(Buffer.from(encodePlan(built.header, built.blob))),
    true,
  );
});

test('select-variants (cuda): every kernel call gets its launch variants, recorded as tuning decisions and in the dump', () => {
  const s = stateAfter('select-variants', 'cuda');
  const calls = s.programs.reduce((n, p) => n + p.kernels.length, 0);
  assert.is(s.variants!.length, s.programs.length);
  s.programs.forEach((p, i) => assert.is(s.variants![i]!.length, p.kernels.length));
  assert.is(s.tuning.length, calls);
  assert.match(s.tuning[0]!.key, /^encoder:0:\w+$/);
  assert.match(s.tuning.find((t) => t.key.endsWith(':fused_matmul'))!.choice, /planc::gemv<.*\| planc::gemm_tc</);
  assert.match(printPrograms(s), /\n {6}launch planc::\w+</);
  // cpu: nothing chosen, nothing recorded.
  const c = stateAfter('select-variants');
  assert.is(c.variants, undefined);
  assert.equal(c.tuning, []);
});

const internal = (pass: string, graph: string, what: RegExp) => (e: unknown) =>
  e instanceof PlancError &&
  e.code === 'PLANC_E901' &&
  e.message.includes(`after program pass ${pass}, program ${graph}`) &&
  what.test(e.message);

test('the program verifier: a corrupted state is an internal error naming the pass and the program', () => {
  const s = stateAfter('plan-memory');
  verifyProgramState(s, 'plan-memory');
  const dec = s.programs[1]!;
  const k = dec.kernels[2]!;
  const saved = k.inputs[0]!;
  k.inputs[0] = dec.tensors.length + 5;
  assert.throws(
    () => verifyProgramState(s, 'plan-memory'),
    internal('plan-memory', 'decoder', /kernel 2 .* refers to tensor \d+ of \d+/),
  );
  k.inputs[0] = saved;
  const arena = dec.tensors.findIndex((t) => t.kind === TENSOR_KIND.ARENA);
  dec.tensors[arena]!.offset = dec.arenaBytes;
  assert.throws(() => verifyProgramState(s, 'plan-memory'), internal('plan-memory', 'decoder', /outside the arena/));
  dec.tensors[arena]!.offset = 0;
  const w = dec.tensors.find((t) => t.kind === TENSOR_KIND.WEIGHT)!;
  w.ref += s.weights.list.length;
  assert.throws(
    () => verifyProgramState(s, 'plan-memory'),
    internal('plan-memory', 'decoder', /refers to weight \d+ of \d+/),
  );
  w.ref -= s.weights.list.length;
  verifyProgramState(s, 'plan-memory');
  // Kernels as the schema declares them: a known name, and operand/argument counts in its range.
  const enc = s.programs[0]!.kernels[0]!;
  const name = enc.name;
  enc.name = 'no_such_kernel';
  assert.throws(
    () => verifyProgramState(s, 'lower'),
    internal('lower', 'encoder', /kernel 0 \(no_such_kernel, .*\) is not a kernel of compiler\/kernel-schema.ts/),
  );
  enc.name = name;
  const mm = s.programs[0]!.kernels.findIndex((x) => x.name === 'fused_matmul');
  s.programs[0]!.kernels[mm]!.iargs.push(0, 0);
  assert.throws(
    () => verifyProgramState(s, 'lower'),
    internal(
      'lower',
      'encoder',
      new RegExp(`kernel ${mm} \\(fused_matmul, .*\\) has 3 iargs, the schema says 1\\.\\.1`),
    ),
  );
  s.programs[0]!.kernels[mm]!.iargs.splice(1);
  verifyProgramState(s, 'lower');
});

test('runProgramPasses verifies after every pass: a pass that breaks the programs is caught right after it', () => {
  const s = programState(runPipeline(importSeq2SeqDir(dir), { topk: 4 }), {
    target: 'cpu',
    ...PROFILE,
    maxDims: { decoder_sequence_length: 1 },
  });
  // The hook runs before plan-memory: as if plan-memory left an alias pointing forward.
  const breakAlias = (pass: string) => {
    if (pass !== 'plan-memory') return;
    const p = s.programs[2]!;
    p.tensors.push({ ...p.tensors[0]!, kind: TENSOR_KIND.ALIAS, ref: p.tensors.length + 1 });
  };
  assert.throws(
    () => runProgramPasses(s, { onPass: breakAlias }),
    internal('plan-memory', 'decoder_with_past', /aliases tensor \d+, which does not come before it/),
  );
});

test('--dump-after: an unknown name lists both lists; planc optimize --dump-after lower prints the programs', () => {
  assert.throws(
    () => checkDumpAfter('nope'),
    (e: unknown) =>
      e instanceof PlancError &&
      e.code === 'PLANC_E302' &&
      PIPELINE.every((p) => e.message.includes(p.name)) &&
      PROGRAM_PASSES.every((p) => e.message.includes(p.name)) &&
      /IR passes: .*; program passes: /.test(e.message),
  );
  for (const name of ['all', 'lower', 'pack', PIPELINE[0]!.name]) checkDumpAfter(name);
  const bad = planc(['optimize', dir, '-o', path.join(tmp, 'x.plan'), '--dump-after', 'nope']);
  assert.is(bad.status, 2);
  assert.match(
    bad.stderr,
    /--dump-after nope: no such pass \(IR passes: .*fuse-layernorm.*; program passes: lower, select-variants, plan-memory, build-cuda, pack; or all\)/,
  );
  const r = planc([
    'optimize',
    dir,
    '-o',
    path.join(tmp, 'm.plan'),
    '--dump-after',
    'lower',
    '--quiet',
    '--max-batch',
    '2',
  ]);
  assert.is(r.status, 0, r.stderr);
  assert.match(r.stderr, /=== programs after lower ===\nprogram encoder: \d+ kernels/);
  assert.match(r.stderr, /\nprogram decoder_with_past: \d+ kernels/);
  assert.not.match(r.stderr, /=== IR after/);
});

test.run();
