// k-means over decoder states: k-means++ seeding on a sample, a mini-batch phase for large sets, then Lloyd iterations.
import { PlancError } from '../diagnostics.ts';
import { seededRng, type Rng } from './rng.ts';

/**
 * The assignment step: for x [n, d] and centroids c [r, d] (row-major) with cnorm[j] = ‖c_j‖², writes each row's
 * nearest centroid (argmin_j ‖c_j‖² − 2 x·c_j, ties to the lowest j) and its squared distance (≥ 0). The native
 * addon's kmeansAssign has this shape; assignTs is the pure-TS fallback.
 */
export type AssignFn = (
  x: Float32Array,
  n: number,
  d: number,
  c: Float32Array,
  r: number,
  cnorm: Float32Array,
  outAssign: Int32Array,
  outDist: Float32Array,
) => void;

export interface KMeansOptions {
  /** R, the number of centroids. */
  clusters: number;
  /** Cap on Lloyd iterations (centroid updates over all states); default 20. */
  maxIterations?: number;
  /** Lloyd stops once at most this fraction of states changes cluster in one iteration; default 1e-4. */
  tolerance?: number;
  /** Seed of the deterministic random generator; default 1. */
  seed?: number;
  /** k-means++ runs on a random sample of this many states; default max(8 R, 4096), at most n. */
  seedSample?: number;
  /** States per mini-batch; default 65536. */
  batchSize?: number;
  /** Sets larger than this get a mini-batch phase before Lloyd; default 262144. */
  miniBatchAbove?: number;
  /** Length of the mini-batch phase in passes over the data; default 2. */
  miniBatchEpochs?: number;
  /** R > n: false (default) fails with PLANC_E501; true lowers R to n (reported as `clusters` in the result). */
  clampClusters?: boolean;
  /** The assignment step; default assignTs (pure TS: fine for tests, far too slow for real sets). */
  assign?: AssignFn;
  onProgress?: (p: KMeansProgress) => void;
}

export interface KMeansProgress {
  phase: 'seed' | 'mini-batch' | 'lloyd';
  step: number;
  steps: number;
  /** Lloyd: states that changed cluster in this iteration. */
  changed?: number;
}

export interface KMeansResult {
  /** R actually used (n when R > n was clamped). */
  clusters: number;
  d: number;
  n: number;
  /** [R, d] row-major. */
  centroids: Float32Array;
  /** ‖C_j‖², [R]. */
  cnorm: Float32Array;
  /** Cluster of every state under the final centroids, [n]. */
  assignments: Int32Array;
  /** States per cluster, [R]. */
  clusterSizes: Int32Array;
  emptyClusters: number;
  /** Lloyd iterations run (centroid updates over all states). */
  iterations: number;
  miniBatchSteps: number;
  /** Whether Lloyd stopped because assignments settled (not at the cap). */
  converged: boolean;
  /** States that changed cluster in the last Lloyd iteration (n when none ran). */
  changed: number;
  /** Σ ‖x − C_assign(x)‖² under the final centroids. */
  inertia: number;
}

interface Resolved {
  r: number;
  maxIterations: number;
  tolerance: number;
  seed: number;
  seedSample: number;
  batchSize: number;
  miniBatchAbove: number;
  miniBatchEpochs: number;
  assign: AssignFn;
  progress: (p: KMeansProgress) => void;
}

/** Clusters the n rows of x [n, d] into R centroids. Deterministic for a given seed and assign function. */
export function kmeans(x: Float32Array, n: number, d: number, options: KMeansOptions): KMeansResult {
  const o = resolveOptions(x, n, d, options);
  const rng = seededRng(o.seed);
  const c = seedPlusPlus(x, n, d, o, rng);
  const miniBatchSteps = n > o.miniBatchAbove ? miniBatch(x, n, d, c, o, rng) : 0;
  const run = lloyd(x, n, d, c, o);
  const clusterSizes = new Int32Array(o.r);
  for (let i = 0; i < n; i++) clusterSizes[run.assignments[i]!]++;
  return {
    clusters: o.r,
    d,
    n,
    centroids: c,
    cnorm: run.cnorm,
    assignments: run.assignments,
    clusterSizes,
    emptyClusters: clusterSizes.reduce((s, v) => s + (v === 0 ? 1 : 0), 0),
    iterations: run.iterations,
    miniBatchSteps,
    converged: run.converged,
    changed: run.changed,
    inertia: run.inertia,
  };
}

/** The assignment step in plain TypeScript (float64 dot products). */
export const assignTs: AssignFn = (x, n, d, c, r, cnorm, outAssign, outDist) => {
  for (let i = 0; i < n; i++) {
    const xo = i * d;
    let best = Infinity;
    let arg = 0;
    for (let j = 0; j < r; j++) {
      const co = j * d;
      let dot = 0;
      for (let k = 0; k < d; k++) dot += x[xo + k]! * c[co + k]!;
      const v = cnorm[j]! - 2 * dot;
      if (v < best) {
        best = v;
        arg = j;
      }
    }
    outAssign[i] = arg;
    outDist[i] = Math.max(0, rowNorm2(x, xo, d) + best);
  }
};

/** ‖C_j‖² of every row of c [r, d] into out [r]. */
export function centroidNorms(c: Float32Array, r: number, d: number, out = new Float32Array(r)): Float32Array {
  for (let j = 0; j < r; j++) out[j] = rowNorm2(c, j * d, d);
  return out;
}

// ---------- options ----------

function fail(message: string): never {
  throw new PlancError('PLANC_E501', message, { stage: 'k-means' });
}

function resolveOptions(x: Float32Array, n: number, d: number, options: KMeansOptions): Resolved {
  if (!Number.isInteger(n) || n < 1) fail(`no states to cluster (n = ${n}): the calibration produced an empty set`);
  if (!Number.isInteger(d) || d < 1) fail(`bad state width d = ${d}`);
  if (x.length !== n * d) fail(`states hold ${x.length} values, expected n × d = ${n} × ${d} = ${n * d} (d mismatch)`);
  checkFinite(x, d);
  let r = options.clusters;
  if (!Number.isInteger(r) || r < 1) fail(`the number of clusters must be a positive integer, got ${r}`);
  if (r > n) {
    if (!options.clampClusters) fail(`R = ${r} clusters but only ${n} states: calibrate on more text or lower R`);
    r = n;
  }
  const batchSize = positiveInt(options.batchSize ?? 65536, 'batchSize');
  return {
    r,
    maxIterations: nonNegativeInt(options.maxIterations ?? 20, 'maxIterations'),
    tolerance: Math.max(0, options.tolerance ?? 1e-4),
    seed: options.seed ?? 1,
    seedSample: Math.min(n, Math.max(r, positiveInt(options.seedSample ?? Math.max(8 * r, 4096), 'seedSample'))),
    batchSize,
    miniBatchAbove: options.miniBatchAbove ?? 4 * batchSize,
    miniBatchEpochs: Math.max(0, options.miniBatchEpochs ?? 2),
    assign: options.assign ?? assignTs,
    progress: options.onProgress ?? (() => {}),
  };
}

function positiveInt(v: number, name: string): number {
  if (!Number.isInteger(v) || v < 1) fail(`${name} must be a positive integer, got ${v}`);
  return v;
}

function nonNegativeInt(v: number, name: string): number {
  if (!Number.isInteger(v) || v < 0) fail(`${name} must be a non-negative integer, got ${v}`);
  return v;
}

function checkFinite(x: Float32Array, d: number): void {
  for (let i = 0; i < x.length; i++) {
    if (!Number.isFinite(x[i]!)) fail(`state ${Math.floor(i / d)} has a non-finite value (${x[i]}) at column ${i % d}`);
  }
}

// ---------- seeding ----------

/** k-means++ (D² sampling) on a random sample of states; each new centroid's distances come from one r = 1 assign. */
function seedPlusPlus(x: Float32Array, n: number, d: number, o: Resolved, rng: Rng): Float32Array {
  const sampleSize = o.seedSample;
  const sample = gatherRows(x, d, sampleIndices(n, sampleSize, rng));
  const c = new Float32Array(o.r * d);
  const minDist = new Float64Array(sampleSize).fill(Infinity);
  const norm = new Float32Array(1);
  const tmpAssign = new Int32Array(sampleSize);
  const tmpDist = new Float32Array(sampleSize);
  let pick = rng.int(sampleSize);
  for (let j = 0; j < o.r; j++) {
    const row = sample.slice(pick * d, pick * d + d);
    c.set(row, j * d);
    if (j === o.r - 1) break;
    norm[0] = rowNorm2(row, 0, d);
    o.assign(sample, sampleSize, d, row, 1, norm, tmpAssign, tmpDist);
    let total = 0;
    for (let i = 0; i < sampleSize; i++) {
      if (tmpDist[i]! < minDist[i]!) minDist[i] = tmpDist[i]!;
      total += minDist[i]!;
    }
    pick = pickByWeight(minDist, total, rng);
    if ((j & 63) === 0) o.progress({ phase: 'seed', step: j + 1, steps: o.r });
  }
  return c;
}

/** An index drawn with probability weight[i] / total; uniform when every weight is 0. */
function pickByWeight(weight: Float64Array, total: number, rng: Rng): number {
  if (!(total > 0) || !Number.isFinite(total)) return rng.int(weight.length);
  const u = rng.next() * total;
  let acc = 0;
  let last = 0;
  for (let i = 0; i < weight.length; i++) {
    if (weight[i]! <= 0) continue;
    acc += weight[i]!;
    last = i;
    if (acc > u) return i;
  }
  return last;
}

/** `size` distinct indices of [0, n) in random order (partial Fisher–Yates); all of them in order when size = n. */
function sampleIndices(n: number, size: number, rng: Rng): Int32Array {
  const idx = new Int32Array(n);
  for (let i = 0; i < n; i++) idx[i] = i;
  if (size >= n) return idx;
  for (let i = 0; i < size; i++) {
    const j = i + rng.int(n - i);
    const t = idx[i]!;
    idx[i] = idx[j]!;
    idx[j] = t;
  }
  return idx.slice(0, size);
}

function gatherRows(x: Float32Array, d: number, idx: Int32Array, out = new Float32Array(idx.length * d)): Float32Array {
  for (let i = 0; i < idx.length; i++) out.set(x.subarray(idx[i]! * d, idx[i]! * d + d), i * d);
  return out;
}

// ---------- mini-batch phase ----------

/** Mini-batch k-means (Sculley 2010, batched as in scikit-learn): each centroid moves to the running mean of its members. */
function miniBatch(x: Float32Array, n: number, d: number, c: Float32Array, o: Resolved, rng: Rng): number {
  const b = Math.min(o.batchSize, n);
  const steps = Math.ceil((o.miniBatchEpochs * n) / b);
  const seen = new Float64Array(o.r);
  const batch = new Float32Array(b * d);
  const idx = new Int32Array(b);
  const assignments = new Int32Array(b);
  const dist = new Float32Array(b);
  const cnorm = new Float32Array(o.r);
  const sums = new Float64Array(o.r * d);
  const counts = new Int32Array(o.r);
  for (let step = 0; step < steps; step++) {
    for (let i = 0; i < b; i++) idx[i] = rng.int(n);
    gatherRows(x, d, idx, batch);
    o.assign(batch, b, d, c, o.r, centroidNorms(c, o.r, d, cnorm), assignments, dist);
    accumulate(batch, b, d, assignments, sums, counts);
    for (let j = 0; j < o.r; j++) {
      if (counts[j] === 0) continue;
      seen[j] += counts[j]!;
      const co = j * d;
      for (let k = 0; k < d; k++) c[co + k] = c[co + k]! + (sums[co + k]! - counts[j]! * c[co + k]!) / seen[j]!;
    }
    o.progress({ phase: 'mini-batch', step: step + 1, steps });
  }
  return steps;
}

/** sums[j] = Σ of the rows assigned to j, counts[j] = how many (both reset first). */
function accumulate(
  x: Float32Array,
  n: number,
  d: number,
  assignments: Int32Array,
  sums: Float64Array,
  counts: Int32Array,
): void {
  sums.fill(0);
  counts.fill(0);
  for (let i = 0; i < n; i++) {
    const j = assignments[i]!;
    counts[j]++;
    const so = j * d;
    const xo = i * d;
    for (let k = 0; k < d; k++) sums[so + k] += x[xo + k]!;
  }
}

// ---------- Lloyd ----------

interface LloydRun {
  assignments: Int32Array;
  cnorm: Float32Array;
  iterations: number;
  converged: boolean;
  changed: number;
  inertia: number;
}

/** Lloyd iterations until at most tolerance × n states change cluster, or the cap; assignments match the final centroids. */
function lloyd(x: Float32Array, n: number, d: number, c: Float32Array, o: Resolved): LloydRun {
  let assignments = new Int32Array(n);
  let next = new Int32Array(n);
  const dist = new Float32Array(n);
  const cnorm = new Float32Array(o.r);
  const sums = new Float64Array(o.r * d);
  const counts = new Int32Array(o.r);
  o.assign(x, n, d, c, o.r, centroidNorms(c, o.r, d, cnorm), assignments, dist);
  let iterations = 0;
  let changed = n;
  let converged = false;
  while (iterations < o.maxIterations) {
    accumulate(x, n, d, assignments, sums, counts);
    updateCentroids(x, d, c, sums, counts, dist);
    iterations++;
    o.assign(x, n, d, c, o.r, centroidNorms(c, o.r, d, cnorm), next, dist);
    changed = countChanged(assignments, next);
    [assignments, next] = [next, assignments];
    o.progress({ phase: 'lloyd', step: iterations, steps: o.maxIterations, changed });
    if (changed <= o.tolerance * n) {
      converged = true;
      break;
    }
  }
  let inertia = 0;
  for (let i = 0; i < n; i++) inertia += dist[i]!;
  return { assignments, cnorm, iterations, converged, changed, inertia };
}

/** Centroids ← means of their members; an empty cluster moves to one of the states farthest from their centroids. */
function updateCentroids(
  x: Float32Array,
  d: number,
  c: Float32Array,
  sums: Float64Array,
  counts: Int32Array,
  dist: Float32Array,
): void {
  const empty: number[] = [];
  for (let j = 0; j < counts.length; j++) {
    if (counts[j] === 0) {
      empty.push(j);
      continue;
    }
    const co = j * d;
    for (let k = 0; k < d; k++) c[co + k] = sums[co + k]! / counts[j]!;
  }
  if (empty.length === 0) return;
  const far = farthest(dist, empty.length);
  for (let e = 0; e < far.length; e++) c.set(x.subarray(far[e]! * d, far[e]! * d + d), empty[e]! * d);
}

/** Indices of the (up to) m states with the largest positive distance, largest first (a size-m min-heap). */
function farthest(dist: Float32Array, m: number): number[] {
  const heap: number[] = [];
  const less = (a: number, b: number) => dist[heap[a]!]! < dist[heap[b]!]!;
  const swap = (a: number, b: number) => ([heap[a], heap[b]] = [heap[b]!, heap[a]!]);
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1,
        r = l + 1;
      let s = i;
      if (l < heap.length && less(l, s)) s = l;
      if (r < heap.length && less(r, s)) s = r;
      if (s === i) return;
      swap(i, s);
      i = s;
    }
  };
  const up = (i: number) => {
    while (i > 0 && less(i, (i - 1) >> 1)) {
      swap(i, (i - 1) >> 1);
      i = (i - 1) >> 1;
    }
  };
  for (let i = 0; i < dist.length; i++) {
    if (!(dist[i]! > 0)) continue;
    if (heap.length < m) {
      heap.push(i);
      up(heap.length - 1);
    } else if (dist[i]! > dist[heap[0]!]!) {
      heap[0] = i;
      down(0);
    }
  }
  return heap.sort((a, b) => dist[b]! - dist[a]! || a - b);
}

function countChanged(a: Int32Array, b: Int32Array): number {
  let changed = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) changed++;
  return changed;
}

function rowNorm2(v: Float32Array, offset: number, d: number): number {
  let s = 0;
  for (let k = 0; k < d; k++) s += v[offset + k]! * v[offset + k]!;
  return s;
}
