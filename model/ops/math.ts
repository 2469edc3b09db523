// Math operators (linear algebra, softmax family, normalizations, reductions, selection, quantization): the family's handlers.
import { EINSUM_OPS } from './math-einsum.ts';
import { MATMUL_OPS } from './math-matmul.ts';
import { NORM_OPS } from './math-norm.ts';
import { QUANT_OPS } from './math-quant.ts';
import { REDUCE_OPS } from './math-reduce.ts';
import { SOFTMAX_OPS } from './math-softmax.ts';
import { TOPK_OPS } from './math-topk.ts';
import type { OpHandler } from './types.ts';

export const MATH_OPS: OpHandler[] = [
  ...MATMUL_OPS,
  ...EINSUM_OPS,
  ...SOFTMAX_OPS,
  ...NORM_OPS,
  ...REDUCE_OPS,
  ...TOPK_OPS,
  ...QUANT_OPS,
];
