// Corpus BLEU compatible with sacreBLEU 2.x (13a tokenizer, closest reference length, exp smoothing by default).
import { PlancError } from '../diagnostics.ts';

export type BleuSmoothing = 'exp' | 'floor' | 'add-k' | 'none';

export interface BleuOptions {
  /** '13a' (sacreBLEU's default, mteval-v13a) or 'none' (split on whitespace only). */
  tokenize?: '13a' | 'none';
  lowercase?: boolean;
  /** sacreBLEU's default is 'exp' (it only matters when some n-gram order has no match at all). */
  smooth?: BleuSmoothing;
  /** For 'floor' (default 0.1) and 'add-k' (default 1). */
  smoothValue?: number;
  maxOrder?: number;
  /** Drop orders beyond the last one with any n-grams (sentence-level use). */
  effectiveOrder?: boolean;
}

export interface BleuScore {
  /** 0..100. */
  score: number;
  /** Matched n-grams per order. */
  counts: number[];
  /** Hypothesis n-grams per order. */
  totals: number[];
  /** Per order, 0..100. */
  precisions: number[];
  /** Brevity penalty. */
  bp: number;
  sysLen: number;
  refLen: number;
}

const SMOOTH_DEFAULTS: Record<BleuSmoothing, number> = { exp: 0, floor: 0.1, 'add-k': 1, none: 0 };

/**
 * Corpus BLEU of hypotheses against one or more reference streams: `references` is either one string per hypothesis
 * or, like sacreBLEU, a list of streams (references[k][i] is the k-th reference of hypothesis i).
 */
export function corpusBleu(
  hypotheses: readonly string[],
  references: readonly string[] | readonly (readonly string[])[],
  options: BleuOptions = {},
): BleuScore {
  const streams = referenceStreams(hypotheses.length, references);
  const maxOrder = options.maxOrder ?? 4;
  const prep = (s: string) => splitWords(tokenizeFor(options, options.lowercase ? s.toLowerCase() : s));
  const correct = new Array<number>(maxOrder).fill(0);
  const total = new Array<number>(maxOrder).fill(0);
  let sysLen = 0;
  let refLen = 0;
  for (let i = 0; i < hypotheses.length; i++) {
    const hyp = prep(hypotheses[i]!);
    const refs = streams.map((s) => prep(s[i]!));
    sysLen += hyp.length;
    refLen += closestRefLength(
      hyp.length,
      refs.map((r) => r.length),
    );
    addMatches(hyp, maxRefCounts(refs, maxOrder), maxOrder, correct, total);
  }
  return computeBleu(correct, total, sysLen, refLen, options);
}

/** BLEU from its sufficient statistics (sacreBLEU's BLEU.compute_bleu). */
export function computeBleu(
  correctIn: readonly number[],
  totalIn: readonly number[],
  sysLen: number,
  refLen: number,
  options: BleuOptions = {},
): BleuScore {
  const correct = [...correctIn];
  const total = [...totalIn];
  const maxOrder = options.maxOrder ?? correct.length;
  const smooth = options.smooth ?? 'exp';
  const smoothValue = options.smoothValue ?? SMOOTH_DEFAULTS[smooth];
  const bp = sysLen < refLen ? (sysLen > 0 ? Math.exp(1 - refLen / sysLen) : 0) : 1;
  const precisions = new Array<number>(maxOrder).fill(0);
  const result = (score: number): BleuScore => ({
    score,
    counts: correct,
    totals: total,
    precisions,
    bp,
    sysLen,
    refLen,
  });
  if (!correct.some((c) => c > 0)) return result(0);
  let mteval = 1;
  let effOrder = maxOrder;
  for (let n = 1; n <= maxOrder; n++) {
    if (smooth === 'add-k' && n > 1) {
      correct[n - 1]! += smoothValue;
      total[n - 1]! += smoothValue;
    }
    if (total[n - 1] === 0) break;
    if (options.effectiveOrder) effOrder = n;
    if (correct[n - 1] === 0) {
      if (smooth === 'exp') {
        mteval *= 2;
        precisions[n - 1] = 100 / (mteval * total[n - 1]!);
      } else if (smooth === 'floor') {
        precisions[n - 1] = (100 * smoothValue) / total[n - 1]!;
      }
    } else {
      precisions[n - 1] = (100 * correct[n - 1]!) / total[n - 1]!;
    }
  }
  const logSum = precisions.slice(0, effOrder).reduce((s, p) => s + safeLog(p), 0);
  return result(bp * Math.exp(logSum / effOrder));
}

/** sacreBLEU's line: "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)". */
export function formatBleu(s: BleuScore): string {
  const ratio = s.refLen ? s.sysLen / s.refLen : 0;
  return (
    `BLEU = ${s.score.toFixed(2)} ${s.precisions.map((p) => p.toFixed(1)).join('/')} (BP = ${s.bp.toFixed(3)} ` +
    `ratio = ${ratio.toFixed(3)} hyp_len = ${s.sysLen} ref_len = ${s.refLen})`
  );
}

/** The mteval-v13a tokenizer as sacreBLEU implements it (tokenizer_13a.py + tokenizer_re.py). */
export function tokenize13a(line: string): string {
  let s = line.replaceAll('<skipped>', '').replaceAll('-\n', '').replaceAll('\n', ' ');
  s = s.replaceAll('&quot;', '"').replaceAll('&amp;', '&').replaceAll('&lt;', '<').replaceAll('&gt;', '>');
  s = ` ${s} `;
  s = s.replace(/([{-~[-`\x20-&(-+:-@/])/g, ' $1 ');
  s = s.replace(/([^0-9])([.,])/g, '$1 $2 ');
  s = s.replace(/([.,])([^0-9])/g, ' $1 $2');
  s = s.replace(/([0-9])(-)/g, '$1 $2 ');
  return splitWords(s).join(' ');
}

// Python's str.split() / str.rstrip() whitespace (Unicode White_Space plus the separators \x1c-\x1f).
const PY_SPACE = '\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const SPACE_RUN = new RegExp(`[${PY_SPACE}]+`);
const TRAILING_SPACE = new RegExp(`[${PY_SPACE}]+$`);

function splitWords(s: string): string[] {
  return s.split(SPACE_RUN).filter((w) => w.length > 0);
}

function tokenizeFor(options: BleuOptions, s: string): string {
  const trimmed = s.replace(TRAILING_SPACE, '');
  return (options.tokenize ?? '13a') === '13a' ? tokenize13a(trimmed) : trimmed;
}

function referenceStreams(
  count: number,
  references: readonly string[] | readonly (readonly string[])[],
): readonly (readonly string[])[] {
  const streams =
    references.length > 0 && typeof references[0] === 'string'
      ? [references as readonly string[]]
      : (references as readonly (readonly string[])[]);
  if (streams.length === 0) fail('no reference stream given');
  streams.forEach((s, k) => {
    if (s.length !== count) fail(`reference stream ${k + 1} has ${s.length} lines, the hypotheses ${count}`);
  });
  return streams;
}

function fail(message: string): never {
  throw new PlancError('PLANC_E501', message, { stage: 'BLEU' });
}

/** n-gram counts of orders 1..maxOrder, keyed by the words joined with spaces. */
function ngramCounts(words: readonly string[], maxOrder: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let n = 1; n <= maxOrder; n++) {
    for (let i = 0; i + n <= words.length; i++) {
      const key = words.slice(i, i + n).join(' ');
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  }
  return counts;
}

/** Per n-gram, the largest count in any reference (clipping counts). */
function maxRefCounts(refs: readonly string[][], maxOrder: number): Map<string, number> {
  const best = new Map<string, number>();
  for (const ref of refs) {
    for (const [key, c] of ngramCounts(ref, maxOrder)) best.set(key, Math.max(best.get(key) ?? 0, c));
  }
  return best;
}

function addMatches(
  hyp: readonly string[],
  refCounts: Map<string, number>,
  maxOrder: number,
  correct: number[],
  total: number[],
): void {
  for (const [key, c] of ngramCounts(hyp, maxOrder)) {
    const order = key.split(' ').length - 1;
    total[order]! += c;
    correct[order]! += Math.min(c, refCounts.get(key) ?? 0);
  }
}

/** The reference length closest to the hypothesis length; ties go to the shorter reference. */
function closestRefLength(hypLen: number, refLens: readonly number[]): number {
  let bestDiff = -1;
  let best = -1;
  for (const len of refLens) {
    const diff = Math.abs(hypLen - len);
    if (bestDiff === -1 || diff < bestDiff) {
      bestDiff = diff;
      best = len;
    } else if (diff === bestDiff && len < best) {
      best = len;
    }
  }
  return best;
}

/** sacreBLEU's my_log: log(0) is a large negative number, not -Infinity. */
function safeLog(p: number): number {
  return p === 0 ? -9999999999 : Math.log(p);
}
