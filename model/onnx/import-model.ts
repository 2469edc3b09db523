// Reads .onnx files and Hugging Face seq2seq folders into one Model whose graphs share deduplicated weights.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PlancError } from '../../compiler/diagnostics.ts';
import type { DecodingFacts, Graph, Model } from '../../compiler/ir.ts';
import { findHandler, maxOnnxOpset } from '../ops/table.ts';
import { verifyModel } from '../verify.ts';
import { WeightStore } from '../weights.ts';
import { readDecodingFacts } from './decoding-facts.ts';
import { checkHrtGraphs, hrtNatFile, readHrtFacts } from './hrt-contract.ts';
import { NAT_GRAPH, NAT_LENGTH_SYMBOL } from '../../compiler/plan/io-names.ts';
import { importGraph } from './import-graph.ts';
import { splitMergedDecoder } from './split-merged.ts';
import { num, onnx, type OnnxTypes } from './proto.ts';
import { ExternalFiles } from './tensor-proto.ts';

/** The graph files of a Hugging Face seq2seq export, by planc graph name. */
export const SEQ2SEQ_FILES: Record<string, string> = {
  encoder: 'encoder_model.onnx',
  decoder: 'decoder_model.onnx',
  decoder_with_past: 'decoder_with_past_model.onnx',
  decoder_merged: 'decoder_model_merged.onnx',
};

export interface ImportOptions {
  /** Import even when operators are unsupported (inspect lists them instead of failing). */
  allowUnsupported?: boolean;
}

/** Reads and decodes a ModelProto, with clear errors for missing, truncated or non-ONNX files. */
export function readModelProto(file: string): OnnxTypes.ModelProto {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `no such file: ${file}`, { file });
  if (fs.statSync(file).isDirectory())
    throw new PlancError('PLANC_E006', `expected a .onnx file, got a folder: ${file}`, { file });
  const bytes = fs.readFileSync(file);
  let m: OnnxTypes.ModelProto;
  try {
    m = onnx.ModelProto.decode(bytes);
  } catch (e) {
    throw new PlancError(
      'PLANC_E001',
      `cannot decode ${file} as an ONNX ModelProto (${(e as Error).message}); the file is truncated or not ONNX`,
      { file },
    );
  }
  if (!m.graph || num(m.irVersion) <= 0 || (m.opsetImport ?? []).length === 0) {
    throw new PlancError('PLANC_E001', `${file} is not an ONNX model (no graph, IR version or opset import)`, { file });
  }
  return m;
}

/**
 * The newest ONNX opset planc reads: the newest in ONNX's own backend tests (28, ../shared/onnx-tests), or a newer one
 * a handler is written for. A model of a later opset (99, 2^31) is refused by name: its operators may mean other things.
 */
export const MAX_ONNX_OPSET = Math.max(28, maxOnnxOpset());

/** The opsets a model imports, by domain ('' for ai.onnx); an ai.onnx opset planc does not know is refused here. */
function opsetsOf(m: OnnxTypes.IModelProto, file: string): Record<string, number> {
  const o: Record<string, number> = {};
  for (const imp of m.opsetImport ?? []) {
    const domain = imp.domain === 'ai.onnx' ? '' : (imp.domain ?? '');
    const v = num(imp.version);
    const max = domain === '' ? MAX_ONNX_OPSET : 1000;
    if (!Number.isSafeInteger(v) || v < 1 || v > max) {
      throw new PlancError(
        'PLANC_E008',
        `${file} imports opset ${v} of domain '${domain || 'ai.onnx'}'; planc reads ${domain === '' ? `ONNX opsets 1 to ${max}` : `versions 1 to ${max}`}`,
        { file },
      );
    }
    o[domain] = v;
  }
  return o;
}

/** Imports one .onnx file as a Model with a single graph named `main`. */
export function importOnnxFile(file: string, opts: ImportOptions = {}): Model {
  const store = new WeightStore();
  const proto = readModelProto(file);
  const external = new ExternalFiles();
  let graph: Graph;
  try {
    graph = importGraph(proto.graph!, { src: { file, external }, weights: store }, 'main');
  } finally {
    external.close();
  }
  const model = assemble(new Map([['main', graph]]), store, opsetsOf(proto, file), proto, { main: file }, {});
  verifyModel(model, { types: false });
  if (!opts.allowUnsupported) checkSupported(model);
  return model;
}

/** Imports a Hugging Face seq2seq export folder: encoder, decoder, decoder_with_past (and merged decoder when present). */
export function importSeq2SeqDir(dir: string, opts: ImportOptions = {}): Model {
  let present = Object.entries(SEQ2SEQ_FILES).filter(([, f]) => fs.existsSync(path.join(dir, f)));
  // the merged decoder holds both decoders again: with both files present it adds nothing
  if (present.some(([g]) => g === 'decoder') && present.some(([g]) => g === 'decoder_with_past'))
    present = present.filter(([g]) => g !== 'decoder_merged');
  if (!present.some(([g]) => g === 'encoder') || !present.some(([g]) => g.startsWith('decoder'))) {
    throw new PlancError(
      'PLANC_E009',
      `${dir} is not a seq2seq model folder: it needs ${SEQ2SEQ_FILES.encoder} and a decoder (${SEQ2SEQ_FILES.decoder}, ${SEQ2SEQ_FILES.decoder_with_past} or ${SEQ2SEQ_FILES.decoder_merged})`,
      { file: dir },
    );
  }
  const natFile = hrtNatFile(dir);
  if (natFile && fs.existsSync(path.join(dir, natFile))) present.push([NAT_GRAPH, natFile]);
  const store = new WeightStore();
  const external = new ExternalFiles();
  const graphs = new Map<string, Graph>();
  const sources: Record<string, string> = {};
  let opsets: Record<string, number> | undefined;
  let first: OnnxTypes.ModelProto | undefined;
  try {
    for (const [g, f] of present) {
      const file = path.join(dir, f);
      const proto = readModelProto(file);
      const o = opsetsOf(proto, file);
      if (opsets && (o[''] ?? 0) !== (opsets[''] ?? 0)) {
        throw new PlancError(
          'PLANC_E008',
          `${f} uses opset ${o['']} but ${present[0]![1]} uses opset ${opsets['']}: planc needs one opset per model`,
          { file },
        );
      }
      opsets = { ...o, ...opsets };
      first ??= proto;
      if (g === NAT_GRAPH) renameDim(proto.graph!, 'decoder_sequence_length', NAT_LENGTH_SYMBOL);
      graphs.set(g, importGraph(proto.graph!, { src: { file, external }, weights: store }, g));
      sources[g] = file;
    }
  } finally {
    external.close();
  }
  const merged = graphs.get('decoder_merged');
  if (merged) {
    // merged-only layout: its If holds both decoders; they become the two graphs the three-file layout has
    const split = splitMergedDecoder(merged, sources.decoder_merged!);
    const ordered = new Map<string, Graph>([['encoder', graphs.get('encoder')!]]);
    ordered.set('decoder', graphs.get('decoder') ?? split.decoder);
    ordered.set('decoder_with_past', graphs.get('decoder_with_past') ?? split.decoderWithPast);
    graphs.clear();
    for (const [k, g] of ordered) graphs.set(k, g);
    sources.decoder ??= sources.decoder_merged!;
    sources.decoder_with_past ??= sources.decoder_merged!;
    delete sources.decoder_merged;
  }
  const facts = readDecodingFacts(dir);
  const hrt = readHrtFacts(dir, facts.eosId);
  if (hrt) facts.hrt = hrt;
  const model = assemble(graphs, store, opsets!, first!, sources, facts);
  verifyModel(model, { types: false });
  if (!opts.allowUnsupported) checkSupported(model);
  if (hrt) checkHrtGraphs(model, hrt, facts.vocabSize);
  return model;
}

/** Renames a symbolic dim of a graph's declared inputs, outputs and value infos (the HRT NAT graph's token axis). */
function renameDim(g: OnnxTypes.IGraphProto, from: string, to: string): void {
  for (const v of [...(g.input ?? []), ...(g.output ?? []), ...(g.valueInfo ?? [])]) {
    for (const d of v.type?.tensorType?.shape?.dim ?? []) if (d.dimParam === from) d.dimParam = to;
  }
}

/** A .onnx file or a seq2seq folder. */
export function importModel(p: string, opts: ImportOptions = {}): Model {
  if (!fs.existsSync(p)) throw new PlancError('PLANC_E006', `no such file or folder: ${p}`, { file: p });
  return fs.statSync(p).isDirectory() ? importSeq2SeqDir(p, opts) : importOnnxFile(p, opts);
}

function assemble(
  graphs: Map<string, Graph>,
  store: WeightStore,
  opsets: Record<string, number>,
  proto: OnnxTypes.IModelProto,
  sources: Record<string, string>,
  decoding: DecodingFacts,
): Model {
  return {
    graphs,
    weights: store.weights,
    opsets,
    irVersion: num(proto.irVersion),
    producer: proto.producerName ?? undefined,
    decoding,
    sources,
    storedWeightBytes: store.storedBytes,
  };
}

/** Every (domain, op) in a graph and its subgraphs that has no handler at the model's opset. */
export function unsupportedOps(model: Model): Map<string, string[]> {
  const missing = new Map<string, string[]>();
  const visit = (g: Graph) => {
    for (const n of g.nodes) {
      const opset = model.opsets[n.domain] ?? (n.domain === '' ? 1 : 1);
      if (!findHandler(n.domain, n.op, opset)) {
        const key = n.domain ? `${n.domain}.${n.op}` : n.op;
        missing.set(key, [...(missing.get(key) ?? []), `${g.name}/${n.name}`]);
      }
      for (const a of Object.values(n.attrs)) {
        if (a.kind === 'graph') visit(a.value);
        if (a.kind === 'graphs') a.value.forEach(visit);
      }
    }
  };
  for (const g of model.graphs.values()) visit(g);
  return missing;
}

/** Fails with one message listing every unsupported operator and where it is used. */
export function checkSupported(model: Model): void {
  const missing = unsupportedOps(model);
  if (missing.size === 0) return;
  const lines = [...missing].map(
    ([op, at]) =>
      `${op} (opset ${model.opsets[op.includes('.') ? op.slice(0, op.lastIndexOf('.')) : ''] ?? '?'}) at ${at.slice(0, 3).join(', ')}${at.length > 3 ? ` and ${at.length - 3} more` : ''}`,
  );
  const file = Object.values(model.sources).join(', ');
  throw new PlancError(
    'PLANC_E005',
    `unsupported operators: ${[...missing.keys()].join(', ')}\n  ${lines.join('\n  ')}`,
    { file },
  );
}
