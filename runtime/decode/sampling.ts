// generate()'s sample mode for one row: the processors' scores, its warpers (temperature, top_k, top_p), softmax, one draw.
import { PlancError } from '../../compiler/diagnostics.ts';
import { TOPK_IDS_OUTPUT, TOPK_LOGPROBS_OUTPUT } from '../../compiler/plan/io-names.ts';
import type { RtTensor } from '../tensor.ts';
import type { RandomStream } from './random.ts';
import { logSumExp, repetitionPenalized } from './scores.ts';

type Outputs = Record<string, RtTensor>;

/** generate()'s sampling warpers: temperature (> 0), top_k (0 = off), top_p (1 = off). */
export interface Warpers {
  temperature: number;
  topK: number;
  topP: number;
}

/** The tokens a draw can pick and their probabilities (summing to 1), best first where the warpers sorted them. */
export interface Distribution {
  ids: number[];
  probs: number[];
}

/**
 * The warped distribution over candidates sorted best first (score descending, ties to the lower id), as transformers
 * 4.57 computes it: TemperatureLogitsWarper divides the scores by the temperature; TopKLogitsWarper keeps every score
 * ≥ the k-th largest (ties at the k-th are all kept); TopPLogitsWarper sorts ascending, accumulates the softmax and
 * removes the tokens whose cumulative probability is ≤ 1 - top_p, never the most likely one (min_tokens_to_keep 1);
 * then softmax over what is left. Scores may be logits or log-probs: none of this sees a constant shift. In float64.
 * The candidates must hold every token that can survive top_k (the whole allowed vocabulary when top_k is 0).
 */
export function warpSorted(ids: readonly number[], scores: ArrayLike<number>, w: Warpers): Distribution {
  let n = ids.length;
  if (n === 0) throw new PlancError('PLANC_E411', 'sampling: every token of this step is banned');
  if (w.topK > 0 && w.topK < n) {
    const kth = scores[w.topK - 1]!;
    n = w.topK;
    while (n < ids.length && scores[n]! >= kth) n++;
  }
  const top = scores[0]!;
  const weights = new Float64Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) total += weights[i] = Math.exp((scores[i]! - top) / w.temperature);
  if (w.topP < 1) {
    // ascending from the least likely: remove while the cumulative probability stays ≤ 1 - top_p; keep the best
    let cum = 0;
    while (n > 1) {
      cum += weights[n - 1]! / total;
      if (!(cum <= 1 - w.topP)) break;
      n--;
    }
    total = 0;
    for (let i = 0; i < n; i++) total += weights[i]!;
  }
  const probs = new Array<number>(n);
  for (let i = 0; i < n; i++) probs[i] = weights[i]! / total;
  return { ids: ids.slice(0, n), probs };
}

/** Candidates sorted one at a time past this many: the top_k set (ties kept) when top_k ≤ it, else top_p's search. */
const SORTED = 256;

/** Row scratch for the weights of a whole vocabulary (one decode loop at a time uses it, synchronously). */
let scratch = new Float64Array(0);

/**
 * One draw (u ∈ [0, 1)) from the warped distribution of a full row of processed scores `x` (logits after the
 * repetition penalty); banned tokens are generate()'s -inf. With top_k ≤ SORTED: a size-k heap finds the k-th score in
 * one pass and only the tokens at or above it are sorted (warpSorted). With top_k 0 (or larger) and top_p 1: one pass
 * of weights, nothing sorted; with top_p < 1, cutTopP's bucket search (only one bucket's tokens sorted).
 */
export function drawFromRow(x: ArrayLike<number>, w: Warpers, banned: ReadonlySet<number>, u: number): number {
  if (w.topK > 0 && w.topK <= SORTED) return draw(sortedAbove(x, kthLargest(x, w.topK, banned), banned, w), u);
  const v = x.length;
  const floor = w.topK > 0 ? kthLargest(x, w.topK, banned) : -Infinity; // the top_k set: allowed scores ≥ floor
  // the best allowed score, the weights' reference (bans are few: they are zeroed after the pass, not looked up in it)
  let best = 0;
  for (let t = 1; t < v; t++) if (x[t]! > x[best]!) best = t;
  let top = x[best]!;
  if (banned.has(best)) {
    top = -Infinity;
    for (let t = 0; t < v; t++) if (x[t]! > top && !banned.has(t)) top = x[t]!;
  }
  if (top === -Infinity) throw new PlancError('PLANC_E411', 'sampling: every token of this step is banned');
  if (scratch.length < v) scratch = new Float64Array(v);
  for (let t = 0; t < v; t++) scratch[t] = x[t]! >= floor ? Math.exp((x[t]! - top) / w.temperature) : 0;
  for (const t of banned) if (t < v) scratch[t] = 0;
  let total = 0;
  for (let t = 0; t < v; t++) total += scratch[t]!;
  if (w.topP >= 1) return drawWeights(v, u * total);
  total = cutTopP(x, v, total, w.topP);
  return drawWeights(v, u * total);
}

/** The first token whose cumulative weight in scratch exceeds target (the last weighted one when rounding runs out). */
function drawWeights(v: number, target: number): number {
  let acc = 0;
  let last = -1;
  for (let t = 0; t < v; t++) {
    if (scratch[t] === 0) continue;
    acc += scratch[t]!;
    last = t;
    if (target < acc) return t;
  }
  return last;
}

/** Value buckets of cutTopP's search. */
const BUCKETS = 2048;
const hist = new Float64Array(BUCKETS);

/**
 * TopPLogitsWarper over the weights in scratch (0: not a candidate), without sorting the row: tokens in ascending order
 * (score, then the higher id first) are removed while their cumulative probability stays ≤ 1 - top_p, never the
 * best. Bucketing the scores (monotone) finds the bucket where the sum crosses 1 - top_p in one pass: the buckets
 * below it are removed whole, those above kept, and only its own tokens are sorted and walked. Zeroes the removed
 * weights and returns the kept total.
 */
function cutTopP(x: ArrayLike<number>, v: number, total: number, topP: number): number {
  let lo = Infinity;
  let hi = -Infinity;
  for (let t = 0; t < v; t++) {
    if (scratch[t] === 0) continue;
    if (x[t]! < lo) lo = x[t]!;
    if (x[t]! > hi) hi = x[t]!;
  }
  const scale = hi > lo ? BUCKETS / (hi - lo) : 0;
  const bucket = (s: number) => Math.min(BUCKETS - 1, Math.floor((s - lo) * scale));
  hist.fill(0);
  for (let t = 0; t < v; t++) if (scratch[t] !== 0) hist[bucket(x[t]!)]! += scratch[t]!;
  const top = bucket(hi); // the best token's bucket: never removed whole
  let cum = 0;
  let at = 0;
  while (at < top && (cum + hist[at]!) / total <= 1 - topP) cum += hist[at++]!;
  const members: number[] = [];
  for (let t = 0; t < v; t++) {
    if (scratch[t] === 0) continue;
    const b = bucket(x[t]!);
    if (b < at) scratch[t] = 0;
    else if (b === at) members.push(t);
  }
  members.sort((a, b) => x[a]! - x[b]! || b - a);
  const walk = at === top ? members.length - 1 : members.length; // the best token is never removed
  for (let i = 0; i < walk; i++) {
    const t = members[i]!;
    if (!((cum + scratch[t]!) / total <= 1 - topP)) break;
    cum += scratch[t]!;
    scratch[t] = 0;
  }
  let kept = 0;
  for (let t = 0; t < v; t++) kept += scratch[t]!;
  return kept;
}

/** warpSorted over the allowed tokens scoring ≥ floor. */
function sortedAbove(x: ArrayLike<number>, floor: number, banned: ReadonlySet<number>, w: Warpers): Distribution {
  const ids: number[] = [];
  for (let t = 0; t < x.length; t++) if (x[t]! >= floor && !banned.has(t)) ids.push(t);
  ids.sort((a, b) => x[b]! - x[a]! || a - b);
  return warpSorted(
    ids,
    ids.map((t) => x[t]!),
    w,
  );
}

/** The k-th largest score among the allowed tokens (-inf when fewer are allowed): a min-heap of the k best. */
function kthLargest(x: ArrayLike<number>, k: number, banned: ReadonlySet<number>): number {
  const heap = new Float64Array(k);
  let size = 0;
  for (let t = 0; t < x.length; t++) {
    const s = x[t]!;
    if (size === k && s <= heap[0]!) continue;
    if (banned.has(t)) continue;
    if (size < k) {
      let i = size++;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (heap[p]! <= s) break;
        heap[i] = heap[p]!;
        i = p;
      }
      heap[i] = s;
    } else {
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= k) break;
        const c = l + 1 < k && heap[l + 1]! < heap[l]! ? l + 1 : l;
        if (heap[c]! >= s) break;
        heap[i] = heap[c]!;
        i = c;
      }
      heap[i] = s;
    }
  }
  return size < k ? -Infinity : heap[0]!;
}

/** torch.multinomial's one draw: the first token whose cumulative probability exceeds u ∈ [0, 1). */
export function draw(d: Distribution, u: number): number {
  let acc = 0;
  for (let i = 0; i < d.ids.length; i++) {
    acc += d.probs[i]!;
    if (u < acc) return d.ids[i]!;
  }
  return d.ids[d.ids.length - 1]!;
}

/**
 * One sampled token of row r of a step's outputs (the last position) and its log-prob (when asked; else 0): the model's
 * log-softmax over the whole vocabulary, before any processor (as greedy reports it). `seen`: the tokens the repetition penalty `penalty`
 * applies to (generate() applies it to the logits in sample mode). From full logits: exact. From a top-k plan (the
 * log-probs of its k best, normalized over the whole vocabulary): exact when top_k ≥ 1 and the row's k best hold the
 * top_k best allowed tokens and every token tied with the last of them; otherwise this step is an error naming the fix.
 */
export function sampleRow(
  out: Outputs,
  r: number,
  w: Warpers,
  banned: ReadonlySet<number>,
  seen: () => ReadonlySet<number>,
  penalty: number,
  u: number,
  withLogProb = true,
): { tok: number; logProb: number } {
  const ids = out[TOPK_IDS_OUTPUT];
  if (ids) {
    const [, t, k] = ids.dims as [number, number, number];
    if (penalty !== 1)
      throw new PlancError(
        'PLANC_E411',
        (opt) =>
          `repetition_penalty ${penalty} with sampling acts on the logits (as generate() does); this plan keeps only its top-k: optimize with ${opt('topk')} 0`,
      );
    if (w.topK < 1)
      throw new PlancError(
        'PLANC_E411',
        (opt) =>
          `sampling with top_k 0 draws from the whole vocabulary, but this plan keeps only its ${k} best tokens per step: set top_k (${opt('topK')}) to at most ${k}, or optimize with ${opt('topk')} 0`,
      );
    const base = (r * t + t - 1) * k;
    const lp = out[TOPK_LOGPROBS_OUTPUT]!.data as Float32Array;
    const id = ids.data as BigInt64Array;
    const cand: number[] = [];
    const scores: number[] = [];
    for (let j = 0; j < k; j++) {
      const tok = Number(id[base + j]!);
      if (banned.has(tok)) continue;
      cand.push(tok);
      scores.push(lp[base + j]!);
    }
    // the tokens the plan left out score ≤ its k-th, and TopKLogitsWarper keeps every token tied with its top_k-th: the
    // step is exact when the top_k-th allowed token scores strictly above the plan's k-th
    if (cand.length < w.topK || !(scores[w.topK - 1]! > lp[base + k - 1]!)) {
      const why =
        cand.length < w.topK
          ? `only ${cand.length} of them are allowed at this step`
          : `the ${w.topK}th allowed one ties with the last it keeps, and a token it left out may tie too`;
      throw new PlancError(
        'PLANC_E411',
        (opt) =>
          `sampling with top_k ${w.topK} needs the ${w.topK} best allowed tokens of each step and one below them, but this plan keeps ${k} and ${why}; optimize with a larger ${opt('topk')}, or ${opt('topk')} 0 to keep the logits`,
      );
    }
    const d = warpSorted(cand, scores, w);
    const tok = draw(d, u);
    return { tok, logProb: scores[cand.indexOf(tok)]! };
  }
  const logits = out.logits!;
  const [, t, v] = logits.dims as [number, number, number];
  const x = (logits.data as Float32Array).subarray((r * t + t - 1) * v, (r * t + t) * v);
  let scores: ArrayLike<number> = x;
  if (penalty !== 1) {
    const y = Float64Array.from(x);
    for (const tok of seen()) if (tok < v) y[tok] = repetitionPenalized(x[tok]!, penalty);
    scores = y;
  }
  const tok = drawFromRow(scores, w, banned, u);
  return { tok, logProb: withLogProb ? x[tok]! - logSumExp(x) : 0 };
}

/** A row's sampled token: row r of the step's outputs, batch sentence `sentence`, its tokens so far and its bans. */
export type SampleToken = (
  out: Outputs,
  r: number,
  sentence: number,
  banned: ReadonlySet<number>,
  seen: () => ReadonlySet<number>,
) => { tok: number; logProb: number };

/**
 * The sampler of one batch: sentence i draws from streams[i] (one number per sampled, i.e. not forced, token); the
 * log-probs only when `withLogProb` (returnScores: full logits make that a pass over the vocabulary).
 */
export function tokenSampler(
  w: Warpers,
  penalty: number,
  streams: readonly RandomStream[],
  withLogProb: boolean,
): SampleToken {
  return (out, r, sentence, banned, seen) =>
    sampleRow(out, r, w, banned, seen, penalty, streams[sentence]!.next(), withLogProb);
}
