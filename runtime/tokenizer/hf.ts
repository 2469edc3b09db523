// Hugging Face tokenizer.json: Hugging Face's own pure-JS implementation (@huggingface/tokenizers).
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import type { Tokenizer } from './types.ts';

/** The part of tokenizer_config.json the library needs, taken from tokenizer.json itself (plans carry only that file). */
function configOf(json: { model?: { unk_token?: unknown } }): Record<string, unknown> {
  const unk = json.model?.unk_token;
  return typeof unk === 'string' ? { unk_token: unk } : {};
}

function checkedIds(ids: unknown[], text: string): number[] {
  return ids.map((id) => {
    const n = Number(id);
    if (!Number.isInteger(n))
      throw new Error(`tokenizer.json gives no id for a token of '${text.slice(0, 40)}' (no unk_token?)`);
    return n;
  });
}

/** Loads the bytes of a tokenizer.json: sources framed by its post-processor, special tokens dropped on decode. */
export function loadHfTokenizer(bytes: Uint8Array): Tokenizer {
  const json = JSON.parse(Buffer.from(bytes).toString('utf8')) as { model?: { unk_token?: unknown } };
  const tok = new HfTokenizer(json, configOf(json));
  return {
    kind: 'hf',
    encode: (text) => checkedIds(tok.encode(text, { add_special_tokens: false }).ids, text),
    encodeSource: (text) => checkedIds(tok.encode(text, { add_special_tokens: true }).ids, text),
    decode: (ids) => (ids.length ? tok.decode(ids, { skip_special_tokens: true }) : ''),
    tokenId: (token) => tok.token_to_id(token),
    specialTokens: () => [...tok.get_added_tokens_decoder().values()].filter((t) => t.special).map((t) => t.content),
  };
}
