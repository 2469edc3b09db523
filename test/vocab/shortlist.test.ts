// Lexical shortlists: Marian text and binary forms, CTranslate2 vmaps, the batch union, and the real Bergamot es→en list.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sharedDir } from '../../compiler/paths.ts';
import {
  encodeMarianBinaryShortlist,
  marianChecksum,
  parseMarianBinaryShortlist,
  readMarianBinaryShortlist,
} from '../../compiler/vocab/shortlist-marian-binary.ts';
import { parseMarianTextShortlist } from '../../compiler/vocab/shortlist-marian-text.ts';
import { readShortlist, sniffFormat } from '../../compiler/vocab/shortlist-read.ts';
import { parseVmap } from '../../compiler/vocab/shortlist-vmap.ts';
import {
  defaultLimits,
  pieceLookup,
  shortlistFor,
  shortlistStats,
  translations,
} from '../../compiler/vocab/shortlist.ts';
import { loadTokenizer } from '../../runtime/tokenizer/tokenizer.ts';
import { readSpmPieces } from '../../scripts/spm-pieces.ts';
import { failsWith } from '../helpers/expect-error.ts';
import { needsShared, skipSuite } from '../helpers/skip.ts';

// ids: </s> 0, <unk> 1, a 2, b 3, c 4, x 5, y 6, z 7
const VOCAB = pieceLookup(['</s>', '<unk>', 'a', 'b', 'c', 'x', 'y', 'z']);
const TEXT = [
  'x a 0.5',
  'y a 0.3',
  'z a 0.7',
  'NULL a 0.1', // NULL: skipped
  'x\tb\t0.9', // tabs separate fields too
  'q a 0.2', // q is not in the vocabulary: skipped
  'y a 0.4', // repeated pair: the last probability wins
  'x c 0', // probability 0: pruned as in Marian
  '',
].join('\n');
const VMAP = ['\t</s> x', 'a\ty z', 'a b\tc', 'b\tq x', 'c q\tx', ''].join('\n');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-shortlist-'));
const write = (name: string, bytes: Uint8Array | string) => {
  const p = path.join(tmp, name);
  fs.writeFileSync(p, bytes);
  return p;
};
const textList = () => parseMarianTextShortlist(TEXT, 'lex.txt', { ...VOCAB });
const ids = (a: ArrayLike<number>) => Array.from(a);

test('Marian text: lists by source id, most probable first, NULL/unknown/zero entries skipped', () => {
  const l = textList();
  assert.is(l.format, 'marian-text');
  assert.equal(ids(translations(l, 2).ids), [7, 5, 6]);
  assert.equal(
    ids(translations(l, 2).probs!).map((p) => +p.toFixed(3)),
    [0.7, 0.5, 0.4],
  );
  assert.equal(ids(translations(l, 3).ids), [5]);
  assert.equal(ids(translations(l, 4).ids), []);
  assert.equal(ids(translations(l, 99).ids), []);
  assert.is(l.skipped, 3);
  assert.equal(ids(l.frequent), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.equal(defaultLimits(l), { first: 100, best: 100 });
  assert.equal(shortlistStats(l), { sourceIds: 4, sourcesWithList: 2, entries: 4, meanLength: 2, maxLength: 3 });
});

test('shortlistFor: first frequent + best translations of each source token + specials, sorted unique', () => {
  const l = textList();
  assert.equal(ids(shortlistFor(l, [[2], [3, 3]], 2, 2, [0])), [0, 1, 5, 7]);
  assert.equal(ids(shortlistFor(l, [[2], [3]], 2, Infinity, [0])), [0, 1, 5, 6, 7]);
  assert.equal(ids(shortlistFor(l, [[2, 3]], 0, 1, [4])), [4, 5, 7]);
  assert.equal(ids(shortlistFor(l, [[2, 3]], 2, 2, [0], { includeSource: true })), [0, 1, 2, 3, 5, 7]);
  assert.equal(ids(shortlistFor(l, [[], [42, -1]], 1, 5, [])), [0], 'unknown source ids add nothing');
  assert.equal(ids(shortlistFor(l, [], 3, 5, [11])), [0, 1, 2, 11], 'specials beyond the lists still count');
});

test('Marian text: malformed input is PLANC_E501 naming the file and line', () => {
  failsWith(
    () => parseMarianTextShortlist('x a 0.5\nx a\n', 'bad.txt', VOCAB),
    'PLANC_E501',
    /line 2.*got 2 fields.*file bad\.txt/,
  );
  failsWith(
    () => parseMarianTextShortlist('x a zero\n', 'bad.txt', VOCAB),
    'PLANC_E501',
    'line 1: bad probability "zero"',
  );
  failsWith(() => parseMarianTextShortlist('\n\n', 'empty.txt', VOCAB), 'PLANC_E501', 'no entries');
});

test('Marian binary: encode → parse round trip keeps the best lists (in id order) and the header', () => {
  const bytes = encodeMarianBinaryShortlist(textList(), 2, 2);
  const l = parseMarianBinaryShortlist(bytes, 'lex.bin');
  assert.is(l.format, 'marian-binary');
  assert.is(l.probs, null);
  assert.equal([l.firstNum, l.bestNum], [2, 2]);
  assert.equal(ids(translations(l, 2).ids), [5, 7]);
  assert.equal(ids(translations(l, 3).ids), [5]);
  assert.equal(ids(l.frequent), [0, 1]);
  assert.equal(defaultLimits(l), { first: 2, best: 2 });
  assert.equal(ids(shortlistFor(l, [[2, 3]], 2, 1, [0])), [0, 1, 5, 7], 'binary lists are used whole');
  assert.equal(ids(parseMarianBinaryShortlist(bytes, 'lex.bin', { vocabSize: 8 }).frequent), [0, 1, 2, 3, 4, 5, 6, 7]);
});

test("Marian binary: the checksum skips a trailing half word, as Marian's hashMem<uint64_t> does", () => {
  const one = parseMarianTextShortlist('x a 1\n', 'one.txt', VOCAB);
  const bytes = encodeMarianBinaryShortlist(one, 1, 1);
  assert.is((bytes.length - 16) % 8, 4);
  const l = parseMarianBinaryShortlist(bytes, 'one.bin');
  assert.equal(ids(translations(l, 2).ids), [5]);
  bytes[bytes.length - 1] = 9; // the uncovered half word: the checksum cannot see it, the bounds check can
  failsWith(
    () => parseMarianBinaryShortlist(bytes, 'one.bin', { vocabSize: 8 }),
    'PLANC_E501',
    'outside the target vocabulary',
  );
});

test('Marian binary: corrupt, truncated and foreign files are PLANC_E501 naming the file and the fault', () => {
  const good = encodeMarianBinaryShortlist(textList(), 2, 2);
  const flipped = good.slice();
  flipped[good.length - 8]! ^= 1;
  failsWith(
    () => parseMarianBinaryShortlist(flipped, 'f.bin'),
    'PLANC_E501',
    /checksum mismatch.*corrupt.*file f\.bin/,
  );
  failsWith(
    () => parseMarianBinaryShortlist(good.subarray(0, good.length - 4), 't.bin'),
    'PLANC_E501',
    'truncated or corrupt',
  );
  failsWith(() => parseMarianBinaryShortlist(good.subarray(0, 20), 's.bin'), 'PLANC_E501', 'too short for its header');
  failsWith(
    () => parseMarianBinaryShortlist(new TextEncoder().encode(TEXT), 'x.bin'),
    'PLANC_E501',
    'not a binary shortlist',
  );
  const badOffsets = good.slice();
  new DataView(badOffsets.buffer).setBigUint64(48 + 8, 99n, true);
  new DataView(badOffsets.buffer).setBigUint64(8, marianChecksum(badOffsets), true);
  failsWith(() => parseMarianBinaryShortlist(badOffsets, 'o.bin'), 'PLANC_E501', 'out of order');
  failsWith(() => readMarianBinaryShortlist(path.join(tmp, 'missing.bin')), 'PLANC_E006', 'not found');
});

test('CTranslate2 vmap: unigram lists, n-gram keys, the empty key as always-included candidates', () => {
  const l = parseVmap(VMAP, 'map.txt', VOCAB);
  assert.is(l.format, 'ctranslate2-vmap');
  assert.equal(ids(l.frequent), [0, 5]);
  assert.equal(ids(translations(l, 2).ids), [6, 7]);
  assert.equal(ids(translations(l, 3).ids), [5]);
  assert.is(l.maxNgram, 2);
  assert.equal(ids(l.ngrams.get('2 3')!), [4]);
  assert.is(l.skipped, 2, 'unknown target q and the key with q');
  assert.equal(ids(shortlistFor(l, [[2, 3]], Infinity, Infinity, [])), [0, 4, 5, 6, 7]);
  assert.equal(ids(shortlistFor(l, [[3, 2]], Infinity, Infinity, [])), [0, 5, 6, 7], 'the bigram must occur in order');
  failsWith(() => parseVmap('a y z\n', 'nt.txt', VOCAB), 'PLANC_E501', 'line 1: no tab');
});

test('readShortlist tells the forms apart by content', () => {
  const t = write('lex.s2t', TEXT);
  const b = write('lex.s2t.bin', encodeMarianBinaryShortlist(textList(), 2, 2));
  const v = write('vmap.txt', VMAP);
  assert.is(sniffFormat(fs.readFileSync(t)), 'marian-text');
  assert.is(sniffFormat(fs.readFileSync(b)), 'marian-binary');
  assert.is(sniffFormat(fs.readFileSync(v)), 'ctranslate2-vmap');
  assert.is(readShortlist(t, VOCAB).format, 'marian-text');
  assert.is(readShortlist(b, { vocabSize: 8 }).format, 'marian-binary');
  assert.is(readShortlist(v, VOCAB).format, 'ctranslate2-vmap');
  failsWith(() => readShortlist(t, {}), 'PLANC_E501', "needs the model's vocabulary");
  failsWith(() => readShortlist(v, { ...VOCAB, vocabSize: 6 }), 'PLANC_E501', 'target id 7 is outside');
  failsWith(() => readShortlist(write('empty', '')), 'PLANC_E501', 'empty');
  failsWith(() => readShortlist(path.join(tmp, 'nope')), 'PLANC_E006', 'not found');
});

const shared = sharedDir();
const ESEN = shared && path.join(shared, 'models', 'es-en');
if (!ESEN || !fs.existsSync(path.join(ESEN, 'lex.50.50.esen.s2t.bin'))) {
  skipSuite(test, needsShared('models/es-en'), [
    'the real Bergamot es→en shortlist loads, verifies, and shortlists test batches',
  ]);
} else {
  test('the real Bergamot es→en shortlist loads, verifies, and shortlists test batches', async () => {
    const pieces = readSpmPieces(path.join(ESEN, 'vocab.esen.spm'));
    const vocab = pieceLookup(pieces);
    const l = readShortlist(path.join(ESEN, 'lex.50.50.esen.s2t.bin'), vocab);
    const stats = shortlistStats(l);
    assert.is(l.format, 'marian-binary');
    assert.equal([l.firstNum, l.bestNum, stats.sourceIds, stats.entries], [50, 50, 32000, 901208]);
    assert.ok(stats.maxLength <= 50);
    const house = translations(l, vocab.pieceToId('▁casa')!).ids;
    assert.ok(house.includes(vocab.pieceToId('▁house')!), '▁casa → ▁house');

    const spm = await loadTokenizer(fs.readFileSync(path.join(ESEN, 'vocab.esen.spm')), 'spm', 'vocab.esen.spm');
    const lines = fs
      .readFileSync(path.join(ESEN, 'test.es'), 'utf8')
      .split('\n')
      .filter((s) => s.length > 0);
    const sources = lines.map((s) => [...spm.encode(s), 0]);
    const want = JSON.parse(fs.readFileSync(path.join(ESEN, 'test_ids.json'), 'utf8')).src_ids as number[][];
    assert.equal(sources[0], want[0], 'the plan tokenizer gives the reference ids');
    const { first, best } = defaultLimits(l);
    const sizes = (batch: number) => {
      const out: number[] = [];
      for (let i = 0; i < sources.length; i += batch)
        out.push(shortlistFor(l, sources.slice(i, i + batch), first, best, [0, 1]).length);
      return out;
    };
    const mean = (a: number[]) => a.reduce((s, v) => s + v, 0) / a.length;
    const one = sizes(1),
      b32 = sizes(32);
    assert.ok(Math.min(...one) >= 50 && Math.max(...b32) < 32000);
    console.log(
      `  es-en shortlist: ${stats.sourceIds} source ids (${stats.sourcesWithList} with a list), mean list ` +
        `${stats.meanLength.toFixed(1)}, ${stats.entries} entries; ${sources.length} test sentences: ` +
        `batch 1 mean ${mean(one).toFixed(0)} (${(mean(one) / 320).toFixed(1)}% of 32000), batch 32 mean ` +
        `${mean(b32).toFixed(0)} (${(mean(b32) / 320).toFixed(1)}%), first batch of 32 ${b32[0]}`,
    );
  });
}

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test.run();
