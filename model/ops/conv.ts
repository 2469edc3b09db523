// Conv-family operators: convolutions (conv-conv.ts), pooling (conv-pool.ts) and rarer ones (conv-extra.ts), as one list.
import { CONV_CONV_OPS } from './conv-conv.ts';
import { CONV_EXTRA_OPS } from './conv-extra.ts';
import { CONV_POOL_OPS } from './conv-pool.ts';
import type { OpHandler } from './types.ts';

export const CONV_OPS: OpHandler[] = [...CONV_CONV_OPS, ...CONV_POOL_OPS, ...CONV_EXTRA_OPS];
