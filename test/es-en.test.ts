// The real es-en model: planc's evaluator vs onnxruntime-node on every graph, and the ONNX round trip.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import { writeOnnxDir } from '../model/onnx/export.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { printModel } from '../model/printer.ts';
import { ort, relErr, runOrt } from './helpers/ort.ts';
import { seq2seqCases, type GraphCase } from './helpers/seq2seq-feeds.ts';
import { before } from './helpers/before.ts';
import { needsShared, skipSuite } from './helpers/skip.ts';

const shared = sharedDir();
const DIR = shared && path.join(shared, 'models', 'es-en');
const TOL = 1e-4;

if (!DIR || !fs.existsSync(DIR)) {
  skipSuite(test, needsShared('models/es-en'), [
    ...['encoder', 'decoder', 'decoder_with_past'].map(
      (g) => `es-en ${g}: evaluator matches onnxruntime within ${TOL}`,
    ),
    'es-en inference gives the declared output types with symbolic dims',
    'es-en shares the decoder weights between the decoder files',
    'es-en round trip: import → write → import gives the same IR, and onnxruntime runs the written files the same',
  ]);
} else {
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(DIR, 'test_ids.json'), 'utf8')).src_ids;
  let model: Model;
  // A padded batch of real test sentences of different lengths, each graph fed what onnxruntime computed before it.
  let cases: Record<string, GraphCase>;

  before(test, async () => {
    try {
      model = importSeq2SeqDir(DIR!);
      cases = await seq2seqCases(model.sources, [ids[0]!, ids[1]!, ids[5]!, ids[17]!]);
    } catch (e) {
      console.error('es-en setup failed:', e); // uvu hides errors thrown by hooks
      throw e;
    }
  });

  for (const g of ['encoder', 'decoder', 'decoder_with_past']) {
    test(`es-en ${g}: evaluator matches onnxruntime within ${TOL}`, () => {
      const got = evaluate(model, g, cases[g]!.feeds);
      const names = Object.keys(cases[g]!.expected);
      assert.equal(Object.keys(got).sort(), names.sort(), 'same outputs');
      for (const n of names) {
        const e = relErr(got[n]!, cases[g]!.expected[n]!);
        assert.ok(e < TOL, `${g} output ${n}: relative error ${e.toExponential(2)}`);
      }
    });
  }

  test('es-en inference gives the declared output types with symbolic dims', () => {
    inferModel(model);
    const enc = model.graphs.get('encoder')!;
    assert.is(
      String(enc.values.get('last_hidden_state')!.type!.shape!.join(',')),
      'batch_size,encoder_sequence_length,256',
    );
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
        const out = await runOrt(s, cases[g]!.feeds);
        for (const [n, t] of Object.entries(cases[g]!.expected))
          assert.ok(relErr(out[n]!, t) < 1e-6, `${g}/${n} after round trip`);
      }
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
}

test.run();
