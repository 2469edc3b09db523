// Placeholder: conv operators (filled in by its owner).
import type { OpHandler } from './types.ts';

export const CONV_OPS: OpHandler[] = [];
