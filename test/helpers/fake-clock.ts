// A fake performance.now for tests of time-driven code: time moves only when the test (or each read) says so.

export interface FakeClock {
  /** Moves the clock forward by ms. */
  advance(ms: number): void;
  /** Puts the real performance.now back. */
  restore(): void;
}

/**
 * Replaces performance.now with a clock that starts at 0 and moves only by advance(), plus perRead ms after each read
 * (perRead > 0: every read sees time pass, so code that waits for time to pass never waits on the machine's speed).
 */
export function fakeClock(perRead = 0): FakeClock {
  const real = performance.now;
  let t = 0;
  performance.now = () => {
    const now = t;
    t += perRead;
    return now;
  };
  return {
    advance: (ms) => {
      t += ms;
    },
    restore: () => {
      performance.now = real;
    },
  };
}

/** Runs fn under a fake clock, then restores the real one (also when fn throws or its promise rejects). */
export async function withFakeClock<T>(perRead: number, fn: (clock: FakeClock) => T | Promise<T>): Promise<T> {
  const clock = fakeClock(perRead);
  try {
    return await fn(clock);
  } finally {
    clock.restore();
  }
}

/** Counts the event loop's turns (a setImmediate that renews itself) from start() until its promise settles. */
export function turnCounter(): { readonly turns: number; during<T>(start: () => Promise<T>): Promise<T> } {
  let turns = 0;
  return {
    get turns() {
      return turns;
    },
    async during<T>(start: () => Promise<T>): Promise<T> {
      let done = false;
      const count = () => {
        turns++;
        if (!done) setImmediate(count);
      };
      setImmediate(count);
      try {
        return await start();
      } finally {
        done = true;
      }
    },
  };
}
