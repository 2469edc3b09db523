// Traces of Jacobi decodes (DDGviz data): every iteration's draft, when each token became final, and the decoding
// dependency graph (token j → the earlier tokens whose change changed j at the next iteration); recorded only when asked.
import type { JacobiKind } from './jacobi.ts';

/** One iteration (one decoder run the sentence took part in) of one sentence. */
export interface JacobiDraft {
  /** 1-based. */
  iteration: number;
  /** The first position the run computed. */
  start: number;
  /** The draft at positions start, start + 1, ... after the run (final tokens and guesses). */
  tokens: number[];
  /** Positions (absolute) whose token differs from the draft before this run (the initial draft is pad / forced). */
  changed: number[];
  /** Tokens final after this run: positions [0, fixed). */
  fixed: number;
}

/** Token `from` changed at `iteration` after token `to` (to < from) had changed at the iteration before. */
export interface JacobiDependency {
  from: number;
  to: number;
  /** The first iteration at which the dependency showed. */
  iteration: number;
  /** It showed at the iteration that gave `from` its final token (its last change). */
  settles: boolean;
}

/** One sentence's Jacobi decode. */
export interface JacobiSentenceTrace {
  strategy: JacobiKind;
  /** The block b the strategy fed (pj: the plan's most step tokens). */
  block: number;
  /** The source ids as decoded (after any truncation). */
  source: number[];
  /** The final tokens (greedy's), the eos included when one was generated. */
  tokens: number[];
  /** Decoder runs the sentence took part in (the first one, from the start token, included) = drafts.length. */
  iterations: number;
  drafts: JacobiDraft[];
  /** Per token: the iteration (1-based) at which it became final. */
  fixedAt: number[];
  /** The decoding dependency graph over the final tokens, one entry per (from, to), by from then to. */
  edges: JacobiDependency[];
}

/** What the recorder reads of a decoding row (runtime/decode/jacobi.ts's Row). */
interface RowView {
  cap: number;
  draft: number[];
  fixed: number;
  done: boolean;
}

interface RowLog {
  source: number[];
  before: number[];
  drafts: JacobiDraft[];
  fixedAt: number[];
}

/** Records the drafts of one batch's rows as jacobiSteps absorbs each run; `finish` turns them into traces. */
export class JacobiTraceRecorder {
  private readonly logs = new Map<RowView, RowLog>();

  constructor(
    private readonly strategy: JacobiKind,
    private readonly block: number,
    sources: number[][],
    private readonly rows: RowView[],
  ) {
    rows.forEach((row, i) =>
      this.logs.set(row, { source: sources[i]!, before: row.draft.slice(), drafts: [], fixedAt: [] }),
    );
  }

  /** After a run that fed `fed` tokens from position `start` was absorbed into `row`. */
  record(row: RowView, start: number, fed: number): void {
    const log = this.logs.get(row)!;
    const fixedBefore = log.drafts[log.drafts.length - 1]?.fixed ?? 0;
    const end = Math.min(start + fed, row.cap, row.done ? row.fixed : Infinity);
    const tokens = row.draft.slice(start, Math.max(start, end));
    const changed = tokens.flatMap((t, k) => (t !== log.before[start + k] ? [start + k] : []));
    for (let q = fixedBefore; q < row.fixed; q++) log.fixedAt[q] = log.drafts.length + 1;
    log.drafts.push({ iteration: log.drafts.length + 1, start, tokens, changed, fixed: row.fixed });
    log.before = row.draft.slice();
  }

  /** One trace per row, in the batch's order. */
  finish(): JacobiSentenceTrace[] {
    return this.rows.map((row) => {
      const log = this.logs.get(row)!;
      const tokens = row.draft.slice(0, row.fixed);
      return {
        strategy: this.strategy,
        block: this.block,
        source: log.source,
        tokens,
        iterations: log.drafts.length,
        drafts: log.drafts,
        fixedAt: log.fixedAt.slice(0, tokens.length),
        edges: dependencies(log.drafts, tokens.length),
      };
    });
  }
}

/**
 * The decoding dependency graph (DDGviz, Santilli et al. 2023 §3.5): j → i for i < j when token i changed at iteration
 * t - 1 and token j changed at iteration t (a deterministic model changes j only when a token before it changed), over
 * the final positions [0, n).
 */
export function dependencies(drafts: JacobiDraft[], n: number): JacobiDependency[] {
  const lastChange = new Array<number>(n).fill(0);
  for (const d of drafts) for (const j of d.changed) if (j < n) lastChange[j] = d.iteration;
  const edges = new Map<number, JacobiDependency>();
  for (let t = 1; t < drafts.length; t++) {
    const prev = drafts[t - 1]!.changed;
    for (const j of drafts[t]!.changed) {
      if (j >= n) continue;
      for (const i of prev) {
        if (i >= j) continue;
        const key = j * n + i;
        const e = edges.get(key);
        const settles = drafts[t]!.iteration === lastChange[j];
        if (e) e.settles ||= settles;
        else edges.set(key, { from: j, to: i, iteration: drafts[t]!.iteration, settles });
      }
    }
  }
  return [...edges.values()].sort((a, b) => a.from - b.from || a.to - b.to);
}

/** Totals over traces: iterations vs tokens. */
export function traceTotals(traces: readonly JacobiSentenceTrace[]): {
  sentences: number;
  iterations: number;
  tokens: number;
} {
  return {
    sentences: traces.length,
    iterations: traces.reduce((a, t) => a + t.iterations, 0),
    tokens: traces.reduce((a, t) => a + t.tokens.length, 0),
  };
}

/**
 * Collects the traces of a decode (pass `listener` as DecodingOptions.jacobiTrace); they arrive in decoding order
 * (sorted by length, per batch), so `inInputOrder` matches them back to the sources by their ids.
 */
export class JacobiTraceCollector {
  readonly traces: JacobiSentenceTrace[] = [];
  readonly listener = (t: JacobiSentenceTrace): void => {
    this.traces.push(t);
  };

  /**
   * Per source (the ids handed to translateIds, in input order): its trace, or undefined for a source that was not
   * decoded (empty, or over the length limit). A truncated source matches the trace of its first ids.
   */
  inInputOrder(sources: readonly number[][]): (JacobiSentenceTrace | undefined)[] {
    const byKey = new Map<string, JacobiSentenceTrace[]>();
    for (const t of this.traces) {
      const k = t.source.join(' ');
      byKey.set(k, [...(byKey.get(k) ?? []), t]);
    }
    const take = (k: string) => byKey.get(k)?.shift();
    const exact = sources.map((s) => take(s.join(' ')));
    const rest = [...byKey.values()].flat();
    return exact.map((t, i) => {
      if (t || sources[i]!.length === 0) return t;
      const s = sources[i]!;
      const at = rest.findIndex(
        (r) => r.source.length < s.length && r.source.slice(0, -1).every((id, k) => id === s[k]),
      );
      return at < 0 ? undefined : rest.splice(at, 1)[0];
    });
  }
}
