// The addon's kmeansAssign against the TS assignment step of compiler/vocab/kmeans.ts: results, argument checks.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assignTs, centroidNorms, kmeans, type AssignFn } from '../../compiler/vocab/kmeans.ts';
import { seededRng } from '../../compiler/vocab/rng.ts';
import { native, nativeAvailable } from '../../runtime/native.ts';
import { NEEDS_NATIVE, testIf } from '../helpers/skip.ts';

const nativeTest = testIf(test, !nativeAvailable() && NEEDS_NATIVE);

function randomArray(n: number, seed: number, scale = 1): Float32Array {
  const rng = seededRng(seed);
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (rng.next() * 2 - 1) * scale;
  return a;
}

/** Float64 squared distance of row i of x to centroid j. */
function dist2(x: Float32Array, i: number, c: Float32Array, j: number, d: number): number {
  let s = 0;
  for (let k = 0; k < d; k++) {
    const t = x[i * d + k]! - c[j * d + k]!;
    s += t * t;
  }
  return s;
}

/**
 * Runs the native and the TS assignment on random data and compares: the same cluster except at near-ties (then the
 * native pick must be as close as the TS one, within float rounding), distances within float rounding.
 */
function compare(n: number, d: number, r: number, seed: number, withNorms: boolean, withDist: boolean): void {
  const x = randomArray(n * d, seed);
  const c = randomArray(r * d, seed + 1);
  const cnorm = centroidNorms(c, r, d);
  const wantAssign = new Int32Array(n),
    wantDist = new Float32Array(n);
  assignTs(x, n, d, c, r, cnorm, wantAssign, wantDist);
  const gotAssign = new Int32Array(n).fill(-1),
    gotDist = new Float32Array(n).fill(-1);
  native().kmeansAssign(x, n, d, c, r, withNorms ? cnorm : null, gotAssign, withDist ? gotDist : null);
  let differ = 0;
  for (let i = 0; i < n; i++) {
    const g = gotAssign[i]!,
      w = wantAssign[i]!;
    assert.ok(g >= 0 && g < r, `row ${i}: assignment ${g} out of range`);
    if (g !== w) {
      differ++;
      const dg = dist2(x, i, c, g, d),
        dw = dist2(x, i, c, w, d);
      assert.ok(Math.abs(dg - dw) <= 1e-4 * (1 + dw), `row ${i}: native picks ${g} (${dg}), TS ${w} (${dw})`);
    }
    if (withDist) {
      const ref = dist2(x, i, c, g, d);
      assert.ok(
        gotDist[i]! >= 0 && Math.abs(gotDist[i]! - ref) <= 1e-4 * (1 + ref),
        `row ${i}: distance ${gotDist[i]} vs ${ref}`,
      );
    } else {
      assert.is(gotDist[i], -1); // untouched
    }
  }
  assert.ok(differ <= Math.max(1, n / 100), `${differ} of ${n} rows differ`);
}

nativeTest('kmeansAssign matches the TS assignment on random data', () => {
  compare(1, 1, 1, 1, true, true);
  compare(7, 3, 1, 2, true, true); // r = 1: k-means++ seeding's shape
  compare(300, 37, 3, 3, false, true); // r <= 4: the transposed product
  compare(500, 37, 23, 4, true, true);
  compare(500, 64, 100, 5, false, false);
  compare(5000, 16, 1000, 6, true, true); // two row blocks of scores
  compare(40, 200, 7, 7, true, false);
});

nativeTest('kmeansAssign: d = 0 and n = 0', () => {
  const a = new Int32Array(3).fill(9),
    dist = new Float32Array(3).fill(9);
  native().kmeansAssign(new Float32Array(0), 3, 0, new Float32Array(0), 2, null, a, dist);
  assert.equal(Array.from(a), [0, 0, 0]);
  assert.equal(Array.from(dist), [0, 0, 0]);
  native().kmeansAssign(new Float32Array(0), 0, 4, new Float32Array(8), 2, null, new Int32Array(0), null);
});

nativeTest('kmeansAssign: ties go to the lowest centroid; longer arrays are fine', () => {
  // Centroids (1, 0), (0, 1), (1, 0): x (1, 0) → 0; (0, 1) → 1; (0.5, 0.5) is equidistant from all → 0.
  const c = new Float32Array([1, 0, 0, 1, 1, 0, 99, 99]);
  const x = new Float32Array([1, 0, 0, 1, 0.5, 0.5, 7]);
  const a = new Int32Array(4).fill(-1),
    dist = new Float32Array(4).fill(-1);
  native().kmeansAssign(x, 3, 2, c, 3, null, a, dist);
  assert.equal(Array.from(a), [0, 1, 0, -1]);
  assert.equal(Array.from(dist.subarray(0, 3)), [0, 0, 0.5]);
  assert.is(dist[3], -1);
});

nativeTest('kmeansAssign checks every array against n, d and r', () => {
  const f = native().kmeansAssign;
  const n = 4,
    d = 3,
    r = 2;
  const x = new Float32Array(n * d),
    c = new Float32Array(r * d),
    cn = new Float32Array(r);
  const a = new Int32Array(n),
    dist = new Float32Array(n);
  f(x, n, d, c, r, cn, a, dist);
  assert.throws(
    () => f(new Float32Array(n * d - 1), n, d, c, r, cn, a, dist),
    /kmeansAssign: x has 11 elements, needs 12/,
  );
  assert.throws(() => f(x, n, d, new Float32Array(5), r, cn, a, dist), /kmeansAssign: c has 5 elements, needs 6/);
  assert.throws(() => f(x, n, d, c, r, new Float32Array(1), a, dist), /kmeansAssign: cnorm has 1 elements, needs 2/);
  assert.throws(() => f(x, n, d, c, r, cn, new Int32Array(3), dist), /kmeansAssign: outAssign has 3 elements, needs 4/);
  assert.throws(() => f(x, n, d, c, r, cn, a, new Float32Array(2)), /kmeansAssign: outDist has 2 elements, needs 4/);
  assert.throws(
    () => f(new Float64Array(n * d) as unknown as Float32Array, n, d, c, r, cn, a, dist),
    /x must be a Float32Array/,
  );
  assert.throws(
    () => f(x, n, d, c, r, cn, new Uint32Array(n) as unknown as Int32Array, dist),
    /outAssign must be a Int32Array/,
  );
  assert.throws(() => f(x, n, d, c, r, [1, 2] as unknown as Float32Array, a, dist), /cnorm must be a TypedArray/);
  assert.throws(() => f(x, 1.5, d, c, r, cn, a, dist), /n must be an integer/);
  assert.throws(() => f(x, n, -1, c, r, cn, a, dist), /d must be an integer/);
  assert.throws(() => f(x, n, d, c, '2' as unknown as number, cn, a, dist), /r must be a number/);
  assert.throws(() => f(x, n, d, c, 0, null, a, dist), /no centroids/);
});

nativeTest('kmeansAssign drives kmeans() as its AssignFn', () => {
  const n = 2000,
    d = 8;
  const x = randomArray(n * d, 11);
  const assign: AssignFn = native().kmeansAssign;
  const viaNative = kmeans(x, n, d, { clusters: 16, seed: 3, assign });
  const viaTs = kmeans(x, n, d, { clusters: 16, seed: 3 });
  assert.is(viaNative.clusters, 16);
  assert.ok(
    Math.abs(viaNative.inertia - viaTs.inertia) <= 0.05 * viaTs.inertia,
    `inertia ${viaNative.inertia} (native) vs ${viaTs.inertia} (TS)`,
  );
});

test.run();
