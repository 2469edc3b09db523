// The package as users get it: npm pack (a copy of this checkout: compiled dist/, prebuilt addon), npm install of the
// tarball into an empty project, then there with plain node: import planc, optimize (with --emit-ts), translate, run,
// npx planc --version; a TypeScript program type-checks against the package's declarations and the emitted module.
// Then the installed CLI: every command's --help and a small real run of each, a cuda plan translated on the emulated
// CUDA device (--device sim: its sources ship in the package, it builds in $XDG_CACHE_HOME), and its errors are named.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { REPO_ROOT } from '../compiler/paths.ts';
import { loadPlan } from '../runtime/plan.ts';
import { NATIVE_BUILD_PATH, nativeAvailable } from '../runtime/native.ts';
import { findNvcc } from '../codegen/cuda/nvcc.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { NEEDS_NATIVE, skipPart, testIf } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-package-'));
const SRC = path.join(tmp, 'src');
const APP = path.join(tmp, 'app');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPX = process.platform === 'win32' ? 'npx.cmd' : 'npx';
/** Where the first test installed the package (undefined when it did not get that far). */
let installed: string | undefined;
const npmFound = spawnSync(NPM, ['--version'], { encoding: 'utf8' }).status === 0;
const portableBuild = fs.existsSync(NATIVE_BUILD_PATH) && !process.env.PLANC_NATIVE_ADDON;
const reason = !npmFound
  ? 'need npm'
  : !nativeAvailable()
    ? NEEDS_NATIVE
    : !portableBuild
      ? 'need the addon built in native/build (npm run build:native)'
      : undefined;

function run(
  cmd: string,
  args: string[],
  cwd: string,
  input?: string,
  env: Record<string, string | undefined> = {},
): SpawnSyncReturns<string> {
  const e: Record<string, string | undefined> = { ...process.env, npm_config_update_notifier: 'false', ...env };
  for (const k of Object.keys(e)) if (e[k] === undefined) delete e[k];
  return spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    ...(input !== undefined ? { input } : {}),
    env: e,
  });
}
const out = (r: SpawnSyncReturns<string>) => `status ${r.status}\n${r.stdout}\n${r.stderr}`.slice(-6000);

/** This checkout's files as a fresh clone has them (no node_modules, builds or scratch), and its addon build. */
function copyCheckout(): void {
  const skip = new Set(['node_modules', '.git', 'dist', 'prebuilds', 'build', 'build-tests']);
  fs.cpSync(REPO_ROOT, SRC, {
    recursive: true,
    filter: (p) => !skip.has(path.basename(p)) && !/^\.tmp-|\.tgz$/.test(path.basename(p)),
  });
  fs.symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(SRC, 'node_modules'), 'dir');
  const build = path.join(SRC, 'native', 'build');
  fs.mkdirSync(path.join(build, 'Release'), { recursive: true });
  fs.copyFileSync(NATIVE_BUILD_PATH, path.join(build, 'Release', 'planc_native.node'));
  fs.copyFileSync(
    path.join(path.dirname(path.dirname(NATIVE_BUILD_PATH)), 'CMakeCache.txt'),
    path.join(build, 'CMakeCache.txt'),
  );
}

/** A tiny synthetic Marian model with a word-level tokenizer.json (w2..w100); d 64 for cuda (head dims of 32). */
function tinyModel(dir: string, d = 16): void {
  makeModel({
    arch: 'marian',
    d,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 2 * d,
    vocab: 101,
    maxPos: 64,
    activation: 'relu',
    seed: 3,
    out: dir,
  });
  fs.writeFileSync(
    path.join(dir, 'tokenizer.json'),
    JSON.stringify({
      version: '1.0',
      added_tokens: [],
      normalizer: null,
      pre_tokenizer: { type: 'WhitespaceSplit' },
      post_processor: null,
      decoder: null,
      model: {
        type: 'WordLevel',
        vocab: Object.fromEntries(
          Array.from({ length: 101 }, (_, i) => [i === 0 ? '</s>' : i === 1 ? '<unk>' : `w${i}`, i]),
        ),
        unk_token: '<unk>',
      },
    }),
  );
}

// What a user writes: plain JavaScript against the package's exports, run with plain node.
const USE = `import { loadPlan, PlancError, nativeInfo } from 'planc';
const plan = await loadPlan('tiny.plan');
const texts = await plan.translate(['w5 w6 w7', 'w9', ''], { beamSize: 2 });
const ids = await plan.translateIds([[5, 6, 0]], { returnScores: true });
const enc = await plan.run('encoder', {
  input_ids: { dtype: 'int64', dims: [1, 3], data: BigInt64Array.from([5n, 6n, 0n]) },
  attention_mask: { dtype: 'int64', dims: [1, 3], data: BigInt64Array.from([1n, 1n, 1n]) },
});
let error;
try { await plan.run('nope', {}); } catch (e) { error = e instanceof PlancError ? e.code : String(e); }
console.log(JSON.stringify({ graphs: plan.graphs, texts, ids, hidden: Array.from(enc.last_hidden_state.data), dims: enc.last_hidden_state.dims, error, blas: nativeInfo().blas }));
`;

// A TypeScript user's program, type-checked against the package's declarations (no access to planc's sources).
const TYPED = `import { loadPlan, PlancError, type RtTensor, type TranslateOptions } from 'planc';
const plan = await loadPlan('tiny.plan');
const options: TranslateOptions = { beamSize: 2, lengthPenalty: 1 };
const texts: string[] = await plan.translate(['w5'], options);
const outputs: Record<string, RtTensor> = await plan.run('encoder', {});
console.log(texts, outputs, PlancError);
`;

// The same through the module planc optimize --emit-ts wrote, which imports the installed package.
const EMITTED = `import { load } from './tiny-plan.ts';
const plan = await load();
const { last_hidden_state } = await plan.run('encoder', {
  input_ids: { dtype: 'int64', dims: [1, 2], data: BigInt64Array.from([5n, 0n]) },
  attention_mask: { dtype: 'int64', dims: [1, 2], data: BigInt64Array.from([1n, 1n]) },
});
const width: 16 = last_hidden_state.dims[2];
console.log(width, await plan.translate(['w5']));
`;

testIf(test, reason)(
  'npm pack → npm install into an empty project → import planc, optimize, translate and run with plain node; npx planc --version',
  async () => {
    copyCheckout();
    const t0 = performance.now();
    const pack = run(NPM, ['pack', '--json', '--pack-destination', tmp], SRC);
    assert.is(pack.status, 0, out(pack));
    const info = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as {
      filename: string;
      files: { path: string }[];
    }[];
    const files = info[0]!.files.map((f) => f.path);
    for (const f of [
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli/main.js',
      'dist/compiler/plan/plan.proto',
      'bin/planc.js',
      'scripts/install-native.mjs',
      'native/CMakeLists.txt',
      'native/src/addon.cc',
      'native/cudasim/driver.cc',
      'native/cudasim/cudasim.h',
      'native/cudasim/include/cuda_fp16.h',
      'prebuilds/linux-x64/planc_native.node',
      'README.md',
      'package.json',
    ]) {
      if (f.startsWith('prebuilds/') && `${process.platform}-${process.arch}` !== 'linux-x64') {
        skipPart(
          `the packed prebuilt addon is checked on linux-x64 (this is ${process.platform}-${process.arch})`,
          'package contents',
        );
        continue;
      }
      assert.ok(files.includes(f), `${f} is packed`);
    }
    const extra = files.filter(
      (f) =>
        /^(test|bench|\.ci|compiler|runtime|cli|passes|codegen|optimize)\//.test(f) ||
        /^native\/(cudasim\/)?(test|build)/.test(f) ||
        (f.endsWith('.ts') && !f.endsWith('.d.ts')),
    );
    assert.equal(extra, [], 'no tests, benchmarks, CI files or TypeScript sources are packed');
    assert.not.ok(fs.existsSync(path.join(SRC, 'prebuilds')), 'postpack removes the prebuilt copy');
    const t1 = performance.now();

    fs.mkdirSync(APP);
    const tarball = path.join(tmp, info[0]!.filename);
    // npm 11 runs a dependency's install script only when the project allows it; allowed here, it finds the prebuilt addon.
    fs.writeFileSync(
      path.join(APP, 'package.json'),
      JSON.stringify({ name: 'app', private: true, type: 'module', allowScripts: { [`file:${tarball}`]: true } }),
    );
    const install = run(NPM, ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline'], APP);
    if (install.status !== 0 && /ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT/.test(install.stderr)) {
      skipPart('need the npm registry', 'installing the packed tarball');
      return;
    }
    assert.is(install.status, 0, out(install));
    installed = path.join(APP, 'node_modules', 'planc');
    assert.ok(
      fs.existsSync(path.join(installed, 'prebuilds', `${process.platform}-${process.arch}`, 'planc_native.node')),
    );
    assert.not.ok(
      fs.existsSync(path.join(installed, 'native', 'build')),
      'nothing was compiled: the prebuilt addon loads',
    );
    assert.not.ok(fs.existsSync(path.join(APP, 'node_modules', 'tsx')), 'tsx is a development dependency only');
    const t2 = performance.now();

    const version = run(NPX, ['planc', '--version'], APP);
    assert.is(version.status, 0, out(version));
    assert.is(
      version.stdout.trim(),
      `planc ${JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')).version}`,
    );

    tinyModel(path.join(APP, 'model'));
    const opt = run(
      NPX,
      [
        'planc',
        'optimize',
        'model',
        '-o',
        'tiny.plan',
        '--emit-ts',
        'tiny-plan.ts',
        '--quiet',
        '--max-batch',
        '4',
        '--max-src-len',
        '16',
        '--max-tgt-len',
        '16',
      ],
      APP,
    );
    assert.is(opt.status, 0, out(opt));

    fs.writeFileSync(path.join(APP, 'use.mjs'), USE);
    const use = run(process.execPath, ['use.mjs'], APP);
    assert.is(use.status, 0, out(use));
    const got = JSON.parse(use.stdout) as {
      graphs: string[];
      texts: string[];
      ids: { ids: number[]; score: number }[];
      hidden: number[];
      dims: number[];
      error: string;
      blas: string;
    };
    assert.equal(got.graphs, [
      'encoder',
      'decoder',
      'decoder_with_past',
      'decoder_with_past_rows',
      'decoder_positions',
      'decoder_cross_kv',
    ]);
    assert.is(got.error, 'PLANC_E405');
    // The installed package computes what this checkout's sources compute on the same plan.
    const plan = await loadPlan(path.join(APP, 'tiny.plan'));
    try {
      assert.equal(got.texts, await plan.translate(['w5 w6 w7', 'w9', ''], { beamSize: 2 }));
      assert.is(got.texts.length, 3);
      assert.ok(got.texts[0]!.length > 0, 'a translation');
      assert.equal(
        got.ids,
        (await plan.translateIds([[5, 6, 0]], { returnScores: true })).map((r) => ({ ids: r.ids, score: r.score })),
      );
      const enc = await plan.run('encoder', {
        input_ids: { dtype: 'int64', dims: [1, 3], data: BigInt64Array.from([5n, 6n, 0n]) },
        attention_mask: { dtype: 'int64', dims: [1, 3], data: BigInt64Array.from([1n, 1n, 1n]) },
      });
      assert.equal(got.dims, [1, 3, 16]);
      assert.equal(got.hidden, Array.from(enc.last_hidden_state.data as Float32Array));
    } finally {
      plan.close();
    }

    fs.writeFileSync(path.join(APP, 'typed.ts'), TYPED);
    fs.writeFileSync(path.join(APP, 'emitted.ts'), EMITTED);
    fs.writeFileSync(
      path.join(APP, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          allowImportingTsExtensions: true,
          types: ['node'],
          typeRoots: [path.join(REPO_ROOT, 'node_modules', '@types')],
        },
        files: ['typed.ts', 'tiny-plan.ts', 'emitted.ts'],
      }),
    );
    const tsc = run(
      process.execPath,
      [path.join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', APP, '--pretty', 'false'],
      APP,
    );
    assert.is(tsc.status, 0, `the package's declarations type-check a user's program:\n${out(tsc)}`);
    const t3 = performance.now();
    process.stdout.write(
      `  package: pack ${((t1 - t0) / 1000).toFixed(1)} s, install ${((t2 - t1) / 1000).toFixed(1)} s, use ${((t3 - t2) / 1000).toFixed(1)} s\n`,
    );
  },
);

/** A run of the installed CLI that must succeed. */
function cli(args: string[], input?: string, env: Record<string, string | undefined> = {}): SpawnSyncReturns<string> {
  const r = run(NPX, ['planc', ...args], APP, input, env);
  assert.is(r.status, 0, `planc ${args.join(' ')}: ${out(r)}`);
  return r;
}

/** A run of the installed CLI that must fail with a named error (its one line, the code), never an internal one. */
function cliFails(args: string[], code: string, input?: string, env: Record<string, string | undefined> = {}): string {
  const r = run(NPX, ['planc', ...args], APP, input, env);
  assert.is(r.status, 2, `planc ${args.join(' ')}: ${out(r)}`);
  assert.not.match(r.stderr, /internal error/, `planc ${args.join(' ')}: ${r.stderr}`);
  assert.match(r.stderr, new RegExp(`^planc( \\w+)?: ${code}: `, 'm'), `planc ${args.join(' ')}: ${r.stderr}`);
  return r.stderr;
}

testIf(test, reason)(
  "the installed CLI: every command's --help and a small run of each; --device sim on a cuda plan; errors are named",
  () => {
    if (!installed) {
      skipPart('the package was not installed (the test above)', 'the installed CLI');
      return;
    }
    const t0 = performance.now();
    const commands = ['optimize', 'translate', 'run', 'inspect', 'tune', 'report', 'ddgviz'];
    const top = cli(['--help']);
    for (const c of commands) {
      assert.match(top.stdout, new RegExp(`^  ${c} `, 'm'), `planc --help lists ${c}`);
      assert.match(cli([c, '--help']).stdout, new RegExp(`^usage: planc ${c} `), `planc ${c} --help`);
    }
    assert.match(cli(['help', 'translate']).stdout, /^usage: planc translate /);

    // optimize ran above (tiny.plan); the other commands on it, and ddgviz on a plan whose decoder steps take 3 tokens.
    const lines = cli(['translate', 'tiny.plan', '--strategy', 'greedy', '--quiet'], 'w5 w6 w7\nw9\n')
      .stdout.split('\n')
      .filter((l) => l !== '');
    assert.is(lines.length, 2, lines.join('\n'));
    fs.writeFileSync(
      path.join(APP, 'feeds.json'),
      JSON.stringify({ input_ids: [[5, 6, 0]], attention_mask: [[1, 1, 1]] }),
    );
    const ran = JSON.parse(
      cli(['run', 'tiny.plan', '--graph', 'encoder', '-i', 'feeds.json', '--json']).stdout,
    ) as Record<string, { dims: number[] }>;
    assert.equal(ran.last_hidden_state!.dims, [1, 3, 16]);
    const plan = JSON.parse(cli(['inspect', 'tiny.plan', '--json']).stdout) as object;
    assert.ok(JSON.stringify(plan).includes('decoder_with_past'));
    assert.ok(JSON.stringify(JSON.parse(cli(['inspect', 'model', '--json']).stdout)).includes('decoder_with_past'));
    cli([
      'tune',
      'tiny.plan',
      '-o',
      'tuned.plan',
      '--tuning-cache',
      'tuning.json',
      '--tune-batch',
      '1',
      '--tune-runs',
      '1',
      '--quiet',
    ]);
    assert.ok(fs.existsSync(path.join(APP, 'tuned.plan')) && fs.existsSync(path.join(APP, 'tuning.json')));
    const report = JSON.parse(cli(['report', 'tuned.plan', '--json', '--runs', '1']).stdout) as object;
    assert.ok(Object.keys(report).length > 0);
    cli([
      'optimize',
      'model',
      '-o',
      'jacobi.plan',
      '--step-tokens',
      '3',
      '--quiet',
      '--max-batch',
      '2',
      '--max-src-len',
      '16',
      '--max-tgt-len',
      '16',
    ]);
    fs.writeFileSync(path.join(APP, 'src.txt'), 'w5 w6 w7\nw9 w10\n');
    cli(['ddgviz', 'jacobi.plan', '--src', 'src.txt', '-o', 'ddgviz.html', '--limit', '2']);
    assert.match(fs.readFileSync(path.join(APP, 'ddgviz.html'), 'utf8'), /<html/i);

    // Errors from the installed package are named.
    cliFails(['translate', 'missing.plan'], 'PLANC_E\\d{3}', '');
    cliFails(['translate', 'tiny.plan', '--device', 'tpu'], 'PLANC_E301', '');
    cliFails(['frobnicate'], 'PLANC_E301');
    const t1 = performance.now();

    // --device sim: a cuda plan (nvcc compiles its kernels) runs on the emulated device, built from the package's
    // native/cudasim into $XDG_CACHE_HOME/planc/cudasim (not into node_modules), greedy tokens as the cpu plan's.
    let nvcc = true;
    try {
      findNvcc();
    } catch {
      nvcc = false;
    }
    const gxx = spawnSync('g++', ['--version']).status === 0;
    if (!nvcc || !gxx) {
      skipPart(
        !nvcc
          ? 'need nvcc (a cuda plan carries its compiled kernels)'
          : 'need g++ (the emulated device compiles kernels for the CPU)',
        '--device sim from the installed package',
      );
      return;
    }
    tinyModel(path.join(APP, 'model64'), 64);
    const profile = ['--quiet', '--max-batch', '2', '--max-src-len', '16', '--max-tgt-len', '16'];
    cli(['optimize', 'model64', '-o', 'cuda.plan', '--target', 'cuda', '--arch', 'sm_80', ...profile]);
    cli(['optimize', 'model64', '-o', 'cpu64.plan', ...profile]);
    const cache = path.join(tmp, 'xdg-cache');
    const simEnv = {
      XDG_CACHE_HOME: cache,
      PLANC_CUDASIM_CACHE: undefined,
      PLANC_CUDASIM_DIR: undefined,
      PLANC_CUDA_DRIVER: undefined,
      PLANC_DEVICE: undefined,
    };
    // A failing emulator build is a named error too.
    const noCxx = cliFails(['translate', 'cuda.plan', '--device', 'sim'], 'PLANC_E403', 'w5\n', {
      ...simEnv,
      PLANC_CUDASIM_CXX: path.join(tmp, 'no-such-g++'),
    });
    assert.match(noCxx, /emulated CUDA device/);
    const src = 'w5 w6 w7\nw9\n';
    const sim = cli(['translate', 'cuda.plan', '--device', 'sim', '--strategy', 'greedy'], src, {
      ...simEnv,
      PLANC_CUDASIM_CXX: undefined,
    });
    assert.match(sim.stderr, /cudasim: emulating the CUDA device/);
    assert.equal(
      sim.stdout,
      cli(['translate', 'cpu64.plan', '--strategy', 'greedy', '--quiet'], src).stdout,
      'the emulated cuda plan translates as the cpu plan',
    );
    assert.ok(
      fs.readdirSync(path.join(cache, 'planc', 'cudasim')).some((d) => d.startsWith('driver-')),
      'the emulator was built in $XDG_CACHE_HOME/planc/cudasim',
    );
    assert.ok(fs.existsSync(path.join(cache, 'planc', 'cudasim', 'modules')), 'its kernels too');
    assert.not.ok(
      fs.existsSync(path.join(installed, 'native', 'cudasim', 'build')),
      'nothing is built inside the installed package',
    );
    const t2 = performance.now();
    process.stdout.write(
      `  installed CLI: commands ${((t1 - t0) / 1000).toFixed(1)} s, --device sim ${((t2 - t1) / 1000).toFixed(1)} s\n`,
    );
  },
);

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test.run();
