// Conversions between the evaluator's tensors and the runtime API's typed tensors (for oracles, demos and tests).
import { PlancError } from '../../compiler/diagnostics.ts';
import { bf16BitsToNumber, f16BitsToNumber, numberToBf16Bits, numberToF16Bits } from '../../compiler/float16.ts';
import { Tensor } from '../../compiler/tensor.ts';
import type { RtTensor } from '../../runtime/tensor.ts';

/** Evaluator tensor → runtime tensor (int64 as BigInt64Array, float16 and bfloat16 as bits). */
export function toRt(t: Tensor): RtTensor {
  const dims = [...t.dims];
  const n = t.nums;
  switch (t.dtype) {
    case 'float32':
      return { dtype: 'float32', dims, data: Float32Array.from(n) };
    case 'float64':
      return { dtype: 'float64', dims, data: Float64Array.from(n) };
    case 'int32':
      return { dtype: 'int32', dims, data: Int32Array.from(n) };
    case 'int64':
      return {
        dtype: 'int64',
        dims,
        data: BigInt64Array.from(n, (x) => BigInt(Math.max(-9223372036854775808, Math.min(9223372036854775807, x)))),
      };
    case 'int8':
      return { dtype: 'int8', dims, data: Int8Array.from(n) };
    case 'uint8':
      return { dtype: 'uint8', dims, data: Uint8Array.from(n) };
    case 'bool':
      return { dtype: 'bool', dims, data: Uint8Array.from(n) };
    case 'float16':
      return { dtype: 'float16', dims, data: Uint16Array.from(n, numberToF16Bits) };
    case 'bfloat16':
      return { dtype: 'bfloat16', dims, data: Uint16Array.from(n, numberToBf16Bits) };
    default:
      throw new PlancError('PLANC_E404', `dtype ${t.dtype} is not supported by plans`);
  }
}

/** Runtime tensor → evaluator tensor. */
export function fromRt(t: RtTensor): Tensor {
  const bits = t.dtype === 'float16' ? f16BitsToNumber : t.dtype === 'bfloat16' ? bf16BitsToNumber : undefined;
  const values = bits
    ? Array.from(t.data as Uint16Array, bits)
    : Array.from(t.data as ArrayLike<number | bigint>, (x) => Number(x));
  return Tensor.fromNumbers(t.dtype, t.dims, values);
}
