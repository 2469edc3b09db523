// cuda plans on the emulated CUDA device (native/cudasim, PLANC_DEVICE=sim / --device sim): every graph of a 1+1-layer
// synthetic plan (tiny and opus-base-shaped) against the CPU backend at batch 1 and 5 with the arena poisoned with NaN,
// bit-identical under two fiber schedules, greedy decoding token-identical with CUDA-graph replay off and on, and
// `planc translate --device sim`. es-en (../shared; top-k, clusters, w8 and fp16 plans per graph at batch 5,
// 16 sentences translated, emulator children in parallel): with PLANC_CUDASIM_ESEN=1 (.ci/run sets it; a few minutes on
// 2 cores). w8 (int8 weight-only) plans of both models: every graph and
// greedy decoding against the cpu w8 plan; fp16 / bf16 (tensor-core) plans against the cpu reference plans of the same precision.
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { findNvcc } from '../codegen/cuda/nvcc.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { before } from './helpers/before.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-cudasim-'));
const CHILD = path.join(REPO_ROOT, 'native', 'cudasim', 'test', 'plan-child.mts');
const TOL = 1e-4;

const noNvcc = (() => {
  try {
    findNvcc();
    return undefined;
  } catch {
    return 'need nvcc (a cuda plan carries its compiled kernels)';
  }
})();
const noGxx =
  spawnSync('g++', ['--version']).status === 0
    ? undefined
    : 'need g++ (the emulated device compiles kernels for the CPU)';
const shared = sharedDir();
const esen = shared && path.join(shared, 'models', 'es-en');
const noEsen = !esen || !fs.existsSync(path.join(esen, 'encoder_model.onnx')) ? needsShared('models/es-en') : undefined;
const noEsenRun =
  noEsen ??
  (process.env.PLANC_CUDASIM_ESEN === '1'
    ? undefined
    : 'set PLANC_CUDASIM_ESEN=1 (es-en on the emulator takes minutes)');

/** One output compared: error relative to max |cpu|, NaN count, exactness, hash; for an ids output beside its values (topk), how many ids differ and how far apart their values are. */
interface Out {
  dims: number[];
  rel: number;
  nan: number;
  exact: boolean;
  hash: string;
  idsDiffer?: number;
  idsGap?: number;
}
type Runs = Record<string, Record<string, Out>>;

function optimize(model: string, out: string, extra: string[]): void {
  const r = spawnSync(
    process.execPath,
    [path.join(REPO_ROOT, 'bin', 'planc.js'), 'optimize', model, '-o', out, '--quiet', ...extra],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`optimize ${model} ${extra.join(' ')}: ${r.stderr}`);
}

/** Runs the child (native/cudasim/test/plan-child.mts) on the emulated device; its JSON and stderr. */
function child(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', CHILD, ...args], {
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    env: { ...process.env, PLANC_DEVICE: 'sim', PLANC_CUDA_POISON: '1', PLANC_CUDASIM_STATS: '1', ...env },
  });
  assert.is(r.status, 0, r.stderr);
  const json = JSON.parse(r.stdout.trim().split('\n').pop()!);
  assert.is(json.error, undefined, json.error);
  return { json, stderr: r.stderr };
}

/** child(), without blocking: several emulator children run at once (the emulator runs on one core). */
// biome-ignore lint/suspicious/noExplicitAny: the child's JSON report, read field by field by the tests
function childAsync(args: string[], env: Record<string, string> = {}): Promise<{ json: any; stderr: string }> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], {
      env: { ...process.env, PLANC_DEVICE: 'sim', PLANC_CUDA_POISON: '1', PLANC_CUDASIM_STATS: '1', ...env },
    });
    let out = '',
      err = '';
    c.stdout.on('data', (d) => (out += d));
    c.stderr.on('data', (d) => (err += d));
    c.on('error', reject);
    c.on('close', (code) => {
      try {
        assert.is(code, 0, err);
        const json = JSON.parse(out.trim().split('\n').pop()!);
        assert.is(json.error, undefined, json.error);
        resolve({ json, stderr: err });
      } catch (e) {
        reject(e);
      }
    });
  });
}

/** Runs the jobs at most `n` at a time; their results in order. */
async function pool<T>(jobs: (() => Promise<T>)[], n: number): Promise<T[]> {
  const results: T[] = new Array(jobs.length);
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      results[i] = await jobs[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, jobs.length) }, worker));
  return results;
}
const PARALLEL = Math.max(1, Math.min(4, os.availableParallelism()));

/**
 * The tolerances of fp16 / bf16 plans against the cpu plan of the same precision. Both round a product's input to the
 * dtype, but their float32 sums differ in order, so a value within a float32 rounding of a half rounding boundary
 * rounds the other way on one side (a few per graph) and changes what follows by up to about the dtype's unit
 * roundoff u: every output within u / 2 of max |ref|. The KV cache rows that are one product of the graph's own inputs
 * (nothing rounded before them: ONE_PRODUCT) within 1e-5, where the float32 plan is u away.
 */
const HALF_TOL = { fp16: { all: 2 ** -12, strict: 1e-5 }, bf16: { all: 2 ** -9, strict: 1e-5 } };
// the first decoder layer's self-attention rows (embeddings + positions, one product: post-norm models such as these)
// and every layer's cross-attention rows (one product of the encoder_hidden_states feed)
const ONE_PRODUCT = /^present\.(0\.decoder|\d+\.encoder)\./;

/** Every output of every graph within TOL (or a half plan's tolerances) of the cpu backend, no NaN where the cpu has none, ids exact. */
function checkRuns(runs: Runs, what: string, half?: keyof typeof HALF_TOL): void {
  assert.ok(Object.keys(runs).length >= 3, `${what}: ${Object.keys(runs).join(', ')}`);
  for (const [graph, outs] of Object.entries(runs)) {
    for (const [name, o] of Object.entries(outs)) {
      const where = `${what} ${graph}/${name} [${o.dims.join('x')}]`;
      const tol = !half ? TOL : ONE_PRODUCT.test(name) ? HALF_TOL[half].strict : HALF_TOL[half].all;
      assert.is(o.nan, 0, `${where}: NaN where the cpu backend has a number`);
      if (half && name.endsWith('ids') && o.idsDiffer !== undefined) {
        // half plans: the two sides' sums differ in order (8 or 16 lanes on the cpu, by machine), so two candidates
        // whose values lie within rounding may swap; an id may differ only where its value agrees within tolerance
        assert.ok(
          o.idsGap! <= tol,
          `${where}: ${o.idsDiffer} ids differ from the cpu backend with values ${o.idsGap!.toExponential(2)} of max |ref| apart (tolerance ${tol}): not a near tie`,
        );
        assert.ok(
          o.idsDiffer! <= Math.max(1, o.dims.reduce((p, d) => p * d, 1) / 16),
          `${where}: ${o.idsDiffer} ids differ (near ties, but too many)`,
        );
        continue;
      }
      assert.ok(o.rel <= tol, `${where}: max error ${o.rel.toExponential(2)} of max |ref| (tolerance ${tol})`);
      if (name.endsWith('ids')) assert.ok(o.exact, `${where}: ids differ from the cpu backend`);
    }
  }
}

const hashes = (runs: Runs) =>
  Object.fromEntries(
    Object.entries(runs).flatMap(([g, outs]) => Object.entries(outs).map(([n, o]) => [`${g}/${n}`, o.hash])),
  );

const names = {
  tiny: 'tiny 1+1-layer plan: every graph on the emulator matches the cpu backend (batch 1 and 5, arena poisoned with NaN)',
  seeds: 'tiny plan: two fiber-schedule seeds give bit-identical outputs',
  opus: 'opus-base-shaped 1+1-layer plan (d 512, 8 heads, ffn 2048): every graph matches the cpu backend (batch 1 and 5)',
  decode: 'greedy decoding on the emulator is token-identical to the cpu plan, CUDA-graph replay off and on',
  replay: 'CUDA graphs: a repeated run replays the graphs captured by the first, matching the cpu backend',
  cli: 'planc translate --device sim runs a cuda plan on the emulator and says so on stderr',
  w8: 'w8 (int8 weight-only) cuda plans: every graph of the opus-shaped plan (qmatmul, qgather with 12-bit rows, qproject_topk rescored) matches the cpu w8 plan (batch 1 and 5)',
  w8decode: 'w8 cuda plan: greedy decoding on the emulator is token-identical to the cpu w8 plan, CUDA-graph replay on',
  w8refuse:
    'int8/int16 inputs and auto on --target cuda are refused by name (the CUDA products are weight-only or fp16 / bf16)',
  half: 'fp16 / bf16 cuda plans (tensor cores, float32 sums): every graph of the opus-shaped plans matches the cpu plan of the same precision (batch 5: 35 encoder rows on gemm_tc16, decode rows on gemv; embeddings gathered in the half dtype and widened)',
  halfDecode:
    'fp16 and bf16 cuda plans: greedy decoding on the emulator is token-identical to the cpu plan of the same precision, CUDA-graph replay on',
  esenGraphs: 'es-en plans (top-k, clusters, w8, fp16): every graph on the emulator matches the cpu backend (batch 5)',
  esen: 'es-en: greedy translation of 16 test sentences (PLANC_CUDASIM_ESEN_N) through the cuda plan on the emulator is token-identical to the cpu plan',
};
const skip = !nativeAvailable() ? NEEDS_NATIVE : (noNvcc ?? noGxx);

if (skip) {
  skipSuite(test, skip, Object.values(names));
} else {
  const plans = {
    tiny: { cuda: path.join(tmp, 'tiny-cuda.plan'), cpu: path.join(tmp, 'tiny-cpu.plan') },
    opus: { cuda: path.join(tmp, 'opus-cuda.plan'), cpu: path.join(tmp, 'opus-cpu.plan') },
    tinyW8: { cuda: path.join(tmp, 'tiny-w8-cuda.plan'), cpu: path.join(tmp, 'tiny-w8-cpu.plan') },
    opusW8: { cuda: path.join(tmp, 'opus-w8-cuda.plan'), cpu: path.join(tmp, 'opus-w8-cpu.plan') },
    tinyF16: { cuda: path.join(tmp, 'tiny-fp16-cuda.plan'), cpu: path.join(tmp, 'tiny-fp16-cpu.plan') },
    tinyBf16: { cuda: path.join(tmp, 'tiny-bf16-cuda.plan'), cpu: path.join(tmp, 'tiny-bf16-cpu.plan') },
    opusF16: { cuda: path.join(tmp, 'opus-fp16-cuda.plan'), cpu: path.join(tmp, 'opus-fp16-cpu.plan') },
    opusBf16: { cuda: path.join(tmp, 'opus-bf16-cuda.plan'), cpu: path.join(tmp, 'opus-bf16-cpu.plan') },
  };
  const profile = ['--no-tokenizer', '--max-batch', '5', '--max-src-len', '16', '--max-tgt-len', '12'];
  before(test, () => {
    const tiny = path.join(tmp, 'tiny');
    makeModel({
      arch: 'marian',
      d: 64,
      encoderLayers: 1,
      decoderLayers: 1,
      heads: 2,
      ffn: 128,
      vocab: 101,
      out: tiny,
      seed: 3,
      maxPos: 64,
      activation: 'relu',
    });
    const opus = path.join(tmp, 'opus');
    makeModel({
      arch: 'marian',
      d: 512,
      encoderLayers: 1,
      decoderLayers: 1,
      heads: 8,
      ffn: 2048,
      vocab: 1200,
      out: opus,
      seed: 5,
      maxPos: 64,
      activation: 'swish',
    });
    const qz = (mode: string) => ['--quantize', mode];
    for (const [dir, p, q] of [
      [tiny, plans.tiny, []],
      [opus, plans.opus, []],
      [tiny, plans.tinyW8, qz('w8')],
      [opus, plans.opusW8, qz('w8')],
      [tiny, plans.tinyF16, qz('fp16')],
      [tiny, plans.tinyBf16, qz('bf16')],
      [opus, plans.opusF16, qz('fp16')],
      [opus, plans.opusBf16, qz('bf16')],
    ] as [string, { cuda: string; cpu: string }, string[]][]) {
      optimize(dir, p.cuda, ['--target', 'cuda', '--arch', 'sm_80', ...profile, ...q]);
      optimize(dir, p.cpu, [...profile, ...q]);
    }
  });

  let tinySeed0: Runs | undefined;
  test(names.tiny, () => {
    const { json, stderr } = child(['graphs', plans.tiny.cuda, plans.tiny.cpu, '1,5']);
    assert.match(json.device, /cudasim/);
    assert.match(stderr, /cudasim stats: [1-9]\d* launches/);
    checkRuns(json.runs, 'tiny');
    tinySeed0 = json.runs;
  });

  test(names.seeds, () => {
    assert.ok(tinySeed0, 'the seed-0 run of the test before');
    // seed 7 shuffles blocks and threads; PLANC_CUDASIM_CHECK poisons shared memory before every block
    const { json } = child(['graphs', plans.tiny.cuda, plans.tiny.cpu, '1,5'], {
      PLANC_CUDASIM_SEED: '7',
      PLANC_CUDASIM_CHECK: '1',
    });
    checkRuns(json.runs, 'seed 7');
    assert.equal(hashes(json.runs), hashes(tinySeed0!));
  });

  test(names.opus, () => {
    checkRuns(child(['graphs', plans.opus.cuda, plans.opus.cpu, '1,5']).json.runs, 'opus');
  });

  test(names.decode, () => {
    const src = path.join(tmp, 'sources.json');
    fs.writeFileSync(
      src,
      JSON.stringify([
        [7, 8, 9, 10, 2],
        [11, 12, 2],
        [13, 14, 15, 16, 17, 2],
        [20, 30, 40, 2],
        [5, 6, 2],
      ]),
    );
    for (const [plan, label] of [[plans.tiny, 'tiny']] as const) {
      for (const graphs of ['0', '1']) {
        const { json, stderr } = child(['decode', plan.cuda, plan.cpu, src], { PLANC_CUDA_GRAPH: graphs });
        assert.equal(json.sim, json.cpu, `${label}, graphs ${graphs}`);
        assert.ok(
          json.cpu.some((ids: number[]) => ids.length > 0),
          `${label}: something was decoded`,
        );
        const m = /cudasim stats: (\d+) launches, (\d+) graph launches replaying (\d+) kernel launches/.exec(stderr);
        assert.ok(m, stderr);
        if (graphs === '1')
          assert.ok(Number(m![2]) > 0 && Number(m![3]) > 0, `${label}: CUDA graphs were replayed (${m![0]})`);
        else assert.is(Number(m![2]), 0, `${label}: no graphs without PLANC_CUDA_GRAPH`);
      }
    }
  });

  test(names.replay, () => {
    const { json, stderr } = child(['graphs', plans.tiny.cuda, plans.tiny.cpu, '1,1'], { PLANC_CUDA_GRAPH: '1' });
    checkRuns(json.runs, 'replayed');
    const m =
      /cudasim stats: (\d+) launches, (\d+) graph launches replaying (\d+) kernel launches, (\d+) captured/.exec(
        stderr,
      );
    assert.ok(m, stderr);
    assert.is(Number(m![1]), 0, 'every launch went through a graph');
    assert.is(Number(m![3]), 2 * Number(m![4]), `the second run replays the graphs captured by the first (${m![0]})`);
  });

  test(names.w8, () => {
    const { json } = child(['graphs', plans.opusW8.cuda, plans.opusW8.cpu, '1,5']);
    checkRuns(json.runs, 'opus w8');
    const kernels = JSON.parse(
      spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), 'inspect', plans.opusW8.cuda, '--json'], {
        encoding: 'utf8',
      }).stdout,
    ).kernels as { name: string }[];
    for (const k of ['qmatmul', 'qgather', 'qproject_topk'])
      assert.ok(
        kernels.some((e) => e.name.endsWith(`_${k}`)),
        `the plan runs ${k} on the device: ${kernels.map((e) => e.name).join(', ')}`,
      );
  });

  test(names.w8decode, () => {
    const src = path.join(tmp, 'sources-w8.json');
    fs.writeFileSync(
      src,
      JSON.stringify([
        [7, 8, 9, 10, 2],
        [11, 12, 2],
        [13, 14, 15, 16, 17, 2],
        [20, 30, 40, 2],
        [5, 6, 2],
      ]),
    );
    const { json } = child(['decode', plans.tinyW8.cuda, plans.tinyW8.cpu, src], { PLANC_CUDA_GRAPH: '1' });
    assert.equal(json.sim, json.cpu);
    assert.ok(
      json.cpu.some((ids: number[]) => ids.length > 0),
      'something was decoded',
    );
  });

  test(names.w8refuse, () => {
    for (const args of [
      ['--quantize', 'int8'],
      ['--quantize', 'int16'],
      ['--quantize', 'auto', '--eval-src', path.join(tmp, 'none.txt')],
      ['--quantize', 'fp16', '--quantize-layers', 'x=int8'],
    ]) {
      const r = spawnSync(
        process.execPath,
        [
          path.join(REPO_ROOT, 'bin', 'planc.js'),
          'optimize',
          path.join(tmp, 'tiny'),
          '-o',
          path.join(tmp, 'refused.plan'),
          '--target',
          'cuda',
          ...args,
          ...profile,
        ],
        { encoding: 'utf8' },
      );
      assert.is(r.status === 0, false, `${args.join(' ')} on cuda was accepted`);
      assert.match(
        r.stderr,
        /PLANC_E301: --quantize(-layers)? \S+ --target cuda: the CUDA products are int8 weight-only \(w8: float32 inputs\) or on tensor cores in fp16 \/ bf16/,
      );
      assert.not.match(r.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  test(names.half, async () => {
    // batch 5: the encoder's 35 rows take the tensor-core path, the decoder's 5 the gemv (batch 1 adds no path)
    const jobs = (
      [
        [plans.opusF16, 'fp16'],
        [plans.opusBf16, 'bf16'],
      ] as const
    ).map(
      ([p, label]) =>
        async () =>
          [label, '5', (await childAsync(['graphs', p.cuda, p.cpu, '5'])).json.runs as Runs] as const,
    );
    for (const [label, b, runs] of await pool(jobs, PARALLEL)) {
      checkRuns(runs, `opus ${label} batch ${b}`, label);
      assert.ok(
        Object.values(runs).some((outs) => Object.keys(outs).some((n) => ONE_PRODUCT.test(n))),
        'the strict outputs were checked',
      );
    }
    for (const p of [plans.opusF16, plans.opusBf16]) {
      const info = JSON.parse(
        spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), 'inspect', p.cuda, '--json'], {
          encoding: 'utf8',
        }).stdout,
      );
      const q = info.quantization;
      assert.ok(
        q.weightBytes < 0.55 * q.weightBytesFp32,
        `half weights: ${q.weightBytes} bytes vs float32 ${q.weightBytesFp32}`,
      );
      for (const k of info.kernels as { name: string; spillBytes: number }[])
        assert.is(k.spillBytes, 0, `${k.name} spills`);
      assert.ok(
        q.layers.length >= 10 && q.layers.every((l: { dtype: string }) => l.dtype === q.mode),
        JSON.stringify(q.layers.slice(0, 3)),
      );
    }
  });

  test(names.halfDecode, () => {
    const src = path.join(tmp, 'sources-half.json');
    fs.writeFileSync(
      src,
      JSON.stringify([
        [7, 8, 9, 10, 2],
        [11, 12, 2],
        [13, 14, 15, 16, 17, 2],
        [20, 30, 40, 2],
        [5, 6, 2],
      ]),
    );
    for (const p of [plans.tinyF16, plans.tinyBf16]) {
      const { json } = child(['decode', p.cuda, p.cpu, src], { PLANC_CUDA_GRAPH: '1' });
      assert.equal(json.sim, json.cpu);
      assert.ok(
        json.cpu.some((ids: number[]) => ids.length > 0),
        'something was decoded',
      );
    }
  });

  test(names.cli, () => {
    const input = '7 8 9 10 2\n11 12 2\n';
    const run = (plan: string, extra: string[]) =>
      spawnSync(
        process.execPath,
        [path.join(REPO_ROOT, 'bin', 'planc.js'), 'translate', plan, '--ids', '--quiet', '--max-length', '6', ...extra],
        { encoding: 'utf8', input, env: { ...process.env, PLANC_DEVICE: '' } },
      );
    const sim = run(plans.tiny.cuda, ['--device', 'sim']);
    assert.is(sim.status, 0, sim.stderr);
    assert.match(sim.stderr, /emulating the CUDA device on the CPU/);
    const cpu = run(plans.tiny.cpu, []);
    assert.is(cpu.status, 0, cpu.stderr);
    assert.is(sim.stdout, cpu.stdout);
    const bad = run(plans.tiny.cuda, ['--device', 'tpu']);
    assert.is(bad.status === 0, false);
    assert.match(bad.stderr, /--device tpu/);
  });

  const esenPlans = (vocab: string[], label: string) => {
    const cuda = path.join(tmp, `esen-${label}-cuda.plan`),
      cpu = path.join(tmp, `esen-${label}-cpu.plan`);
    if (!fs.existsSync(cpu)) {
      const p = ['--max-batch', '5', '--max-src-len', '32', '--max-tgt-len', '32', ...vocab];
      optimize(esen!, cuda, ['--target', 'cuda', '--arch', 'sm_80', ...p]);
      optimize(esen!, cpu, p);
    }
    return { cuda, cpu };
  };

  testIf(test, noEsenRun)(names.esenGraphs, async () => {
    const calib = path.join(tmp, 'calib.es');
    fs.writeFileSync(calib, fs.readFileSync(path.join(esen!, 'dev.es'), 'utf8').split('\n').slice(0, 200).join('\n'));
    // (a shortlist plan runs the clusters plan's kernels: project_topk with an active mask, fed instead of computed)
    const variants: [string, string[]][] = [
      ['topk', []],
      ['clusters', ['--vocab', 'clusters=64,8', '--calibrate', calib]],
      ['w8', ['--quantize', 'w8']],
      ['fp16', ['--quantize', 'fp16']],
    ];
    const plansOf = variants.map(([label, vocab]) => [label, esenPlans(vocab, label)] as const);
    // one emulator child per plan, as many at once as there are cores; batch 5 only (CI time): its encoder rows take the
    // matrix paths and its decoder rows the gemv ones, and batch 1 adds no kernel path (the tiny and opus-shaped plans
    // above check batch 1 against 5 on every graph)
    const jobs: (() => Promise<readonly [string, string, Runs]>)[] = plansOf.map(
      ([label, p]) =>
        async () =>
          [label, '5', (await childAsync(['graphs', p.cuda, p.cpu, '5'])).json.runs as Runs] as const,
    );
    const done = await pool(jobs, PARALLEL);
    for (const [label, b, runs] of done)
      checkRuns(runs, `es-en ${label} batch ${b}`, label === 'fp16' ? 'fp16' : undefined);
  });

  testIf(test, noEsenRun)(names.esen, async () => {
    const { cuda, cpu } = esenPlans([], 'topk');
    const ids = JSON.parse(fs.readFileSync(path.join(esen!, 'test_ids.json'), 'utf8')).src_ids as number[][];
    const n = Number(process.env.PLANC_CUDASIM_ESEN_N ?? 16);
    const src = path.join(tmp, 'esen-sources.json');
    fs.writeFileSync(src, JSON.stringify(ids.filter((s) => s.length <= 32).slice(0, n)));
    // CUDA graphs off (the default); replaying them is checked on the synthetic plans (names.replay)
    const { json } = await childAsync(['decode', cuda, cpu, src], { PLANC_CUDA_GRAPH: '0', CUDASIM_MAX_LENGTH: '32' });
    assert.is(json.sim.length, n);
    assert.equal(json.sim, json.cpu);
  });
}

test.run();
