// Marian's text lexical shortlist (`target source probability` lines over vocabulary pieces) → the in-memory form.
import * as fs from 'node:fs';
import { PlancError } from '../diagnostics.ts';
import { csrFromRanked, forEachLine, idRange, shortlistError, targetBoundOf, type Shortlist } from './shortlist.ts';

export interface TextShortlistOptions {
  /** Source piece → id; undefined (not in the vocabulary) skips the entry. */
  pieceToId: (piece: string) => number | undefined;
  /** Target piece → id; default pieceToId (one shared vocabulary). */
  targetPieceToId?: (piece: string) => number | undefined;
  /** Target vocabulary size: the frequent ids are 0 .. vocabSize − 1 (Marian's vocabularies are frequency-ordered). */
  vocabSize: number;
  /** Entries with probability ≤ threshold are dropped (Marian's prune threshold); default 0. */
  threshold?: number;
}

/** Reads a text shortlist file; missing file → PLANC_E006, malformed line → PLANC_E501 naming the line. */
export function readMarianTextShortlist(file: string, options: TextShortlistOptions): Shortlist {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `shortlist ${file} not found`, { file });
  return parseMarianTextShortlist(fs.readFileSync(file), file, options);
}

/**
 * Parses `target source probability` lines (whitespace-separated, as fast_align's lexical tables). As in Marian:
 * pairs with a NULL side are skipped, a repeated pair keeps its last probability, and each source's list is sorted by
 * probability descending; unlike Marian (which maps unknown pieces to <unk>), pairs with unknown pieces are skipped.
 */
export function parseMarianTextShortlist(
  text: Uint8Array | string,
  file: string,
  options: TextShortlistOptions,
): Shortlist {
  const targetId = options.targetPieceToId ?? options.pieceToId;
  const threshold = options.threshold ?? 0;
  const lists = new Map<number, Map<number, number>>();
  let skipped = 0;
  let entries = 0;
  forEachLine(text, (line, lineNo) => {
    const fields = line.split(/[ \t\v\f\r]+/).filter((f) => f !== '');
    if (fields.length === 0) return;
    const [trg, src, prob] = parseFields(fields, line, lineNo, file);
    entries++;
    const s = src === 'NULL' ? undefined : options.pieceToId(src);
    const t = trg === 'NULL' ? undefined : targetId(trg);
    if (s === undefined || t === undefined || !(prob > threshold)) {
      skipped++;
      return;
    }
    let m = lists.get(s);
    if (!m) lists.set(s, (m = new Map()));
    m.set(t, prob);
  });
  if (entries === 0) throw shortlistError(file, 'text shortlist has no entries');
  const { offsets, targets, probs } = csrFromRanked(lists);
  const frequent = idRange(options.vocabSize);
  const ngrams = new Map<string, Int32Array>();
  return {
    file,
    format: 'marian-text',
    offsets,
    targets,
    probs,
    frequent,
    ngrams,
    maxNgram: 1,
    targetBound: targetBoundOf(targets, frequent, ngrams),
    skipped,
  };
}

function parseFields(fields: string[], line: string, lineNo: number, file: string): [string, string, number] {
  if (fields.length !== 3) {
    throw shortlistError(
      file,
      `line ${lineNo}: expected 'target source probability', got ${fields.length} fields: ` +
        JSON.stringify(line.slice(0, 80)),
    );
  }
  const prob = Number(fields[2]);
  if (!Number.isFinite(prob) || prob < 0) {
    throw shortlistError(file, `line ${lineNo}: bad probability ${JSON.stringify(fields[2])}`);
  }
  return [fields[0]!, fields[1]!, prob];
}
