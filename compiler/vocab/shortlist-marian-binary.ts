// Marian/Bergamot binary lexical shortlists (lex.*.s2t.bin): reader with checksum and bounds checks, and a writer.
import * as fs from 'node:fs';
import { PlancError } from '../diagnostics.ts';
import { idRange, shortlistError, targetBoundOf, type Shortlist } from './shortlist.ts';

/*
 * Layout (marian-dev src/data/shortlist.{h,cpp}, BinaryShortlistGenerator), all little-endian:
 *   u64 magic = 0xF11A48D5013417F5, u64 checksum, u64 firstNum, u64 bestNum, u64 wordToOffsetSize, u64 shortListsSize,
 *   u64 wordToOffset[wordToOffsetSize]   (source id s owns shortLists[wordToOffset[s] .. wordToOffset[s + 1]))
 *   u32 shortLists[shortListsSize]       (target ids, ascending within each source's list)
 * checksum = util::hashMem<uint64_t> over the u64 words from firstNum to the end of the file (a trailing 4-byte half
 * word is left out), each folded in as seed ^= v + 0x9e3779b9 + (seed << 6) + (seed >> 2) modulo 2^64.
 */
export const BINARY_SHORTLIST_MAGIC = 0xf11a48d5013417f5n;
const HEADER_BYTES = 48;
const U64 = (1n << 64n) - 1n;

export interface BinaryShortlistOptions {
  /** Target vocabulary size: ids must lie below it; it also sets how many frequent ids `first` may take. */
  vocabSize?: number;
  /** Verify the header checksum (default true), as Marian does unless told not to. */
  verifyChecksum?: boolean;
}

/** Whether the bytes start with the binary shortlist magic. */
export function isMarianBinaryShortlist(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && view(bytes).getBigUint64(0, true) === BINARY_SHORTLIST_MAGIC;
}

/** Reads a binary shortlist file; missing file → PLANC_E006, bad content → PLANC_E501. */
export function readMarianBinaryShortlist(file: string, options: BinaryShortlistOptions = {}): Shortlist {
  if (!fs.existsSync(file)) throw new PlancError('PLANC_E006', `shortlist ${file} not found`, { file });
  return parseMarianBinaryShortlist(fs.readFileSync(file), file, options);
}

/** Parses the bytes of a binary shortlist; `file` names it in errors. */
export function parseMarianBinaryShortlist(
  bytes: Uint8Array,
  file: string,
  options: BinaryShortlistOptions = {},
): Shortlist {
  const header = readHeader(bytes, file);
  if (options.verifyChecksum ?? true) verifyChecksum(bytes, header.checksum, file);
  const v = view(bytes);
  const offsets = readOffsets(v, header.wordToOffsetSize, header.shortListsSize, file);
  const targets = new Int32Array(header.shortListsSize);
  const base = HEADER_BYTES + 8 * header.wordToOffsetSize;
  for (let i = 0; i < targets.length; i++) targets[i] = checkId(v.getUint32(base + 4 * i, true), file);
  const frequent = idRange(options.vocabSize ?? header.firstNum);
  const ngrams = new Map<string, Int32Array>();
  const list: Shortlist = {
    file,
    format: 'marian-binary',
    offsets,
    targets,
    probs: null,
    frequent,
    ngrams,
    maxNgram: 1,
    firstNum: header.firstNum,
    bestNum: header.bestNum,
    targetBound: targetBoundOf(targets, frequent, ngrams),
    skipped: 0,
  };
  if (options.vocabSize !== undefined && list.targetBound > options.vocabSize) {
    throw shortlistError(
      file,
      `target id ${list.targetBound - 1} is outside the target vocabulary of ${options.vocabSize} ids`,
    );
  }
  return list;
}

/**
 * Writes a shortlist in the binary form: each source's list cut to its `bestNum` most probable targets (whole lists
 * when it has no probabilities), stored in id order, with the header checksum.
 */
export function encodeMarianBinaryShortlist(list: Shortlist, firstNum: number, bestNum: number): Uint8Array {
  const sources = list.offsets.length - 1;
  const lists: Int32Array[] = [];
  for (let s = 0; s < sources; s++) {
    const b = list.offsets[s]!,
      e = list.offsets[s + 1]!;
    lists.push(list.targets.slice(b, list.probs ? Math.min(e, b + bestNum) : e).sort());
  }
  const total = lists.reduce((n, l) => n + l.length, 0);
  const bytes = new Uint8Array(HEADER_BYTES + 8 * (sources + 1) + 4 * total);
  const v = view(bytes);
  const fields = [BINARY_SHORTLIST_MAGIC, 0n, BigInt(firstNum), BigInt(bestNum), BigInt(sources + 1), BigInt(total)];
  fields.forEach((f, i) => v.setBigUint64(8 * i, f, true));
  let at = 0;
  lists.forEach((l, s) => {
    v.setBigUint64(HEADER_BYTES + 8 * s, BigInt(at), true);
    l.forEach((t, i) => v.setUint32(HEADER_BYTES + 8 * (sources + 1) + 4 * (at + i), t, true));
    at += l.length;
  });
  v.setBigUint64(HEADER_BYTES + 8 * sources, BigInt(at), true);
  v.setBigUint64(8, marianChecksum(bytes), true);
  return bytes;
}

/** Marian's checksum of a binary shortlist (util::hashMem<uint64_t> from the firstNum field on). */
export function marianChecksum(bytes: Uint8Array): bigint {
  const v = view(bytes);
  const words = Math.floor((bytes.length - 16) / 8);
  let seed = 0n;
  for (let i = 0; i < words; i++) {
    const w = v.getBigUint64(16 + 8 * i, true);
    seed = (seed ^ ((w + 0x9e3779b9n + (seed << 6n) + (seed >> 2n)) & U64)) & U64;
  }
  return seed;
}

interface Header {
  checksum: bigint;
  firstNum: number;
  bestNum: number;
  wordToOffsetSize: number;
  shortListsSize: number;
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function readHeader(bytes: Uint8Array, file: string): Header {
  if (bytes.length < HEADER_BYTES) {
    throw shortlistError(file, `binary shortlist too short for its header (${bytes.length} bytes < ${HEADER_BYTES})`);
  }
  const v = view(bytes);
  const magic = v.getBigUint64(0, true);
  if (magic !== BINARY_SHORTLIST_MAGIC) {
    throw shortlistError(
      file,
      `not a binary shortlist: magic 0x${magic.toString(16)}, expected 0x${BINARY_SHORTLIST_MAGIC.toString(16)}`,
    );
  }
  const field = (i: number, name: string) => smallInt(v.getBigUint64(8 * i, true), name, file);
  const header: Header = {
    checksum: v.getBigUint64(8, true),
    firstNum: field(2, 'firstNum'),
    bestNum: field(3, 'bestNum'),
    wordToOffsetSize: field(4, 'wordToOffsetSize'),
    shortListsSize: field(5, 'shortListsSize'),
  };
  const expected = HEADER_BYTES + 8 * header.wordToOffsetSize + 4 * header.shortListsSize;
  if (expected !== bytes.length) {
    throw shortlistError(
      file,
      `header claims ${expected} bytes (${header.wordToOffsetSize} offsets, ` +
        `${header.shortListsSize} target ids) but the file has ${bytes.length}: truncated or corrupt`,
    );
  }
  if (header.wordToOffsetSize < 1) throw shortlistError(file, 'binary shortlist has an empty offset table');
  return header;
}

function smallInt(v: bigint, name: string, file: string): number {
  if (v > 0x7fffffffn) throw shortlistError(file, `header field ${name} = ${v} is implausibly large: corrupt file`);
  return Number(v);
}

function verifyChecksum(bytes: Uint8Array, want: bigint, file: string): void {
  const got = marianChecksum(bytes);
  if (got !== want) {
    throw shortlistError(
      file,
      `checksum mismatch (header 0x${want.toString(16)}, content 0x${got.toString(16)}): the file is corrupt`,
    );
  }
}

/** The offset table as Int32 CSR offsets: must start at 0, never decrease, and end at shortListsSize. */
function readOffsets(v: DataView, count: number, total: number, file: string): Int32Array {
  const offsets = new Int32Array(count);
  let prev = 0;
  for (let s = 0; s < count; s++) {
    const o = v.getBigUint64(HEADER_BYTES + 8 * s, true);
    if (o < BigInt(prev) || o > BigInt(total)) {
      throw shortlistError(file, `offset table entry ${s} = ${o} is out of order or past the ${total} target ids`);
    }
    prev = Number(o);
    offsets[s] = prev;
  }
  if (offsets[0] !== 0) throw shortlistError(file, `offset table starts at ${offsets[0]}, not 0`);
  if (prev !== total) throw shortlistError(file, `offset table ends at ${prev}, not at the ${total} target ids`);
  return offsets;
}

function checkId(id: number, file: string): number {
  if (id > 0x7fffffff) throw shortlistError(file, `target id ${id} is implausibly large: corrupt file`);
  return id;
}
