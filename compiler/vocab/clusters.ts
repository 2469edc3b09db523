// Cluster active sets: each cluster's tokens = union of its members' top-K ids + special ids, stored as CSR.
import { PlancError } from '../diagnostics.ts';

/** Active token sets of R clusters: cluster j's sorted ids are ids[offsets[j] .. offsets[j + 1]). */
export interface ActiveSets {
  clusters: number;
  vocabSize: number;
  /** [R + 1]. */
  offsets: Int32Array;
  /** Sorted unique ids per cluster, concatenated. */
  ids: Int32Array;
}

export interface ActiveSetStats {
  /** Mean over clusters of |A_j| / V. */
  meanFraction: number;
  /** Largest |A_j| / V. */
  maxFraction: number;
  /** Mean of |A_j| / V weighted by members: the expected active fraction of one state (batch 1) on the calibration set. */
  weightedMeanFraction: number;
  meanSize: number;
  maxSize: number;
  /** Clusters without members (their set is the special ids only). */
  emptyClusters: number;
}

function fail(message: string): never {
  throw new PlancError('PLANC_E501', message, { stage: 'cluster active sets' });
}

/**
 * Builds the active sets from every state's cluster (assignments [n]) and its top-K token ids (topK [n, k],
 * row-major); every set also holds specialIds. Ids must lie in [0, vocabSize).
 */
export function clusterActiveSets(
  assignments: Int32Array,
  topK: Int32Array,
  k: number,
  clusters: number,
  specialIds: readonly number[],
  vocabSize: number,
): ActiveSets {
  checkInputs(assignments, topK, k, clusters, specialIds, vocabSize);
  const order = statesByCluster(assignments, clusters);
  const stamp = new Int32Array(vocabSize).fill(-1);
  const offsets = new Int32Array(clusters + 1);
  const parts: Int32Array[] = [];
  let total = 0;
  for (let j = 0; j < clusters; j++) {
    const set = clusterSet(j, order, topK, k, specialIds, stamp);
    parts.push(set);
    total += set.length;
    offsets[j + 1] = total;
  }
  const ids = new Int32Array(total);
  for (let j = 0; j < clusters; j++) ids.set(parts[j]!, offsets[j]!);
  return { clusters, vocabSize, offsets, ids };
}

/** Size statistics of the active sets; `assignments` (optional) weights them by members. */
export function activeSetStats(sets: ActiveSets, assignments?: Int32Array): ActiveSetStats {
  const members = new Int32Array(sets.clusters);
  if (assignments) for (const a of assignments) members[a]++;
  let sum = 0;
  let max = 0;
  let weighted = 0;
  let empty = 0;
  for (let j = 0; j < sets.clusters; j++) {
    const size = sets.offsets[j + 1]! - sets.offsets[j]!;
    sum += size;
    max = Math.max(max, size);
    weighted += size * members[j]!;
    if (assignments && members[j] === 0) empty++;
  }
  const v = sets.vocabSize;
  const n = assignments?.length ?? 0;
  return {
    meanFraction: sum / sets.clusters / v,
    maxFraction: max / v,
    weightedMeanFraction: n > 0 ? weighted / n / v : sum / sets.clusters / v,
    meanSize: sum / sets.clusters,
    maxSize: max,
    emptyClusters: empty,
  };
}

/** The runtime union for one batch (seed 000 §2.3): a boolean mask over the vocabulary, then its compaction. */
export function unionActiveSets(sets: ActiveSets, clusterIds: ArrayLike<number>): Int32Array {
  const mask = new Uint8Array(sets.vocabSize);
  for (let b = 0; b < clusterIds.length; b++) {
    const j = clusterIds[b]!;
    if (!Number.isInteger(j) || j < 0 || j >= sets.clusters) fail(`cluster id ${j} outside [0, ${sets.clusters})`);
    for (let p = sets.offsets[j]!; p < sets.offsets[j + 1]!; p++) mask[sets.ids[p]!] = 1;
  }
  return compactMask(mask);
}

/** The set positions of a 0/1 mask, ascending. */
export function compactMask(mask: Uint8Array): Int32Array {
  let count = 0;
  for (let i = 0; i < mask.length; i++) count += mask[i]!;
  const out = new Int32Array(count);
  for (let i = 0, o = 0; i < mask.length; i++) if (mask[i]) out[o++] = i;
  return out;
}

function checkInputs(
  assignments: Int32Array,
  topK: Int32Array,
  k: number,
  clusters: number,
  specialIds: readonly number[],
  vocabSize: number,
): void {
  if (!Number.isInteger(vocabSize) || vocabSize < 1) fail(`bad vocabulary size ${vocabSize}`);
  if (!Number.isInteger(clusters) || clusters < 1) fail(`bad number of clusters ${clusters}`);
  if (!Number.isInteger(k) || k < 1) fail(`bad K ${k}: every state needs at least its top-1 token`);
  const n = assignments.length;
  if (topK.length !== n * k) fail(`top-K ids hold ${topK.length} values, expected states × K = ${n} × ${k}`);
  for (let i = 0; i < n; i++) {
    const a = assignments[i]!;
    if (a < 0 || a >= clusters) fail(`state ${i} is assigned to cluster ${a}, outside [0, ${clusters})`);
  }
  for (let i = 0; i < topK.length; i++) {
    const t = topK[i]!;
    if (t < 0 || t >= vocabSize) fail(`state ${Math.floor(i / k)} has top-K id ${t}, outside [0, ${vocabSize})`);
  }
  for (const s of specialIds) {
    if (!Number.isInteger(s) || s < 0 || s >= vocabSize) fail(`special id ${s} outside [0, ${vocabSize})`);
  }
}

/** States grouped by cluster (counting sort): members of j are order.states[order.start[j] .. order.start[j + 1]). */
function statesByCluster(assignments: Int32Array, clusters: number): { start: Int32Array; states: Int32Array } {
  const start = new Int32Array(clusters + 1);
  for (const a of assignments) start[a + 1]++;
  for (let j = 0; j < clusters; j++) start[j + 1] += start[j]!;
  const fill = start.slice(0, clusters);
  const states = new Int32Array(assignments.length);
  for (let i = 0; i < assignments.length; i++) states[fill[assignments[i]!]++] = i;
  return { start, states };
}

/** Sorted unique ids of cluster j; `stamp[id] === j` marks ids already taken for this cluster. */
function clusterSet(
  j: number,
  order: { start: Int32Array; states: Int32Array },
  topK: Int32Array,
  k: number,
  specialIds: readonly number[],
  stamp: Int32Array,
): Int32Array {
  const out: number[] = [];
  const take = (id: number) => {
    if (stamp[id] === j) return;
    stamp[id] = j;
    out.push(id);
  };
  for (const s of specialIds) take(s);
  for (let p = order.start[j]!; p < order.start[j + 1]!; p++) {
    const base = order.states[p]! * k;
    for (let q = 0; q < k; q++) take(topK[base + q]!);
  }
  return Int32Array.from(out).sort();
}
