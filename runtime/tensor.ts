// Tensors of the runtime API: a dtype, dims and a typed array (int64 as BigInt64Array, bool as Uint8Array, float16 and
// bfloat16 as their bits in a Uint16Array), or a
// view of a plan's resident buffer.
import { PLAN_DTYPES } from '../compiler/kernel-enums.ts';
import type { NativeResident } from './native.ts';
export type RtDType = 'float32' | 'float64' | 'float16' | 'bfloat16' | 'int32' | 'int64' | 'int8' | 'uint8' | 'bool';

export type RtData = Float32Array | Float64Array | Int32Array | BigInt64Array | Int8Array | Uint8Array | Uint16Array;

export interface RtTensor {
  dtype: RtDType;
  dims: number[];
  data: RtData;
}

/**
 * A resident buffer: native memory a loaded plan owns (host memory on cpu, device memory on cuda), made by
 * Plan.residentNew; it outlives runs and is freed by Plan.residentFree or the plan's close.
 */
export interface Resident {
  readonly handle: NativeResident;
  readonly bytes: number;
  /** The plan that made it (runs and copies of other plans refuse it). */
  readonly owner: object;
}

/** A tensor stored in a resident buffer at a byte offset: a feed or output of Plan.run without a host array. */
export interface ResidentTensor {
  dtype: RtDType;
  dims: number[];
  resident: Resident;
  offset: number;
}

/** What Plan.run accepts as a feed. */
export type FeedTensor = RtTensor | ResidentTensor;

export function isResidentTensor(t: FeedTensor): t is ResidentTensor {
  return (t as ResidentTensor).resident !== undefined;
}

/** ONNX dtype code → runtime dtype. */
export const DTYPE_OF_CODE: Record<number, RtDType> = Object.fromEntries(
  PLAN_DTYPES.map((d) => [d.code, d.name as RtDType]),
);

const ARRAY: Record<RtDType, { new (n: number): RtData; name: string }> = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Uint16Array,
  bfloat16: Uint16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  int8: Int8Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};

export function allocTensor(dtype: RtDType, dims: number[]): RtTensor {
  return { dtype, dims, data: new ARRAY[dtype](dims.reduce((a, b) => a * b, 1)) };
}

const BYTES = Object.fromEntries(PLAN_DTYPES.map((d) => [d.name, d.bytes])) as Record<RtDType, number>;

/** Bytes per element of a dtype. */
export function dtypeBytes(dtype: RtDType): number {
  return BYTES[dtype];
}

/**
 * A tensor whose memory is not zeroed, for outputs the native runtime overwrites entirely: fresh zeroed megabytes per
 * decoder step (logits, caches) cost page faults and clearing that show up in step latency.
 */
export function allocOutputTensor(dtype: RtDType, dims: number[]): RtTensor {
  const n = dims.reduce((a, b) => a * b, 1);
  if (n * BYTES[dtype] < 4096) return allocTensor(dtype, dims);
  const buf = Buffer.allocUnsafeSlow(n * BYTES[dtype]).buffer;
  const Ctor = ARRAY[dtype] as unknown as { new (b: ArrayBufferLike, offset: number, length: number): RtData };
  return { dtype, dims, data: new Ctor(buf, 0, n) };
}

/** The typed array class a dtype uses (for checking feeds). */
export function arrayNameOf(dtype: RtDType): string {
  return ARRAY[dtype].name;
}

/** A tensor from plain numbers (int64 converted to bigint). */
export function tensorFrom(dtype: RtDType, dims: number[], values: ArrayLike<number>): RtTensor {
  const t = allocTensor(dtype, dims);
  if (t.data.length !== values.length) throw new Error(`tensorFrom: ${values.length} values for dims [${dims}]`);
  if (t.data instanceof BigInt64Array)
    for (let i = 0; i < values.length; i++) t.data[i] = BigInt(Math.trunc(values[i]!));
  else (t.data as Float32Array).set(values);
  return t;
}

/** The elements as numbers (int64 via Number). */
export function toNumbers(t: RtTensor): number[] {
  return Array.from(t.data as ArrayLike<number | bigint>, (x) => Number(x));
}

/**
 * int64 words of safe integers, without a BigInt per value: values in int32 range are written as two int32 words
 * (little-endian, the byte order of every platform the addon builds for), the rest through BigInt.
 */
export function bigInt64Of(values: readonly number[]): BigInt64Array {
  const out = new BigInt64Array(values.length);
  const words = new Int32Array(out.buffer);
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if ((v | 0) === v) {
      words[2 * i] = v;
      words[2 * i + 1] = v < 0 ? -1 : 0;
    } else out[i] = BigInt(v);
  }
  return out;
}
