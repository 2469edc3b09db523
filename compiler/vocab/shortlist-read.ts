// Reads a lexical shortlist in any supported form, told apart by content (binary magic, text line shape, tab for vmap).
import * as fs from 'node:fs';
import { PlancError } from '../diagnostics.ts';
import { isMarianBinaryShortlist, parseMarianBinaryShortlist } from './shortlist-marian-binary.ts';
import { parseMarianTextShortlist } from './shortlist-marian-text.ts';
import { parseVmap } from './shortlist-vmap.ts';
import { checkTargetRange, shortlistError, type Shortlist, type ShortlistFormat } from './shortlist.ts';

export interface ReadShortlistOptions {
  /** Source piece → id (needed by the text forms). */
  pieceToId?: (piece: string) => number | undefined;
  /** Target piece → id; default pieceToId. */
  targetPieceToId?: (piece: string) => number | undefined;
  /** Target vocabulary size: every target id must lie below it. */
  vocabSize?: number;
  /** Skip the content sniffing. */
  format?: ShortlistFormat;
}

/** Reads FILE as a Marian binary shortlist, a CTranslate2 vmap or a Marian text shortlist. */
export function readShortlist(file: string, options: ReadShortlistOptions = {}): Shortlist {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `shortlist ${file} not found`, { file });
  const bytes = fs.readFileSync(file);
  if (bytes.length === 0) throw shortlistError(file, 'shortlist file is empty');
  const format = options.format ?? sniffFormat(bytes);
  const list =
    format === 'marian-binary'
      ? parseMarianBinaryShortlist(bytes, file, { vocabSize: options.vocabSize })
      : parseText(bytes, file, format, options);
  if (options.vocabSize !== undefined) checkTargetRange(list, options.vocabSize);
  return list;
}

/**
 * The form of shortlist bytes: the binary magic; else Marian's text when the first non-empty line is three fields
 * ending in a number (tab- or space-separated); else a vmap when that line has a tab; else Marian's text.
 */
export function sniffFormat(bytes: Uint8Array): ShortlistFormat {
  if (isMarianBinaryShortlist(bytes)) return 'marian-binary';
  const head = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, 65536)).toString('utf8');
  const first = head.split('\n').find((l) => l.trim() !== '') ?? '';
  const fields = first.trim().split(/[ \t\r]+/);
  if (fields.length === 3 && Number.isFinite(Number(fields[2]))) return 'marian-text';
  return first.includes('\t') ? 'ctranslate2-vmap' : 'marian-text';
}

function parseText(bytes: Uint8Array, file: string, format: ShortlistFormat, options: ReadShortlistOptions): Shortlist {
  const { pieceToId, targetPieceToId, vocabSize } = options;
  if (!pieceToId) throw shortlistError(file, `a ${format} shortlist needs the model's vocabulary to map pieces to ids`);
  if (format === 'ctranslate2-vmap') return parseVmap(bytes, file, { pieceToId, targetPieceToId });
  if (vocabSize === undefined) throw shortlistError(file, 'a Marian text shortlist needs the target vocabulary size');
  return parseMarianTextShortlist(bytes, file, { pieceToId, targetPieceToId, vocabSize });
}
