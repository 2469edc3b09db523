// planc optimize / inspect / run on the real es-en model, and the Node API's refusal of bad feeds.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { zipSync } from 'fflate';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { sharedDir } from '../compiler/paths.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { tensorFrom } from '../runtime/tensor.ts';
import { before } from './helpers/before.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipSuite } from './helpers/skip.ts';

const shared = sharedDir();
const esen = shared && path.join(shared, 'models', 'es-en');

if (!esen || !fs.existsSync(esen) || !nativeAvailable()) {
  skipSuite(test, !nativeAvailable() ? NEEDS_NATIVE : needsShared('models/es-en'), [
    'optimize prints a summary and progress',
    'inspect --json: weights stored once, every arena within 1.10x of its lower bound',
    'inspect --json: every fusion fired (one planc.Attention per attention block, one norm per norm) and no KV Concat',
    'run: JSON feeds in, output shapes and values out',
    'run: .npz feeds give the same outputs as JSON feeds',
    'bad feeds: wrong dtype, rank, shape, over the profile, ids outside the vocabulary, missing, unknown',
    'a plan from another format version is refused naming the version',
    'a truncated plan is refused by the CLI with exit 2',
  ]);
} else {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-cli-'));
  const planFile = path.join(tmp, 'es-en.plan');
  let plan: Plan;

  before(test, async () => {
    const r = planc([
      'optimize',
      esen,
      '-o',
      planFile,
      '--max-batch',
      '4',
      '--max-src-len',
      '24',
      '--max-tgt-len',
      '16',
    ]);
    if (r.status !== 0) throw new Error(`optimize failed: ${r.stderr}`);
    plan = await loadPlan(planFile);
  });

  test('optimize prints a summary and progress', () => {
    const r = planc(['optimize', esen, '-o', path.join(tmp, 'again.plan'), '--max-batch', '2']);
    assert.is(r.status, 0, r.stderr);
    assert.match(r.stdout, /encoder\s+\d+ kernels/);
    assert.match(r.stdout, /done in [\d.]+ s/);
    assert.match(r.stderr, /lowering decoder_with_past/);
  });

  test('inspect --json: weights stored once, every arena within 1.10x of its lower bound', () => {
    const r = planc(['inspect', planFile, '--json']);
    assert.is(r.status, 0, r.stderr);
    const j = JSON.parse(r.stdout);
    assert.is(j.target, 'cpu');
    const distinct = JSON.parse(planc(['inspect', esen, '--json']).stdout).uniqueWeightBytes;
    assert.ok(
      j.uniqueWeightBytes <= 1.02 * distinct,
      `plan weights ${j.uniqueWeightBytes} vs distinct initializers ${distinct}`,
    );
    assert.equal(
      j.graphs.map((g: { name: string }) => g.name),
      ['encoder', 'decoder', 'decoder_with_past', 'decoder_with_past_rows', 'decoder_positions', 'decoder_cross_kv'],
    );
    for (const g of j.graphs.filter((x: { name: string }) => x.name !== 'decoder_positions')) {
      // the positions graph is a few kernels; the encoder K/V cut, two products and two head splits a decoder layer
      assert.ok(g.kernelCount >= (g.name === 'decoder_cross_kv' ? 8 : 20), `${g.name} kernels`);
      assert.ok(
        g.arenaBytes <= 1.1 * g.arenaLowerBoundBytes,
        `${g.name}: arena ${g.arenaBytes} vs lower bound ${g.arenaLowerBoundBytes}`,
      );
      assert.ok(g.arenaBytes < g.tensorBytesSum, `${g.name}: reuse happened`);
    }
  });

  test('inspect --json: every fusion fired (one planc.Attention per attention block, one norm per norm) and no KV Concat', () => {
    const j = JSON.parse(planc(['inspect', planFile, '--json']).stdout);
    const ops = Object.fromEntries(
      j.graphs.map((g: { name: string; fusedOps: Record<string, number> }) => [g.name, g.fusedOps]),
    );
    // es-en: 6 encoder layers (self-attention, 2 norms each), 2 decoder layers (self + cross attention, 3 norms each)
    assert.equal(ops.encoder, { 'planc.FusedMatMul': 36, 'planc.Attention': 6, 'planc.LayerNorm': 12 });
    assert.equal(ops.decoder, {
      'planc.FusedMatMul': 20,
      'planc.Attention': 4,
      'planc.LayerNorm': 6,
      'planc.ProjectTopK': 1,
    });
    assert.equal(ops.decoder_with_past, {
      'planc.FusedMatMul': 16,
      'planc.CacheWrite': 4,
      'planc.Attention': 4,
      'planc.LayerNorm': 6,
      'planc.ProjectTopK': 1,
    });
    const step = plan.header.programs.find((p) => p.graph === 'decoder_with_past')!;
    assert.not.ok(
      step.kernels.some((k) => k.name === 'concat'),
      'no Concat of KV caches in decoder_with_past',
    );
    assert.ok(
      plan.inputs('decoder_with_past').some((i) => i.name.startsWith('kv_cache.')),
      'the step appends to cache inputs in place',
    );
  });

  test('run: JSON feeds in, output shapes and values out', () => {
    const feeds = path.join(tmp, 'feeds.json');
    fs.writeFileSync(feeds, JSON.stringify({ input_ids: [[26289, 2, 8332, 0]], attention_mask: [[1, 1, 1, 1]] }));
    const r = planc(['run', planFile, '--graph', 'encoder', '--inputs', feeds, '--json']);
    assert.is(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout).last_hidden_state;
    assert.equal(out.dims, [1, 4, 256]);
    assert.ok(out.data.every((x: number) => Number.isFinite(x)));
  });

  /** A NumPy .npy file for an int64 array (the header is a Python dict literal padded to 64 bytes). */
  const npyInt64 = (dims: number[], values: number[]): Uint8Array => {
    let header = `{'descr': '<i8', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
    header += ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
    const out = new Uint8Array(10 + header.length + values.length * 8);
    out.set([0x93, ...Buffer.from('NUMPY'), 1, 0, header.length & 0xff, header.length >> 8]);
    out.set(Buffer.from(header, 'latin1'), 10);
    values.forEach((v, i) => new DataView(out.buffer).setBigInt64(10 + header.length + i * 8, BigInt(v), true));
    return out;
  };

  test('run: .npz feeds give the same outputs as JSON feeds', () => {
    const npz = path.join(tmp, 'feeds.npz');
    fs.writeFileSync(
      npz,
      zipSync({
        'input_ids.npy': npyInt64([1, 4], [26289, 2, 8332, 0]),
        'attention_mask.npy': npyInt64([1, 4], [1, 1, 1, 1]),
      }),
    );
    const a = planc(['run', planFile, '--graph', 'encoder', '--inputs', npz, '--json']);
    assert.is(a.status, 0, a.stderr);
    const b = planc(['run', planFile, '--graph', 'encoder', '--inputs', path.join(tmp, 'feeds.json'), '--json']);
    assert.equal(JSON.parse(a.stdout), JSON.parse(b.stdout));
  });

  const expectFeedError = async (feeds: Record<string, ReturnType<typeof tensorFrom>>, ...parts: string[]) => {
    try {
      await plan.run('encoder', feeds);
      assert.unreachable('bad feeds were accepted');
    } catch (e) {
      assert.instance(e, PlancError);
      for (const p of parts) assert.ok((e as Error).message.includes(p), `'${p}' in ${(e as Error).message}`);
    }
  };
  const ids = (dims: number[], v = 5) => tensorFrom('int64', dims, new Array(dims.reduce((a, b) => a * b, 1)).fill(v));

  test('bad feeds: wrong dtype, rank, shape, over the profile, ids outside the vocabulary, missing, unknown', async () => {
    await expectFeedError(
      { input_ids: tensorFrom('int32', [1, 3], [1, 2, 3]), attention_mask: ids([1, 3], 1) },
      "'input_ids'",
      'int32',
      'int64',
    );
    await expectFeedError({ input_ids: ids([3]), attention_mask: ids([1, 3], 1) }, "'input_ids'", 'rank 1');
    await expectFeedError({ input_ids: ids([1, 3]), attention_mask: ids([1, 4], 1) }, "'attention_mask'", 'dims [1,4]');
    await expectFeedError(
      { input_ids: ids([5, 3]), attention_mask: ids([5, 3], 1) },
      'batch_size = 5',
      'maximum 4',
      'maxBatch',
    );
    await expectFeedError(
      { input_ids: ids([1, 30]), attention_mask: ids([1, 30], 1) },
      'encoder_sequence_length = 30',
      'maximum 24',
    );
    await expectFeedError(
      { input_ids: ids([1, 3], 32000), attention_mask: ids([1, 3], 1) },
      'token id 32000',
      'vocabulary',
    );
    await expectFeedError({ input_ids: ids([1, 3], -1), attention_mask: ids([1, 3], 1) }, 'token id -1');
    await expectFeedError({ input_ids: ids([1, 3]) }, "missing feed 'attention_mask'");
    await expectFeedError(
      { input_ids: ids([1, 3]), attention_mask: ids([1, 3], 1), extra: ids([1]) },
      "unknown feed 'extra'",
    );
    const wrongArray = { dtype: 'int64' as const, dims: [1, 3], data: new Float64Array(3) as unknown as BigInt64Array };
    await expectFeedError({ input_ids: wrongArray, attention_mask: ids([1, 3], 1) }, 'BigInt64Array');
    // and a good feed still runs afterwards
    const out = await plan.run('encoder', { input_ids: ids([2, 3]), attention_mask: ids([2, 3], 1) });
    assert.equal(out.last_hidden_state!.dims, [2, 3, 256]);
  });

  test('a plan from another format version is refused naming the version', () => {
    const bytes = fs.readFileSync(planFile);
    bytes.writeUInt32LE(99, 8);
    const other = path.join(tmp, 'future.plan');
    fs.writeFileSync(other, bytes);
    const r = planc(['inspect', other]);
    assert.is(r.status, 2);
    assert.ok(
      r.stderr.includes('PLANC_E402') && r.stderr.includes('format version 99') && r.stderr.includes('planc 0.1.0'),
      r.stderr,
    );
  });

  test('a truncated plan is refused by the CLI with exit 2', () => {
    const cut = path.join(tmp, 'cut.plan');
    fs.writeFileSync(cut, fs.readFileSync(planFile).subarray(0, 5000));
    const r = planc(['run', cut, '--graph', 'encoder', '--inputs', path.join(tmp, 'feeds.json')]);
    assert.is(r.status, 2);
    assert.ok(r.stderr.includes('PLANC_E401'), r.stderr);
  });

  test.after(() => {
    plan?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });
}

test.run();
