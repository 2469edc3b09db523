// Test helpers for comparing planc with onnxruntime-node: tensor conversion and the relative error metric.
import ort from 'onnxruntime-node';
import type { DType } from '../../compiler/dtype.ts';
import { Tensor } from '../../compiler/tensor.ts';

export { ort };

/** planc Tensor → onnxruntime tensor. */
export function toOrt(t: Tensor): ort.Tensor {
  const dims = [...t.dims];
  switch (t.dtype) {
    case 'int64':
      return new ort.Tensor(
        'int64',
        BigInt64Array.from(t.nums, (x) => BigInt(x)),
        dims,
      );
    case 'float32':
      return new ort.Tensor('float32', Float32Array.from(t.nums), dims);
    case 'int32':
      return new ort.Tensor('int32', Int32Array.from(t.nums), dims);
    case 'bool':
      return new ort.Tensor('bool', Uint8Array.from(t.nums), dims);
    case 'float64':
      return new ort.Tensor('float64', Float64Array.from(t.nums), dims);
    default:
      throw new Error(`toOrt: ${t.dtype} not needed by the tests`);
  }
}

/** onnxruntime tensor → planc Tensor. */
export function fromOrt(t: ort.Tensor): Tensor {
  const map: Record<string, DType> = {
    float32: 'float32',
    int64: 'int64',
    int32: 'int32',
    bool: 'bool',
    float64: 'float64',
  };
  const dtype = map[t.type];
  if (!dtype) throw new Error(`fromOrt: ${t.type} not needed by the tests`);
  const data = t.data as ArrayLike<number | bigint>;
  return Tensor.fromNumbers(
    dtype,
    t.dims.map(Number),
    Array.from(data, (x) => Number(x)),
  );
}

/** max |a-b| / (max |b| + 1e-6): the relative error the issues specify. */
export function relErr(a: Tensor, b: Tensor): number {
  if (a.dims.join() !== b.dims.join()) return Infinity;
  let diff = 0;
  let mag = 0;
  const x = a.nums;
  const y = b.nums;
  for (let i = 0; i < y.length; i++) {
    diff = Math.max(diff, Math.abs(x[i]! - y[i]!));
    mag = Math.max(mag, Math.abs(y[i]!));
  }
  return diff / (mag + 1e-6);
}

/** Runs an onnxruntime session on planc tensors; returns planc tensors by output name. */
export async function runOrt(
  session: ort.InferenceSession,
  feeds: Record<string, Tensor>,
): Promise<Record<string, Tensor>> {
  const f: Record<string, ort.Tensor> = {};
  for (const [k, v] of Object.entries(feeds)) f[k] = toOrt(v);
  const out = await session.run(f);
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, fromOrt(v)]));
}
