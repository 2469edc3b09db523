// What a tokenizer is (SentencePiece or tokenizer.json): the interface every loader returns.

export type TokenizerKind = 'spm' | 'hf';

export interface Tokenizer {
  /** Text → ids, without any special tokens. */
  encode(text: string): number[];
  /**
   * Text → the model's source ids with the tokenizer's own framing: tokenizer.json's post-processor (`X </s>`,
   * `es_XX X </s>`, `<s> X </s>`, ...); SentencePiece files have none, so `X </s>` with the eos id given at load.
   */
  encodeSource(text: string): number[];
  /** Ids → text; special and control tokens (eos, pad, language codes, unk markers) are dropped. */
  decode(ids: number[]): string;
  /** A token's id by its text (e.g. a language code: en_XX, __en__, eng_Latn), or undefined. */
  tokenId(token: string): number | undefined;
  /** The texts of the special tokens (tokenizer.json only; empty for SentencePiece). */
  specialTokens(): string[];
  kind: TokenizerKind;
}
