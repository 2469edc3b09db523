// Placeholder: movement operators (filled in by its owner).
import type { OpHandler } from './types.ts';

export const MOVEMENT_OPS: OpHandler[] = [];
