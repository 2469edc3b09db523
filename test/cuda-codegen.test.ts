// CUDA codegen without a GPU: optimize --target cuda on es-en and a synthetic opus-base shape compiles with nvcc
// (sm_80 + sm_90, no register spills), the plan carries the fatbin, inspect --json shows the kernels.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { CROSS_KV_GRAPH, POSITIONS_GRAPH } from '../compiler/plan/io-names.ts';
import { readPlanFile } from '../compiler/plan/format.ts';
import type { PlanProgram, PlanTensor, TensorKind } from '../compiler/plan/types.ts';
import { DTYPE_CODE, type PlanDTypeName } from '../compiler/kernel-enums.ts';
import { CUDA_DEFAULT_VARIANTS, call, cudaVariant } from '../compiler/kernel-schema.ts';
import { selectCuda } from '../codegen/cuda/rules.ts';
import { templateSource } from '../codegen/cuda/generate.ts';
import { compileCuda, findNvcc, gencodeFlags, parseArchs, parsePtxas } from '../codegen/cuda/nvcc.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import type { VocabRewriteOptions } from '../passes/pass.ts';
import { needsShared, testIf } from './helpers/skip.ts';

const cli = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
  spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), ...args], {
    encoding: 'utf8',
    env,
    maxBuffer: 64 << 20,
  });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-cuda-'));
const shared = sharedDir();
const esen = shared && path.join(shared, 'models', 'es-en');

// CI has nvcc (CI set: its absence is a failure); a user's machine without it skips the tests that compile CUDA.
const nvcc = (() => {
  try {
    return findNvcc();
  } catch (e) {
    return (e as Error).message;
  }
})();

const noNvcc = !fs.existsSync(nvcc) ? `need nvcc (${nvcc.split('\n')[0]})` : undefined;
const nvccTest = testIf(test, noNvcc);
testIf(test, !process.env.CI && noNvcc)("nvcc is installed (CI compiles every plan's CUDA)", () => {
  assert.ok(fs.existsSync(nvcc), `nvcc missing: ${nvcc}`);
});

interface KernelRow {
  name: string;
  arch: string;
  registers: number;
  spillBytes: number;
  sharedBytes: number;
  stackBytes: number;
}
interface Report {
  target: string;
  archs: string[];
  nvcc: string;
  fatbinBytes: number;
  kernels: KernelRow[];
  graphs: { name: string; kernels: Record<string, number> }[];
}

/** optimize --target cuda, then the checks every cuda plan must pass; returns the inspect --json report. */
function optimizeCuda(model: string, out: string, extra: string[]): Report {
  const r = cli(['optimize', model, '-o', out, '--target', 'cuda', ...extra]);
  assert.is(r.status, 0, r.stderr);
  assert.match(r.stdout, /target cuda sm_80,sm_90 \(\d+ CUDA launches, \d+ kernels, nvcc [\d.]+/);
  const file = readPlanFile(out);
  const h = file.header;
  assert.is(h.target.kind, 'cuda');
  assert.equal(h.target.archs, ['sm_80', 'sm_90']);
  assert.ok(h.cuda, 'the plan carries CUDA code');
  const cuda = h.cuda!;
  assert.ok(cuda.fatbin.length > 10_000, `fatbin of ${cuda.fatbin.length} bytes`);
  assert.ok(cuda.source.includes('extern "C" __global__'));
  assert.match(cuda.nvccVersion, /^\d+\.\d+/);
  assert.is(h.toolchain.nvcc, cuda.nvccVersion);
  // One launch per kernel call; every entry a call uses was compiled for both archs.
  assert.is(cuda.programs.length, h.programs.length);
  const entries = new Set<string>();
  h.programs.forEach((p, i) => {
    assert.is(cuda.programs[i]!.calls.length, p.kernels.length, p.graph);
    for (const c of cuda.programs[i]!.calls) for (const v of c.variants) entries.add(v.entry);
  });
  for (const e of entries)
    for (const arch of ['sm_80', 'sm_90'])
      assert.ok(
        cuda.kernels.some((k) => k.name === e && k.arch === arch),
        `${e} on ${arch}`,
      );
  // ptxas -v: no spills and no local-memory stack for the default tiles.
  for (const k of cuda.kernels) {
    assert.is(k.spillBytes, 0, `${k.name} on ${k.arch} spills ${k.spillBytes} bytes`);
    assert.is(k.stackBytes, 0, `${k.name} on ${k.arch} has a ${k.stackBytes}-byte stack frame`);
    assert.ok(k.registers > 0 && k.registers <= 255, `${k.name}: ${k.registers} registers`);
    assert.ok(k.sharedBytes <= 48 * 1024, `${k.name}: ${k.sharedBytes} bytes of static shared memory`);
  }
  const j = cli(['inspect', out, '--json']);
  assert.is(j.status, 0, j.stderr);
  const report = JSON.parse(j.stdout) as Report;
  assert.is(report.target, 'cuda');
  assert.equal(report.archs, ['sm_80', 'sm_90']);
  assert.is(report.nvcc, cuda.nvccVersion);
  assert.is(report.fatbinBytes, cuda.fatbin.length);
  assert.is(report.kernels.length, cuda.kernels.length);
  for (const k of report.kernels)
    for (const f of ['name', 'registers', 'spillBytes', 'sharedBytes'] as const) assert.ok(k[f] !== undefined, f);
  return report;
}

const noEsen = !esen || !fs.existsSync(esen) ? needsShared('models/es-en') : undefined;
{
  testIf(test, noNvcc || noEsen)(
    'es-en: optimize --target cuda compiles every kernel for sm_80 and sm_90 without spills',
    () => {
      const r = optimizeCuda(esen!, path.join(tmp, 'es-en.plan'), ['--max-batch', '16']);
      const used = new Set(r.graphs.flatMap((g) => Object.keys(g.kernels)));
      for (const k of ['fused_matmul', 'layer_norm', 'attention', 'cache_write', 'gather'])
        assert.ok(used.has(k), `es-en uses ${k}`);
      const text = cli(['inspect', path.join(tmp, 'es-en.plan')]);
      assert.match(text.stdout, /CUDA: \d+ kernels, fatbin [\d.]+ MB, nvcc/);
    },
  );
}

/** A tiny clusters rewrite for hidden size d: 3 centroids, active sets of 3, 2 and 4 ids (the last id included). */
function tinyClusters(d: number, vocab: number): VocabRewriteOptions {
  const r = 3;
  const centroids = Float32Array.from({ length: r * d }, (_, i) => Math.sin(i * 0.37));
  const cnorm = Float32Array.from({ length: r }, (_, j) =>
    centroids.subarray(j * d, (j + 1) * d).reduce((a, x) => a + x * x, 0),
  );
  return {
    method: 'clusters',
    clusters: r,
    dim: d,
    centroids,
    cnorm,
    offsets: Int32Array.from([0, 3, 5, 9]),
    ids: Int32Array.from([0, 1, 2, 3, 7, 4, 10, 200, vocab - 1]),
  };
}

{
  testIf(test, noNvcc || noEsen)(
    'es-en with --vocab (clusters, shortlist): cuda plans with cluster_mask and the masked project_topk, no spills',
    () => {
      const model = importSeq2SeqDir(esen!);
      const profile = { maxBatch: 8, maxSrcLen: 64, maxTgtLen: 64 };
      for (const [vocab, kernels] of [
        [tinyClusters(256, 32000), ['cluster_mask', 'project_topk']],
        [{ method: 'shortlist' }, ['project_topk']],
      ] as const) {
        const built = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK, vocab }), { target: 'cuda', ...profile });
        const h = built.header;
        const cuda = h.cuda!;
        assert.equal(h.target.archs, ['sm_80', 'sm_90']);
        assert.match(
          cuda.source,
          /__launch_bounds__\(256, 1\) k\d+_project_topk\(.*planc::project_topk<256, 32000, 8, true, true, true>/,
          `${vocab.method}: the masked project_topk`,
        );
        if (vocab.method === 'clusters')
          assert.match(cuda.source, /__launch_bounds__\(256, 1\) k\d+_cluster_mask\(.*planc::cluster_mask<256, 3>/);
        else assert.not.match(cuda.source, /k\d+_cluster_mask/);
        // Every decoder step graph runs the vocab kernels (the positions graph and the encoder K/V cut compute no
        // logits); every entry a call uses is compiled for both archs, spill-free.
        for (const [i, p] of h.programs.entries()) {
          if (!p.graph.startsWith('decoder') || p.graph === POSITIONS_GRAPH || p.graph === CROSS_KV_GRAPH) continue;
          for (const k of kernels)
            assert.ok(
              p.kernels.some((c) => c.name === k),
              `${vocab.method}: ${p.graph} calls ${k}`,
            );
          p.kernels.forEach((c, j) => {
            if (!kernels.includes(c.name as never)) return;
            for (const v of cuda.programs[i]!.calls[j]!.variants) {
              for (const arch of ['sm_80', 'sm_90']) {
                const st = cuda.kernels.find((s) => s.name === v.entry && s.arch === arch);
                assert.ok(st, `${v.entry} on ${arch}`);
                assert.is(st!.spillBytes, 0, `${v.entry} on ${arch} spills`);
                assert.is(st!.stackBytes, 0, `${v.entry} on ${arch} has a stack frame`);
              }
            }
          });
        }
        for (const s of cuda.kernels) assert.is(s.spillBytes, 0, `${vocab.method}: ${s.name} on ${s.arch} spills`);
      }
    },
  );
}

nvccTest('opus-base shapes (d 512, 8 heads, FFN 2048, vocab 58,101; 1+1 layers): cuda plan with project_topk', () => {
  const dir = path.join(tmp, 'opus-base');
  makeModel({
    arch: 'marian',
    d: 512,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 8,
    ffn: 2048,
    vocab: 58101,
    out: dir,
    seed: 1,
    maxPos: 512,
    activation: 'relu',
  });
  const r = optimizeCuda(dir, path.join(tmp, 'opus-base.plan'), [
    '--no-tokenizer',
    '--topk',
    '4',
    '--max-batch',
    '8',
    '--max-src-len',
    '64',
    '--max-tgt-len',
    '64',
  ]);
  const used = new Set(r.graphs.flatMap((g) => Object.keys(g.kernels)));
  assert.ok(used.has('project_topk'), `opus-base with --topk uses project_topk (kernels: ${[...used].join(', ')})`);
  const source = readPlanFile(path.join(tmp, 'opus-base.plan')).header.cuda!.source;
  assert.match(source, /planc::project_topk<512, 58101, 4, /, 'project_topk specialized for D 512, vocab 58,101, k 4');
  assert.match(
    source,
    /planc::gemm_tc<64, 64, 32, 3, true, 1, true, false, /,
    'the FFN GEMM with its fused bias + relu epilogue',
  );
  assert.match(source, /planc::gemv</, 'a GEMV path for decode');
});

// Instantiations beyond what the two models use (other dtypes, ranks, epilogues, layouts, mask kinds), so every
// template is compiled and checked for spills, not only parsed.
const COVERAGE = [
  'planc::binary<planc::OpAdd, float, 3, true>',
  'planc::binary<planc::OpDiv, int64_t, 4, false>',
  'planc::binary<planc::OpMax, double, 2, false>',
  'planc::binary<planc::OpMod<false>, int32_t, 2, false>',
  'planc::binary<planc::OpMod<true>, float, 2, false>',
  'planc::binary<planc::OpMin, int8_t, 1, false>',
  'planc::power<float, int64_t, 3>',
  'planc::compare<planc::OpLt, float, 4>',
  'planc::compare<planc::OpEq, uint8_t, 2>',
  'planc::compare<planc::OpXor, uint8_t, 2>',
  'planc::where_select<uint32_t, 4>',
  'planc::unary<planc::URelu, int64_t>',
  'planc::unary<planc::UErf, float>',
  'planc::unary<planc::USoftplus, double>',
  'planc::unary<planc::UNot, uint8_t>',
  'planc::unary<planc::UGelu, float>',
  'planc::unary<planc::UHardSigmoid, float>',
  'planc::unary<planc::UElu, float>',
  'planc::unary<planc::URound, float>',
  'planc::unary<planc::USign, int32_t>',
  'planc::clip<float>',
  'planc::clip<int64_t>',
  'planc::cast<int64_t, float, false>',
  'planc::cast<float, __half, false>',
  'planc::cast<__half, float, false>',
  'planc::cast<float, uint8_t, true>',
  'planc::copy<4>',
  'planc::fill<int64_t>',
  'planc::range<float>',
  'planc::values<int64_t>',
  'planc::gemm_tc<64, 64, 32, 3, true, 2, true, true, 3, false>',
  'planc::gemm_tc<64, 64, 16, 3, false, 0, false, false, 4, true>',
  'planc::gemm_tc<64, 64, 32, 1, true, 4, true, false, 2, false>',
  'planc::gemv<3, true, true, true, 1>',
  'planc::gemv<0, false, false, false, 8>',
  'planc::gemv<1, true, false, true, 16>',
  'planc::softmax<true, true>',
  'planc::softmax<false, false>',
  'planc::norm<512, false, true>',
  'planc::norm<0, true, false>',
  'planc::norm<1024, true, false>',
  'planc::transpose<uint64_t, 5>',
  'planc::gather<uint16_t, int32_t, 1>',
  'planc::slice<uint8_t, 3>',
  'planc::concat<uint32_t, 2>',
  'planc::split<uint32_t, 1>',
  'planc::expand<uint64_t, 4>',
  'planc::tile<uint32_t, 3>',
  'planc::trilu<uint32_t, false>',
  'planc::attention<64, 0, 1, false>',
  'planc::attention<128, 1, 2, true>',
  'planc::attention<64, 1, 3, false>',
  'planc::attention<256, 0, 0, true>',
  'planc::cache_write<0>',
  'planc::cache_write<1>',
  'planc::project_topk<512, 58101, 4, true, false>',
  'planc::project_topk<1024, 250000, 8, false, true>',
  'planc::project_topk<512, 32000, 8, true, true, true>',
  'planc::project_topk<1024, 250000, 64, false, false, true>',
  'planc::cluster_mask<512, 500>',
  'planc::cluster_mask<32, 5000>',
];

nvccTest('every kernel template compiles (sm_80) without spills or stack frames', () => {
  // Threads per block as the schema declares each launch; the vocabulary kernels' rules set min blocks 1 (rules.ts
  // Instance.minBlocks).
  const launch = (t: string) =>
    /gemm_tc/.test(t)
      ? cudaVariant('matmul', 'gemm_tc')
      : /gemv/.test(t)
        ? cudaVariant('matmul', 'gemv')
        : /attention/.test(t)
          ? cudaVariant('attention', 'default')
          : CUDA_DEFAULT_VARIANTS[0];
  const block = (t: string) =>
    `${launch(t).block}${/cluster_mask|project_topk<(?:[^,>]+, ){5}true>/.test(t) ? ', 1' : ''}`;
  const source = `${templateSource()}\n${COVERAGE.map((t, i) => `extern "C" __global__ void __launch_bounds__(${block(t)}) c${i}(const __grid_constant__ planc::KArgs a) { ${t}(a); }`).join('\n')}\n`;
  const c = compileCuda(source, ['sm_80']);
  assert.is(c.stats.length, COVERAGE.length);
  for (const s of c.stats) {
    const t = COVERAGE[Number(s.name.slice(1))];
    assert.is(s.spillBytes, 0, `${t} spills`);
    assert.is(s.stackBytes, 0, `${t} has a stack frame`);
  }
});

test('--arch parsing and gencode flags', () => {
  assert.equal(parseArchs(undefined), ['sm_80', 'sm_90']);
  assert.equal(parseArchs('90,sm_80'), ['sm_80', 'sm_90']);
  assert.throws(() => parseArchs('sm_75'), /sm_80 or newer/);
  assert.throws(() => parseArchs('volta'), /not an sm arch/);
  assert.equal(gencodeFlags(['sm_80', 'sm_90']), [
    '-gencode=arch=compute_80,code=sm_80',
    '-gencode=arch=compute_90,code=[sm_90,compute_90]',
  ]);
});

test('ptxas -v parsing', () => {
  const log = [
    "ptxas info    : Compiling entry function 'k0_add' for 'sm_80'",
    'ptxas info    : Function properties for k0_add',
    '    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads',
    'ptxas info    : Used 32 registers, used 1 barriers, 17920 bytes smem, 1736 bytes cmem[0]',
  ].join('\n');
  assert.equal(parsePtxas(log), [
    { name: 'k0_add', arch: 'sm_80', registers: 32, spillBytes: 8, sharedBytes: 17920, stackBytes: 8 },
  ]);
});

test('no nvcc: a clear error that says how to install it', () => {
  const r = cli(['optimize', path.join(tmp, 'none'), '-o', path.join(tmp, 'none.plan'), '--target', 'cuda'], {
    ...process.env,
    PLANC_NVCC: path.join(tmp, 'no-such-nvcc'),
  });
  assert.is.not(r.status, 0);
  assert.match(r.stderr, /PLANC_E601: PLANC_NVCC=.* does not exist: install the CUDA toolkit .* or set PLANC_NVCC/);
});

test('cluster_mask and the masked project_topk rules: templates, fixed grid, min blocks, checks', () => {
  const c = (v: number) => ({ terms: [{ coeff: v, factors: [] }] });
  // exprs: 0 → 4 (rows), 1 → 256 (D), 2 → 3 (R), 3 → 4 (R + 1), 4 → 9 (nnz), 5 → 1000 (V), 6 → 8 (k), 7 → 1, 8 → 100 (bad D)
  // (a plan kernel's iargs are expression indices: call() orders them by name)
  const args = (k: ReturnType<typeof call>) => ({ iargs: k.iargs as number[], fargs: k.fargs });
  const exprs = [4, 256, 3, 4, 9, 1000, 8, 1, 100].map(c);
  const t = (name: string, kind: TensorKind, dtype: PlanDTypeName, dims: number[], slotBytes = 0): PlanTensor => ({
    name,
    kind,
    dtype: DTYPE_CODE[dtype]!,
    dims,
    offset: 0,
    slotBytes,
    ref: 0,
  });
  const p: PlanProgram = {
    graph: 'g',
    symbols: [],
    exprs,
    tensors: [
      t('x', 2, 'float32', [0, 1]),
      t('c', 1, 'float32', [2, 1]),
      t('cn', 1, 'float32', [2]),
      t('off', 1, 'int32', [3]),
      t('ids', 1, 'int32', [4]),
      t('active', 0, 'uint8', [5], 1000),
      t('w', 1, 'float32', [5, 1]),
      t('vals', 0, 'float32', [0, 6], 128),
      t('idx', 0, 'int64', [0, 6], 256),
      t('cbad', 1, 'float32', [2, 8]),
    ],
    kernels: [
      {
        name: 'cluster_mask',
        inputs: [0, 1, 2, 3, 4],
        outputs: [5],
        ...args(call('cluster_mask', { vocab: 5 })),
        node: '/m/clusters',
        origin: [],
      },
      {
        name: 'project_topk',
        inputs: [0, 6, -1, 5],
        outputs: [7, 8],
        ...args(call('project_topk', { k: 6, transposed: 7 })),
        node: '/m/topk',
        origin: [],
      },
      {
        name: 'cluster_mask',
        inputs: [0, 9, 2, 3, 4],
        outputs: [5],
        ...args(call('cluster_mask', { vocab: 5 })),
        node: '/m/bad',
        origin: [],
      },
    ],
    inputs: [],
    outputs: [],
    arenaBytes: 4096,
    arenaLowerBound: 0,
    tensorBytesSum: 0,
    fusedOps: {},
  };
  const [cm] = selectCuda(p, 0);
  assert.is(cm!.template, 'planc::cluster_mask<256, 3>');
  assert.is(cm!.minBlocks, 1);
  assert.equal(
    cm!.grid,
    [{ operand: 0, from: 0, to: 0, div: 1, mul: 32 }],
    'a fixed grid: the mask is written even with no rows',
  );
  assert.ok(cm!.scratchBytes! >= 4 * 16384, 'the ticket + bitmap live in the scratch counters');
  const [pt] = selectCuda(p, 1);
  assert.is(pt!.template, 'planc::project_topk<256, 1000, 8, true, false, true>');
  assert.is(pt!.minBlocks, 1);
  assert.throws(() => selectCuda(p, 2), /kernel 'cluster_mask': the centroids must be a static \[R, 256\]/);
});

test('a kernel without a CUDA template fails naming the node', () => {
  const p: PlanProgram = {
    graph: 'g',
    symbols: [],
    exprs: [{ terms: [{ coeff: 4, factors: [] }] }],
    tensors: [
      { name: 'x', kind: 2, dtype: DTYPE_CODE.float32!, dims: [0], offset: 0, slotBytes: 0, ref: 0 },
      { name: 'y', kind: 0, dtype: DTYPE_CODE.int64!, dims: [0], offset: 0, slotBytes: 32, ref: 0 },
    ],
    kernels: [
      { name: 'cumsum_magic', inputs: [0], outputs: [1], iargs: [], fargs: [], node: '/model/weird_node', origin: [] },
    ],
    inputs: [{ name: 'x', tensor: 0 }],
    outputs: [{ name: 'y', tensor: 1 }],
    arenaBytes: 64,
    arenaLowerBound: 0,
    tensorBytesSum: 0,
    fusedOps: {},
  };
  try {
    selectCuda(p, 0);
    assert.unreachable('should fail');
  } catch (e) {
    assert.instance(e, PlancError);
    assert.is((e as PlancError).code, 'PLANC_E602');
    assert.match((e as Error).message, /kernel 'cumsum_magic': no CUDA template .*node '\/model\/weird_node'/);
  }
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
