// Greedy decoding over a Plan with batch shrinking: finished sentences leave the batch (their cache rows are dropped).
import type { Plan } from '../plan.ts';
import { rowBest } from './scores.ts';
import { StepRunner, type DecodeIds } from './step-runner.ts';

/** One decoded hypothesis: ids without start and eos, the sum of its token log-probs, its length (tokens + eos if any). */
export interface Hypothesis {
  ids: number[];
  logProb: number;
  length: number;
}

/**
 * Greedy decoding of one batch; maxLens[i] caps sentence i's generated tokens (eos included). Each step, sentences that
 * emitted eos or hit their cap leave the batch: the rows of the encoder mask, the encoder K/V and the self-attention
 * cache are compacted, so later steps compute only live rows. Log-probs are computed only when `scores` is set.
 */
export function greedyBatch(plan: Plan, sources: number[][], maxLens: number[], d: DecodeIds, scores: boolean): Hypothesis[] {
  const out: Hypothesis[] = sources.map(() => ({ ids: [], logProb: 0, length: 0 }));
  const runner = new StepRunner(plan, sources, d, sources.length, Math.max(...maxLens));
  let live = sources.map((_, i) => i);
  for (let t = 0; ; t++) {
    const next: number[] = [];
    const keep: number[] = [];
    live.forEach((i, r) => {
      const { tok, logProb } = rowBest(runner.out, r, scores);
      const h = out[i]!;
      h.logProb += logProb;
      h.length++;
      if (tok !== d.eosId) h.ids.push(tok);
      if (tok === d.eosId || t + 1 >= maxLens[i]!) return;
      keep.push(r);
      next.push(tok);
    });
    if (keep.length === 0) return out;
    runner.select(keep);
    live = keep.map((r) => live[r]!);
    runner.step(next);
  }
}
