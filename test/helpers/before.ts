// test.before that fails the run when setup throws: uvu 0.5 reports such a suite as "0 passed" yet exits with 0.
import type { Test } from 'uvu';

let setupFailed = false;
process.on('exit', () => {
  if (setupFailed) process.exitCode = 1;
});

/** Runs fn before the suite's tests; an error is printed and makes the whole test run fail. */
export function before(test: Test, fn: () => unknown): void {
  test.before(async () => {
    try {
      await fn();
    } catch (e) {
      setupFailed = true;
      console.error(`\n  SETUP FAILED: ${(e as Error).stack ?? String(e)}\n`);
      throw e;
    }
  });
}
