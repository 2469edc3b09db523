// SentencePiece tokenizer: the real SentencePiece C++ library compiled to WebAssembly (@sctg/sentencepiece-js).
import { SentencePieceProcessor } from '@sctg/sentencepiece-js';
import type { Tokenizer } from './tokenizer.ts';

/** Loads a serialized SentencePiece ModelProto (the bytes of a .spm / .model file). */
export async function loadSpmTokenizer(bytes: Uint8Array): Promise<Tokenizer> {
  const sp = new SentencePieceProcessor();
  await sp.loadFromB64StringModel(Buffer.from(bytes).toString('base64'));
  return {
    kind: 'spm',
    encode: (text) => Array.from(sp.encodeIds(text)),
    decode: (ids) => String(sp.decodeIds(Int32Array.from(ids))),
  };
}
