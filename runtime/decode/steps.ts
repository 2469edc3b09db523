// Decoding loops are generators that yield after each decoder step; these drive one on the calling thread or, yielding
// to the event loop between steps, from async code.

/** A decoding loop: yields after each decoder step, returns its result. */
export type Steps<R> = Generator<void, R>;

/** Runs the loop to its end without yielding (calibration, synchronous callers). */
export function runToEnd<R>(steps: Steps<R>): R {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** The event loop waits at most this long (plus one step) while a batch decodes. */
export const YIELD_EVERY_MS = 4;

/**
 * Runs the loop, returning to the event loop between steps once YIELD_EVERY_MS has passed since it last did, so timers
 * and I/O are served while a batch decodes (a yield per step would cost more than a short step on the CPU).
 */
export async function runYielding<R>(steps: Steps<R>): Promise<R> {
  let since = performance.now();
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    if (performance.now() - since >= YIELD_EVERY_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      since = performance.now();
    }
  }
}
