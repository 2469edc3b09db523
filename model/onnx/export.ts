// IR → ONNX: writes a Model back as .onnx files (one per graph) that onnxruntime and Netron open.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ONNX_CODE } from '../../compiler/dtype.ts';
import type { Attr, Graph, Model, ValueType } from '../../compiler/ir.ts';
import { dimStr } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import { ORIGIN_PREFIX } from './import-graph.ts';
import { SEQ2SEQ_FILES } from './import-model.ts';
import { onnx, type OnnxTypes } from './proto.ts';
import { tensorToProto, toRaw } from './tensor-proto.ts';

const AT = onnx.AttributeProto.AttributeType;

/** Weights at least this large go to the shared external-data file when writing a folder. */
const EXTERNAL_MIN_BYTES = 1024;

/** Where initializer bytes go: inline raw_data, or one external file shared by all graphs (each weight once). */
interface WeightSink {
  /** Returns the TensorProto for a weight, writing its bytes externally if the sink does that. */
  proto(id: string, name: string, t: Tensor): OnnxTypes.TensorProto;
}

function inlineSink(): WeightSink {
  return { proto: (_id, name, t) => tensorToProto(t, name) };
}

/** Appends each distinct weight once to `file` (64-byte aligned) and points TensorProtos at it. */
function externalSink(dir: string, file: string): WeightSink & { close(): void } {
  const fd = fs.openSync(path.join(dir, file), 'w');
  let offset = 0;
  const placed = new Map<string, { offset: number; length: number }>();
  return {
    proto(id, name, t) {
      if (t.dtype === 'string' || t.size * 4 < EXTERNAL_MIN_BYTES) return tensorToProto(t, name);
      let at = placed.get(id);
      if (!at) {
        const raw = toRaw(t);
        const pad = (64 - (offset % 64)) % 64;
        if (pad) {
          fs.writeSync(fd, new Uint8Array(pad));
          offset += pad;
        }
        fs.writeSync(fd, raw);
        at = { offset, length: raw.length };
        offset += raw.length;
        placed.set(id, at);
      }
      return new onnx.TensorProto({
        name,
        dims: [...t.dims],
        dataType: ONNX_CODE[t.dtype],
        dataLocation: onnx.TensorProto.DataLocation.EXTERNAL,
        externalData: [
          { key: 'location', value: file },
          { key: 'offset', value: String(at.offset) },
          { key: 'length', value: String(at.length) },
        ],
      });
    },
    close: () => fs.closeSync(fd),
  };
}

function typeProto(t: ValueType | undefined): OnnxTypes.ITypeProto | undefined {
  if (!t) return undefined;
  return {
    tensorType: {
      elemType: ONNX_CODE[t.dtype],
      shape: t.shape
        ? { dim: t.shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: dimStr(d) })) }
        : undefined,
    },
  };
}

function attrProto(name: string, a: Attr, model: Model, sink: WeightSink): OnnxTypes.IAttributeProto {
  const s = (x: string) => Buffer.from(x, 'utf8');
  switch (a.kind) {
    case 'int':
      return { name, type: AT.INT, i: a.value };
    case 'float':
      return { name, type: AT.FLOAT, f: a.value };
    case 'string':
      return { name, type: AT.STRING, s: s(a.value) };
    case 'tensor':
      return { name, type: AT.TENSOR, t: tensorToProto(a.value, '') };
    case 'graph':
      return { name, type: AT.GRAPH, g: graphProto(a.value, model, sink) };
    case 'ints':
      return { name, type: AT.INTS, ints: a.value };
    case 'floats':
      return { name, type: AT.FLOATS, floats: a.value };
    case 'strings':
      return { name, type: AT.STRINGS, strings: a.value.map(s) };
    case 'tensors':
      return { name, type: AT.TENSORS, tensors: a.value.map((t) => tensorToProto(t, '')) };
    case 'graphs':
      return { name, type: AT.GRAPHS, graphs: a.value.map((g) => graphProto(g, model, sink)) };
  }
}

function graphProto(g: Graph, model: Model, sink: WeightSink): OnnxTypes.IGraphProto {
  const vi = (n: string): OnnxTypes.IValueInfoProto => ({ name: n, type: typeProto(g.values.get(n)?.type) });
  const io = new Set([...g.inputs, ...g.outputs, ...g.initializers.keys()]);
  return {
    name: g.name,
    input: g.inputs.map(vi),
    output: g.outputs.map(vi),
    initializer: [...g.initializers].map(([n, id]) => sink.proto(id, n, model.weights.get(id)!.tensor)),
    valueInfo: [...g.values.keys()].filter((n) => !io.has(n) && g.values.get(n)?.type).map(vi),
    node: g.nodes.map((n) => ({
      name: n.name,
      opType: n.op,
      domain: n.domain,
      input: n.inputs,
      output: n.outputs,
      attribute: Object.entries(n.attrs).map(([k, a]) => attrProto(k, a, model, sink)),
      docString: n.origin.length === 1 && n.origin[0] === n.name ? undefined : ORIGIN_PREFIX + n.origin.join(','),
    })),
  };
}

function modelProto(model: Model, g: Graph, sink: WeightSink): Uint8Array {
  const m = onnx.ModelProto.create({
    irVersion: model.irVersion || 8,
    producerName: 'planc',
    opsetImport: Object.entries(model.opsets).map(([domain, version]) => ({ domain, version })),
    graph: graphProto(g, model, sink),
  });
  return onnx.ModelProto.encode(m).finish();
}

/** Writes one graph as a self-contained .onnx file (weights inline). */
export function writeOnnxFile(model: Model, graphName: string, file: string): void {
  const g = model.graphs.get(graphName);
  if (!g) throw new Error(`model has no graph '${graphName}'`);
  fs.writeFileSync(file, modelProto(model, g, inlineSink()));
}

/**
 * Writes every graph into a folder in the Hugging Face layout (encoder_model.onnx, ...; a single `main` graph as
 * model.onnx), large weights once in a shared `weights.bin`. Returns the files written.
 */
export function writeOnnxDir(model: Model, dir: string): string[] {
  fs.mkdirSync(dir, { recursive: true });
  const sink = externalSink(dir, 'weights.bin');
  const files: string[] = [];
  try {
    for (const [name, g] of model.graphs) {
      const file = path.join(dir, SEQ2SEQ_FILES[name] ?? `${name === 'main' ? 'model' : name}.onnx`);
      fs.writeFileSync(file, modelProto(model, g, sink));
      files.push(file);
    }
  } finally {
    sink.close();
  }
  return files;
}
