// Cluster active sets: CSR union of members' top-K ids plus specials, statistics, and the runtime batch union.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { activeSetStats, clusterActiveSets, compactMask, unionActiveSets } from '../../compiler/vocab/clusters.ts';
import { failsWith } from '../helpers/expect-error.ts';

const ids = (a: ArrayLike<number>) => Array.from(a);

// The paper's example (seed 000 §2.2): two states of one cluster with top-3 {2,4,6} and {2,8,9} → {2,4,6,8,9}.
test("active set = union of the members' top-K ids + specials, sorted, as CSR", () => {
  const assignments = Int32Array.from([0, 0, 2]);
  const topK = Int32Array.from([6, 2, 4, 2, 9, 8, 3, 1, 3]);
  const sets = clusterActiveSets(assignments, topK, 3, 3, [0], 10);
  assert.equal(ids(sets.offsets), [0, 6, 7, 10]);
  assert.equal(ids(sets.ids.subarray(0, 6)), [0, 2, 4, 6, 8, 9]);
  assert.equal(ids(sets.ids.subarray(6, 7)), [0], 'a cluster without members keeps the specials');
  assert.equal(ids(sets.ids.subarray(7, 10)), [0, 1, 3]);
});

test('statistics: mean, max and member-weighted active fractions', () => {
  const assignments = Int32Array.from([0, 0, 0, 1]);
  const topK = Int32Array.from([1, 2, 3, 4]);
  const sets = clusterActiveSets(assignments, topK, 1, 2, [], 10);
  const s = activeSetStats(sets, assignments);
  assert.equal([s.meanSize, s.maxSize, s.meanFraction, s.maxFraction, s.emptyClusters], [2, 3, 0.2, 0.3, 0]);
  assert.ok(Math.abs(s.weightedMeanFraction - (3 * 3 + 1 * 1) / 4 / 10) < 1e-12);
  assert.is(activeSetStats(sets).weightedMeanFraction, 0.2, 'without assignments: the plain mean');
});

// The paper's runtime example (seed 000 §2.3): clusters {0,1,2} with sets {2,4,6}, {2,8,9}, {1,3} → {1,2,3,4,6,8,9}.
test('unionActiveSets: the batch union through a boolean mask and compaction', () => {
  const sets = {
    clusters: 3,
    vocabSize: 10,
    offsets: Int32Array.from([0, 3, 6, 8]),
    ids: Int32Array.from([2, 4, 6, 2, 8, 9, 1, 3]),
  };
  assert.equal(ids(unionActiveSets(sets, [0, 1, 2])), [1, 2, 3, 4, 6, 8, 9]);
  assert.equal(ids(unionActiveSets(sets, [1, 1])), [2, 8, 9]);
  assert.equal(ids(compactMask(Uint8Array.from([0, 1, 1, 1, 1, 0, 1, 0, 1, 1]))), [1, 2, 3, 4, 6, 8, 9]);
  failsWith(() => unionActiveSets(sets, [3]), 'PLANC_E501', 'cluster id 3 outside');
});

test('bad input is PLANC_E501', () => {
  const a = Int32Array.from([0, 1]);
  failsWith(
    () => clusterActiveSets(a, Int32Array.from([1, 2, 3]), 2, 2, [], 10),
    'PLANC_E501',
    'expected states × K = 2 × 2',
  );
  failsWith(
    () => clusterActiveSets(a, Int32Array.from([1, 12]), 1, 2, [], 10),
    'PLANC_E501',
    'state 1 has top-K id 12',
  );
  failsWith(
    () => clusterActiveSets(Int32Array.from([0, 5]), Int32Array.from([1, 2]), 1, 2, [], 10),
    'PLANC_E501',
    'cluster 5',
  );
  failsWith(() => clusterActiveSets(a, Int32Array.from([1, 2]), 1, 2, [10], 10), 'PLANC_E501', 'special id 10');
});

test.run();
