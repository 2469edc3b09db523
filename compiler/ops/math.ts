// Placeholder: math operators (filled in by its owner).
import type { OpHandler } from './types.ts';

export const MATH_OPS: OpHandler[] = [];
