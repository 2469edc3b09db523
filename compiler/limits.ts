// Sizes a plan can hold: the bounds the compiler checks models and profiles against, before they overflow a size.

/**
 * The most bytes a plan may address: one tensor, or the arena all of a program's tensors share. The native runtime
 * refuses larger arenas (kMaxBytes in native/src/plan_state.cc), so a model or profile that needs more is refused
 * when compiled, naming the dims and options that make it so.
 */
export const MAX_PLAN_BYTES = 2 ** 46;

/** The largest dim a model may declare or a profile bound may set (kernels' loops and CUDA grids use 32-bit dims). */
export const MAX_DIM = 2 ** 31 - 1;
