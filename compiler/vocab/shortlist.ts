// Lexical shortlists in one in-memory form (per source id: target ids, most probable first) and the per-batch union.
import { PlancError } from '../diagnostics.ts';
import { compactMask } from './clusters.ts';

export type ShortlistFormat = 'marian-text' | 'marian-binary' | 'ctranslate2-vmap';

/** A lexical shortlist, whatever file form it came from. */
export interface Shortlist {
  file: string;
  format: ShortlistFormat;
  /** CSR over source ids [0, offsets.length − 1): the translations of s are targets[offsets[s] .. offsets[s + 1]). */
  offsets: Int32Array;
  targets: Int32Array;
  /**
   * Probabilities parallel to `targets`, each list sorted by probability descending (ties: higher id first, as
   * Marian sorts). null when the form has none: Marian's binary lists were already cut to the file's bestNum when it
   * was built and are kept in id order; vmap candidates are unranked. Without them `best` does not apply.
   */
  probs: Float32Array | null;
  /** Target ids, most frequent first: 0, 1, 2, ... for Marian (its vocabularies are frequency-ordered); vmap: its empty-key line. */
  frequent: Int32Array;
  /** vmap keys of 2+ tokens (source ids joined by spaces) → candidates. */
  ngrams: Map<string, Int32Array>;
  /** Longest key in `ngrams` (1 when there are none). */
  maxNgram: number;
  /** The firstNum and bestNum the file was built with (binary header). */
  firstNum?: number;
  bestNum?: number;
  /** Largest target id anywhere in the shortlist, plus one. */
  targetBound: number;
  /** Entries dropped while reading (NULL, pieces the vocabulary lacks, probabilities ≤ the threshold). */
  skipped: number;
}

export interface ShortlistStats {
  /** Source ids the shortlist covers (offsets.length − 1). */
  sourceIds: number;
  /** Source ids with at least one translation. */
  sourcesWithList: number;
  entries: number;
  /** Mean list length over the source ids with a list. */
  meanLength: number;
  maxLength: number;
}

export interface ShortlistForOptions {
  /** Also keep the source ids themselves (Marian does this when source and target share one vocabulary). */
  includeSource?: boolean;
}

export function shortlistError(file: string, message: string): PlancError {
  return new PlancError('PLANC_E501', message, { file, stage: 'reading a lexical shortlist' });
}

/** The first/best a shortlist is meant to be used with: the binary header's, else Marian's defaults 100/100. */
export function defaultLimits(list: Shortlist): { first: number; best: number } {
  if (list.format === 'ctranslate2-vmap') return { first: list.frequent.length, best: Infinity };
  return { first: list.firstNum ?? 100, best: list.bestNum ?? 100 };
}

/** The translations of one source id (empty when it has none), with their probabilities when the form has them. */
export function translations(list: Shortlist, sourceId: number): { ids: Int32Array; probs: Float32Array | null } {
  if (!(sourceId >= 0 && sourceId < list.offsets.length - 1)) return { ids: new Int32Array(0), probs: null };
  const b = list.offsets[sourceId]!,
    e = list.offsets[sourceId + 1]!;
  return { ids: list.targets.subarray(b, e), probs: list.probs ? list.probs.subarray(b, e) : null };
}

/**
 * The output vocabulary of one batch (seed 002 §4.1): sorted unique union of the `first` most frequent target ids,
 * the `best` most probable translations of every source token in the batch (whole lists where the form has no
 * probabilities), the candidates of vmap n-grams found in the batch, and the special ids.
 */
export function shortlistFor(
  list: Shortlist,
  sourceIds: readonly (readonly number[])[],
  first: number,
  best: number,
  specialIds: readonly number[],
  options: ShortlistForOptions = {},
): Int32Array {
  const mask = new Uint8Array(maskSize(list, sourceIds, specialIds, options));
  const frequent = list.frequent.subarray(0, Math.max(0, Math.min(first, list.frequent.length)));
  for (const id of frequent) mask[id] = 1;
  for (const id of specialIds) mask[id] = 1;
  markTranslations(list, sourceIds, best, mask, options);
  if (list.maxNgram > 1) for (const sentence of sourceIds) markNgrams(list, sentence, mask);
  return compactMask(mask);
}

/** Size statistics of a shortlist. */
export function shortlistStats(list: Shortlist): ShortlistStats {
  const sourceIds = list.offsets.length - 1;
  let withList = 0;
  let maxLength = 0;
  for (let s = 0; s < sourceIds; s++) {
    const len = list.offsets[s + 1]! - list.offsets[s]!;
    if (len > 0) withList++;
    maxLength = Math.max(maxLength, len);
  }
  const entries = list.targets.length;
  return { sourceIds, sourcesWithList: withList, entries, meanLength: withList ? entries / withList : 0, maxLength };
}

/** Fails (PLANC_E501) when a target id of the shortlist lies outside a vocabulary of vocabSize ids. */
export function checkTargetRange(list: Shortlist, vocabSize: number): void {
  if (list.targetBound <= vocabSize) return;
  throw shortlistError(
    list.file,
    `target id ${list.targetBound - 1} is outside the target vocabulary of ${vocabSize}` +
      ' ids: the shortlist was built for another vocabulary',
  );
}

/** CSR from per-source (target → probability) maps, each list sorted by probability descending, ties higher id first. */
export function csrFromRanked(lists: Map<number, Map<number, number>>): {
  offsets: Int32Array;
  targets: Int32Array;
  probs: Float32Array;
} {
  const sources = maxKey(lists) + 1;
  const offsets = new Int32Array(sources + 1);
  for (const [s, m] of lists) offsets[s + 1] = m.size;
  for (let s = 0; s < sources; s++) offsets[s + 1] += offsets[s]!;
  const targets = new Int32Array(offsets[sources]!);
  const probs = new Float32Array(targets.length);
  for (const [s, m] of lists) {
    const sorted = [...m].sort((a, b) => b[1] - a[1] || b[0] - a[0]);
    sorted.forEach(([t, p], i) => {
      targets[offsets[s]! + i] = t;
      probs[offsets[s]! + i] = p;
    });
  }
  return { offsets, targets, probs };
}

/** CSR from per-source candidate lists, kept in their order. */
export function csrFromLists(lists: Map<number, readonly number[]>): { offsets: Int32Array; targets: Int32Array } {
  const sources = maxKey(lists) + 1;
  const offsets = new Int32Array(sources + 1);
  for (const [s, l] of lists) offsets[s + 1] = l.length;
  for (let s = 0; s < sources; s++) offsets[s + 1] += offsets[s]!;
  const targets = new Int32Array(offsets[sources]!);
  for (const [s, l] of lists) targets.set(l, offsets[s]!);
  return { offsets, targets };
}

/** Largest id of targets, frequent ids and n-gram candidates, plus one. */
export function targetBoundOf(targets: Int32Array, frequent: Int32Array, ngrams: Map<string, Int32Array>): number {
  let bound = 0;
  for (const t of targets) if (t >= bound) bound = t + 1;
  for (const t of frequent) if (t >= bound) bound = t + 1;
  for (const c of ngrams.values()) for (const t of c) if (t >= bound) bound = t + 1;
  return bound;
}

/** Ids 0 .. count − 1 (Marian's frequency-ordered vocabularies). */
export function idRange(count: number): Int32Array {
  const out = new Int32Array(Math.max(0, count));
  for (let i = 0; i < out.length; i++) out[i] = i;
  return out;
}

function maxKey(m: Map<number, unknown>): number {
  let max = -1;
  for (const k of m.keys()) if (k > max) max = k;
  return max;
}

function maskSize(
  list: Shortlist,
  sourceIds: readonly (readonly number[])[],
  specialIds: readonly number[],
  options: ShortlistForOptions,
): number {
  let size = list.targetBound;
  for (const id of specialIds) {
    if (!Number.isInteger(id) || id < 0) throw shortlistError(list.file, `bad special id ${id}`);
    size = Math.max(size, id + 1);
  }
  if (options.includeSource) for (const sentence of sourceIds) for (const id of sentence) size = Math.max(size, id + 1);
  return size;
}

/** Marks the translations of every distinct source id of the batch (and the ids themselves with includeSource). */
function markTranslations(
  list: Shortlist,
  sourceIds: readonly (readonly number[])[],
  best: number,
  mask: Uint8Array,
  options: ShortlistForOptions,
): void {
  const sources = list.offsets.length - 1;
  const seen = new Uint8Array(sources);
  for (const sentence of sourceIds) {
    for (const id of sentence) {
      if (options.includeSource && Number.isInteger(id) && id >= 0) mask[id] = 1;
      if (!(Number.isInteger(id) && id >= 0 && id < sources) || seen[id]) continue;
      seen[id] = 1;
      const b = list.offsets[id]!,
        e = list.offsets[id + 1]!;
      const end = list.probs ? Math.min(e, b + Math.max(0, best)) : e;
      for (let p = b; p < end; p++) mask[list.targets[p]!] = 1;
    }
  }
}

/** Marks the candidates of every vmap n-gram (2+ tokens) found in one source sentence. */
function markNgrams(list: Shortlist, sentence: readonly number[], mask: Uint8Array): void {
  for (let i = 0; i < sentence.length; i++) {
    let key = String(sentence[i]);
    for (let n = 2; n <= list.maxNgram && i + n <= sentence.length; n++) {
      key += ` ${sentence[i + n - 1]}`;
      const candidates = list.ngrams.get(key);
      if (candidates) for (const t of candidates) mask[t] = 1;
    }
  }
}

/** A vocabulary lookup over a piece list (id = position), e.g. the pieces of a SentencePiece model. */
export function pieceLookup(pieces: readonly string[]): {
  pieceToId: (piece: string) => number | undefined;
  vocabSize: number;
} {
  const ids = new Map<string, number>();
  pieces.forEach((p, i) => {
    if (!ids.has(p)) ids.set(p, i);
  });
  return { pieceToId: (piece) => ids.get(piece), vocabSize: pieces.length };
}

/** Calls fn on every line of UTF-8 text (without its line break), numbered from 1; a final empty line is skipped. */
export function forEachLine(text: Uint8Array | string, fn: (line: string, lineNo: number) => void): void {
  if (typeof text === 'string') {
    const lines = text.split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    lines.forEach((l, i) => fn(l.endsWith('\r') ? l.slice(0, -1) : l, i + 1));
    return;
  }
  const buf = Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  let start = 0;
  for (let lineNo = 1; start < buf.length; lineNo++) {
    let end = buf.indexOf(0x0a, start);
    if (end < 0) end = buf.length;
    const stop = end > start && buf[end - 1] === 0x0d ? end - 1 : end;
    fn(buf.toString('utf8', start, stop), lineNo);
    start = end + 1;
  }
}
