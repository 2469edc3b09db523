// One sentence's beam search bookkeeping under transformers' _beam_search rules (4.57): finished set, running beams, done.
import type { Hypothesis } from './greedy.ts';
import { penalized } from './options.ts';

/** A live beam: its tokens so far, its log-prob sum and the cache row it continues. */
export interface Beam {
  ids: number[];
  logProb: number;
  row: number;
}

/** A finished hypothesis with its length-penalized score. */
export interface Finished extends Hypothesis {
  score: number;
}

/** A candidate continuation: log-prob sum, source row, token. */
export interface Cand {
  score: number;
  row: number;
  tok: number;
}

/** How the search ends: generate()'s num_beams, length_penalty, early_stopping. */
export interface BeamRules {
  k: number;
  alpha: number;
  earlyStopping: boolean | 'never';
}

/** One sentence's search state. `open`: generate()'s is_early_stop_heuristic_unsatisfied (finished hypotheses may still enter). */
export interface Search {
  live: Beam[];
  finished: Finished[];
  open: boolean;
  done: boolean;
}

export const newSearch = (row: number): Search => ({
  live: [{ ids: [], logProb: 0, row }],
  finished: [],
  open: true,
  done: false,
});

/** Best first; ties go to the lower (row, token), i.e. the earlier beam and the smaller id (torch.topk's order). */
export const byScore = (a: Cand, b: Cand): number => b.score - a.score || a.row - b.row || a.tok - b.tok;

/**
 * One step `t` (0 = the first generated token) of one sentence, given its best candidates (the top (1 + eos ids) × k
 * of beam sum + log-prob, best first; or one forced token per live beam) — generate()'s _beam_search steps c–g:
 * - a candidate among the first k ranks that ends (an eos; at the last step every one) is a finished hypothesis of
 *   length t + 1 scored sum / (t + 1)^alpha, kept when the sentence is still open (and, for early_stopping true, not
 *   yet full); the finished set keeps the k best (earlier ones first on ties);
 * - the first k candidates that do not end are the next live beams;
 * - after the step the sentence closes when it is full (k finished) and the best live beam, scored at its length t + 1
 *   (early_stopping 'never' with alpha > 0: at maxLen), is no better than the worst finished one. It is done when
 *   closed, when full under early_stopping true, or at the last step.
 */
export function advance(
  s: Search,
  cands: Cand[],
  beamOfRow: Map<number, Beam>,
  r: BeamRules,
  isEos: (tok: number) => boolean,
  t: number,
  maxLen: number,
): void {
  const last = t + 1 >= maxLen;
  const full = () => s.finished.length >= r.k;
  const accept = s.open && !(r.earlyStopping === true && full());
  const live: Beam[] = [];
  const fresh: Finished[] = [];
  cands.forEach((c, rank) => {
    const from = beamOfRow.get(c.row)!;
    const eos = isEos(c.tok);
    if (eos || last) {
      if (rank < r.k && accept) {
        const ids = eos ? from.ids : [...from.ids, c.tok];
        fresh.push({ ids, logProb: c.score, length: t + 1, score: penalized(c.score, t + 1, r.alpha) });
      }
    } else if (live.length < r.k) {
      live.push({ ids: [...from.ids, c.tok], logProb: c.score, row: c.row });
    }
  });
  if (fresh.length) {
    s.finished = [...s.finished, ...fresh]
      .map((h, i) => ({ h, i }))
      .sort((a, b) => b.h.score - a.h.score || a.i - b.i)
      .slice(0, r.k)
      .map((x) => x.h);
  }
  s.live = live;
  if (last || live.length === 0) {
    s.done = true;
    return;
  }
  if (s.open && full()) {
    const len = r.earlyStopping === 'never' && r.alpha > 0 ? maxLen : t + 1;
    const best = live[0]!.logProb / len ** r.alpha;
    const worst = Math.min(...s.finished.map((h) => h.score));
    s.open = best > worst;
  }
  s.done = !s.open || (r.earlyStopping === true && full());
}
