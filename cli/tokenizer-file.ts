// Finds the tokenizer file `planc optimize` embeds: *.spm / *.model / tokenizer.json in the model folder, or --tokenizer FILE.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PlancError } from '../compiler/diagnostics.ts';
import { tokenizerKindOf, type TokenizerKind } from '../runtime/tokenizer/tokenizer.ts';

export interface TokenizerFile {
  file: string;
  kind: TokenizerKind;
  bytes: Uint8Array;
}

/** Tokenizer candidates in a model folder (none for a single .onnx file). */
export function tokenizerCandidates(model: string): string[] {
  if (!fs.existsSync(model) || !fs.statSync(model).isDirectory()) return [];
  return fs
    .readdirSync(model)
    .filter((f) => /\.(spm|model)$/i.test(f) || f === 'tokenizer.json')
    .map((f) => path.join(model, f))
    .filter((f) => fs.statSync(f).isFile())
    .sort();
}

/** The tokenizer to embed: the chosen file, or the one candidate in the model folder; undefined when there is none. */
export function findTokenizer(model: string, chosen?: string): TokenizerFile | undefined {
  if (chosen !== undefined) return readTokenizerFile(chosen);
  const found = tokenizerCandidates(model);
  if (found.length > 1) {
    throw new PlancError(
      'PLANC_E010',
      `${model} holds ${found.length} tokenizer files (${found.map((f) => path.basename(f)).join(', ')}): choose one with --tokenizer FILE, or skip with --no-tokenizer`,
      { file: model },
    );
  }
  return found.length === 1 ? readTokenizerFile(found[0]!) : undefined;
}

function readTokenizerFile(file: string): TokenizerFile {
  if (!fs.existsSync(file) || !fs.statSync(file).isFile())
    throw new PlancError('PLANC_E010', `no such tokenizer file: ${file}`, { file });
  const kind = tokenizerKindOf(file);
  if (!kind)
    throw new PlancError(
      'PLANC_E010',
      `cannot tell the tokenizer kind of ${file}: expected a SentencePiece .spm/.model file or a Hugging Face tokenizer.json`,
      { file },
    );
  const bytes = new Uint8Array(fs.readFileSync(file));
  if (bytes.length === 0) throw new PlancError('PLANC_E010', `tokenizer file ${file} is empty`, { file });
  return { file, kind, bytes };
}
