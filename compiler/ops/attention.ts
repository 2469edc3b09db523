// Placeholder: attention operators (filled in by its owner).
import type { OpHandler } from './types.ts';

export const ATTENTION_OPS: OpHandler[] = [];
