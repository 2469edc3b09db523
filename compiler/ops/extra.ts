// Operators beyond the translation-model set, for conformance coverage: losses, resize, control flow, signal, text and more.
import { GRID_OPS } from './extra-grid.ts';
import { LOOP_OPS } from './extra-loop.ts';
import { LOSS_OPS } from './extra-loss.ts';
import { MISC_OPS } from './extra-misc.ts';
import { RESIZE_OPS } from './extra-resize.ts';
import { SIGNAL_OPS } from './extra-signal.ts';
import { VISION_OPS } from './extra-vision.ts';
import type { OpHandler } from './types.ts';

export const EXTRA_OPS: OpHandler[] = [...LOSS_OPS, ...RESIZE_OPS, ...GRID_OPS, ...LOOP_OPS, ...MISC_OPS, ...SIGNAL_OPS, ...VISION_OPS];
