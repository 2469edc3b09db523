// A tiny synthetic Marian plan with a word-level tokenizer.json (words w2..w100), built by `planc optimize`, for CLI tests.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { makeModel } from '../../scripts/make-model/generate.ts';
import { planc } from './planc-cli.ts';

const VOCAB = 101;

/** A Hugging Face WordLevel tokenizer.json: `</s>` 0, `<unk>` 1, `w2` .. `w{vocab - 1}`, split on whitespace. */
export function wordTokenizer(vocab = VOCAB): object {
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const size = vocab;
  const words: Record<string, number> = { '</s>': 0, '<unk>': 1 };
  for (let i = 2; i < size; i++) words[`w${i}`] = i;
  return {
    version: '1.0',
    added_tokens: [special(0, '</s>'), special(1, '<unk>')],
    normalizer: null,
    pre_tokenizer: { type: 'WhitespaceSplit' },
    post_processor: null,
    decoder: null,
    model: { type: 'WordLevel', vocab: words, unk_token: '<unk>' },
  };
}

/**
 * Writes the model folder under `dir` and optimizes it into `dir/tiny.plan` (batch ≤ 4, source ≤ 16, target ≤ 8), or
 * with `extra` optimize flags into `dir/tiny-NAME.plan`.
 */
export function makeTinyTextPlan(dir: string, extra: string[] = [], name = 'tiny'): string {
  const model = path.join(dir, 'tiny-model');
  makeModel({
    arch: 'marian',
    d: 16,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 32,
    vocab: VOCAB,
    maxPos: 64,
    activation: 'relu',
    seed: 3,
    out: model,
  });
  fs.writeFileSync(path.join(model, 'tokenizer.json'), JSON.stringify(wordTokenizer()));
  const plan = path.join(dir, `${name}.plan`);
  const r = planc([
    'optimize',
    model,
    '-o',
    plan,
    '--quiet',
    '--max-batch',
    '4',
    '--max-src-len',
    '16',
    '--max-tgt-len',
    '8',
    ...extra,
  ]);
  if (r.status !== 0) throw new Error(`planc optimize of the tiny model failed: ${r.stderr}`);
  return plan;
}

/** The tiny model's own words: n of them, from `seed`. */
export const tinyWords = (seed: number, n: number) =>
  Array.from({ length: n }, (_, i) => `w${2 + ((seed * 7 + i * 13) % 99)}`).join(' ');

/**
 * The tiny model under `dir` (makeTinyTextPlan) and held-out text for its accuracy gates: `sentences` (12) source sentences and as many
 * references, and the profile flags the tests optimize it with.
 */
export function tinyGateSetup(
  dir: string,
  sentences = 12,
): { model: string; src: string; ref: string; base: string[] } {
  makeTinyTextPlan(dir);
  const src = path.join(dir, 'eval.src'),
    ref = path.join(dir, 'eval.ref');
  fs.writeFileSync(src, `${Array.from({ length: sentences }, (_, i) => tinyWords(i, 3 + (i % 5))).join('\n')}\n`);
  fs.writeFileSync(ref, `${Array.from({ length: sentences }, (_, i) => tinyWords(i + 40, 3 + (i % 4))).join('\n')}\n`);
  const base = ['--max-batch', '4', '--max-src-len', '16', '--max-tgt-len', '8'];
  return { model: path.join(dir, 'tiny-model'), src, ref, base };
}
