// Turns a Marian/BART-family seq2seq ONNX export into a Hugging Face checkpoint folder (config.json, one .npy per tensor, vocabulary).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { importSeq2SeqDir } from '../../model/onnx/import-model.ts';
import { readSpmPieces } from '../../scripts/spm-pieces.ts';
import { type HfConfig, hfStateDict } from './hf-names.ts';
import { writeNpy } from './npy.ts';

/** The vocabulary by id: a vocab*.spm's pieces, else tokenizer.json's model vocabulary. */
function vocabulary(dir: string): string[] | undefined {
  const spm = fs.readdirSync(dir).find((f) => f.endsWith('.spm'));
  if (spm) return readSpmPieces(path.join(dir, spm));
  const tj = path.join(dir, 'tokenizer.json');
  if (!fs.existsSync(tj)) return undefined;
  const v = JSON.parse(fs.readFileSync(tj, 'utf8')).model.vocab as [string, number][] | Record<string, number>;
  if (Array.isArray(v)) return v.map(([p]) => p);
  const out: string[] = [];
  for (const [p, i] of Object.entries(v)) out[i] = p;
  return out;
}

/**
 * Writes `out`: config.json (the export's), tensors/NAME.npy for every state-dict tensor with tensors/index.json
 * listing them, and tokens.json (the vocabulary by id) when the export has one. `python3 bench/ct2/assemble.py out`
 * then writes pytorch_model.bin. Returns the notes of the mapping (tensors it had to compute).
 */
export function writeHfCheckpoint(exportDir: string, out: string): string[] {
  const config = JSON.parse(fs.readFileSync(path.join(exportDir, 'config.json'), 'utf8')) as HfConfig;
  const { tensors, notes } = hfStateDict(importSeq2SeqDir(exportDir), config);
  fs.mkdirSync(path.join(out, 'tensors'), { recursive: true });
  fs.copyFileSync(path.join(exportDir, 'config.json'), path.join(out, 'config.json'));
  const index: { name: string; shape: readonly number[]; from: string }[] = [];
  for (const [name, t] of tensors) {
    writeNpy(path.join(out, 'tensors', `${name}.npy`), t.tensor);
    index.push({ name, shape: t.tensor.dims, from: t.from });
  }
  fs.writeFileSync(path.join(out, 'tensors', 'index.json'), `${JSON.stringify(index, null, 1)}\n`);
  const vocab = vocabulary(exportDir);
  if (vocab) fs.writeFileSync(path.join(out, 'tokens.json'), JSON.stringify(vocab));
  return notes;
}

// node --import tsx bench/ct2/hf-checkpoint.ts EXPORT_DIR OUT_DIR
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const [exportDir, out] = process.argv.slice(2);
  if (!exportDir || !out) {
    console.error('usage: node --import tsx bench/ct2/hf-checkpoint.ts EXPORT_DIR OUT_DIR');
    process.exit(2);
  }
  for (const n of writeHfCheckpoint(exportDir, out)) console.log(n);
  console.log(`wrote ${out}`);
}
