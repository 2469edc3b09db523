// Builds small ONNX models in tests (valid or deliberately broken) with onnx-proto.
import { ONNX_CODE, type DType } from '../../compiler/dtype.ts';
import { onnx, type OnnxTypes } from '../../model/onnx/proto.ts';

export interface NodeSpec {
  op: string;
  inputs: string[];
  outputs: string[];
  name?: string;
  domain?: string;
  attrs?: OnnxTypes.IAttributeProto[];
}

export interface ModelSpec {
  inputs: [name: string, dtype: DType, dims: (number | string)[]][];
  outputs: [name: string, dtype: DType, dims: (number | string)[]][];
  nodes: NodeSpec[];
  initializers?: OnnxTypes.ITensorProto[];
  opset?: number;
}

function vi([name, dtype, dims]: [string, DType, (number | string)[]]): OnnxTypes.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType: ONNX_CODE[dtype],
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

/** Serialized ModelProto bytes. */
export function buildModel(spec: ModelSpec): Uint8Array {
  const m = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'planc-test',
    opsetImport: [{ domain: '', version: spec.opset ?? 17 }],
    graph: {
      name: 'test',
      input: spec.inputs.map(vi),
      output: spec.outputs.map(vi),
      initializer: spec.initializers ?? [],
      node: spec.nodes.map((n, i) => ({
        name: n.name ?? `n${i}`,
        opType: n.op,
        domain: n.domain ?? '',
        input: n.inputs,
        output: n.outputs,
        attribute: n.attrs ?? [],
      })),
    },
  });
  return onnx.ModelProto.encode(m).finish();
}

/** A float32 initializer with raw data. */
export function floatInit(name: string, dims: number[], values: number[]): OnnxTypes.ITensorProto {
  return { name, dims, dataType: ONNX_CODE.float32, rawData: new Uint8Array(Float32Array.from(values).buffer) };
}

/** An int64 initializer. */
export function int64Init(name: string, dims: number[], values: number[]): OnnxTypes.ITensorProto {
  return { name, dims, dataType: ONNX_CODE.int64, int64Data: values };
}

/** A Transpose's perm attribute. */
export function permAttr(p: number[]): NodeSpec['attrs'] {
  return [{ name: 'perm', type: 7, ints: p }];
}

/** Exporter-style head split: x [B,S,H*D] → [B,H,S,D] (Reshape by the 'heads_shape' initializer, then Transpose 0,2,1,3). */
export function headSplit(x: string, out: string): NodeSpec[] {
  return [
    { op: 'Reshape', inputs: [x, 'heads_shape'], outputs: [`${out}_r`], name: `${out}_reshape` },
    { op: 'Transpose', inputs: [`${out}_r`], outputs: [out], name: `${out}_split`, attrs: permAttr([0, 2, 1, 3]) },
  ];
}
