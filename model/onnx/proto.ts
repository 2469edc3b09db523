// The ONNX protobuf classes (onnx-proto, protobufjs) and small conversions of their Long fields.
import onnxProto from 'onnx-proto';

export const onnx = onnxProto.onnx;
// eslint-disable-next-line @typescript-eslint/no-namespace
export type { onnx as OnnxTypes } from 'onnx-proto';

/** protobufjs gives int64 fields as Long objects or numbers; planc uses numbers (exact up to 2^53). */
export function num(x: number | { toNumber(): number } | null | undefined): number {
  if (x === null || x === undefined) return 0;
  return typeof x === 'number' ? x : x.toNumber();
}
