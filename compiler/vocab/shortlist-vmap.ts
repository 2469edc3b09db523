// CTranslate2's vocabulary map (vmap: `src_1 … src_N<TAB>tgt_1 … tgt_K` lines over pieces) → the in-memory form.
import * as fs from 'node:fs';
import { PlancError } from '../diagnostics.ts';
import { csrFromLists, forEachLine, shortlistError, targetBoundOf, type Shortlist } from './shortlist.ts';

export interface VmapOptions {
  /** Source piece → id; a key with a piece the vocabulary lacks can never match and is skipped. */
  pieceToId: (piece: string) => number | undefined;
  /** Target piece → id; default pieceToId. Unknown target pieces are skipped. */
  targetPieceToId?: (piece: string) => number | undefined;
}

/** Reads a vmap file; missing file → PLANC_E006, malformed line → PLANC_E501 naming the line. */
export function readVmap(file: string, options: VmapOptions): Shortlist {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `vocabulary map ${file} not found`, { file });
  return parseVmap(fs.readFileSync(file), file, options);
}

/**
 * Parses a vmap as CTranslate2's VocabularyMap does: the key (1+ space-separated source pieces) is followed by a tab
 * and the candidates; the empty key lists the always-included candidates (→ `frequent`); a repeated key keeps its
 * last line. Candidates carry no probabilities, so whole lists are used.
 */
export function parseVmap(text: Uint8Array | string, file: string, options: VmapOptions): Shortlist {
  const targetId = options.targetPieceToId ?? options.pieceToId;
  const unigrams = new Map<number, number[]>();
  const ngrams = new Map<string, Int32Array>();
  let frequent: number[] = [];
  let skipped = 0;
  let lines = 0;
  forEachLine(text, (line, lineNo) => {
    if (line.trim() === '') return;
    const tab = line.indexOf('\t');
    if (tab < 0) throw shortlistError(file, `line ${lineNo}: no tab between the source n-gram and its candidates`);
    lines++;
    const candidates = mapPieces(words(line.slice(tab + 1)), targetId);
    skipped += candidates.skipped;
    const key = words(line.slice(0, tab));
    if (key.length === 0) return void (frequent = candidates.ids);
    const ids = mapPieces(key, options.pieceToId);
    if (ids.skipped > 0) return void skipped++;
    if (ids.ids.length === 1) unigrams.set(ids.ids[0]!, candidates.ids);
    else ngrams.set(ids.ids.join(' '), Int32Array.from(candidates.ids));
  });
  if (lines === 0) throw shortlistError(file, 'vocabulary map has no entries');
  const { offsets, targets } = csrFromLists(unigrams);
  const freq = Int32Array.from(new Set(frequent));
  let maxNgram = 1;
  for (const k of ngrams.keys()) maxNgram = Math.max(maxNgram, k.split(' ').length);
  return {
    file,
    format: 'ctranslate2-vmap',
    offsets,
    targets,
    probs: null,
    frequent: freq,
    ngrams,
    maxNgram,
    targetBound: targetBoundOf(targets, freq, ngrams),
    skipped,
  };
}

function words(s: string): string[] {
  return s.split(' ').filter((w) => w !== '');
}

/** Pieces → unique ids in first-seen order; pieces the vocabulary lacks are counted, not kept. */
function mapPieces(pieces: string[], toId: (p: string) => number | undefined): { ids: number[]; skipped: number } {
  const ids: number[] = [];
  const seen = new Set<number>();
  let skipped = 0;
  for (const p of pieces) {
    const id = toId(p);
    if (id === undefined) skipped++;
    else if (!seen.has(id)) {
      seen.add(id);
      ids.push(id);
    }
  }
  return { ids, skipped };
}
