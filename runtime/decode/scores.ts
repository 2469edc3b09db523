// The best tokens of one row of a decoder step's outputs: from full logits, or from a planc.ProjectTopK plan's top-k.
import { PlancError } from '../../compiler/diagnostics.ts';
import { TOPK_IDS_OUTPUT, TOPK_LOGPROBS_OUTPUT } from '../../compiler/plan/io-names.ts';
import type { RtTensor } from '../tensor.ts';

type Outputs = Record<string, RtTensor>;

/** Candidates of one row, best first (ties: lower id first). */
export interface RowTop {
  ids: number[];
  logProbs: number[];
}

const NONE: ReadonlySet<number> = new Set();

/** The token positions per row of a step's outputs (1 for a one-token step; n for a step of n tokens). */
export function stepPositions(out: Outputs): number {
  return ((out[TOPK_IDS_OUTPUT] ?? out.logits!).dims[1] ?? 1) as number;
}

/**
 * The n best tokens of row r at the last position that are not `banned`, with log-softmax log-probs over the whole
 * vocabulary (banned tokens are dropped, the others keep their log-probs, as generate() does). From a top-k plan: the
 * first n allowed of the row's k; fewer than n allowed there is an error (the plan's k is too small to be exact).
 */
export function rowTop(out: Outputs, r: number, n: number, banned: ReadonlySet<number> = NONE): RowTop {
  return positionTop(out, r, stepPositions(out) - 1, n, banned);
}

/** rowTop at token position p of row r (a step of several tokens predicts one next token per position). */
export function positionTop(out: Outputs, r: number, p: number, n: number, banned: ReadonlySet<number> = NONE): RowTop {
  const ids = out[TOPK_IDS_OUTPUT];
  if (ids) {
    const [, t, k] = ids.dims as [number, number, number];
    checkPosition(p, t);
    const base = (r * t + p) * k;
    const lp = out[TOPK_LOGPROBS_OUTPUT]!.data as Float32Array;
    const id = ids.data as BigInt64Array;
    const top: RowTop = { ids: [], logProbs: [] };
    for (let j = 0; j < k && top.ids.length < n; j++) {
      const tok = Number(id[base + j]!);
      if (banned.has(tok)) continue;
      top.ids.push(tok);
      top.logProbs.push(lp[base + j]!);
    }
    if (top.ids.length < n) {
      const need = n + banned.size;
      throw new PlancError(
        'PLANC_E411',
        (opt) =>
          `decoding needs the ${n} best tokens per step${banned.size ? ` besides ${banned.size} banned ones` : ''} but the plan keeps ${k}; optimize with ${opt('topk')} ${need} or more`,
      );
    }
    return top;
  }
  const logits = out.logits!;
  const [, t, v] = logits.dims as [number, number, number];
  checkPosition(p, t);
  const x = (logits.data as Float32Array).subarray((r * t + p) * v, (r * t + p + 1) * v);
  const lse = logSumExp(x);
  const best: number[] = [];
  for (let tok = 0; tok < v; tok++) {
    if (best.length === n && x[tok]! <= x[best[n - 1]!]!) continue;
    if (banned.has(tok)) continue;
    let at = best.length;
    while (at > 0 && x[best[at - 1]!]! < x[tok]!) at--;
    best.splice(at, 0, tok);
    if (best.length > n) best.pop();
  }
  return { ids: best, logProbs: best.map((tok) => x[tok]! - lse) };
}

/** generate()'s repetition penalty on one score (RepetitionPenaltyLogitsProcessor): a negative one × p, else ÷ p. */
export const repetitionPenalized = (x: number, p: number): number => (x < 0 ? x * p : x / p);

/**
 * rowTop under generate()'s repetition penalty p as beam search applies it: to the log-probs (after the log-softmax)
 * of the `seen` tokens (the decoder start and the tokens so far), then bans; best first, ties to the lower id.
 * From logits: exact. From a top-k plan: the tokens it left out have log-probs ≤ its k-th one, lpK, so none can beat
 * max(lpK, penalized(lpK)) (a penalty below 1 lifts seen tokens); the picks are exact when the n-th is above that
 * bound, and otherwise the step is an error naming the fix (a larger --topk, or --topk 0 to keep the logits).
 */
export function penalizedTop(
  out: Outputs,
  r: number,
  n: number,
  banned: ReadonlySet<number>,
  seen: ReadonlySet<number>,
  p: number,
): RowTop {
  const cands: { tok: number; lp: number; v: number }[] = [];
  const ids = out[TOPK_IDS_OUTPUT];
  let bound = -Infinity;
  if (ids) {
    const [, t, k] = ids.dims as [number, number, number];
    const base = (r * t + t - 1) * k;
    const lp = out[TOPK_LOGPROBS_OUTPUT]!.data as Float32Array;
    const id = ids.data as BigInt64Array;
    for (let j = 0; j < k; j++) {
      const tok = Number(id[base + j]!);
      if (!banned.has(tok))
        cands.push({
          tok,
          lp: lp[base + j]!,
          v: seen.has(tok) ? repetitionPenalized(lp[base + j]!, p) : lp[base + j]!,
        });
    }
    const lpK = lp[base + k - 1]!;
    bound = Math.max(lpK, repetitionPenalized(lpK, p));
  } else {
    const logits = out.logits!;
    const [, t, v] = logits.dims as [number, number, number];
    const x = (logits.data as Float32Array).subarray((r * t + t - 1) * v, (r * t + t) * v);
    const lse = logSumExp(x);
    for (let tok = 0; tok < v; tok++) {
      if (!banned.has(tok))
        cands.push({
          tok,
          lp: x[tok]! - lse,
          v: seen.has(tok) ? repetitionPenalized(x[tok]! - lse, p) : x[tok]! - lse,
        });
    }
  }
  cands.sort((a, b) => b.v - a.v || a.tok - b.tok);
  const top = cands.slice(0, n);
  if (ids && (top.length < n || !(top[n - 1]!.v > bound))) {
    throw new PlancError(
      'PLANC_E411',
      (opt) =>
        `repetition_penalty ${p}: this step's ${n} best tokens are not certain among the ${ids.dims[2]} the plan keeps; optimize with a larger ${opt('topk')}, or ${opt('topk')} 0 to keep the logits`,
    );
  }
  return { ids: top.map((c) => c.tok), logProbs: top.map((c) => c.v) };
}

/**
 * The best allowed token of row r under generate()'s repetition penalty p as greedy search applies it: to the raw
 * logits of the `seen` tokens (needs a plan that keeps the logits); its log-prob is the unpenalized log-softmax one.
 */
export function penalizedBest(
  out: Outputs,
  r: number,
  withLogProb: boolean,
  banned: ReadonlySet<number>,
  seen: ReadonlySet<number>,
  p: number,
): { tok: number; logProb: number } {
  const logits = out.logits;
  if (!logits)
    throw new PlancError(
      'PLANC_E411',
      (opt) =>
        `repetition_penalty ${p} with greedy decoding acts on the logits (as generate() does); this plan keeps only its top-k: optimize with ${opt('topk')} 0`,
    );
  const [, t, v] = logits.dims as [number, number, number];
  const x = (logits.data as Float32Array).subarray((r * t + t - 1) * v, (r * t + t) * v);
  let best = -1;
  let bestV = -Infinity;
  for (let k = 0; k < v; k++) {
    if (banned.has(k)) continue;
    const val = seen.has(k) ? repetitionPenalized(x[k]!, p) : x[k]!;
    if (best < 0 || val > bestV) {
      best = k;
      bestV = val;
    }
  }
  return { tok: best, logProb: withLogProb ? x[best]! - logSumExp(x) : 0 };
}

/** The best allowed token of row r (at the last position); its log-prob only when asked (full logits make that a second pass). */
export function rowBest(
  out: Outputs,
  r: number,
  withLogProb: boolean,
  banned: ReadonlySet<number> = NONE,
): { tok: number; logProb: number } {
  return positionBest(out, r, stepPositions(out) - 1, withLogProb, banned);
}

/** rowBest at token position p of row r: the best allowed next token after the step's first p + 1 tokens. */
export function positionBest(
  out: Outputs,
  r: number,
  p: number,
  withLogProb: boolean,
  banned: ReadonlySet<number> = NONE,
): { tok: number; logProb: number } {
  if (out[TOPK_IDS_OUTPUT] || withLogProb) {
    const top = positionTop(out, r, p, 1, banned);
    return { tok: top.ids[0]!, logProb: top.logProbs[0]! };
  }
  const logits = out.logits!;
  const [, t, v] = logits.dims as [number, number, number];
  checkPosition(p, t);
  const x = logits.data as Float32Array;
  const base = (r * t + p) * v;
  let best = -1;
  for (let k = 0; k < v; k++) {
    if ((best < 0 || x[base + k]! > x[base + best]!) && !banned.has(k)) best = k;
  }
  return { tok: best, logProb: 0 };
}

/** A position of a step's outputs: an integer in [0, t). */
function checkPosition(p: number, t: number): void {
  if (!Number.isInteger(p) || p < 0 || p >= t)
    throw new PlancError('PLANC_E405', `position ${p} is not one of the step's ${t} token positions`);
}

/** log(sum(exp(x))) in float64. */
export function logSumExp(x: Float32Array): number {
  let max = -Infinity;
  for (let k = 0; k < x.length; k++) if (x[k]! > max) max = x[k]!;
  let sum = 0;
  for (let k = 0; k < x.length; k++) sum += Math.exp(x[k]! - max);
  return max + Math.log(sum);
}
