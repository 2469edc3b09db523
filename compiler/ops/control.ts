// Placeholder: control operators (filled in by its owner).
import type { OpHandler } from './types.ts';

export const CONTROL_OPS: OpHandler[] = [];
