// The tuner's end-to-end check: short greedy translations of synthetic source ids with the untuned and the tuned plan,
// alternated, at each operating point's batch size (the real mix of row counts a decode goes through).
import type { PlanFile } from '../compiler/plan/types.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { Plan } from '../runtime/plan.ts';
import type { OperatingPoint } from './tune-measure.ts';

/** New tokens per sentence: enough for every graph to run at its sizes, short enough to keep tuning quick. */
const MAX_LENGTH = 16;

/** Source ids: `n` sentences of `len` tokens inside the vocabulary, ending in eos (deterministic). */
function sourceIds(file: PlanFile, n: number, len: number): number[][] {
  const d = file.header.decoding;
  const vocab = Math.max(16, (d.vocabSize ?? 64) - 8);
  const eos = d.eosId ?? 0;
  return Array.from({ length: n }, (_, i) => [...Array.from({ length: Math.max(1, len - 1 - (i % 5)) }, (_, j) => 4 + ((i * 131 + j * 17) % vocab)), eos]);
}

/**
 * Milliseconds of a short translation per point, [untuned, tuned], each the fastest of `reps` alternated runs (other
 * work on the machine only ever adds time; the fastest run is the plan's own).
 */
export async function confirmByTranslation(untuned: PlanFile, tuned: PlanFile, points: OperatingPoint[], reps = 3): Promise<[number, number][]> {
  const plans = [new Plan(untuned, '<untuned>'), new Plan(tuned, '<tuned>')] as const;
  try {
    const out: [number, number][] = [];
    for (const pt of points) {
      const ids = sourceIds(untuned, Math.max(pt.batch, 4), Math.min(pt.srcLen, 16));
      const opts = { batchSize: pt.batch, maxLength: MAX_LENGTH };
      const best: [number, number] = [Infinity, Infinity];
      for (const p of plans) await translateIds(p, ids.slice(0, pt.batch), opts); // warm-up
      for (let r = 0; r < reps; r++) {
        for (const k of r % 2 ? [1, 0] : [0, 1]) {
          const t0 = performance.now();
          await translateIds(plans[k]!, ids, opts);
          best[k] = Math.min(best[k]!, performance.now() - t0);
        }
      }
      out.push(best);
    }
    return out;
  } finally {
    plans.forEach((p) => p.close());
  }
}
