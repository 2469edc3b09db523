// bench/ct2's ONNX → Hugging Face state-dict mapping: every tensor found by graph structure on the zoo's optimum exports and es-en, clear refusals.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { npyBytes } from '../bench/ct2/npy.ts';
import { expectedNames, type HfConfig, hfStateDict } from '../bench/ct2/hf-names.ts';
import { sharedDir } from '../compiler/paths.ts';
import { Tensor } from '../compiler/tensor.ts';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { needsShared, testIf } from './helpers/skip.ts';

const shared = sharedDir();
const models = shared && path.join(shared, 'models');
const have = (sub: string) => (models && fs.existsSync(path.join(models, sub)) ? false : needsShared(`models/${sub}`));
const config = (dir: string): HfConfig => JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));

/** The initializer a node (found by name) reads at input `i`. */
function input(dir: string, graph: string, node: string, i: number): Tensor {
  const m = importSeq2SeqDir(dir);
  const g = m.graphs.get(graph)!;
  const n = g.nodes.find((x) => x.name === node)!;
  return m.weights.get(g.initializers.get(n.inputs[i]!)!)!.tensor;
}

test('npy: a 64-byte-aligned header that names the dtype and shape, then the float32 bytes', () => {
  const b = npyBytes(Tensor.fromNumbers('float32', [2, 3], [1, 2, 3, 4, 5, 6]));
  const len = b.readUInt16LE(8);
  assert.is((10 + len) % 64, 0);
  assert.ok(
    b
      .subarray(10, 10 + len)
      .toString('latin1')
      .includes("'shape': (2, 3)"),
  );
  assert.equal(
    Array.from(new Float32Array(b.buffer.slice(b.byteOffset + 10 + len, b.byteOffset + b.length))),
    [1, 2, 3, 4, 5, 6],
  );
});

for (const family of ['marian', 'bart', 'mbart']) {
  testIf(test, have(`zoo/${family}`))(
    `zoo ${family}: every HF tensor found; Linear weights are the MatMul weights transposed`,
    () => {
      const dir = path.join(models!, 'zoo', family);
      const c = config(dir);
      const { tensors } = hfStateDict(importSeq2SeqDir(dir), c);
      assert.equal([...tensors.keys()], expectedNames(c));
      const w = input(dir, 'decoder', '/model/decoder/layers.1/encoder_attn/k_proj/MatMul', 1);
      const hf = tensors.get('model.decoder.layers.1.encoder_attn.k_proj.weight')!.tensor;
      assert.equal(hf.dims, [w.dims[1], w.dims[0]]);
      assert.is(hf.nums[1 * w.dims[0]! + 2], w.nums[2 * w.dims[1]! + 1]);
    },
  );
}

testIf(test, have('es-en'))(
  "es-en (short module names, anonymous decoder k/v MatMuls): every HF tensor found; positions are the graph's table",
  () => {
    const dir = path.join(models!, 'es-en');
    const c = config(dir);
    const model = importSeq2SeqDir(dir);
    const { tensors } = hfStateDict(model, c);
    assert.equal([...tensors.keys()], expectedNames(c));
    assert.is(tensors.get('model.decoder.layers.1.self_attn.k_proj.bias')!.from, 'm.dec.1.self_att.k.bias');
    assert.is(tensors.get('model.decoder.layers.0.final_layer_norm.weight')!.from, 'm.dec.0.ln3.weight');
    const table = model.graphs.get('encoder')!.nodes.find((n) => n.name === '/Constant_6')!.attrs.value!;
    assert.is(tensors.get('model.encoder.embed_positions.weight')!.tensor, table.value as Tensor);
    assert.equal(tensors.get('final_logits_bias')!.tensor.dims, [1, 32000]);
  },
);

testIf(test, have('zoo/marian'))('a tensor the graphs lack is named; a family outside Marian/BART is refused', () => {
  const dir = path.join(models!, 'zoo', 'marian');
  const model = importSeq2SeqDir(dir);
  for (const g of model.graphs.values()) g.nodes = g.nodes.filter((n) => !n.name.includes('layers.1/fc2'));
  assert.throws(
    () => hfStateDict(model, config(dir)),
    /no tensor in the ONNX graphs maps to model\.encoder\.layers\.1\.fc2\.weight/,
  );
  assert.throws(() => expectedNames({ ...config(dir), model_type: 't5' }), /'t5' is not a Marian\/BART-family model/);
});

test.run();
