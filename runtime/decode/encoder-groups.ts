// The encoder of a batch run in groups of similar source lengths: a batch of mixed lengths (a serving cohort) pays for
// its padding in every encoder layer, so contiguous runs of rows are encoded apart, each padded to its own longest.
import type { Plan } from '../plan.ts';
import { dtypeBytes, type Resident, type ResidentTensor } from '../tensor.ts';
import type { GraphRuns } from './graph-runs.ts';
import { Spans } from './row-spans.ts';
import { sourceFeeds } from './source-feeds.ts';

/** One encoder call's fixed cost in padded source tokens (its pass over the weights), against rows × longest. */
const CALL_TOKENS = 32;

/**
 * Contiguous [start, end) runs of rows that minimize Σ (CALL_TOKENS + rows × longest source) over the runs: one run for
 * a batch of similar lengths, several for mixed ones (best when the rows are sorted by length).
 */
export function encoderGroups(lengths: number[]): [number, number][] {
  const n = lengths.length;
  const best = new Array<number>(n + 1).fill(Infinity);
  const cut = new Array<number>(n + 1).fill(0);
  best[0] = 0;
  for (let end = 1; end <= n; end++) {
    let longest = 0;
    for (let start = end - 1; start >= 0; start--) {
      longest = Math.max(longest, lengths[start]!);
      const cost = best[start]! + CALL_TOKENS + (end - start) * longest;
      if (cost < best[end]!) {
        best[end] = cost;
        cut[end] = start;
      }
    }
  }
  const groups: [number, number][] = [];
  for (let end = n; end > 0; end = cut[end]!) groups.unshift([cut[end]!, end]);
  return groups;
}

/**
 * The encoder run of each group of `groups` (a GraphRuns sequence), its rows placed in `hidden` ([rows, S, D], S the
 * batch's longest): each row's own positions hold what a run of the whole batch would write there (a row's encoding does not depend on
 * the padding beside it), its padding positions zeros (masked in every cross-attention). `take` gives scratch memory.
 */
export function* encodeInGroups(
  plan: Plan,
  sources: number[][],
  padId: number,
  groups: [number, number][],
  hidden: ResidentTensor,
  take: (bytes: number) => Resident,
): GraphRuns {
  const [, S, D] = hidden.dims as [number, number, number];
  const bytes = dtypeBytes(hidden.dtype);
  const rowBytes = S * D * bytes;
  const longest = (a: number, b: number) => Math.max(...sources.slice(a, b).map((s) => s.length));
  const scratch = take(Math.max(...groups.map(([a, b]) => (b - a) * longest(a, b))) * D * bytes);
  const pads = new Spans(sources.length);
  let padBytes = 0;
  for (const [a, b] of groups) {
    const len = longest(a, b);
    const { ids, mask } = sourceFeeds(sources.slice(a, b), padId);
    yield {
      graph: 'encoder',
      feeds: { input_ids: ids, attention_mask: mask },
      into: { last_hidden_state: { dtype: hidden.dtype, dims: [b - a, len, D], resident: scratch, offset: 0 } },
    };
    const spans = new Spans(b - a);
    for (let r = a; r < b; r++) spans.push((r - a) * len * D * bytes, hidden.offset + r * rowBytes, len * D * bytes);
    plan.residentCopy(scratch, hidden.resident, spans.array);
    if (len < S) {
      padBytes = Math.max(padBytes, (S - len) * D * bytes);
      for (let r = a; r < b; r++) pads.push(0, hidden.offset + r * rowBytes + len * D * bytes, (S - len) * D * bytes);
    }
  }
  // the padding of every shorter group, zeroed in one copy from zeros written once to the scratch (a group of the
  // longest source has 1 row or more, so the scratch holds S × D at least)
  if (padBytes > 0) {
    plan.residentWrite(scratch, 0, new Uint8Array(padBytes));
    plan.residentCopy(scratch, hidden.resident, pads.array);
  }
}
