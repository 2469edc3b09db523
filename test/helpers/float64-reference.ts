// A float64 copy of an ONNX graph run by onnxruntime: the truth that says how far float32 itself (onnxruntime's
// included) is from the exact result on models whose rounding error is amplified past a test's tolerance.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { num, onnx, type OnnxTypes } from '../../model/onnx/proto.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { fromOrt, ort, toOrt } from './ort.ts';

const FLOAT = onnx.TensorProto.DataType.FLOAT;
const DOUBLE = onnx.TensorProto.DataType.DOUBLE;

/** Float32 values of t: inline, or from its external data file (resolved against the model's folder). */
function floatValues(t: OnnxTypes.ITensorProto, dir: string, files: Map<string, Buffer>): Float32Array {
  if (t.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
    const kv = Object.fromEntries((t.externalData ?? []).map((e) => [e.key, e.value]));
    const file = path.join(dir, kv.location ?? '');
    const bytes = files.get(file) ?? fs.readFileSync(file);
    files.set(file, bytes);
    const offset = Number(kv.offset ?? 0);
    const length = kv.length === undefined ? bytes.length - offset : Number(kv.length);
    return new Float32Array(Uint8Array.from(bytes.subarray(offset, offset + length)).buffer);
  }
  if (t.rawData && t.rawData.length > 0) return new Float32Array(Uint8Array.from(t.rawData).buffer);
  return Float32Array.from(t.floatData ?? []);
}

function widenTensor(t: OnnxTypes.ITensorProto, dir: string, files: Map<string, Buffer>): void {
  if (t.dataType !== FLOAT) return;
  const values = floatValues(t, dir, files);
  t.dataType = DOUBLE;
  t.dataLocation = onnx.TensorProto.DataLocation.DEFAULT;
  t.externalData = [];
  t.floatData = [];
  t.doubleData = [];
  t.rawData = new Uint8Array(Float64Array.from(values).buffer);
}

function widenType(v: OnnxTypes.IValueInfoProto): void {
  const tt = v.type?.tensorType;
  if (tt && tt.elemType === FLOAT) tt.elemType = DOUBLE;
}

/**
 * The model in onnxFile with every float32 initializer (external data read in), constant, value type and Cast-to-float
 * widened to float64.
 */
export function widenToFloat64(onnxFile: string): Uint8Array {
  const dir = path.dirname(onnxFile);
  const files = new Map<string, Buffer>();
  const m = onnx.ModelProto.decode(fs.readFileSync(onnxFile));
  const g = m.graph;
  if (!g) throw new Error('widenToFloat64: the model has no graph');
  if (g.sparseInitializer?.length) throw new Error('widenToFloat64: sparse initializers are not widened');
  for (const t of g.initializer ?? []) widenTensor(t, dir, files);
  for (const v of [...(g.input ?? []), ...(g.output ?? []), ...(g.valueInfo ?? [])]) widenType(v);
  for (const n of g.node ?? []) {
    for (const a of n.attribute ?? []) {
      if (a.t) widenTensor(a.t, dir, files);
      if (a.g || a.graphs?.length) throw new Error(`widenToFloat64: node ${n.name} (${n.opType}) has a subgraph`);
      if (n.opType === 'Cast' && a.name === 'to' && num(a.i) === FLOAT) a.i = DOUBLE;
    }
  }
  return onnx.ModelProto.encode(m).finish();
}

const sessions = new Map<string, Promise<ort.InferenceSession>>();

/**
 * The graph's outputs computed in float64 by onnxruntime (graph optimizations off: its fusions are float32-only
 * kernels), for float32 feeds widened; outputs come back as float64 tensors.
 */
export async function float64Outputs(onnxFile: string, feeds: Record<string, Tensor>): Promise<Record<string, Tensor>> {
  let s = sessions.get(onnxFile);
  if (!s) {
    s = ort.InferenceSession.create(widenToFloat64(onnxFile), { graphOptimizationLevel: 'disabled' });
    sessions.set(onnxFile, s);
  }
  const session = await s;
  const wide = Object.fromEntries(
    Object.entries(feeds)
      .filter(([k]) => session.inputNames.includes(k))
      .map(([k, v]) => [
        k,
        toOrt(v.dtype === 'float32' ? Tensor.fromNumbers('float64', [...v.dims], Array.from(v.nums)) : v),
      ]),
  );
  const out = await session.run(wide);
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, fromOrt(v)]));
}
