// Movement operators (data movement and shape ops): the family's handlers, gathered from the movement-*.ts files.
import type { OpHandler } from './types.ts';
import { MOVEMENT_SHAPE_OPS } from './movement-shape.ts';
import { MOVEMENT_SLICE_OPS } from './movement-slice.ts';
import { MOVEMENT_GATHER_OPS } from './movement-gather.ts';
import { MOVEMENT_MAKE_OPS } from './movement-make.ts';
import { MOVEMENT_MISC_OPS } from './movement-misc.ts';
import { MOVEMENT_SELECT_OPS } from './movement-select.ts';

export const MOVEMENT_OPS: OpHandler[] = [
  ...MOVEMENT_SHAPE_OPS,
  ...MOVEMENT_SLICE_OPS,
  ...MOVEMENT_GATHER_OPS,
  ...MOVEMENT_MAKE_OPS,
  ...MOVEMENT_MISC_OPS,
  ...MOVEMENT_SELECT_OPS,
];
