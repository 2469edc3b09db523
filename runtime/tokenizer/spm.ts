// SentencePiece tokenizer: the real SentencePiece C++ library compiled to WebAssembly (@sctg/sentencepiece-js).
import { SentencePieceProcessor } from '@sctg/sentencepiece-js';
import protobuf from 'protobufjs';
import type { Tokenizer } from './types.ts';

/** Piece text → id of a serialized ModelProto (field 1: repeated SentencePiece, whose field 1 is the piece). */
function pieceIds(bytes: Uint8Array): Map<string, number> {
  const ids = new Map<string, number>();
  const r = protobuf.Reader.create(bytes);
  while (r.pos < r.len) {
    const tag = r.uint32();
    if (tag !== ((1 << 3) | 2)) {
      r.skipType(tag & 7);
      continue;
    }
    const end = r.uint32() + r.pos;
    while (r.pos < end) {
      const t = r.uint32();
      if (t === ((1 << 3) | 2)) ids.set(r.string(), ids.size);
      else r.skipType(t & 7);
    }
  }
  return ids;
}

/** Loads a serialized SentencePiece ModelProto (a .spm / .model file); sources end with `eosId`, else its `</s>` (Marian). */
export async function loadSpmTokenizer(bytes: Uint8Array, eosId?: number): Promise<Tokenizer> {
  const sp = new SentencePieceProcessor();
  await sp.loadFromB64StringModel(Buffer.from(bytes).toString('base64'));
  let pieces: Map<string, number> | undefined;
  const tokenId = (token: string) => (pieces ??= pieceIds(bytes)).get(token);
  const encode = (text: string) => Array.from(sp.encodeIds(text));
  return {
    kind: 'spm',
    encode,
    encodeSource: (text) => {
      const eos = eosId ?? tokenId('</s>');
      return eos === undefined ? encode(text) : [...encode(text), eos];
    },
    decode: (ids) => String(sp.decodeIds(Int32Array.from(ids))),
    tokenId,
    specialTokens: () => [],
  };
}
