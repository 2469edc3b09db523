// The real es-en model: planc's evaluator vs onnxruntime-node on every graph, and the ONNX round trip.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { evaluate } from '../compiler/eval/evaluate.ts';
import { inferModel } from '../compiler/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import { writeOnnxDir } from '../compiler/onnx/export.ts';
import { importSeq2SeqDir } from '../compiler/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { printModel } from '../compiler/printer.ts';
import { Tensor } from '../compiler/tensor.ts';
import { ort, relErr, runOrt } from './helpers/ort.ts';

const shared = sharedDir();
const DIR = shared && path.join(shared, 'models', 'es-en');
const TOL = 1e-4;

if (!DIR || !fs.existsSync(DIR)) {
  console.log('es-en tests skipped: ../shared/models/es-en is not here');
} else {
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(DIR, 'test_ids.json'), 'utf8')).src_ids;
  // A padded batch of real test sentences of different lengths.
  const batch = [ids[0]!, ids[1]!, ids[5]!, ids[17]!];
  const len = Math.max(...batch.map((s) => s.length));
  const inputIds = Tensor.fromNumbers('int64', [batch.length, len], batch.flatMap((s) => [...s, ...new Array(len - s.length).fill(0)]));
  const mask = Tensor.fromNumbers('int64', [batch.length, len], batch.flatMap((s) => s.map(() => 1).concat(new Array(len - s.length).fill(0))));

  let model: Model;
  const sessions: Record<string, ort.InferenceSession> = {};
  const ortOut: Record<string, Record<string, Tensor>> = {};
  const feeds: Record<string, Record<string, Tensor>> = {};

  test.before(async () => {
    try {
      await setup();
    } catch (e) {
      console.error('es-en setup failed:', e); // uvu hides errors thrown by hooks
      throw e;
    }
  });

  async function setup() {
    model = importSeq2SeqDir(DIR!);
    for (const g of ['encoder', 'decoder', 'decoder_with_past']) {
      sessions[g] = await ort.InferenceSession.create(model.sources[g]!);
    }
    feeds.encoder = { input_ids: inputIds, attention_mask: mask };
    ortOut.encoder = await runOrt(sessions.encoder!, feeds.encoder);
    const enc = ortOut.encoder.last_hidden_state!;
    // First decoder step on [start], then a two-token prefix from ORT's own argmax.
    const first = await runOrt(sessions.decoder!, { input_ids: Tensor.fromNumbers('int64', [batch.length, 1], batch.map(() => 0)), encoder_attention_mask: mask, encoder_hidden_states: enc });
    const best = argmaxLast(first.logits!);
    feeds.decoder = { input_ids: Tensor.fromNumbers('int64', [batch.length, 2], best.flatMap((t) => [0, t])), encoder_attention_mask: mask, encoder_hidden_states: enc };
    ortOut.decoder = await runOrt(sessions.decoder!, feeds.decoder);
    const next = argmaxLast(ortOut.decoder.logits!);
    feeds.decoder_with_past = { input_ids: Tensor.fromNumbers('int64', [batch.length, 1], next), encoder_attention_mask: mask };
    for (const [k, v] of Object.entries(ortOut.decoder)) if (k.startsWith('present.')) feeds.decoder_with_past[k.replace('present.', 'past_key_values.')] = v;
    ortOut.decoder_with_past = await runOrt(sessions.decoder_with_past!, feeds.decoder_with_past);
  }

  for (const g of ['encoder', 'decoder', 'decoder_with_past']) {
    test(`es-en ${g}: evaluator matches onnxruntime within ${TOL}`, () => {
      const got = evaluate(model, g, feeds[g]!);
      const names = Object.keys(ortOut[g]!);
      assert.equal(Object.keys(got).sort(), names.sort(), 'same outputs');
      for (const n of names) {
        const e = relErr(got[n]!, ortOut[g]![n]!);
        assert.ok(e < TOL, `${g} output ${n}: relative error ${e.toExponential(2)}`);
      }
    });
  }

  test('es-en inference gives the declared output types with symbolic dims', () => {
    inferModel(model);
    const enc = model.graphs.get('encoder')!;
    assert.is(String(enc.values.get('last_hidden_state')!.type!.shape!.join(',')), 'batch_size,encoder_sequence_length,256');
    const dec = model.graphs.get('decoder_with_past')!;
    const present = dec.values.get('present.0.decoder.key')!.type!;
    assert.is(present.shape!.map(String).join(','), 'batch_size,4,past_decoder_sequence_length+1,64');
  });

  test('es-en shares the decoder weights between the decoder files', () => {
    let unique = 0;
    for (const w of model.weights.values()) unique += w.bytes;
    assert.ok(model.storedWeightBytes > unique * 1.3, `stored ${model.storedWeightBytes} vs unique ${unique}`);
    const dec = new Set(model.graphs.get('decoder')!.initializers.values());
    const past = new Set(model.graphs.get('decoder_with_past')!.initializers.values());
    const shared = [...past].filter((id) => dec.has(id)).length;
    assert.ok(shared >= past.size - 2, `${shared} of ${past.size} decoder_with_past weights shared with decoder`);
  });

  test('es-en round trip: import → write → import gives the same IR, and onnxruntime runs the written files the same', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-rt-'));
    try {
      const fresh = importSeq2SeqDir(DIR!);
      writeOnnxDir(fresh, tmp);
      fs.copyFileSync(path.join(DIR, 'config.json'), path.join(tmp, 'config.json'));
      const again = importSeq2SeqDir(tmp);
      assert.fixture(printModel(again), printModel(fresh));
      for (const g of ['encoder', 'decoder', 'decoder_with_past']) {
        const s = await ort.InferenceSession.create(again.sources[g]!);
        const out = await runOrt(s, feeds[g]!);
        for (const [n, t] of Object.entries(ortOut[g]!)) assert.ok(relErr(out[n]!, t) < 1e-6, `${g}/${n} after round trip`);
      }
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
}

function argmaxLast(logits: Tensor): number[] {
  const [b, t, v] = logits.dims as [number, number, number];
  const out: number[] = [];
  for (let i = 0; i < b; i++) {
    const base = (i * t + t - 1) * v;
    let best = 0;
    for (let k = 1; k < v; k++) if (logits.nums[base + k]! > logits.nums[base + best]!) best = k;
    out.push(best);
  }
  return out;
}

test.run();
