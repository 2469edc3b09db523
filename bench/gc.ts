// A full garbage collection before a timed run, so that no run pays for the garbage of the one before it (onnxruntime's
// reference decoder leaves much; without this the plan timed after it ran up to 1.4x slower).
import * as v8 from 'node:v8';
import * as vm from 'node:vm';

let gc: (() => void) | undefined;

/** Collects all garbage now (node's gc, exposed at first use). */
export function collectGarbage(): void {
  if (!gc) {
    v8.setFlagsFromString('--expose-gc');
    gc = vm.runInNewContext('gc') as () => void;
  }
  gc();
}
