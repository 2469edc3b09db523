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
