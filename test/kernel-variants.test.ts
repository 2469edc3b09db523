// Kernel variants as data: the schema's variants and their generated codes, select-variants on cpu (auto, a provably
// equal fixed variant, forced ones by kernel or node), every variant this machine runs giving auto's outputs, the
// refusals (options, plan validation, the native loader), the CUDA target facts the launch rules read, and the CUDA
// launch variants the schema declares (every rule's instances named by them, recorded per call, checked by the verifier).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { inferModel } from '../model/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import {
  CUDA_DEFAULT_VARIANTS,
  CUDA_GEMM_VARIANTS,
  cudaVariant,
  cudaVariants,
  GEMM_AUTO,
  GEMM_VARIANTS,
  KERNELS,
  QGEMM_VARIANTS,
  kernelVariants,
  schemaProblems,
  variantCode,
  type KernelSpec,
} from '../compiler/kernel-schema.ts';
import { nativeArgsHeader } from '../compiler/kernel-schema-headers.ts';
import { importOnnxFile, importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { decodePlan, encodePlan } from '../compiler/plan/format.ts';
import type { PlanHeader } from '../compiler/plan/types.ts';
import { buildPlan, programState, type BuildOptions } from '../codegen/build-plan.ts';
import { printPrograms, PROGRAM_PASSES, tuningVariants, type ProgramState } from '../codegen/program-passes.ts';
import { verifyProgramState } from '../codegen/program-verify.ts';
import { CUDA_RULES, selectCuda, type CudaRule } from '../codegen/cuda/rules.ts';
import { CUDA_ARCHS, cudaArch, cudaTuningArch } from '../codegen/target.ts';
import { formatPlanReport, planReport } from '../cli/inspect.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { ISA_LEVELS, nativeAvailable, nativeInfo, type IsaLevel } from '../runtime/native.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { FUSE_MATMUL_EPILOGUE } from '../passes/fuse-matmul-epilogue.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { buildModel, floatInit } from './helpers/onnx-build.ts';
import { randomFeeds } from './helpers/random-feeds.ts';
import { NEEDS_NATIVE, needsShared, skipPart, testIf } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-variants-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.3 + seed) * 0.5);

/**
 * One graph with every matrix-product kernel: h = relu(x·W1 + b1) (fused_matmul, rows batch·len: run-time), g =
 * Gemm(u, W2ᵀ) (gemm), z·W1 with z [2, 24] (matmul, 2 fixed rows), q·k batched [1, 2, 24] × [1, 24, 5] (matmul,
 * 2 fixed rows over a batch), and r·W1 with r [3, 24] (matmul, 3 fixed rows: machine-dependent under auto).
 */
function productsModel(): Model {
  const file = path.join(tmp, 'products.onnx');
  const mm = (a: string, b: string, out: string) => ({ op: 'MatMul', inputs: [a, b], outputs: [out], name: out });
  fs.writeFileSync(
    file,
    buildModel({
      opset: 18,
      inputs: [
        ['x', 'float32', ['batch', 'len', 24]],
        ['u', 'float32', ['batch', 40]],
        ['z', 'float32', [2, 24]],
        ['q', 'float32', [1, 2, 24]],
        ['k', 'float32', [1, 24, 5]],
        ['r', 'float32', [3, 24]],
      ],
      outputs: [
        ['h', 'float32', ['batch', 'len', 40]],
        ['g', 'float32', ['batch', 40]],
        ['zw', 'float32', [2, 40]],
        ['qk', 'float32', [1, 2, 5]],
        ['rw', 'float32', [3, 40]],
      ],
      initializers: [
        floatInit('w1', [24, 40], vals(960, 1)),
        floatInit('b1', [40], vals(40, 2)),
        floatInit('w2', [40, 40], vals(1600, 3)),
      ],
      nodes: [
        mm('x', 'w1', 'xw'),
        { op: 'Add', inputs: ['xw', 'b1'], outputs: ['xb'], name: 'xb' },
        { op: 'Relu', inputs: ['xb'], outputs: ['h'], name: 'h' },
        { op: 'Gemm', inputs: ['u', 'w2'], outputs: ['g'], name: 'gemm', attrs: [{ name: 'transB', type: 2, i: 1 }] },
        mm('z', 'w1', 'zw'),
        mm('q', 'k', 'qk'),
        mm('r', 'w1', 'rw'),
      ],
    }),
  );
  const m = importOnnxFile(file);
  inferModel(m);
  const f = FUSE_MATMUL_EPILOGUE.run(m, {});
  inferModel(f);
  return f;
}

const model = productsModel();
const PROFILE = { target: 'cpu', maxBatch: 2, maxSrcLen: 8, maxTgtLen: 8 } as const;

/** The state after select-variants. */
function selected(opts: Partial<BuildOptions> = {}): ProgramState {
  const s = programState(model, { ...PROFILE, ...opts });
  for (const pass of PROGRAM_PASSES.slice(0, PROGRAM_PASSES.findIndex((p) => p.name === 'select-variants') + 1))
    pass.run(s);
  return s;
}

/** The variant of each kernel call with variants, by its IR node. */
const chosen = (kernels: { name: string; node: string; variant?: string }[]) =>
  Object.fromEntries(
    kernels.filter((k) => kernelVariants(k.name).length).map((k) => [k.node, `${k.name} ${k.variant}`]),
  );

test('schema: the float32 products share GEMM_VARIANTS, the quantized ones QGEMM_VARIANTS (auto first), others have none; codes are positions', () => {
  assert.equal(schemaProblems(), []);
  const withVariants = Object.entries(KERNELS as Record<string, KernelSpec>)
    .filter(([, s]) => s.variants?.length)
    .map(([k]) => k);
  assert.equal(withVariants, ['matmul', 'gemm', 'fused_matmul', 'qmatmul', 'qproject_topk', 'project_topk']);
  assert.is(kernelVariants('qmatmul'), QGEMM_VARIANTS);
  assert.equal(
    kernelVariants('project_topk').map((v) => v.name),
    ['auto', 'packed'],
  );
  assert.is(kernelVariants('qproject_topk'), QGEMM_VARIANTS);
  assert.equal(
    QGEMM_VARIANTS.map((v) => v.name),
    ['auto', 'ref', 'avx2', 'avx512bw', 'avxvnni', 'avx512vnni', 'amx'],
  );
  assert.equal(
    GEMM_VARIANTS.map((v) => v.name),
    ['auto', 'gemv', 'blocked', 'blas', 'avx512'],
  );
  assert.equal(
    GEMM_VARIANTS.filter((v) => 'needs' in v).map((v) => v.name),
    ['blas', 'avx512'],
  );
  assert.is(variantCode('matmul', 'avx512'), 4);
  assert.is(variantCode('fused_matmul', ''), 0);
  assert.is(variantCode('add', ''), 0);
  assert.is(variantCode('add', 'auto'), undefined);
  assert.is(variantCode('gemm', 'fast'), undefined);
  // One source of truth: the header's codes and auto bounds are the schema's.
  const h = nativeArgsHeader();
  assert.match(
    h,
    /namespace gemm_args \{[^}]*constexpr int kVariantBlocked = 2;[^}]*kVariantNames\[\] = \{"auto", "gemv", "blocked", "blas", "avx512"\};/,
  );
  assert.match(h, new RegExp(`kGemvEverywhereMaxM = ${GEMM_AUTO.gemvEverywhereMaxM};`));
  assert.match(h, /\{"add", add_args::kArity, 0, nullptr\},/);
});

test('select-variants (cpu): auto, except gemv where every product has M ≤ 2 rows fixed at optimize time', () => {
  const s = selected();
  assert.is(s.variants, undefined, 'no CUDA launches on cpu');
  assert.equal(s.tuning, []);
  assert.equal(chosen(s.programs[0]!.kernels), {
    'xw:fused': 'fused_matmul auto',
    gemm: 'gemm auto',
    zw: 'matmul gemv',
    qk: 'matmul gemv',
    rw: 'matmul auto',
  });
  // Kernels without variants name none.
  assert.ok(s.programs[0]!.kernels.filter((k) => !kernelVariants(k.name).length).every((k) => k.variant === undefined));
  const dump = printPrograms(s);
  assert.match(dump, /k\d+ matmul\(%t\d+ float32\[2, 24\] input \d+, .*\) variant gemv {2}# zw\n/);
  assert.match(dump, /k\d+ fused_matmul\(.*\) iargs \[1\] variant auto {2}# xw:fused/);
});

test('select-variants (cpu): forced by kernel or by node (the node wins); bad choices are PLANC_E302 naming them', () => {
  const s = selected({ variants: { matmul: 'blocked', fused_matmul: 'gemv', rw: 'auto' } });
  assert.equal(chosen(s.programs[0]!.kernels), {
    'xw:fused': 'fused_matmul gemv',
    gemm: 'gemm auto',
    zw: 'matmul blocked',
    qk: 'matmul blocked',
    rw: 'matmul auto',
  });
  const e301 = (re: RegExp) => (e: unknown) => e instanceof PlancError && e.code === 'PLANC_E302' && re.test(e.message);
  assert.throws(
    () => selected({ variants: { softmax: 'gemv' } }),
    e301(
      /variants: 'softmax' is neither a kernel with variants nor a node lowered to one \(kernels with variants here: fused_matmul, gemm, matmul\)/,
    ),
  );
  assert.throws(
    () => selected({ variants: { gemm: 'fast' } }),
    e301(/gemm: kernel 'gemm' has no variant 'fast' \(its variants: auto, gemv, blocked, blas, avx512\)/),
  );
  assert.throws(
    () => selected({ target: 'cuda', variants: { gemm: 'gemv' } }),
    e301(/kernel variants are the CPU kernels'/),
  );
});

/**
 * Whether this machine runs a variant, decided apart from the runtime under test: the build's BLAS, the CPU's flags and
 * the PLANC_ISA cap in the environment (the tests below also check that nativeInfo().variants says the same).
 */
function expectedToRun(variant: string): boolean {
  if (variant === 'blas') return nativeInfo().blas === 'openblas';
  if (variant !== 'avx512') return true;
  if (process.arch !== 'x64' || !fs.existsSync('/proc/cpuinfo')) return false;
  const cap = process.env.PLANC_ISA;
  if (cap && ISA_LEVELS.indexOf(cap as IsaLevel) < ISA_LEVELS.indexOf('avx512')) return false;
  const flags = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.split(/\s+/) ?? [];
  return ['avx512f', 'avx512bw', 'avx512vl', 'avx512dq', 'fma'].every((f) => flags.includes(f));
}

const feed = (dims: number[], seed: number): RtTensor => ({
  dtype: 'float32',
  dims,
  data: Float32Array.from(
    vals(
      dims.reduce((a, b) => a * b, 1),
      seed,
    ),
  ),
});
const FEEDS = {
  x: feed([2, 7, 24], 5),
  u: feed([2, 40], 10),
  z: feed([2, 24], 6),
  q: feed([1, 2, 24], 7),
  k: feed([1, 24, 5], 8),
  r: feed([3, 24], 9),
};

function run(opts: Partial<BuildOptions>): Record<string, RtTensor> {
  const built = buildPlan(model, { ...PROFILE, ...opts });
  const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'variants.plan');
  try {
    return plan.runSync('main', FEEDS);
  } finally {
    plan.close();
  }
}

testIf(test, !nativeAvailable() && NEEDS_NATIVE)(
  "every variant this machine runs gives auto's outputs within 1e-4; the others are refused at load",
  () => {
    const want = run({});
    let ran = 0;
    const info = nativeInfo();
    for (const v of GEMM_VARIANTS.map((x) => x.name)) {
      const forced = { matmul: v, gemm: v, fused_matmul: v };
      for (const kernel of Object.keys(forced))
        assert.is(
          info.variants[kernel]!.includes(v),
          expectedToRun(v),
          `nativeInfo().variants.${kernel} lists ${v}: ${JSON.stringify(info.variants[kernel])}`,
        );
      if (!expectedToRun(v)) {
        assert.throws(
          () => run({ variants: forced }),
          (e: unknown) =>
            e instanceof PlancError &&
            new RegExp(`kernel \\w+ variant ${v} cannot run on this machine: `).test(e.message),
        );
        skipPart(`this machine lacks what variant ${v} needs`, `its comparison with auto (kernel-variants)`);
        continue;
      }
      const got = run({ variants: forced });
      for (const [name, w] of Object.entries(want)) {
        const g = got[name]!;
        assert.equal(g.dims, w.dims, `${v} ${name} dims`);
        const a = g.data as Float32Array,
          b = w.data as Float32Array;
        let worst = 0;
        for (let i = 0; i < b.length; i++)
          worst = Math.max(worst, Math.abs(a[i]! - b[i]!) / Math.max(1, Math.abs(b[i]!)));
        assert.ok(worst <= 1e-4, `variant ${v}, output ${name}: off by ${worst}`);
        assert.ok(
          b.some((x) => Math.abs(x) > 0.1),
          `${name} is not all zeros`,
        );
      }
      ran++;
    }
    assert.ok(ran >= 3, 'auto, gemv and blocked run everywhere');
  },
);

/** A generated Marian model (D 40, vocabulary 301: not a multiple of the 32-column panels) optimized for translation. */
function topkModel(): Model {
  const dir = path.join(tmp, 'topk-model');
  makeModel({
    arch: 'marian',
    d: 40,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 64,
    vocab: 301,
    maxPos: 64,
    activation: 'relu',
    seed: 11,
    out: dir,
  });
  return runPipeline(importSeq2SeqDir(dir), { topk: TRANSLATE_TOPK });
}

testIf(test, !nativeAvailable() && NEEDS_NATIVE)(
  "project_topk packed: decoder steps give auto's ids and values (W reordered once per plan), or the plan is refused where the CPU lacks AVX-512",
  () => {
    const m = topkModel();
    const profile = { target: 'cpu', maxBatch: 5, maxSrcLen: 8, maxTgtLen: 8 } as const;
    const load = (variants?: Record<string, string>) => {
      const built = buildPlan(m, { ...profile, variants });
      assert.ok(
        built.header.programs.some((p) =>
          p.kernels.some((k) => k.name === 'project_topk' && k.variant === (variants ? 'packed' : 'auto')),
        ),
        'the plan runs project_topk',
      );
      return loadPlanBytes(encodePlan(built.header, built.blob), 'topk.plan');
    };
    assert.is(
      nativeInfo().variants.project_topk!.includes('packed'),
      expectedToRun('avx512'),
      'nativeInfo().variants.project_topk lists packed',
    );
    if (!expectedToRun('avx512')) {
      assert.throws(
        () => load({ project_topk: 'packed' }).close(),
        (e: unknown) =>
          e instanceof PlancError && /kernel project_topk variant packed cannot run on this machine: /.test(e.message),
      );
      return skipPart('this machine lacks AVX-512', 'project_topk packed against auto (kernel-variants)');
    }
    const auto = load(),
      packed = load({ project_topk: 'packed' });
    try {
      const graphs = auto.graphs.filter((g) => auto.outputs(g).some((o) => o.dtype === 'int64'));
      assert.equal(
        graphs,
        ['decoder', 'decoder_with_past', 'decoder_with_past_rows'],
        'the decoder graphs end in the top-k',
      );
      for (const graph of graphs) {
        for (const batch of [1, 2, 5]) {
          // 1 and 2 rows (auto: dot products on W; packed: the GEMM's 1- and 2-row micro-kernels on the panels) and 5 (the GEMM on W packed per call, or on the panels)
          for (let rep = 0; rep < 2; rep++) {
            // the second run reads the W the first one prepared
            const feeds = randomFeeds(auto, graph, { batch, srcLen: 6, past: 3, vocab: 301, seed: 7 + batch + rep });
            const want = auto.runSync(graph, feeds),
              got = packed.runSync(graph, feeds);
            for (const [name, w] of Object.entries(want)) {
              const g = got[name]!;
              if (w.dtype === 'int64')
                assert.equal(
                  Array.from(g.data as BigInt64Array),
                  Array.from(w.data as BigInt64Array),
                  `${graph} batch ${batch} ${name}`,
                );
              else {
                const a = g.data as Float32Array,
                  b = w.data as Float32Array;
                let worst = 0;
                for (let i = 0; i < b.length; i++)
                  worst = Math.max(worst, Math.abs(a[i]! - b[i]!) / Math.max(1, Math.abs(b[i]!)));
                assert.ok(worst <= 1e-5, `${graph} batch ${batch} ${name}: off by ${worst}`);
              }
            }
          }
        }
      }
    } finally {
      auto.close();
      packed.close();
    }
  },
);

test('the plan records the variants: inspect shows them; a bad name is refused (corrupt plan, or not in this schema)', () => {
  const built = buildPlan(model, { ...PROFILE, variants: { gemm: 'blocked' } });
  const file = decodePlan(encodePlan(built.header, built.blob));
  assert.equal(chosen(file.header.programs[0]!.kernels), {
    'xw:fused': 'fused_matmul auto',
    gemm: 'gemm blocked',
    zw: 'matmul gemv',
    qk: 'matmul gemv',
    rw: 'matmul auto',
  });
  const report = planReport('v.plan', file.header);
  assert.equal(report.graphs[0]!.variants, {
    'matmul gemv': 2,
    'fused_matmul auto': 1,
    'gemm blocked': 1,
    'matmul auto': 1,
  });
  assert.match(
    formatPlanReport(report),
    /\n {4}variants: matmul gemv 2, fused_matmul auto 1, gemm blocked 1, matmul auto 1\n/,
  );
  const edited = (edit: (h: PlanHeader) => void) => {
    const h = structuredClone(file.header);
    edit(h);
    return encodePlan(h, file.blob);
  };
  const gemm = (h: PlanHeader) => h.programs[0]!.kernels.find((k) => k.name === 'gemm')!;
  assert.throws(
    () =>
      decodePlan(
        edited((h) => {
          gemm(h).variant = 'Fast!';
        }),
      ),
    (e: unknown) =>
      e instanceof PlancError &&
      e.code === 'PLANC_E401' &&
      /kernel \d+ \(gemm\) has a bad variant name/.test(e.message),
  );
  assert.throws(
    () =>
      decodePlan(
        edited((h) => {
          h.target = { kind: 'cuda', archs: ['sm_90'] };
        }),
      ),
    (e: unknown) => e instanceof PlancError && e.code === 'PLANC_E401',
  );
  if (!nativeAvailable()) return skipPart(NEEDS_NATIVE, 'loading a plan with an unknown variant');
  assert.throws(
    () =>
      loadPlanBytes(
        edited((h) => {
          gemm(h).variant = 'fast';
        }),
        'v.plan',
      ),
    (e: unknown) =>
      e instanceof PlancError &&
      e.code === 'PLANC_E403' &&
      /kernel \d+ \(gemm\) names variant 'fast', which this planc's kernel schema does not have/.test(e.message),
  );
});

test('CUDA targets: facts per arch, the nearest listed arch below for others, plans tuned for their newest arch', () => {
  assert.equal(
    CUDA_ARCHS.map((a) => [a.arch, a.sms]),
    [
      ['sm_80', 108],
      ['sm_86', 72],
      ['sm_89', 58],
      ['sm_90', 132],
      ['sm_100', 148],
    ],
  );
  assert.is(cudaArch('sm_90a').gpu, 'H100 SXM5');
  assert.is(cudaArch('sm_87').arch, 'sm_86');
  assert.is(cudaArch('sm_120').arch, 'sm_100');
  assert.throws(() => cudaArch('sm_75'), /sm_80 or newer/);
  assert.is(cudaTuningArch(['sm_90', 'sm_80']).arch, 'sm_90');
  // The small-M gemv splits K to fill about 2 waves of the tuning arch's SMs: N 2048 (32 column tiles) and K 2048
  // split 8 ways on an H100 (264 / 32), 6 on an A100 (216 / 32).
  const p = selected().programs[0]!;
  const k = p.kernels.findIndex((x) => x.name === 'fused_matmul');
  const kern = p.kernels[k]!;
  const n = p.exprs.push({ terms: [{ coeff: 2048, factors: [] }] }) - 1; // the fused_matmul made [.., 2048] × [2048, 2048]
  for (const t of [kern.inputs[0]!, kern.outputs[0]!]) p.tensors[t]!.dims = [...p.tensors[t]!.dims.slice(0, -1), n];
  p.tensors[kern.inputs[1]!]!.dims = [n, n];
  const ks = (arch: string) => /^planc::gemv<.*, (\d+)>$/.exec(selectCuda(p, k, cudaArch(arch))[0]!.template)![1];
  assert.is(ks('sm_90'), '8');
  assert.is(ks('sm_80'), '6');
  assert.is(
    selectCuda(p, k)[0]!.template,
    selectCuda(p, k, cudaArch('sm_90'))[0]!.template,
    'the default archs are tuned for sm_90',
  );
});

// ---- CUDA launch variants ----

/** y = softmax(x·W) with x [2, 24]: a matmul (2 fixed rows) and a last-axis softmax, both with CUDA rules. */
function cudaModel(): Model {
  const file = path.join(tmp, 'cuda.onnx');
  fs.writeFileSync(
    file,
    buildModel({
      opset: 18,
      inputs: [['x', 'float32', [2, 24]]],
      outputs: [['y', 'float32', [2, 40]]],
      initializers: [floatInit('w', [24, 40], vals(960, 4))],
      nodes: [
        { op: 'MatMul', inputs: ['x', 'w'], outputs: ['xw'], name: 'xw' },
        { op: 'Softmax', inputs: ['xw'], outputs: ['y'], name: 'sm', attrs: [{ name: 'axis', type: 2, i: -1 }] },
      ],
    }),
  );
  const m = importOnnxFile(file);
  inferModel(m);
  return m;
}

/** The cuda state of a model after select-variants, verified. */
function cudaSelected(m: Model, opts: Partial<BuildOptions> = {}): ProgramState {
  const s = programState(m, { ...PROFILE, target: 'cuda', ...opts });
  for (const pass of PROGRAM_PASSES.slice(0, PROGRAM_PASSES.findIndex((p) => p.name === 'select-variants') + 1)) {
    pass.run(s);
    verifyProgramState(s, pass.name);
  }
  return s;
}

test('schema: CUDA launch variants by name with their launch shapes (gemv, gemm_tc for products; default elsewhere)', () => {
  assert.equal(
    cudaVariants('matmul').map((v) => [v.name, v.block, v.maxRows]),
    [
      ['gemv', 256, 16],
      ['gemm_tc', 128, undefined],
    ],
  );
  assert.is(cudaVariants('fused_matmul'), CUDA_GEMM_VARIANTS, 'one declaration for both products');
  assert.equal(cudaVariant('fused_matmul', 'gemm_tc').tile, { bm: 64, bn: 64, bk: 32, passes: 3 });
  assert.equal(
    cudaVariants('softmax').map((v) => v.name),
    ['rows', 'strided'],
  );
  assert.equal(
    cudaVariants('attention').map((v) => [v.name, v.block]),
    [['default', 128]],
  );
  assert.is(cudaVariants('add'), CUDA_DEFAULT_VARIANTS);
  // Only a declared name type-checks (and the run-time lookup refuses it too).
  // @ts-expect-error: matmul declares no CUDA variant 'default'
  assert.throws(() => cudaVariant('matmul', 'default'), /kernel 'matmul' has no CUDA variant 'default'/);
  // Every CUDA rule is of a real kernel.
  for (const k of Object.keys(CUDA_RULES))
    assert.ok(
      Object.hasOwn(KERNELS, k) && !(KERNELS as Record<string, KernelSpec>)[k]!.testOnly,
      `${k} is a schema kernel`,
    );
});

test('select-variants (cuda): every instance names a declared variant; the names are in the tuning record and the dump', () => {
  const s = cudaSelected(cudaModel());
  const p = s.programs[0]!;
  assert.equal(
    p.kernels.map((k) => k.name),
    ['matmul', 'softmax'],
  );
  assert.equal(
    s.variants![0]!.map((vs) => vs.map((v) => v.variant)),
    [['gemv', 'gemm_tc'], ['rows']],
  );
  assert.equal(
    s.variants![0]![0]!.map((v) => [v.block, v.maxRows]),
    [
      [256, 16],
      [128, undefined],
    ],
    "launch shapes are the schema's",
  );
  assert.equal(
    s.tuning.map((t) => [t.key, tuningVariants(t.choice)]),
    [
      ['main:0:matmul', ['gemv', 'gemm_tc']],
      ['main:1:softmax', ['rows']],
    ],
  );
  assert.match(
    s.tuning[0]!.choice,
    /^gemv, gemm_tc: planc::gemv<.*> block 256 rows ≤ 16 \| planc::gemm_tc<64, 64, 32, 3, .*> block 128$/,
  );
  assert.match(
    printPrograms(s),
    /\n {6}launch planc::gemv<.*> block 256 rows ≤ 16 variant gemv\n {6}launch planc::gemm_tc<.*> block 128 variant gemm_tc\n/,
  );
});

test('the verifier: a CUDA rule returning a variant its kernel does not declare is PLANC_E901 naming the call', () => {
  const rules = CUDA_RULES as Record<string, CudaRule>;
  const softmax = rules.softmax!;
  // Such a rule does not type-check (CudaRule<'softmax'> instances are 'rows' | 'strided'), hence the cast.
  rules.softmax = ((ctx: Parameters<CudaRule>[0]) =>
    softmax(ctx).map((v) => ({ ...v, variant: 'warp_magic' }))) as unknown as CudaRule;
  try {
    assert.throws(
      () => cudaSelected(cudaModel()),
      (e: unknown) =>
        e instanceof PlancError &&
        e.code === 'PLANC_E901' &&
        /after program pass select-variants, program main: kernel 1 \(softmax, node 'sm'\) launches CUDA variant 'warp_magic', which compiler\/kernel-schema.ts does not declare for it \(rows, strided\)/.test(
          e.message,
        ),
    );
  } finally {
    rules.softmax = softmax;
  }
  // A product's variant swapped for the other kernel's name is caught the same way.
  const s = cudaSelected(cudaModel());
  s.variants![0]![0]![1]!.variant = 'rows';
  assert.throws(
    () => verifyProgramState(s, 'select-variants'),
    (e: unknown) =>
      e instanceof PlancError &&
      e.code === 'PLANC_E901' &&
      /kernel 0 \(matmul, node 'xw'\) launches CUDA variant 'rows'/.test(e.message),
  );
});

const shared = sharedDir();
const esen = shared && path.join(shared, 'models', 'es-en');
testIf(test, (!esen || !fs.existsSync(esen)) && needsShared('models/es-en'))(
  'es-en (cuda): every call records declared variant names, in the order its launches run',
  () => {
    const s = cudaSelected(runPipeline(importSeq2SeqDir(esen!), { topk: TRANSLATE_TOPK }), {
      maxBatch: 16,
      maxSrcLen: 64,
      maxTgtLen: 64,
    });
    const calls = s.programs.flatMap((p, i) =>
      p.kernels.map((k, j) => ({
        k,
        names: s.variants![i]![j]!.map((v) => v.variant),
        key: `${p.graph}:${j}:${k.name}`,
      })),
    );
    assert.is(s.tuning.length, calls.length);
    const seen = new Set<string>();
    calls.forEach(({ k, names, key }, n) => {
      const declared = cudaVariants(k.name).map((v) => v.name);
      for (const v of names) assert.ok(declared.includes(v), `${key}: '${v}' is declared (${declared.join(', ')})`);
      assert.equal(tuningVariants(s.tuning[n]!.choice), names, `${key}: the tuning record names its variants`);
      assert.is(s.tuning[n]!.key, key);
      seen.add(`${k.name} ${names.join(',')}`);
    });
    assert.ok(
      seen.has('fused_matmul gemv,gemm_tc'),
      `es-en has a fused_matmul with gemv then gemm_tc (${[...seen].join('; ')})`,
    );
    assert.ok(seen.has('attention default'));
  },
);

test.run();
