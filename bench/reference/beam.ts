// Reference beam search over the three HF seq2seq graphs for any graph runner, one sentence at a time (oracle for tests).
import { Tensor } from '../../compiler/tensor.ts';
import { DecodingRules, type Conventions } from '../../runtime/decode/conventions.ts';
import type { GraphRunner } from './greedy.ts';

/** The model's ids and generate() conventions (forced bos/eos, banned tokens, eos list), and the search's settings. */
export interface BeamOptions extends Conventions {
  maxLength: number;
  beamSize: number;
  /** Simple length penalty alpha: score = log-prob sum / length^alpha, length = tokens + eos when present. */
  lengthPenalty: number;
}

export interface BeamHypothesis {
  ids: number[];
  /** Length-penalized score. */
  score: number;
}

interface Live { ids: number[]; sum: number }
interface Done { ids: number[]; sum: number; length: number }
interface Cand { score: number; beam: number; tok: number }

/** Rows `rows` of a tensor whose first dim is the batch. */
function rowsOf(t: Tensor, rows: number[]): Tensor {
  const size = t.nums.length / t.dims[0]!;
  const values: number[] = [];
  for (const r of rows) for (let i = 0; i < size; i++) values.push(t.nums[r * size + i]!);
  return Tensor.fromNumbers(t.dtype, [rows.length, ...t.dims.slice(1)], values);
}

/** Log-softmax (float64) of row r of logits [rows, steps, vocab] at the last step. */
function logSoftmaxRow(logits: Tensor, r: number): Float64Array {
  const [, t, v] = logits.dims as [number, number, number];
  const row = Float64Array.from(logits.nums.subarray((r * t + t - 1) * v, (r * t + t) * v));
  let max = -Infinity;
  for (const x of row) max = Math.max(max, x);
  let sum = 0;
  for (const x of row) sum += Math.exp(x - max);
  const lse = max + Math.log(sum);
  return row.map((x) => x - lse);
}

const byScore = (a: Cand, c: Cand) => c.score - a.score || a.beam - c.beam || a.tok - c.tok;

/**
 * The n best (beam sum + log-prob) continuations that are not banned (log-probs of the full log-softmax); ties go to
 * the earlier beam, then the smaller token id.
 */
function best(logits: Tensor, live: Live[], n: number, rules: DecodingRules): Cand[] {
  const all: Cand[] = [];
  live.forEach((b, beam) => {
    const lp = logSoftmaxRow(logits, beam);
    const banned = rules.banned(b.ids);
    const top: number[] = [];
    for (let tok = 0; tok < lp.length; tok++) {
      if ((top.length === n && lp[tok]! <= lp[top[n - 1]!]!) || banned.has(tok)) continue;
      top.push(tok);
      top.sort((a, c) => lp[c]! - lp[a]! || a - c);
      if (top.length > n) top.pop();
    }
    for (const tok of top) all.push({ score: b.sum + lp[tok]!, beam, tok });
  });
  return all.sort(byScore).slice(0, n);
}

/**
 * Beam search for one source (ids as the model takes them): rules.candidates(k) (2k with one eos) candidates per step,
 * an eos within the first k ranks finishes a hypothesis, the first k other candidates live on; done at k finished
 * hypotheses or at maxLength (live beams then finish unterminated). A forced step (forced bos first, forced eos last)
 * gives every live beam the forced token at log-prob 0. Returns the finished hypotheses, best first by the simple
 * length penalty.
 */
export async function beamDecodeOne(run: GraphRunner, source: number[], o: BeamOptions): Promise<BeamHypothesis[]> {
  const k = o.beamSize;
  const ids = Tensor.fromNumbers('int64', [1, source.length], source);
  let mask = Tensor.fromNumbers('int64', [1, source.length], source.map(() => 1));
  const enc = (await run('encoder', { input_ids: ids, attention_mask: mask })).last_hidden_state!;
  let step = await run('decoder', { input_ids: Tensor.fromNumbers('int64', [1, 1], [o.startId]), encoder_attention_mask: mask, encoder_hidden_states: enc });
  let encKV: Record<string, Tensor> = {};
  for (const [name, v] of Object.entries(step)) if (name.includes('.encoder.')) encKV[name.replace('present.', 'past_key_values.')] = v;
  let live: Live[] = [{ ids: [], sum: 0 }];
  const done: Done[] = [];
  const rules = new DecodingRules(o);
  for (let t = 0; t < o.maxLength; t++) {
    const forced = rules.forced(t, t === o.maxLength - 1);
    const cands = forced !== undefined
      ? live.map((b, beam) => ({ score: b.sum, beam, tok: forced })).sort(byScore)
      : best(step.logits!, live, rules.candidates(k), rules);
    const next: Live[] = [];
    const origin: number[] = [];
    cands.forEach((c, rank) => {
      const from = live[c.beam]!;
      if (rules.isEos(c.tok)) {
        if (rank < k && done.length < k) done.push({ ids: from.ids, sum: c.score, length: from.ids.length + 1 });
      } else if (next.length < k) {
        next.push({ ids: [...from.ids, c.tok], sum: c.score });
        origin.push(c.beam);
      }
    });
    if (done.length >= k) break;
    if (t === o.maxLength - 1) {
      for (const b of next) done.push({ ids: b.ids, sum: b.sum, length: b.ids.length });
      break;
    }
    if (mask.dims[0] !== next.length) {
      mask = rowsOf(mask, origin.map(() => 0));
      encKV = Object.fromEntries(Object.entries(encKV).map(([name, v]) => [name, rowsOf(v, origin.map(() => 0))]));
    }
    const feeds: Record<string, Tensor> = {
      input_ids: Tensor.fromNumbers('int64', [next.length, 1], next.map((b) => b.ids[b.ids.length - 1]!)),
      encoder_attention_mask: mask,
      ...encKV,
    };
    for (const [name, v] of Object.entries(step)) if (name.includes('.decoder.')) feeds[name.replace('present.', 'past_key_values.')] = rowsOf(v, origin);
    live = next;
    step = await run('decoder_with_past', feeds);
  }
  const score = (h: Done) => (o.lengthPenalty === 0 ? h.sum : h.sum / Math.pow(Math.max(1, h.length), o.lengthPenalty));
  return done.map((h, i) => ({ h, i })).sort((a, b) => score(b.h) - score(a.h) || a.i - b.i).map(({ h }) => ({ ids: h.ids, score: score(h) }));
}
