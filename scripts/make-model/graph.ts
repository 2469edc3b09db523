// Graph builder for make-model: emits ONNX nodes named the way the PyTorch exporter names them (/scope/Op_N, *_output_0).
import onnxProto from 'onnx-proto';
import type { onnx as O } from 'onnx-proto';

const { onnx } = onnxProto;
export type INode = O.INodeProto;
export type IAttr = O.IAttributeProto;
export type ITensor = O.ITensorProto;
export type IValueInfo = O.IValueInfoProto;

const AT = onnx.AttributeProto.AttributeType;
export const FLOAT = onnx.TensorProto.DataType.FLOAT;
export const INT64 = onnx.TensorProto.DataType.INT64;

/** Attribute constructors. */
export const attr = {
  int: (name: string, i: number): IAttr => ({ name, type: AT.INT, i }),
  ints: (name: string, ints: number[]): IAttr => ({ name, type: AT.INTS, ints }),
  float: (name: string, f: number): IAttr => ({ name, type: AT.FLOAT, f }),
  tensor: (name: string, t: ITensor): IAttr => ({ name, type: AT.TENSOR, t }),
};

function bytes(a: BigInt64Array | Float32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** Small constant tensors as the exporter writes them (raw_data, no name; dims omitted for scalars). */
export const tensor = {
  i64: (v: number): ITensor => ({ dataType: INT64, rawData: bytes(BigInt64Array.of(BigInt(v))) }),
  i64v: (v: number[]): ITensor => ({
    dims: [v.length],
    dataType: INT64,
    rawData: bytes(BigInt64Array.from(v.map(BigInt))),
  }),
  f32: (v: number): ITensor => ({ dataType: FLOAT, rawData: bytes(Float32Array.of(v)) }),
  f32v: (v: number[]): ITensor => ({ dims: [v.length], dataType: FLOAT, rawData: bytes(Float32Array.from(v)) }),
  f32nd: (dims: number[], data: Float32Array): ITensor => ({ dims, dataType: FLOAT, rawData: bytes(data) }),
};

/** A graph input/output: element type and dims (numbers are fixed, strings symbolic). */
export function valueInfo(name: string, elemType: number, dims: (number | string)[]): IValueInfo {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

/** One graph under construction. Initializers are referenced by the key of a model-wide tensor. */
export class GraphBuilder {
  readonly nodes: INode[] = [];
  /** Named parameters used (name → tensor key), in first-use order; sorted into module order when finalized. */
  readonly params = new Map<string, string>();
  /** Exporter-named MatMul weights (onnx::MatMul_N → tensor key), in use order. */
  readonly weights = new Map<string, string>();
  private readonly counts = new Map<string, number>();
  private nextId: number;

  constructor(firstValueId = 100) {
    this.nextId = firstValueId;
  }

  /** Appends node `${scope}/${op}[_n]` and returns its (single) output name. */
  add(scope: string, op: string, inputs: string[], attrs: IAttr[] = [], output?: string): string {
    const base = `${scope}/${op}`;
    const n = this.counts.get(base) ?? 0;
    this.counts.set(base, n + 1);
    const name = n ? `${base}_${n}` : base;
    const out = output ?? `${name}_output_0`;
    const node: INode = { name, opType: op, input: inputs, output: [out] };
    if (attrs.length) node.attribute = attrs;
    this.nodes.push(node);
    this.nextId++;
    return out;
  }

  /** A named Constant node in `scope`. */
  constant(scope: string, t: ITensor): string {
    return this.add(scope, 'Constant', [], [attr.tensor('value', t)]);
  }

  /** The exporter's anonymous axes constant for Unsqueeze: node Constant_<index>, output onnx::Unsqueeze_<id>. */
  unsqueezeAxes0(): string {
    const out = `onnx::Unsqueeze_${this.nextId++}`;
    this.nodes.push({
      name: `Constant_${this.nodes.length}`,
      opType: 'Constant',
      output: [out],
      attribute: [attr.tensor('value', tensor.i64v([0]))],
    });
    return out;
  }

  /** A named parameter (e.g. m.enc.0.att.q.bias); its name is its tensor key. */
  param(name: string): string {
    this.params.set(name, name);
    return name;
  }

  /** A MatMul weight: a fresh onnx::MatMul_N name bound to the model tensor `key`. */
  weight(key: string): string {
    const name = `onnx::MatMul_${this.nextId++}`;
    this.weights.set(name, key);
    return name;
  }
}
