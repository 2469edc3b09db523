// Operators beyond the translation-model set, for conformance coverage: losses, resize, control flow, signal, text and more.
import { LOSS_OPS } from './extra-loss.ts';
import type { OpHandler } from './types.ts';

export const EXTRA_OPS: OpHandler[] = [...LOSS_OPS];
