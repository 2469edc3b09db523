// Elementwise operators: unary math and activations, binary/variadic arithmetic and logic, casts and pass-throughs.
import { BINARY_OPS } from './elementwise-binary.ts';
import { CAST_OPS } from './elementwise-cast.ts';
import { UNARY_OPS } from './elementwise-unary.ts';
import type { OpHandler } from './types.ts';

export const ELEMENTWISE_OPS: OpHandler[] = [...UNARY_OPS, ...BINARY_OPS, ...CAST_OPS];
