// Operators beyond the translation-model set, for conformance coverage: losses, resize, control flow, signal, text and more.
import { GRID_OPS } from './extra-grid.ts';
import { LOOP_OPS } from './extra-loop.ts';
import { LOSS_OPS } from './extra-loss.ts';
import { ML_OPS } from './extra-ml.ts';
import { MISC_OPS } from './extra-misc.ts';
import { RESIZE_OPS } from './extra-resize.ts';
import { RNN_OPS } from './extra-rnn.ts';
import { SIGNAL_OPS } from './extra-signal.ts';
import { TEXT_OPS } from './extra-text.ts';
import { VISION_OPS } from './extra-vision.ts';
import type { OpHandler } from './types.ts';

export const EXTRA_OPS: OpHandler[] = [
  ...LOSS_OPS,
  ...RESIZE_OPS,
  ...GRID_OPS,
  ...LOOP_OPS,
  ...MISC_OPS,
  ...SIGNAL_OPS,
  ...VISION_OPS,
  ...TEXT_OPS,
  ...RNN_OPS,
  ...ML_OPS,
];
