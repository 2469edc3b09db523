// Resident buffers (native/src/resident.h) of a cpu plan through the addon: zeroed memory, host round trips, span
// copies applied in order, and every bad handle, span or range a clear error that copies nothing.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { native, nativeAvailable, type NativeAddon, type NativePlan, type NativeResident } from '../runtime/native.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';
import { thrown } from './helpers/expect-error.ts';

const NAMES = [
  'a new resident buffer is zeroed; writes and reads at an offset round trip',
  'span copies gather into another buffer, and in place later spans read what earlier ones wrote',
  'bad spans are clear errors and copy nothing',
  'bad handles, sizes and ranges are clear errors',
];

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, NAMES);
} else {
  const a: NativeAddon = native();
  const plan: NativePlan = a.planNew(new Uint8Array(0), new BigInt64Array(0), 0);
  const other: NativePlan = a.planNew(new Uint8Array(0), new BigInt64Array(0), 0);
  const floats = (r: NativeResident, n: number, offset = 0) => {
    const out = new Float32Array(n);
    a.residentRead(r, offset, out);
    return Array.from(out);
  };
  const counting = (n: number) => {
    const r = a.residentNew(plan, 4 * n);
    a.residentWrite(
      r,
      0,
      Float32Array.from({ length: n }, (_, i) => i),
    );
    return r;
  };

  test(NAMES[0]!, () => {
    const r = a.residentNew(plan, 64);
    assert.equal(floats(r, 16), new Array(16).fill(0));
    a.residentWrite(r, 8, Float32Array.of(1.5, -2, 3));
    assert.equal(floats(r, 5), [0, 0, 1.5, -2, 3]);
    assert.equal(floats(r, 2, 12), [-2, 3]);
    const bytes = new Uint8Array(4);
    a.residentRead(r, 8, bytes);
    assert.equal(Array.from(bytes), Array.from(new Uint8Array(Float32Array.of(1.5).buffer)));
    a.residentFree(r);
  });

  test(NAMES[1]!, () => {
    const src = counting(10);
    const dst = a.residentNew(plan, 40);
    a.residentCopy(src, dst, Float64Array.of(12, 0, 8, 0, 8, 4, 36, 12, 4));
    assert.equal(floats(dst, 10), [3, 4, 0, 9, 0, 0, 0, 0, 0, 0]);
    // in place: span 0 moves element 1 to 0; span 1 copies element 0 (now 1) to 5
    a.residentCopy(src, src, Float64Array.of(4, 0, 4, 0, 20, 4));
    assert.equal(floats(src, 10), [1, 1, 2, 3, 4, 1, 6, 7, 8, 9]);
    // rows of 2 moving down (batch shrinking: rows 1, 3, 4 of 5 become rows 0, 1, 2); same-offset spans are no-ops
    const rows = counting(10);
    a.residentCopy(rows, rows, Float64Array.of(8, 0, 8, 24, 8, 8, 32, 16, 8, 0, 0, 8));
    assert.equal(floats(rows, 6), [2, 3, 6, 7, 8, 9]);
    // empty span lists and zero-byte spans are fine
    a.residentCopy(src, dst, new Float64Array(0));
    a.residentCopy(src, dst, Float64Array.of(40, 40, 0));
  });

  test(NAMES[2]!, () => {
    const src = counting(10);
    const dst = a.residentNew(plan, 40);
    const cases: [Float64Array, RegExp][] = [
      [Float64Array.of(0, 0, 44), /span 0: source \[0, 44\) is outside the source resident of 40 bytes/],
      [
        Float64Array.of(0, 0, 4, 0, 38, 4),
        /span 1: destination \[38, 42\) is outside the destination resident of 40 bytes/,
      ],
      [Float64Array.of(-4, 0, 4), /span 0: .* are not byte counts/],
      [Float64Array.of(0.5, 0, 4), /span 0: .* are not byte counts/],
      [Float64Array.of(NaN, 0, 4), /span 0: .* are not byte counts/],
      [Float64Array.of(0, 0), /triples \(length 2\)/],
    ];
    for (const [spans, want] of cases)
      assert.match(
        thrown(() => a.residentCopy(src, dst, spans)),
        want,
      );
    assert.equal(floats(dst, 10), new Array(10).fill(0), 'no span of a bad list was applied');
    assert.match(
      thrown(() => a.residentCopy(src, src, Float64Array.of(0, 0, 4, 0, 8, 12))),
      /span 1: source \[0, 12\) and destination \[8, 20\) overlap in one resident/,
    );
    assert.equal(floats(src, 10), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.match(
      thrown(() => a.residentCopy(src, dst, [0, 0, 4] as unknown as Float64Array)),
      /spans must be a Float64Array/,
    );
    const theirs = a.residentNew(other, 40);
    assert.match(
      thrown(() => a.residentCopy(src, theirs, Float64Array.of(0, 0, 4))),
      /src and dst belong to different plans/,
    );
  });

  test(NAMES[3]!, () => {
    const r = a.residentNew(plan, 40);
    assert.match(
      thrown(() => a.residentWrite(r, 36, new Float32Array(2))),
      /residentWrite: \[36, 44\) is outside the resident buffer of 40 bytes/,
    );
    assert.match(
      thrown(() => a.residentRead(r, 41, new Uint8Array(0))),
      /residentRead: \[41, 41\) is outside/,
    );
    assert.match(
      thrown(() => a.residentRead(r, -1, new Uint8Array(1))),
      /offset = -1.* must be an integer/,
    );
    assert.match(
      thrown(() => a.residentWrite(r, 0, [1, 2] as unknown as Float32Array)),
      /data must be a TypedArray/,
    );
    assert.match(
      thrown(() => a.residentNew(plan, -1)),
      /residentNew: bytes must be an integer/,
    );
    assert.match(
      thrown(() => a.residentNew(plan, 2 ** 47)),
      /residentNew: bytes must be an integer/,
    );
    assert.match(
      thrown(() => a.residentRead({} as NativeResident, 0, new Uint8Array(1))),
      /must be a resident buffer handle/,
    );
    a.residentFree(r);
    a.residentFree(r);
    assert.match(
      thrown(() => a.residentRead(r, 0, new Uint8Array(1))),
      /the resident buffer was freed/,
    );
    assert.match(
      thrown(() => a.residentCopy(r, r, new Float64Array(0))),
      /the resident buffer was freed/,
    );
  });

  test.after(() => {
    a.planFree(plan);
    a.planFree(other);
  });
}

test.run();
