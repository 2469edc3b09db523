// The vocabulary rewrite at run time: a shortlist plan's `vocab_active` mask per batch, from the shortlist it carries.
import { VOCAB_ACTIVE_INPUT } from '../compiler/plan/io-names.ts';
import type { PlanVocab } from '../compiler/plan/types.ts';
import { shortlistFor, type Shortlist, type ShortlistFormat } from '../compiler/vocab/shortlist.ts';
import type { RtTensor } from './tensor.ts';

const cache = new WeakMap<PlanVocab, Shortlist>();

/** The Shortlist kept in a plan's vocab header (read once per header). */
export function planShortlist(v: PlanVocab): Shortlist {
  let s = cache.get(v);
  if (!s) {
    const targets = Int32Array.from(v.targets);
    const frequent = Int32Array.from(v.frequent);
    let bound = 0;
    for (const t of targets) if (t >= bound) bound = t + 1;
    for (const t of frequent) if (t >= bound) bound = t + 1;
    s = {
      file: v.shortlistFile,
      format: v.shortlistFormat as ShortlistFormat,
      offsets: Int32Array.from(v.offsets),
      targets,
      probs: v.probs.length ? Float32Array.from(v.probs) : null,
      frequent,
      ngrams: new Map(),
      maxNgram: 1,
      targetBound: bound,
      skipped: 0,
    };
    cache.set(v, s);
  }
  return s;
}

/** The active mask of one batch: first-N frequent ∪ best-N translations of its source ids ∪ specials (uint8 [V]). */
export function shortlistMask(v: PlanVocab, vocabSize: number, sources: readonly (readonly number[])[]): Uint8Array {
  const ids = shortlistFor(planShortlist(v), sources, v.first, v.best, v.specialIds, {
    includeSource: v.includeSource,
  });
  const mask = new Uint8Array(vocabSize);
  for (const id of ids) if (id < vocabSize) mask[id] = 1;
  return mask;
}

/** Extra decoder feeds of a plan for a batch: { vocab_active } for shortlist plans, {} otherwise. */
export function vocabFeeds(
  header: { vocab?: PlanVocab; decoding: { vocabSize?: number } },
  sources: readonly (readonly number[])[],
): Record<string, RtTensor> {
  const v = header.vocab;
  if (v?.method !== 'shortlist') return {};
  const size = header.decoding.vocabSize ?? 0;
  return { [VOCAB_ACTIVE_INPUT]: { dtype: 'uint8', dims: [size], data: shortlistMask(v, size, sources) } };
}
