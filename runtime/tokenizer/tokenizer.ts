// One tokenizer interface over SentencePiece models (.spm/.model) and Hugging Face tokenizer.json files.
import { PlancError } from '../../compiler/diagnostics.ts';
import { loadHfTokenizer } from './hf.ts';
import { loadSpmTokenizer } from './spm.ts';

export type TokenizerKind = 'spm' | 'hf';

export interface Tokenizer {
  /** Text → ids, without any special tokens (callers append eos). */
  encode(text: string): number[];
  /** Ids → text; special and control tokens (eos, pad, unk markers) are dropped. */
  decode(ids: number[]): string;
  kind: TokenizerKind;
}

/** Loads a tokenizer from the bytes of its file; `name` names it in errors. */
export async function loadTokenizer(bytes: Uint8Array, kind: TokenizerKind, name = '<tokenizer>'): Promise<Tokenizer> {
  if (bytes.length === 0) throw new PlancError('PLANC_E010', `tokenizer ${name} is empty`, { file: name });
  try {
    return kind === 'spm' ? await loadSpmTokenizer(bytes) : loadHfTokenizer(bytes);
  } catch (e) {
    if (e instanceof PlancError) throw e;
    throw new PlancError('PLANC_E010', `cannot read ${kind} tokenizer ${name}: ${(e as Error).message ?? e}`, { file: name });
  }
}

/** The tokenizer kind a file name implies: .spm/.model → spm, *.json → hf; undefined otherwise. */
export function tokenizerKindOf(file: string): TokenizerKind | undefined {
  if (/\.(spm|model)$/i.test(file)) return 'spm';
  if (/\.json$/i.test(file)) return 'hf';
  return undefined;
}
