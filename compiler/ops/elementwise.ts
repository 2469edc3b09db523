// Placeholder: elementwise operators (filled in by its owner).
import type { OpHandler } from './types.ts';

export const ELEMENTWISE_OPS: OpHandler[] = [];
