// Reference beam search over the three HF seq2seq graphs for any graph runner, one sentence at a time (oracle for tests).
import { Tensor } from '../../compiler/tensor.ts';
import { DecodingRules, type Conventions } from '../../runtime/decode/conventions.ts';
import type { GraphRunner } from './greedy.ts';
import { logSoftmax } from './log-softmax.ts';

/** The model's ids and generate() conventions (forced bos/eos, banned tokens, eos list), and the search's settings. */
export interface BeamOptions extends Conventions {
  /** max_new_tokens. */
  maxLength: number;
  /** num_beams. */
  beamSize: number;
  /** length_penalty: a finished hypothesis scores log-prob sum / length^alpha, length = tokens + eos when present. */
  lengthPenalty: number;
  /** early_stopping (default false, generate()'s). */
  earlyStopping?: boolean | 'never';
  /** The source ids (encoder_input_ids), for encoder_no_repeat_ngram_size; beamDecodeOne sets them. */
  source?: number[];
}

export interface BeamHypothesis {
  ids: number[];
  /** Length-penalized score (sequences_scores). */
  score: number;
}

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
  return logSoftmax(logits.nums, (r * t + t - 1) * v, v);
}

/** Indices of the n largest values, largest first; ties go to the lower index (torch.topk on one row). */
function topk(values: ArrayLike<number>, n: number): number[] {
  const idx = Array.from({ length: values.length }, (_, i) => i);
  return idx.sort((a, b) => (values[b]! > values[a]! ? 1 : values[b]! < values[a]! ? -1 : a - b)).slice(0, n);
}

/** The logits [k, 1, vocab] of the next token for each of the k running sequences; origin[i]: the running beam of the
 * last step that sequence i continues (step 0: every row is the bare decoder start). */
export type NextLogits = (t: number, running: readonly number[][], origin: readonly number[]) => Promise<Tensor>;

/**
 * Beam search for one source (ids as the model takes them) over the three HF seq2seq graphs: beamSearch with a step
 * that runs the encoder once, the first-step decoder on k copies of the decoder start, then decoder_with_past with the
 * self-attention cache rows gathered by origin (as `_beam_search` reorders the cache).
 */
export async function beamDecodeOne(run: GraphRunner, source: number[], o: BeamOptions): Promise<BeamHypothesis[]> {
  const k = o.beamSize;
  const ids = Tensor.fromNumbers('int64', [1, source.length], source);
  const mask1 = Tensor.fromNumbers(
    'int64',
    [1, source.length],
    source.map(() => 1),
  );
  const enc = (await run('encoder', { input_ids: ids, attention_mask: mask1 })).last_hidden_state!;
  const zeros = new Array<number>(k).fill(0);
  const mask = rowsOf(mask1, zeros);
  let step: Record<string, Tensor> = {};
  const encKV: Record<string, Tensor> = {};
  return beamSearch(
    async (t, running, origin) => {
      if (t === 0) {
        step = await run('decoder', {
          input_ids: Tensor.fromNumbers(
            'int64',
            [k, 1],
            zeros.map(() => o.startId),
          ),
          encoder_attention_mask: mask,
          encoder_hidden_states: rowsOf(enc, zeros),
        });
        for (const [name, v] of Object.entries(step))
          if (name.includes('.encoder.')) encKV[name.replace('present.', 'past_key_values.')] = v;
      } else {
        const feeds: Record<string, Tensor> = {
          input_ids: Tensor.fromNumbers(
            'int64',
            [k, 1],
            running.map((b) => b[b.length - 1]!),
          ),
          encoder_attention_mask: mask,
          ...encKV,
        };
        for (const [name, v] of Object.entries(step))
          if (name.includes('.decoder.')) feeds[name.replace('present.', 'past_key_values.')] = rowsOf(v, [...origin]);
        step = await run('decoder_with_past', feeds);
      }
      return step.logits!;
    },
    { ...o, source },
  );
}

/** EncoderNoRepeatNGramLogitsProcessor, transliterated: the source's n-grams keyed by their first n - 1 tokens; the
 * key of input_ids[cur_len + 1 - n : cur_len] (a shorter slice when cur_len < n - 1, which matches none). */
function encoderNgramBans(o: BeamOptions, seq: number[]): number[] {
  const n = o.encoderNoRepeatNgramSize ?? 0;
  if (n <= 0 || !o.source) return [];
  const grams = new Map<string, number[]>();
  for (let i = 0; i + n <= o.source.length; i++) {
    const key = o.source.slice(i, i + n - 1).join();
    grams.set(key, [...(grams.get(key) ?? []), o.source[i + n - 1]!]);
  }
  const inputIds = [o.startId, ...seq];
  const start = inputIds.length + 1 - n;
  if (start < 0) return [];
  return grams.get(inputIds.slice(start).join()) ?? [];
}

/**
 * Beam search, transliterated from transformers 4.57 `_beam_search` for one source, over any next-token logits:
 * num_beams rows from the start (all but the first at -1e9), log-softmax then the processors (banned ids -inf, a
 * forced token 0 and every other -inf), top (1 + eos ids, at least 2) × num_beams of running score + log-prob over all
 * beams; the top num_beams of those that end (eos, or every one at max_new_tokens) join the finished set scored
 * sum / length^length_penalty unless the sentence is full under early_stopping true or its early-stop heuristic is
 * satisfied; the best num_beams that do not end run on; the heuristic (best running score / cur_len or, for 'never'
 * with a positive penalty, max_length, to that power, against the worst finished) and the stopping rules as
 * `_check_early_stop_heuristic` and `_beam_search_has_unfinished_sequences`. Returns the num_beams finished
 * hypotheses, best first (sequences and sequences_scores order).
 */
export async function beamSearch(next: NextLogits, o: BeamOptions): Promise<BeamHypothesis[]> {
  const k = o.beamSize;
  const alpha = o.lengthPenalty;
  const early = o.earlyStopping ?? false;
  const NEG = -1e9;
  const rules = new DecodingRules(o);
  const nEos = (o.eosIds ?? [o.eosId]).length;
  const keep = Math.max(2, 1 + nEos) * k;
  let running: { seq: number[]; score: number }[] = Array.from({ length: k }, (_, b) => ({
    seq: [],
    score: b === 0 ? 0 : NEG,
  }));
  let finished: { seq: number[]; score: number; done: boolean }[] = Array.from({ length: k }, () => ({
    seq: [],
    score: NEG,
    done: false,
  }));
  let unsatisfied = true;
  let origin = running.map((_, i) => i);
  for (let t = 0; ; t++) {
    const last = t + 1 >= o.maxLength;
    const logits = await next(
      t,
      running.map((b) => b.seq),
      origin,
    );
    // b. log-probs, processors, + running scores, flattened [k × vocab]
    const vocab = logits.dims[2]!;
    const acc = new Float64Array(k * vocab);
    running.forEach((b, beam) => {
      const lp = logSoftmaxRow(logits, beam);
      // RepetitionPenaltyLogitsProcessor on the log-probs, over input_ids = [start, ...seq]; then the bans
      if (o.repetitionPenalty !== undefined && o.repetitionPenalty !== 1) {
        for (const tok of new Set([o.startId, ...b.seq]))
          lp[tok] = lp[tok]! < 0 ? lp[tok]! * o.repetitionPenalty : lp[tok]! / o.repetitionPenalty;
      }
      for (const tok of rules.banned(b.seq)) lp[tok] = -Infinity;
      for (const tok of encoderNgramBans(o, b.seq)) lp[tok] = -Infinity;
      const forced = rules.forced(t, last);
      if (forced !== undefined) {
        lp.fill(-Infinity);
        lp[forced] = 0;
      }
      for (let tok = 0; tok < vocab; tok++) acc[beam * vocab + tok] = lp[tok]! + b.score;
    });
    // c. top-K continuations
    const top = topk(acc, keep).map((i) => ({ beam: Math.floor(i / vocab), tok: i % vocab, score: acc[i]! }));
    const cands = top.map((c) => ({ ...c, seq: [...running[c.beam]!.seq, c.tok] }));
    // d. which of them hit a stopping criterion (eos, max length)
    const hits = cands.map((c) => rules.isEos(c.tok) || last);
    // e. the running beams of the next step
    const runScores = cands.map((c, i) => c.score + (hits[i] ? NEG : 0));
    const nextRunning = topk(runScores, k).map((i) => ({
      seq: cands[i]!.seq,
      score: runScores[i]!,
      beam: cands[i]!.beam,
    }));
    // f. the finished set
    const full = finished.every((f) => f.done);
    const fresh = cands.map((c, i) => {
      let s = c.score / (t + 1) ** alpha;
      if (full && early === true) s += NEG;
      if (!unsatisfied) s += NEG;
      const just = hits[i]! && i < k;
      if (!just) s += NEG;
      return { seq: rules.isEos(c.tok) ? c.seq.slice(0, -1) : c.seq, score: s, done: just };
    });
    const merged = [...finished, ...fresh];
    finished = topk(
      merged.map((m) => m.score),
      k,
    ).map((i) => merged[i]!);
    // g. the heuristic and the stopping condition
    const len = early === 'never' && alpha > 0 ? o.maxLength : t + 1;
    const best = nextRunning[0]!.score / len ** alpha;
    const minFinished = Math.min(...finished.map((f) => f.score));
    unsatisfied = unsatisfied && finished.some((f) => best > (f.done ? minFinished : NEG));
    const allFinished = finished.every((f) => f.done);
    if (!unsatisfied || (allFinished && early === true) || hits.every((h) => h)) break;
    running = nextRunning;
    origin = nextRunning.map((r) => r.beam);
  }
  return finished.map((f) => ({ ids: f.seq, score: f.score }));
}
