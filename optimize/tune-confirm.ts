// The tuner's end-to-end check: short greedy translations of synthetic source ids with the untuned and the tuned plan
// (and a second copy of the untuned one: the noise), alternated, at each operating point's batch size (the real mix of
// row counts a decode goes through).
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
  return Array.from({ length: n }, (_, i) => [
    ...Array.from({ length: Math.max(1, len - 1 - (i % 5)) }, (_, j) => 4 + ((i * 131 + j * 17) % vocab)),
    eos,
  ]);
}

/** One point of the check: ms per generated token of each plan, and whether the second produced the first's tokens. */
export interface TranslationCheck {
  msPerToken: number[];
  identical: boolean;
}

/**
 * Per point: milliseconds per generated token of a short translation by each plan (the untuned one first, the tuned
 * one second, any others after: a second copy of the untuned one measures the noise), each from the fastest of `reps`
 * alternated runs (other work on the machine only ever adds time; the fastest run is the plan's own), the order
 * rotating run by run. Per token, since variants that sum in another order may change a greedy choice and so the lengths.
 */
export async function confirmByTranslation(
  files: PlanFile[],
  points: OperatingPoint[],
  reps = 3,
): Promise<TranslationCheck[]> {
  // One plan loaded at a time: with two plans open, the one made second ran several times slower at batch 1 in the
  // same alternation (measured on the tiny int8 plan against itself), which would bias the check.
  const n = files.length;
  const out: TranslationCheck[] = [];
  for (const pt of points) {
    const ids = sourceIds(files[0]!, Math.max(pt.batch, 4), Math.min(pt.srcLen, 16));
    const opts = { batchSize: pt.batch, maxLength: MAX_LENGTH };
    const best = files.map(() => Infinity);
    const tokens = files.map(() => '');
    for (let r = 0; r < reps; r++) {
      for (let j = 0; j < n; j++) {
        const k = (j + r) % n;
        const plan = new Plan(files[k]!, `<alternative ${k}>`);
        try {
          await translateIds(plan, ids.slice(0, pt.batch), opts); // warm-up
          const t0 = performance.now();
          const res = await translateIds(plan, ids, opts);
          const ms = performance.now() - t0;
          best[k] = Math.min(best[k]!, ms / res.reduce((a, x) => a + x.ids.length + 1, 0));
          tokens[k] = res.map((x) => x.ids.join(' ')).join('\n');
        } finally {
          plan.close();
        }
      }
    }
    out.push({ msPerToken: best, identical: tokens[0] === tokens[1] });
  }
  return out;
}
