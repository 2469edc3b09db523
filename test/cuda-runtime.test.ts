// The CUDA launcher without a GPU: a fake libcuda.so.1 (test/native/cuda-stub.c) stands in for the driver, so plan
// loading, program decoding, launch selection, grids, the KArgs layout, output copies, kernel-error reports and the
// host↔device traffic of decoding with resident (device) KV caches run.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT } from '../compiler/paths.ts';
import { readPlanFile } from '../compiler/plan/format.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { before } from './helpers/before.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-cuda-stub-'));
const log = path.join(tmp, 'launches.log');
const planFile = path.join(tmp, 'tiny.plan');

function child(extraEnv: Record<string, string> = {}, graph?: string) {
  fs.rmSync(log, { force: true });
  const r = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(REPO_ROOT, 'test', 'helpers', 'stub-driver-child.ts'),
      planFile,
      ...(graph ? [graph] : []),
    ],
    {
      encoding: 'utf8',
      env: { ...process.env, LD_LIBRARY_PATH: tmp, PLANC_CUDA_STUB_LOG: log, ...extraEnv },
    },
  );
  assert.is(r.status, 0, r.stderr);
  return {
    result: JSON.parse(r.stdout.trim().split('\n').pop()!),
    lines: fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : [],
  };
}

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [
    'every graph runs: one launch per kernel call, in order, with the planned entry and resolved dims',
    'a kernel-reported error names the kernel, its name and its node',
    'no driver: loading says why',
    'greedy decoding: per step only input_ids, the past length and the step outputs cross between host and device',
    'device span copies equal in-order host copies; strided runs are one 2D copy, overlapping ones are split',
  ]);
} else {
  before(test, () => {
    const cc = spawnSync(
      'cc',
      [
        '-shared',
        '-fPIC',
        '-O1',
        '-o',
        path.join(tmp, 'libcuda.so.1'),
        path.join(REPO_ROOT, 'test', 'native', 'cuda-stub.c'),
      ],
      { encoding: 'utf8' },
    );
    if (cc.status !== 0) throw new Error(`cannot build the libcuda stub: ${cc.stderr}`);
    const dir = path.join(tmp, 'tiny');
    makeModel({
      arch: 'marian',
      d: 64,
      encoderLayers: 1,
      decoderLayers: 1,
      heads: 2,
      ffn: 128,
      vocab: 101,
      out: dir,
      seed: 3,
      maxPos: 64,
      activation: 'relu',
    });
    const r = spawnSync(
      process.execPath,
      [
        path.join(REPO_ROOT, 'bin', 'planc.js'),
        'optimize',
        dir,
        '-o',
        planFile,
        '--target',
        'cuda',
        '--arch',
        'sm_80',
        '--no-tokenizer',
        '--max-batch',
        '4',
        '--max-src-len',
        '16',
        '--max-tgt-len',
        '8',
        '--quiet',
      ],
      { encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`optimize --target cuda failed: ${r.stderr}`);
  });

  test('every graph runs: one launch per kernel call, in order, with the planned entry and resolved dims', () => {
    const { result, lines } = child();
    assert.is(result.error, undefined, result.error);
    assert.is(result.device, 'planc stub GPU (sm_90)');
    assert.equal(
      result.runs.map((r: { graph: string }) => r.graph),
      ['encoder', 'decoder', 'decoder_with_past', 'decoder_with_past_rows', 'decoder_positions', 'decoder_cross_kv'],
    );
    const calls = result.runs.flatMap((r: { calls: string[] }) => r.calls);
    assert.is(lines.length, calls.length, 'one launch per call (no call has an empty grid here)');
    lines.forEach((l: string, i: number) => {
      const entry = l.split(' ')[0]!;
      assert.ok(
        calls[i]!.split('|').includes(entry),
        `launch ${i}: ${entry} is not a variant of call ${i} (${calls[i]})`,
      );
    });
    // The encoder's first fused_matmul: 3 × 7 = 21 rows (> 16: the tensor-core variant), N = 64 → grid 1 × 1, 128 threads.
    const mm = lines.find((l) => /_fused_matmul /.test(l) && / in\[3,7,64\]/.test(l));
    assert.ok(mm, 'a fused_matmul on the encoder states');
    assert.match(mm!, /grid=1,1,1 block=128/);
    // decoder_with_past's matmuls have 3 rows: the GEMV variant (256 threads).
    const step = lines.slice(lines.length - result.runs[2].calls.length);
    assert.ok(
      step.some((l) => /_fused_matmul grid=\d+,\d+,1 block=256 /.test(l)),
      'a GEMV launch in the decoder step',
    );
    assert.ok(
      step.some((l) => /_attention /.test(l) && /block=128/.test(l)),
      'attention in the decoder step',
    );
    assert.equal(result.runs[0].outputs.last_hidden_state, [3, 7, 64]);
  });

  test('a kernel-reported error names the kernel, its name and its node', () => {
    const { result } = child({ PLANC_CUDA_STUB_FAIL_CALL: '0' }, 'encoder');
    const node = readPlanFile(planFile).header.programs[0]!.kernels[0]!;
    assert.match(
      result.error ?? '',
      new RegExp(
        `PLANC_E406: kernel #0 \\(${node.name}, node ${node.node.replace(/[/.()]/g, '\\$&')}\\): an index is out of range`,
      ),
    );
  });

  test('greedy decoding: per step only input_ids, the past length and the step outputs cross between host and device', () => {
    const copies = path.join(tmp, 'copies.log');
    fs.rmSync(copies, { force: true });
    const { result } = child({ PLANC_CUDA_STUB_COPY_LOG: copies }, '--decode');
    assert.is(result.error, undefined, result.error);
    const steps: { rows: number; outBytes: number[] }[] = result.steps;
    const lines = fs.readFileSync(copies, 'utf8').trim().split('\n');
    // segments: the batch setup (encoder, first step, cache fill) before "# pick 0", then select + step k before "# pick k"
    const segments: string[][] = [[]];
    for (const l of lines.slice(lines.indexOf('# decode') + 1)) {
      if (l.startsWith('# pick')) segments.push([]);
      else segments[segments.length - 1]!.push(l);
    }
    assert.equal(
      steps.map((s) => s.rows),
      [3, 3, 3, 2, 2],
      'sentence 0 (cap 3) leaves the batch after its third token',
    );
    assert.is(segments.length, steps.length + 1);
    assert.equal(segments[steps.length], [], 'nothing after the last step');
    const host = (seg: string[]) => seg.filter((l) => /^(HtoD|DtoH)/.test(l)).sort();
    const outputs = (k: number) => steps[k]!.outBytes.map((b) => `DtoH ${b}`);
    // the setup brings back only the first step's host outputs (logits or top-k): encoder states and K/V stay on the device
    assert.equal(
      host(segments[0]!).filter((l) => l.startsWith('DtoH') && !l.endsWith('err')),
      outputs(0).sort(),
    );
    for (let k = 1; k < steps.length; k++) {
      const want = [`HtoD ${steps[k]!.rows * 8}`, 'HtoD 8', ...outputs(k), 'DtoH 8 err'].sort();
      assert.equal(host(segments[k]!), want, `step ${k}: input_ids, past length, outputs, the kernel error word`);
    }
    assert.ok(
      segments[3]!.some((l) => /^(DtoD|2D) /.test(l)),
      'the shrinking step compacts rows on the device',
    );
    // no host copy anywhere has the size of a cache feed ([rows, H, capacity, D] float32)
    const step = readPlanFile(planFile).header.programs.find((p) => p.graph === 'decoder_with_past')!;
    const cache = step.inputs.find((i) => i.name.startsWith('kv_cache.'));
    assert.ok(cache, 'the plan has in-place caches');
    const constant = (e: number) => step.exprs[e]!.terms[0]!.coeff;
    const dims = step.tensors[cache!.tensor]!.dims;
    const rowBytes = constant(dims[1]!) * 5 * constant(dims[3]!) * 4; // H × capacity (5: the longest cap) × D float32
    for (const l of lines.filter((x) => /^(HtoD|DtoH)/.test(x))) {
      const bytes = Number(l.split(' ')[1]);
      for (let rows = 1; rows <= 4; rows++)
        assert.is.not(bytes, rows * rowBytes, `a host copy the size of a ${rows}-row cache: ${l}`);
    }
  });

  test('device span copies equal in-order host copies; strided runs are one 2D copy, overlapping ones are split', () => {
    const copies = path.join(tmp, 'copies.log');
    fs.rmSync(copies, { force: true });
    const { result } = child({ PLANC_CUDA_STUB_COPY_LOG: copies }, '--spans');
    assert.is(result.error, undefined, result.error);
    const cases: { name: string; ok: boolean; copies: string[] }[] = result.spans;
    assert.ok(cases.length > 40);
    for (const c of cases) assert.ok(c.ok, `${c.name}: device bytes differ from in-order host copies`);
    const by = (name: string) => cases.find((c) => c.name === name)!.copies.filter((l) => /^(DtoD|2D) /.test(l));
    assert.equal(by('fill'), ['2D 32 x 6'], 'a cache fill (rows × heads, capacity-strided) is one 2D copy');
    assert.equal(
      by('gather'),
      ['2D 96 x 2', '2D 96 x 2', '2D 96 x 4'],
      'a beam gather: one 2D copy per run of consecutive source rows',
    );
    assert.equal(
      by('compact rows'),
      ['DtoD 256', 'DtoD 256', 'DtoD 256'],
      'rows moving down by one are not merged into one overlapping copy',
    );
  });

  test('no driver: loading says why', () => {
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', path.join(REPO_ROOT, 'test', 'helpers', 'stub-driver-child.ts'), planFile],
      {
        encoding: 'utf8',
        env: { ...process.env, LD_LIBRARY_PATH: path.join(tmp, 'none') },
      },
    );
    assert.is.not(r.status, 0);
    assert.match(
      r.stderr,
      /PLANC_E403: plan targets cuda \(sm_80\) but this machine cannot run it: no GPU: libcuda.so.1 not found/,
    );
  });
}

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
