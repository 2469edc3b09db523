// Reads the piece table of a SentencePiece model file, enough to turn ids back into text for demos and reports.
import * as fs from 'node:fs';
import protobuf from 'protobufjs';

/** The pieces of a SentencePiece ModelProto (field 1: repeated SentencePiece, whose field 1 is the piece). */
export function readSpmPieces(file: string): string[] {
  const r = protobuf.Reader.create(fs.readFileSync(file));
  const pieces: string[] = [];
  while (r.pos < r.len) {
    const tag = r.uint32();
    if (tag >>> 3 !== 1) {
      r.skipType(tag & 7);
      continue;
    }
    const end = r.uint32() + r.pos;
    let piece = '';
    while (r.pos < end) {
      const t = r.uint32();
      if (t >>> 3 === 1) piece = r.string();
      else r.skipType(t & 7);
    }
    pieces.push(piece);
  }
  return pieces;
}

/** Ids → text: concatenated pieces with SentencePiece's word marker turned back into spaces. */
export function detokenize(pieces: string[], ids: number[]): string {
  return ids
    .map((i) => pieces[i] ?? `<${i}>`)
    .join('')
    .replace(/\u2581/g, ' ')
    .trim();
}
