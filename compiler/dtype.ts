// Element types of tensors: names, ONNX TensorProto codes, sizes and the JS array each is held in.
export type DType =
  | 'float32'
  | 'float16'
  | 'bfloat16'
  | 'float64'
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'uint8'
  | 'uint16'
  | 'uint32'
  | 'uint64'
  | 'bool'
  | 'string';

/** ONNX TensorProto.DataType code for each supported dtype. */
export const ONNX_CODE: Record<DType, number> = {
  float32: 1,
  uint8: 2,
  int8: 3,
  uint16: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  string: 8,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
  uint64: 13,
  bfloat16: 16,
};

/** Names ONNX gives to the codes planc does not support (for error messages). */
const UNSUPPORTED_CODES: Record<number, string> = {
  0: 'UNDEFINED',
  14: 'COMPLEX64',
  15: 'COMPLEX128',
  17: 'FLOAT8E4M3FN',
  18: 'FLOAT8E4M3FNUZ',
  19: 'FLOAT8E5M2',
  20: 'FLOAT8E5M2FNUZ',
  21: 'UINT4',
  22: 'INT4',
  23: 'FLOAT4E2M1',
  24: 'FLOAT8E8M0',
  25: 'UINT2',
  26: 'INT2',
};

const BY_CODE = new Map<number, DType>(Object.entries(ONNX_CODE).map(([k, v]) => [v, k as DType]));

/** The dtype for an ONNX code, or undefined when planc does not support it. */
export function dtypeFromOnnx(code: number): DType | undefined {
  return BY_CODE.get(code);
}

/** A readable name for an ONNX dtype code, supported or not. */
export function onnxDtypeName(code: number): string {
  const d = BY_CODE.get(code);
  return d ?? UNSUPPORTED_CODES[code] ?? `code ${code}`;
}

/** Bytes per element as stored in ONNX raw_data and in plans (strings: 0, variable). */
export const BYTES: Record<DType, number> = {
  float32: 4,
  float16: 2,
  bfloat16: 2,
  float64: 8,
  int8: 1,
  int16: 2,
  int32: 4,
  int64: 8,
  uint8: 1,
  uint16: 2,
  uint32: 4,
  uint64: 8,
  bool: 1,
  string: 0,
};

export const FLOAT_TYPES: readonly DType[] = ['float32', 'float16', 'bfloat16', 'float64'];
export const INT_TYPES: readonly DType[] = ['int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64'];
export const NUMERIC_TYPES: readonly DType[] = [...FLOAT_TYPES, ...INT_TYPES];

export function isFloat(d: DType): boolean {
  return FLOAT_TYPES.includes(d);
}
export function isInt(d: DType): boolean {
  return INT_TYPES.includes(d);
}
export function isSigned(d: DType): boolean {
  return d.startsWith('int') || isFloat(d);
}

/**
 * The JS array that holds a dtype's elements inside the evaluator. float16 and bfloat16 are held as
 * float32 values already rounded to the narrower type; int64 and uint64 as float64 (exact up to 2^53).
 */
export type NumArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Int16Array
  | Int32Array
  | Uint8Array
  | Uint16Array
  | Uint32Array;
export type Data = NumArray | string[];

export function allocData(dtype: DType, n: number): Data {
  switch (dtype) {
    case 'float32':
    case 'float16':
    case 'bfloat16':
      return new Float32Array(n);
    case 'float64':
    case 'int64':
    case 'uint64':
      return new Float64Array(n);
    case 'int8':
      return new Int8Array(n);
    case 'int16':
      return new Int16Array(n);
    case 'int32':
      return new Int32Array(n);
    case 'uint8':
    case 'bool':
      return new Uint8Array(n);
    case 'uint16':
      return new Uint16Array(n);
    case 'uint32':
      return new Uint32Array(n);
    case 'string':
      return new Array<string>(n).fill('');
  }
}

/** Integer limits used by casts and saturating ops. */
export const INT_RANGE: Partial<Record<DType, [number, number]>> = {
  int8: [-128, 127],
  int16: [-32768, 32767],
  int32: [-2147483648, 2147483647],
  int64: [-9223372036854775808, 9223372036854775807],
  uint8: [0, 255],
  uint16: [0, 65535],
  uint32: [0, 4294967295],
  uint64: [0, 18446744073709551615],
};
