// Tokenizers (SentencePiece on es-en, a tiny tokenizer.json), plans that carry them, special ids, planc translate.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { PlancError } from '../compiler/diagnostics.ts';
import { REPO_ROOT, sharedDir } from '../compiler/paths.ts';
import { readPlanFile } from '../compiler/plan/format.ts';
import { validateHeader } from '../compiler/plan/validate.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { loadTokenizer } from '../runtime/tokenizer/tokenizer.ts';
import { findTokenizer } from '../cli/tokenizer-file.ts';
import { readLines } from '../cli/read-lines.ts';
import { parseIdLine } from '../cli/translate.ts';
import { loadPlan } from '../runtime/plan.ts';
import { translate, translateStream } from '../runtime/translate.ts';
import { needsShared, skipSuite } from './helpers/skip.ts';

const shared = sharedDir();
const ESEN = shared && path.join(shared, 'models', 'es-en');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-tokenizer-'));
const cli = (args: string[], input = '') =>
  spawnSync(process.execPath, [path.join(REPO_ROOT, 'bin', 'planc.js'), ...args], { encoding: 'utf8', input });

/** A tiny WordLevel tokenizer.json (Hugging Face format) with whitespace pre-tokenization. */
const TINY_HF = {
  version: '1.0',
  added_tokens: [
    { id: 0, content: '</s>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
    { id: 1, content: '<unk>', single_word: false, lstrip: false, rstrip: false, normalized: false, special: true },
  ],
  normalizer: null,
  pre_tokenizer: { type: 'WhitespaceSplit' },
  post_processor: null,
  decoder: null,
  model: { type: 'WordLevel', vocab: { '</s>': 0, '<unk>': 1, hola: 2, mundo: 3, adios: 4 }, unk_token: '<unk>' },
};

/** A tiny synthetic Marian model folder (vocab 101); its config.json removed when `config` is false. */
function tinyModel(name: string, config: boolean): string {
  const out = path.join(tmp, name);
  makeModel({
    arch: 'marian',
    d: 16,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 32,
    vocab: 101,
    maxPos: 64,
    activation: 'relu',
    seed: 3,
    out,
  });
  if (!config) fs.rmSync(path.join(out, 'config.json'));
  return out;
}

test('hf tokenizer.json: encode without special tokens, sources framed by its post-processor, decode drops them', async () => {
  const tok = await loadTokenizer(new TextEncoder().encode(JSON.stringify(TINY_HF)), 'hf');
  assert.is(tok.kind, 'hf');
  assert.equal(tok.encode('hola mundo adios'), [2, 3, 4]);
  assert.equal(tok.encode('hola xyz'), [2, 1]);
  assert.equal(tok.encodeSource('hola mundo'), [2, 3], 'no post-processor: no framing');
  assert.is(tok.decode([2, 3, 0]), 'hola mundo');
  assert.is(tok.decode([]), '');
  assert.equal([tok.tokenId('mundo'), tok.tokenId('nada')], [3, undefined]);
  const framed = {
    ...TINY_HF,
    post_processor: {
      type: 'TemplateProcessing',
      single: [{ Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '</s>', type_id: 0 } }],
      pair: [],
      special_tokens: { '</s>': { id: '</s>', ids: [0], tokens: ['</s>'] } },
    },
  };
  const t2 = await loadTokenizer(new TextEncoder().encode(JSON.stringify(framed)), 'hf');
  assert.equal(t2.encodeSource('hola mundo'), [2, 3, 0]);
  assert.equal(t2.encode('hola mundo'), [2, 3]);
  assert.equal(t2.specialTokens(), ['</s>', '<unk>']);
});

test('unreadable tokenizers are PlancErrors', async () => {
  for (const [bytes, kind] of [
    [new Uint8Array(0), 'spm'],
    [new TextEncoder().encode('{not json'), 'hf'],
  ] as const) {
    try {
      await loadTokenizer(bytes, kind, 'bad-file');
      assert.unreachable('should throw');
    } catch (e) {
      assert.instance(e, PlancError);
      assert.ok((e as PlancError).message.includes('bad-file'));
    }
  }
});

test('validate: tokenizer kind must be "", spm or hf, bytes empty exactly when the kind is ""', () => {
  const model = tinyModel('validate', true);
  const plan = path.join(tmp, 'validate.plan');
  const r = cli([
    'optimize',
    model,
    '-o',
    plan,
    '--quiet',
    '--max-batch',
    '2',
    '--max-src-len',
    '8',
    '--max-tgt-len',
    '8',
  ]);
  assert.is(r.status, 0, r.stderr);
  const h = readPlanFile(plan).header;
  assert.is(h.tokenizerKind, '');
  assert.is(h.tokenizer.length, 0);
  assert.throws(
    () => validateHeader({ ...h, tokenizerKind: 'bpe' as 'hf', tokenizer: new Uint8Array([1]) }, 'x'),
    /unknown tokenizer kind 'bpe'/,
  );
  assert.throws(() => validateHeader({ ...h, tokenizerKind: '', tokenizer: new Uint8Array([1]) }, 'x'), /no kind/);
  assert.throws(
    () => validateHeader({ ...h, tokenizerKind: 'spm', tokenizer: new Uint8Array(0) }, 'x'),
    /no tokenizer bytes/,
  );
  const t = cli(['translate', plan], 'hola\n');
  assert.is(t.status, 2);
  assert.match(t.stderr, /PLANC_E407/);
  assert.ok(t.stderr.includes(plan), t.stderr);
  const ids = cli(['translate', plan, '--ids', '--quiet', '--max-length', '4'], '5 6 0\n7\n');
  assert.is(ids.status, 0, ids.stderr);
  assert.is(readLines(ids.stdout).length, 2);
});

test('seq2seq model without config.json: the error names the missing ids and their options', () => {
  const model = tinyModel('no-config', false);
  const plan = path.join(tmp, 'no-config.plan');
  const r = cli(['optimize', model, '-o', plan, '--quiet']);
  assert.is(r.status, 2);
  assert.match(r.stderr, /PLANC_E011/);
  for (const s of [
    'decoder_start_token_id',
    'eos_token_id',
    'pad_token_id',
    '--decoder-start-id',
    '--eos-id',
    '--pad-id',
  ])
    assert.ok(r.stderr.includes(s), `${s} in ${r.stderr}`);
  const partial = cli(['optimize', model, '-o', plan, '--quiet', '--eos-id', '0']);
  assert.is(partial.status, 2);
  assert.ok(!partial.stderr.includes('--eos-id'), partial.stderr);
  assert.ok(partial.stderr.includes('--pad-id'), partial.stderr);
  const ok = cli([
    'optimize',
    model,
    '-o',
    plan,
    '--quiet',
    '--decoder-start-id',
    '0',
    '--eos-id',
    '0',
    '--pad-id',
    '0',
    '--unk-id',
    '1',
    '--max-batch',
    '2',
    '--max-src-len',
    '8',
    '--max-tgt-len',
    '8',
  ]);
  assert.is(ok.status, 0, ok.stderr);
  const d = readPlanFile(plan).header.decoding;
  assert.equal([d.decoderStartId, d.eosId, d.padId, d.unkId], [0, 0, 0, 1]);
});

test('tokenizer discovery: two candidates are an error naming both; --tokenizer and --no-tokenizer choose', () => {
  const model = tinyModel('two-tokenizers', true);
  fs.writeFileSync(path.join(model, 'tokenizer.json'), JSON.stringify(TINY_HF));
  fs.writeFileSync(path.join(model, 'source.spm'), 'x');
  assert.throws(
    () => findTokenizer(model),
    (e: Error) =>
      e.message.includes('source.spm') && e.message.includes('tokenizer.json') && e.message.includes('--tokenizer'),
  );
  assert.is(findTokenizer(model, path.join(model, 'tokenizer.json'))?.kind, 'hf');
  const plan = path.join(tmp, 'two.plan');
  const r = cli(['optimize', model, '-o', plan, '--quiet']);
  assert.is(r.status, 2);
  assert.match(r.stderr, /PLANC_E010/);
  const chosen = cli([
    'optimize',
    model,
    '-o',
    plan,
    '--quiet',
    '--tokenizer',
    path.join(model, 'tokenizer.json'),
    '--max-batch',
    '2',
    '--max-src-len',
    '8',
    '--max-tgt-len',
    '8',
  ]);
  assert.is(chosen.status, 0, chosen.stderr);
  assert.is(readPlanFile(plan).header.tokenizerKind, 'hf');
  const none = cli([
    'optimize',
    model,
    '-o',
    plan,
    '--quiet',
    '--no-tokenizer',
    '--max-batch',
    '2',
    '--max-src-len',
    '8',
    '--max-tgt-len',
    '8',
  ]);
  assert.is(none.status, 0, none.stderr);
  assert.is(readPlanFile(plan).header.tokenizerKind, '');
});

test('--ids input lines: integers only', () => {
  assert.equal(parseIdLine(' 5  6 0 ', 1), [5, 6, 0]);
  assert.equal(parseIdLine('', 1), []);
  assert.throws(() => parseIdLine('5 x', 3), /line 3: 'x'/);
});

if (!ESEN || !fs.existsSync(ESEN)) {
  skipSuite(test, needsShared('models/es-en'), [
    'es-en: encoding the 1,000 test sentences as sources (X </s>) reproduces test_ids.json exactly',
    'es-en: decode(encode(text)) is the normalized text when no piece is unknown; eos and unk markers',
    'es-en: the plan embeds vocab.esen.spm; inspect shows it; planc translate uses it',
  ]);
} else {
  const spm = fs.readFileSync(path.join(ESEN, 'vocab.esen.spm'));
  const lines = fs.readFileSync(path.join(ESEN, 'test.es'), 'utf8').split('\n').slice(0, 1000);
  const expected: number[][] = JSON.parse(fs.readFileSync(path.join(ESEN, 'test_ids.json'), 'utf8')).src_ids;

  test('es-en: encoding the 1,000 test sentences as sources (X </s>) reproduces test_ids.json exactly', async () => {
    const tok = await loadTokenizer(spm, 'spm', 'vocab.esen.spm', 0);
    assert.is(expected.length, 1000);
    assert.equal([tok.tokenId('</s>'), tok.tokenId('<unk>'), tok.tokenId('no such piece')], [0, 1, undefined]);
    let match = 0;
    const misses: string[] = [];
    lines.forEach((l, i) => {
      const ids = tok.encodeSource(l);
      if (JSON.stringify(ids) === JSON.stringify(expected[i])) match++;
      else if (misses.length < 3) misses.push(`${i}: ${l} → ${ids} (want ${expected[i]})`);
    });
    console.log(`es-en spm: ${match}/1000 sentences match test_ids.json`);
    assert.is(match, 1000, misses.join('\n'));
  });

  /** What SentencePiece's nmt_nfkc normalizer makes of a text: NFKC, runs of spaces as one, no edge spaces. */
  const normalized = (s: string) => s.normalize('NFKC').replace(/ +/g, ' ').trim();

  test('es-en: decode(encode(text)) is the normalized text when no piece is unknown; eos and unk markers', async () => {
    const tok = await loadTokenizer(spm, 'spm');
    let known = 0;
    for (const l of lines) {
      const ids = tok.encode(l);
      if (ids.includes(1)) continue;
      known++;
      assert.is(tok.decode(ids), normalized(l));
      assert.is(tok.decode([...ids, 0]), normalized(l));
    }
    assert.ok(known > 800, `${known} sentences without <unk>`);
    assert.is(tok.decode([1]), ' ⁇ ');
  });

  test('es-en: the plan embeds vocab.esen.spm; inspect shows it; planc translate uses it', async () => {
    const plan = path.join(tmp, 'esen.plan');
    const r = cli([
      'optimize',
      ESEN,
      '-o',
      plan,
      '--quiet',
      '--max-batch',
      '8',
      '--max-src-len',
      '64',
      '--max-tgt-len',
      '32',
    ]);
    assert.is(r.status, 0, r.stderr);
    const h = readPlanFile(plan).header;
    assert.is(h.tokenizerKind, 'spm');
    assert.ok(Buffer.from(h.tokenizer).equals(spm));
    const tok = await loadTokenizer(h.tokenizer, 'spm');
    assert.equal([...tok.encode(lines[0]!), 0], expected[0]);
    const inspect = cli(['inspect', plan]);
    assert.match(inspect.stdout, /tokenizer: spm, 825\.5 kB/);
    const t = cli(['translate', plan, '--max-length', '16'], lines.slice(0, 4).join('\n') + '\n');
    assert.is(t.status, 0, t.stderr);
    assert.is(readLines(t.stdout).length, 4);
    assert.match(t.stderr, /translated 4 sentences in .* sentences\/s, .* tokens\/s/);
    const p = await loadPlan(plan);
    try {
      const texts = await translate(p, lines.slice(0, 4), { maxLength: 16, chunkSize: 3, batchSize: 2 });
      assert.equal(texts, readLines(t.stdout));
      async function* source() {
        for (const l of lines.slice(0, 4)) yield l;
      }
      const streamed: number[] = [];
      for await (const r of translateStream(p, source(), { maxLength: 16, chunkSize: 2 })) {
        streamed.push(r.index);
        assert.is(r.text, texts[r.index]);
      }
      assert.equal(streamed, [0, 1, 2, 3]);
    } finally {
      p.close();
    }
  });
}

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
test.run();
