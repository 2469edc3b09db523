// make-model: generated models run in onnxruntime, the KV cache agrees with the full decoder, and the graphs match es-en.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import onnxProto from 'onnx-proto';
import ort from 'onnxruntime-node';
import { makeModel, modelProtos, type MakeModelOptions } from '../scripts/make-model/generate.ts';
import { buildMarian } from '../scripts/make-model/marian.ts';
import { planLayout } from '../scripts/make-model/weights.ts';
import { sharedDir } from '../compiler/paths.ts';
import { needsShared, testIf } from './helpers/skip.ts';

const { onnx } = onnxProto;
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const REAL = path.join(sharedDir() ?? '/nonexistent', 'models', 'es-en');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-make-model-'));
const TINY: MakeModelOptions = {
  arch: 'marian',
  d: 32,
  encoderLayers: 2,
  decoderLayers: 1,
  heads: 4,
  ffn: 64,
  vocab: 101,
  maxPos: 512,
  activation: 'relu',
  seed: 7,
  out: path.join(tmp, 'tiny'),
};
const H = 4,
  DH = 8,
  V = 101,
  D = 32;

const i64 = (rows: number[][]) =>
  new ort.Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);
const floats = (t: ort.Tensor) => t.data as Float32Array;
const allFinite = (t: ort.Tensor) => floats(t).every(Number.isFinite);
const decode = (file: string) => onnx.ModelProto.decode(fs.readFileSync(file));

function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assert.is(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** Values of an initializer (external or inline) as float32. */
function initializerData(dir: string, t: onnxProto.onnx.ITensorProto): Float32Array {
  if (t.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
    const kv = Object.fromEntries((t.externalData ?? []).map((e) => [e.key, e.value]));
    const buf = fs.readFileSync(path.join(dir, kv.location!));
    return new Float32Array(
      buf.buffer.slice(buf.byteOffset + Number(kv.offset), buf.byteOffset + Number(kv.offset) + Number(kv.length)),
    );
  }
  const raw = t.rawData!;
  return new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
}

test('tiny model: files, config, weights.bin layout (64-byte aligned, each tensor once, ≥1 KiB external)', () => {
  const r = makeModel(TINY);
  const names = r.files.map((f) => f.name).sort();
  assert.equal(names, [
    'config.json',
    'decoder_model.onnx',
    'decoder_with_past_model.onnx',
    'encoder_model.onnx',
    'weights.bin',
  ]);
  const cfg = JSON.parse(fs.readFileSync(path.join(TINY.out, 'config.json'), 'utf8'));
  for (const [k, v] of Object.entries({
    model_type: 'marian',
    d_model: 32,
    encoder_layers: 2,
    decoder_layers: 1,
    encoder_attention_heads: 4,
    decoder_attention_heads: 4,
    encoder_ffn_dim: 64,
    decoder_ffn_dim: 64,
    vocab_size: 101,
    max_position_embeddings: 512,
    pad_token_id: 0,
    eos_token_id: 0,
    decoder_start_token_id: 0,
    scale_embedding: true,
    activation_function: 'relu',
  }))
    assert.is(cfg[k], v, k);

  const size = fs.statSync(path.join(TINY.out, 'weights.bin')).size;
  const ranges = new Map<string, string>(); // "offset+length" → first tensor name seen there
  for (const file of ['encoder_model.onnx', 'decoder_model.onnx', 'decoder_with_past_model.onnx']) {
    const m = decode(path.join(TINY.out, file));
    assert.is(Number(m.irVersion), 8);
    assert.is(Number(m.opsetImport![0].version), 17);
    for (const t of m.graph!.initializer!) {
      const bytes = (t.dims ?? []).reduce((a, b) => a * Number(b), 1) * 4;
      if (bytes < 1024) {
        assert.ok(t.dataLocation !== onnx.TensorProto.DataLocation.EXTERNAL, `${t.name} should be inline`);
        assert.is(t.rawData!.length, bytes);
        continue;
      }
      assert.is(t.dataLocation, onnx.TensorProto.DataLocation.EXTERNAL, `${t.name} should be external`);
      assert.equal(
        t.externalData!.map((e) => e.key),
        ['location', 'offset', 'length'],
      );
      const kv = Object.fromEntries(t.externalData!.map((e) => [e.key, e.value]));
      assert.is(kv.location, 'weights.bin');
      assert.is(Number(kv.offset) % 64, 0, `${t.name} offset aligned`);
      assert.is(Number(kv.length), bytes);
      assert.ok(Number(kv.offset) + bytes <= size);
      ranges.set(`${kv.offset}+${kv.length}`, ranges.get(`${kv.offset}+${kv.length}`) ?? t.name!);
    }
  }
  // Distinct tensors do not overlap, and the file holds nothing else (apart from alignment padding).
  const sorted = [...ranges.keys()].map((k) => k.split('+').map(Number)).sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < sorted.length; i++)
    assert.ok(sorted[i][0] >= sorted[i - 1][0] + sorted[i - 1][1], 'tensors overlap');
  const last = sorted[sorted.length - 1];
  assert.is(size, last[0] + last[1]);
  // 2 enc layers × 6 matrices + 1 dec layer × 10 + embedding + its transposed copy = 24 external tensors.
  assert.is(sorted.length, 24);
});

test('tied output projection is a transposed copy of the embedding; same seed → same bytes', () => {
  const dec = decode(path.join(TINY.out, 'decoder_model.onnx'));
  const byName = new Map(dec.graph!.initializer!.map((t) => [t.name!, t]));
  const emb = initializerData(TINY.out, byName.get('m.emb.weight')!);
  const final = dec.graph!.node!.find((n) => n.name === '/MatMul')!;
  const proj = byName.get(final.input![1])!;
  assert.equal(proj.dims!.map(Number), [D, V]);
  const t = initializerData(TINY.out, proj);
  let bad = 0;
  for (let v = 0; v < V; v++) for (let j = 0; j < D; j++) if (t[j * V + v] !== emb[v * D + j]) bad++;
  assert.is(bad, 0);
  // Scale like a trained model: embedding std ≈ 1/sqrt(d).
  const std = Math.sqrt(emb.reduce((a, x) => a + x * x, 0) / emb.length);
  assert.ok(Math.abs(std - 1 / Math.sqrt(D)) < 0.02, `emb std ${std}`);

  const again = { ...TINY, out: path.join(tmp, 'tiny-again') };
  makeModel(again);
  for (const f of ['weights.bin', 'encoder_model.onnx', 'decoder_model.onnx', 'decoder_with_past_model.onnx']) {
    assert.ok(
      fs.readFileSync(path.join(TINY.out, f)).equals(fs.readFileSync(path.join(again.out, f))),
      `${f} differs for the same seed`,
    );
  }
  const other = { ...TINY, seed: 8, out: path.join(tmp, 'tiny-seed8') };
  makeModel(other);
  assert.not.ok(
    fs.readFileSync(path.join(TINY.out, 'weights.bin')).equals(fs.readFileSync(path.join(other.out, 'weights.bin'))),
  );
});

/** A tiny model (TINY's shape) in `dir` runs in onnxruntime: encoder → decoder → decoder_with_past, cache = full decoder. */
async function checkOrtChain(dir: string): Promise<void> {
  const opts = { graphOptimizationLevel: 'disabled' as const };
  const enc = await ort.InferenceSession.create(path.join(dir, 'encoder_model.onnx'), opts);
  const dec = await ort.InferenceSession.create(path.join(dir, 'decoder_model.onnx'), opts);
  const dwp = await ort.InferenceSession.create(path.join(dir, 'decoder_with_past_model.onnx'), opts);
  assert.equal(enc.inputNames, ['input_ids', 'attention_mask']);
  assert.equal(enc.outputNames, ['last_hidden_state']);
  assert.equal(dec.inputNames, ['input_ids', 'encoder_attention_mask', 'encoder_hidden_states']);
  assert.equal(dec.outputNames, [
    'logits',
    'present.0.decoder.key',
    'present.0.decoder.value',
    'present.0.encoder.key',
    'present.0.encoder.value',
  ]);
  assert.equal(dwp.inputNames, [
    'input_ids',
    'encoder_attention_mask',
    'past_key_values.0.decoder.key',
    'past_key_values.0.decoder.value',
    'past_key_values.0.encoder.key',
    'past_key_values.0.encoder.value',
  ]);
  assert.equal(dwp.outputNames, ['logits', 'present.0.decoder.key', 'present.0.decoder.value']);

  // Batch of 2; the second source is 3 tokens padded to 5.
  const src = [
    [5, 17, 42, 99, 0],
    [8, 23, 0, 0, 0],
  ];
  const srcMask = i64([
    [1, 1, 1, 1, 1],
    [1, 1, 1, 0, 0],
  ]);
  const { last_hidden_state: h } = await enc.run({ input_ids: i64(src), attention_mask: srcMask });
  assert.equal(h.dims, [2, 5, D]);
  assert.ok(allFinite(h));
  // Padding is masked: the padded row's real positions equal the unpadded run.
  const { last_hidden_state: h1 } = await enc.run({ input_ids: i64([[8, 23, 0]]), attention_mask: i64([[1, 1, 1]]) });
  assert.ok(maxDiff(floats(h).subarray(5 * D, 8 * D), floats(h1)) < 1e-5, 'padding mask');

  const step1 = await dec.run({
    input_ids: i64([[0], [0]]),
    encoder_attention_mask: srcMask,
    encoder_hidden_states: h,
  });
  assert.equal(step1.logits.dims, [2, 1, V]);
  assert.ok(allFinite(step1.logits));
  assert.equal(step1['present.0.decoder.key'].dims, [2, H, 1, DH]);
  assert.equal(step1['present.0.encoder.value'].dims, [2, H, 5, DH]);
  const logits1 = floats(step1.logits);
  const next = [0, 1].map((b) => {
    const row = logits1.subarray(b * V, (b + 1) * V);
    return row.indexOf(Math.max(...row));
  });

  const feeds: Record<string, ort.Tensor> = { input_ids: i64(next.map((t) => [t])), encoder_attention_mask: srcMask };
  for (const kind of ['decoder.key', 'decoder.value', 'encoder.key', 'encoder.value'])
    feeds[`past_key_values.0.${kind}`] = step1[`present.0.${kind}`];
  const step2 = await dwp.run(feeds);
  assert.equal(step2.logits.dims, [2, 1, V]);
  assert.equal(step2['present.0.decoder.key'].dims, [2, H, 2, DH]);
  assert.ok(allFinite(step2.logits) && allFinite(step2['present.0.decoder.value']));

  const full = await dec.run({
    input_ids: i64(next.map((t) => [0, t])),
    encoder_attention_mask: srcMask,
    encoder_hidden_states: h,
  });
  assert.equal(full.logits.dims, [2, 2, V]);
  const fl = floats(full.logits);
  for (let b = 0; b < 2; b++) {
    const d1 = maxDiff(fl.subarray(b * 2 * V, (b * 2 + 1) * V), logits1.subarray(b * V, (b + 1) * V));
    const d2 = maxDiff(
      fl.subarray((b * 2 + 1) * V, (b * 2 + 2) * V),
      floats(step2.logits).subarray(b * V, (b + 1) * V),
    );
    assert.ok(d1 < 1e-4, `row ${b} position 0: ${d1}`);
    assert.ok(d2 < 1e-4, `row ${b} cached step vs full decoder at position 1: ${d2}`);
  }
  // The cache itself: present.decoder.key of the cached step = that of the full two-token run.
  assert.ok(maxDiff(floats(step2['present.0.decoder.key']), floats(full['present.0.decoder.key'])) < 1e-5);
  // A second cached step (past length 2) still runs.
  const feeds3: Record<string, ort.Tensor> = { input_ids: i64([[3], [4]]), encoder_attention_mask: srcMask };
  for (const kind of ['decoder.key', 'decoder.value']) feeds3[`past_key_values.0.${kind}`] = step2[`present.0.${kind}`];
  for (const kind of ['encoder.key', 'encoder.value']) feeds3[`past_key_values.0.${kind}`] = step1[`present.0.${kind}`];
  const step3 = await dwp.run(feeds3);
  assert.equal(step3['present.0.decoder.value'].dims, [2, H, 3, DH]);
  assert.ok(allFinite(step3.logits));
}

test('onnxruntime: encoder → decoder_model → decoder_with_past; the cached step equals the full decoder', async () => {
  await checkOrtChain(TINY.out);
});

const PRE = { ...TINY, preNorm: true, out: path.join(tmp, 'tiny-prenorm') };

test("pre-norm: normalize_before, LN before each sub-layer and a final LN per stack; shared tensors equal post-norm's", () => {
  makeModel(PRE);
  const cfg = JSON.parse(fs.readFileSync(path.join(PRE.out, 'config.json'), 'utf8'));
  assert.is(cfg.normalize_before, true);
  assert.is(JSON.parse(fs.readFileSync(path.join(TINY.out, 'config.json'), 'utf8')).normalize_before, false);
  const post = new Map<string, Float32Array>();
  for (const file of ['encoder_model.onnx', 'decoder_model.onnx', 'decoder_with_past_model.onnx']) {
    const g = decode(path.join(PRE.out, file)).graph!;
    const nodes = g.node!;
    const producer = new Map(nodes.flatMap((n) => n.output!.map((o) => [o, n] as const)));
    const lns = nodes.filter((n) => n.opType === 'LayerNormalization');
    const layers = file === 'encoder_model.onnx' ? TINY.encoderLayers : TINY.decoderLayers;
    const perLayer = file === 'encoder_model.onnx' ? 2 : 3;
    assert.is(lns.length, perLayer * layers + 1, `${file} LayerNormalization count`);
    // Each norm reads the residual stream (the embedding sum or a residual Add, not a bias Add), and each but the
    // final one feeds only its sub-layer's projections: the residual Adds bypass it (post-norm's Adds read its output).
    for (const ln of lns) {
      const src = producer.get(ln.input![0]!)!;
      assert.is(src.opType, 'Add', `${file} ${ln.name} reads ${src.name}`);
      assert.ok(
        !src.input!.some((x) => producer.get(x)?.opType === 'MatMul'),
        `${file} ${ln.name} reads a projection's bias Add`,
      );
      if (ln.name!.startsWith('/enc/') || ln.name!.startsWith('/dec/')) continue;
      const readers = nodes.filter((n) => n.input!.includes(ln.output![0]!));
      assert.ok(
        readers.length > 0 && readers.every((n) => n.opType === 'MatMul'),
        `${file} ${ln.name} feeds ${readers.map((n) => n.name).join(', ')}`,
      );
    }
    // Every projection of the residual stream reads a norm (cross K/V read encoder_hidden_states / past inputs).
    for (const mm of nodes.filter((n) => n.opType === 'MatMul' && n.input![1]!.startsWith('onnx::MatMul_'))) {
      const a = mm.input![0]!;
      const from = producer.get(a)?.opType;
      if (a === 'encoder_hidden_states' || from === 'Reshape' || from === 'Relu') continue; // cross K/V, attention out, ffn w2
      assert.is(from, 'LayerNormalization', `${file} ${mm.name} reads ${a}`);
    }
    const last =
      file === 'encoder_model.onnx'
        ? producer.get('last_hidden_state')!
        : producer.get(producer.get('logits')!.input![1]!)!;
    const final = file === 'encoder_model.onnx' ? last : producer.get(last.input![0]!)!;
    assert.is(final.opType, 'LayerNormalization', `${file}: the final norm`);
    assert.equal(
      final.input!.slice(1),
      file === 'encoder_model.onnx' ? ['m.enc.ln.weight', 'm.enc.ln.bias'] : ['m.dec.ln.weight', 'm.dec.ln.bias'],
    );
    // Tensors both variants have hold the same values (per-tensor seeds).
    const m = decode(path.join(TINY.out, file));
    for (const t of m.graph!.initializer!)
      if (t.name!.startsWith('m.')) post.set(t.name!, initializerData(TINY.out, t));
    for (const t of g.initializer!) {
      if (!t.name!.startsWith('m.')) continue;
      const want = post.get(t.name!);
      if (t.name!.startsWith('m.enc.ln.') || t.name!.startsWith('m.dec.ln.')) assert.is(want, undefined);
      else assert.equal(initializerData(PRE.out, t), want, t.name!);
    }
  }
});

test('pre-norm onnxruntime: encoder → decoder_model → decoder_with_past; the cached step equals the full decoder', async () => {
  await checkOrtChain(PRE.out);
});

test('gelu and swish variants run in onnxruntime', async () => {
  for (const activation of ['gelu', 'swish'] as const) {
    const o = { ...TINY, activation, out: path.join(tmp, `tiny-${activation}`) };
    makeModel(o);
    const enc = await ort.InferenceSession.create(path.join(o.out, 'encoder_model.onnx'));
    const { last_hidden_state: h } = await enc.run({ input_ids: i64([[1, 2, 3]]), attention_mask: i64([[1, 1, 1]]) });
    assert.ok(allFinite(h), activation);
  }
});

testIf(test, !fs.existsSync(REAL) && needsShared('models/es-en'))(
  'same graphs as the es-en export: nodes, names, attributes, I/O, initializers, weights.bin offsets',
  () => {
    const model = buildMarian({
      d: 256,
      encoderLayers: 6,
      decoderLayers: 2,
      heads: 4,
      ffn: 1024,
      vocab: 32000,
      maxPos: 1024,
      activation: 'relu',
    });
    const layout = planLayout(model.graphs, model.tensors);
    assert.is(layout.size, fs.statSync(path.join(REAL, 'weights.bin')).size);
    const toObj = (bytes: Uint8Array) =>
      onnx.ModelProto.toObject(onnx.ModelProto.decode(bytes), { longs: String, enums: String, bytes: String });
    for (const [file, bytes] of modelProtos(model, layout, new Map())) {
      const a = toObj(bytes);
      const b = toObj(fs.readFileSync(path.join(REAL, file)));
      // Exporter-numbered names (onnx::MatMul_N, onnx::Unsqueeze_N) are compared by order of appearance.
      const renamer = () => {
        const map = new Map<string, string>();
        return (s: string) => {
          if (!s.startsWith('onnx::')) return s;
          if (!map.has(s)) map.set(s, `${s.split('_')[0]}#${map.size}`);
          return map.get(s)!;
        };
      };
      const ra = renamer();
      const rb = renamer();
      assert.is(a.irVersion, b.irVersion);
      assert.equal(a.opsetImport, b.opsetImport);
      assert.equal(a.graph.input, b.graph.input, `${file} inputs`);
      assert.equal(a.graph.output, b.graph.output, `${file} outputs`);
      assert.is(a.graph.node.length, b.graph.node.length, `${file} node count`);
      for (let i = 0; i < a.graph.node.length; i++) {
        const x = a.graph.node[i];
        const y = b.graph.node[i];
        const norm = (n: typeof x, r: (s: string) => string) => ({
          ...n,
          input: (n.input ?? []).map(r),
          output: n.output.map(r),
        });
        const tx = x.attribute?.[0]?.t;
        if (x.opType === 'Constant' && tx?.dims?.length === 2) {
          // the position table: equal up to float rounding
          const f = (s: string) => {
            const u = Buffer.from(s, 'base64');
            return new Float32Array(u.buffer.slice(u.byteOffset, u.byteOffset + u.length));
          };
          assert.equal(tx.dims, y.attribute[0].t.dims);
          assert.ok(maxDiff(f(tx.rawData), f(y.attribute[0].t.rawData)) < 1e-4, `${file} position table`);
          assert.is(x.name, y.name);
          continue;
        }
        assert.equal(norm(x, ra), norm(y, rb), `${file} node ${i} (${y.name})`);
      }
      const inits = (o: typeof a, r: (s: string) => string) =>
        o.graph.initializer.map((t: { name: string }) => ({ ...t, name: r(t.name) }));
      assert.equal(inits(a, ra), inits(b, rb), `${file} initializers`);
    }
  },
);

test('CLI: npm run make-model arguments', () => {
  const out = path.join(tmp, 'cli');
  const r = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      'scripts/make-model.ts',
      '--arch',
      'marian',
      '--d',
      '16',
      '--layers',
      '1,2',
      '--heads',
      '2',
      '--ffn',
      '32',
      '--vocab',
      '50',
      '-o',
      out,
      '--seed',
      '3',
      '--max-pos',
      '64',
    ],
    { cwd: ROOT, encoding: 'utf8' },
  );
  assert.is(r.status, 0, r.stderr);
  const cfg = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8'));
  assert.is(cfg.encoder_layers, 1);
  assert.is(cfg.decoder_layers, 2);
  assert.is(cfg.max_position_embeddings, 64);
  const pre = path.join(tmp, 'cli-pre');
  const rp = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      'scripts/make-model.ts',
      '--d',
      '16',
      '--layers',
      '1',
      '--heads',
      '2',
      '--pre-norm',
      '--ffn',
      '32',
      '--vocab',
      '50',
      '-o',
      pre,
    ],
    { cwd: ROOT, encoding: 'utf8' },
  );
  assert.is(rp.status, 0, rp.stderr);
  assert.match(rp.stdout, /pre-norm/);
  assert.is(JSON.parse(fs.readFileSync(path.join(pre, 'config.json'), 'utf8')).normalize_before, true);
  assert.is(cfg.normalize_before, false);
  const bad = spawnSync(
    process.execPath,
    [
      '--import',
      'tsx',
      'scripts/make-model.ts',
      '--d',
      '30',
      '--layers',
      '1,1',
      '--heads',
      '4',
      '--ffn',
      '8',
      '--vocab',
      '10',
      '-o',
      path.join(tmp, 'bad'),
    ],
    { cwd: ROOT, encoding: 'utf8' },
  );
  assert.is(bad.status, 1);
  assert.match(bad.stderr, /divisible by heads/);
});

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test.run();
