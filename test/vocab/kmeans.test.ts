// k-means: seeding, Lloyd and mini-batch phases on separable blobs, determinism, degenerate sets and bad input.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { assignTs, centroidNorms, kmeans, type AssignFn } from '../../compiler/vocab/kmeans.ts';
import { seededRng } from '../../compiler/vocab/rng.ts';
import { failsWith } from '../helpers/expect-error.ts';

/** n points around `centers` (rows of [k, d]), point i belonging to blob i % k, with uniform noise of ±spread. */
function blobs(
  centers: number[][],
  n: number,
  spread: number,
  seed = 7,
): { x: Float32Array; blob: Int32Array; d: number } {
  const d = centers[0]!.length;
  const rng = seededRng(seed);
  const x = new Float32Array(n * d);
  const blob = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    blob[i] = i % centers.length;
    for (let k = 0; k < d; k++) x[i * d + k] = centers[blob[i]!]![k]! + (rng.next() * 2 - 1) * spread;
  }
  return { x, blob, d };
}

/** Corner-ish centers far apart: center j has 10 at coordinate j mod d, 10·(j div d) at the next one. */
function farCenters(k: number, d: number): number[][] {
  return Array.from({ length: k }, (_, j) =>
    Array.from({ length: d }, (_, c) => (c === j % d ? 10 : 0) + (c === (j + 1) % d ? 10 * Math.floor(j / d) : 0)),
  );
}

/** Whether every cluster holds exactly one blob (a bijection between clusters and blobs). */
function pure(assign: Int32Array, blob: Int32Array, k: number): boolean {
  const map = new Map<number, number>();
  for (let i = 0; i < assign.length; i++) {
    const m = map.get(assign[i]!);
    if (m === undefined) map.set(assign[i]!, blob[i]!);
    else if (m !== blob[i]) return false;
  }
  return map.size === k;
}

function bruteNearest(x: Float32Array, i: number, c: Float32Array, r: number, d: number): { j: number; dist: number } {
  let best = Infinity,
    arg = -1;
  for (let j = 0; j < r; j++) {
    let s = 0;
    for (let k = 0; k < d; k++) s += (x[i * d + k]! - c[j * d + k]!) ** 2;
    if (s < best) [best, arg] = [s, j];
  }
  return { j: arg, dist: best };
}

test('assignTs: nearest centroid and squared distance, ties to the lowest index', () => {
  const d = 3,
    r = 4;
  const x = Float32Array.from([0, 0, 0, 1, 1, 1, 5, 5, 5]);
  const c = Float32Array.from([1, 1, 1, 1, 1, 1, 4, 4, 4, -1, 0, 0]);
  const a = new Int32Array(3),
    dist = new Float32Array(3);
  assignTs(x, 3, d, c, r, centroidNorms(c, r, d), a, dist);
  assert.equal(Array.from(a), [3, 0, 2]);
  assert.equal(Array.from(dist), [1, 0, 3]);
});

test('kmeans recovers separated blobs, settles, and its outputs agree with each other', () => {
  const { x, blob, d } = blobs(farCenters(6, 8), 600, 1);
  const res = kmeans(x, 600, d, { clusters: 6, seed: 3 });
  assert.ok(pure(res.assignments, blob, 6), 'one blob per cluster');
  assert.ok(res.converged);
  assert.is(res.changed, 0);
  assert.ok(res.iterations >= 1 && res.iterations < 20);
  assert.is(res.miniBatchSteps, 0);
  assert.is(res.emptyClusters, 0);
  assert.is(
    res.clusterSizes.reduce((s, v) => s + v, 0),
    600,
  );
  assert.equal(Array.from(res.cnorm), Array.from(centroidNorms(res.centroids, 6, d)));
  let inertia = 0;
  for (let i = 0; i < 600; i++) {
    const near = bruteNearest(x, i, res.centroids, 6, d);
    assert.is(res.assignments[i], near.j);
    inertia += near.dist;
  }
  assert.ok(Math.abs(res.inertia - inertia) < 1e-6 * inertia);
  assert.ok(res.inertia / 600 < d / 3 + 0.2, `mean squared distance ${res.inertia / 600} ≈ d·spread²/3`);
});

test('kmeans is deterministic for a seed and uses the given assign function (k-means++ as r = 1 calls)', () => {
  const { x, d } = blobs(farCenters(5, 4), 300, 2);
  const calls: number[] = [];
  const counting: AssignFn = (...args) => {
    calls.push(args[4]);
    assignTs(...args);
  };
  const a = kmeans(x, 300, d, { clusters: 5, seed: 11, assign: counting });
  const b = kmeans(x, 300, d, { clusters: 5, seed: 11 });
  assert.equal(Array.from(a.centroids), Array.from(b.centroids));
  assert.equal(Array.from(a.assignments), Array.from(b.assignments));
  assert.is(calls.filter((r) => r === 1).length, 4, 'seeding: one r = 1 pass per centroid after the first');
  assert.is(calls.filter((r) => r === 5).length, a.iterations + 1, 'Lloyd: one pass per iteration plus the first');
  const c = kmeans(x, 300, d, { clusters: 5, seed: 12 });
  assert.ok(c.inertia > 0);
});

test('large sets take a mini-batch phase first and still find the blobs', () => {
  const { x, blob, d } = blobs(farCenters(8, 6), 4000, 1, 5);
  const progress = new Set<string>();
  const res = kmeans(x, 4000, d, {
    clusters: 8,
    batchSize: 256,
    miniBatchAbove: 1000,
    seed: 2,
    onProgress: (p) => progress.add(p.phase),
  });
  assert.is(res.miniBatchSteps, Math.ceil((2 * 4000) / 256));
  assert.ok(pure(res.assignments, blob, 8));
  assert.ok(res.converged);
  assert.equal([...progress].sort(), ['lloyd', 'mini-batch', 'seed']);
});

test('the iteration cap stops Lloyd; assignments still match the final centroids', () => {
  const { x, d } = blobs(farCenters(3, 4), 500, 12, 9); // overlapping blobs: slow to settle
  const res = kmeans(x, 500, d, { clusters: 7, maxIterations: 1, seed: 4 });
  assert.is(res.iterations, 1);
  for (let i = 0; i < 500; i += 7) assert.is(res.assignments[i], bruteNearest(x, i, res.centroids, 7, d).j);
  const none = kmeans(x, 500, d, { clusters: 7, maxIterations: 0, seed: 4 });
  assert.equal([none.iterations, none.converged, none.changed], [0, false, 500]);
});

test('degenerate sets: identical states leave clusters empty without failing; duplicates are not picked twice', () => {
  const same = new Float32Array(40).fill(3); // 10 states × d 4, all equal
  const res = kmeans(same, 10, 4, { clusters: 3 });
  assert.is(res.inertia, 0);
  assert.is(res.emptyClusters, 2);
  const spots = blobs(farCenters(3, 2), 30, 0).x; // 3 distinct points, 10 copies each
  const three = kmeans(spots, 30, 2, { clusters: 3 });
  assert.equal([three.emptyClusters, three.inertia], [0, 0]);
});

test('bad input is PLANC_E501: empty set, d mismatch, R > n, R < 1, non-finite values', () => {
  const x = new Float32Array(12);
  failsWith(() => kmeans(new Float32Array(0), 0, 4, { clusters: 2 }), 'PLANC_E501', 'no states to cluster');
  failsWith(() => kmeans(x, 3, 5, { clusters: 2 }), 'PLANC_E501', 'd mismatch');
  failsWith(() => kmeans(x, 3, 4, { clusters: 4 }), 'PLANC_E501', 'R = 4 clusters but only 3 states');
  failsWith(() => kmeans(x, 3, 4, { clusters: 0 }), 'PLANC_E501', 'positive integer');
  const bad = x.slice();
  bad[6] = NaN;
  failsWith(() => kmeans(bad, 3, 4, { clusters: 2 }), 'PLANC_E501', 'state 1 has a non-finite value');
  assert.is(kmeans(x, 3, 4, { clusters: 4, clampClusters: true }).clusters, 3, 'clampClusters lowers R to n');
});

test.run();
