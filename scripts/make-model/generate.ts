// make-model core: builds the Marian graphs, streams weights.bin, writes the three .onnx files and config.json.
import * as fs from 'node:fs';
import * as path from 'node:path';
import onnxProto from 'onnx-proto';
import type { ITensor } from './graph.ts';
import { FLOAT } from './graph.ts';
import {
  buildMarian,
  HRT_NAT_FILE,
  HRT_SPECIALS,
  type Activation,
  type MarianConfig,
  type MarianModel,
} from './marian.ts';
import { inlineData, planLayout, writeWeights, type Layout } from './weights.ts';

const { onnx } = onnxProto;

export const WEIGHTS_FILE = 'weights.bin';
export const IR_VERSION = 8;
export const OPSET = 17;

export interface MakeModelOptions extends MarianConfig {
  arch: 'marian';
  out: string;
  seed: number;
}

export const DEFAULTS = { arch: 'marian' as const, seed: 1, maxPos: 512, activation: 'relu' as Activation };

export interface MakeModelResult {
  /** Files written, with their sizes in bytes. */
  files: { name: string; bytes: number }[];
  parameters: number;
  seconds: number;
}

/** The initializer TensorProto for `name` → `key`: external-data reference, or inline raw_data. */
function initializerProto(
  name: string,
  key: string,
  model: MarianModel,
  layout: Layout,
  inline: Map<string, Float32Array>,
): ITensor {
  const dims = model.tensors.get(key)!.dims;
  const ext = layout.external.get(key);
  if (ext) {
    return {
      dims,
      dataType: FLOAT,
      name,
      externalData: [
        { key: 'location', value: WEIGHTS_FILE },
        { key: 'offset', value: String(ext.offset) },
        { key: 'length', value: String(ext.length) },
      ],
      dataLocation: onnx.TensorProto.DataLocation.EXTERNAL,
    };
  }
  const data = inline.get(key);
  if (!data) throw new Error(`no data for inline tensor ${key}`);
  return { dims, dataType: FLOAT, name, rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

/** Encodes the graphs (three, four with hrt) as ModelProtos (file name → bytes). `inline` holds the data of the inline tensors. */
export function modelProtos(
  model: MarianModel,
  layout: Layout,
  inline: Map<string, Float32Array>,
): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  for (const g of model.graphs) {
    const proto = onnx.ModelProto.create({
      irVersion: IR_VERSION,
      producerName: 'planc-make-model',
      producerVersion: '0.1.0',
      opsetImport: [{ version: OPSET }],
      graph: {
        node: g.builder.nodes,
        name: 'torch_jit',
        initializer: g.initializers.map(([name, key]) => initializerProto(name, key, model, layout, inline)),
        input: g.inputs,
        output: g.outputs,
      },
    });
    out.set(g.file, onnx.ModelProto.encode(proto).finish());
  }
  return out;
}

/** config.json's `hrt` object (docs/hrt.md 1.3, contract version 1) of a synthetic HRT model: specials after the vocabulary. */
export function hrtSection(vocab: number): Record<string, unknown> {
  return {
    version: 1,
    chunk_sizes: [2, 3],
    bos_k_ids: { 1: 0, 2: vocab, 3: vocab + 1 },
    mask_id: vocab + 2,
    input_vocab_size: vocab + HRT_SPECIALS,
    nat_graph: HRT_NAT_FILE,
    nat_positions: '1..m*k',
  };
}

/** HF MarianConfig for the generated model. */
export function configJson(o: MakeModelOptions): Record<string, unknown> {
  return {
    model_type: 'marian',
    architectures: ['MarianMTModel'],
    vocab_size: o.vocab,
    decoder_vocab_size: o.vocab,
    d_model: o.d,
    encoder_layers: o.encoderLayers,
    decoder_layers: o.decoderLayers,
    encoder_attention_heads: o.heads,
    decoder_attention_heads: o.heads,
    encoder_ffn_dim: o.ffn,
    decoder_ffn_dim: o.ffn,
    activation_function: o.activation,
    normalize_before: o.preNorm ?? false,
    scale_embedding: true,
    share_encoder_decoder_embeddings: true,
    tie_word_embeddings: true,
    max_position_embeddings: o.maxPos,
    decoder_start_token_id: 0,
    eos_token_id: 0,
    pad_token_id: 0,
    unk_token_id: 1,
    forced_eos_token_id: 0,
    planc_synthetic: { generator: 'scripts/make-model.ts', seed: o.seed, note: 'random weights, for speed work only' },
    ...(o.hrt ? { hrt: hrtSection(o.vocab) } : {}),
  };
}

/** Generates the model into `o.out`. */
export function makeModel(o: MakeModelOptions): MakeModelResult {
  if (o.arch !== 'marian') throw new Error(`unsupported --arch ${o.arch} (only marian)`);
  if (!Number.isInteger(o.seed) || o.seed < 0 || o.seed > 0xffffffff)
    throw new Error(`seed must be an integer in [0, 2^32), got ${o.seed}`);
  const t0 = performance.now();
  const model = buildMarian(o);
  const layout = planLayout(model.graphs, model.tensors);
  fs.mkdirSync(o.out, { recursive: true });
  writeWeights(path.join(o.out, WEIGHTS_FILE), layout, model.tensors, o.seed);
  const inline = new Map([...layout.inline].map((k) => [k, inlineData(model.tensors.get(k)!, model.tensors, o.seed)]));
  const files: { name: string; bytes: number }[] = [];
  for (const [file, bytes] of modelProtos(model, layout, inline)) {
    fs.writeFileSync(path.join(o.out, file), bytes);
    files.push({ name: file, bytes: bytes.length });
  }
  files.push({ name: WEIGHTS_FILE, bytes: layout.size });
  const config = JSON.stringify(configJson(o), null, 2) + '\n';
  fs.writeFileSync(path.join(o.out, 'config.json'), config);
  files.push({ name: 'config.json', bytes: config.length });
  let parameters = 0;
  for (const [key, spec] of model.tensors)
    if (spec.init.kind === 'normal' && (key !== 'm.emb.weight.T' || o.hrt))
      parameters += spec.dims.reduce((a, b) => a * b, 1);
  return { files, parameters, seconds: (performance.now() - t0) / 1000 };
}
