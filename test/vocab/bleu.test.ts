// Corpus BLEU against sacreBLEU's own test values (test/test_bleu.py) and hand-computed cases; the 13a tokenizer.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { sharedDir } from '../../compiler/paths.ts';
import { computeBleu, corpusBleu, formatBleu, tokenize13a } from '../../compiler/vocab/bleu.ts';
import { failsWith } from '../helpers/expect-error.ts';
import { needsShared, skipSuite } from '../helpers/skip.ts';

const close = (got: number, want: number, eps = 1e-6) => assert.ok(Math.abs(got - want) < eps, `${got} vs ${want}`);

// sacreBLEU's README example: three hypotheses, two reference streams.
const REFS = [
  ['The dog bit the man.', 'It was not unexpected.', 'The man bit him first.'],
  ['The dog had bit the man.', 'No one was surprised.', 'The man had bitten the dog.'],
];
const HYPS = ['The dog bit the man.', "It wasn't surprising.", 'The man had just bitten him.'];

test('tokenize13a splits punctuation like mteval-v13a, keeping decimals, thousands and inner hyphens', () => {
  assert.is(tokenize13a('The dog bit the man.'), 'The dog bit the man .');
  assert.is(tokenize13a("It wasn't surprising."), "It wasn't surprising .");
  assert.is(tokenize13a('Pi is 3.14, or 3,141.59 - about; see (x)!'), 'Pi is 3.14 , or 3,141.59 - about ; see ( x ) !');
  assert.is(tokenize13a('state-of-the-art 1990-2000 a.b'), 'state-of-the-art 1990 - 2000 a . b');
  assert.is(tokenize13a('&quot;A&quot; &amp; <skipped>B&lt;C&gt;'), '" A " & B < C >');
  assert.is(tokenize13a('  many   spaces\there  '), 'many spaces here');
  assert.is(tokenize13a('a$b%c#d@e'), 'a $ b % c # d @ e');
});

test("corpus BLEU matches sacreBLEU's test values (13a/exp, none tokenizer, no smoothing, empty hypotheses)", () => {
  close(corpusBleu(HYPS, REFS).score, 48.530827);
  close(corpusBleu(HYPS, REFS, { tokenize: '13a' }).score, 48.530827);
  close(corpusBleu(HYPS, REFS, { tokenize: 'none' }).score, 49.1919566);
  close(corpusBleu(HYPS, REFS, { smooth: 'none' }).score, 48.530827);
  assert.is(corpusBleu(['', '', ''], REFS).score, 0);
});

test('computeBleu from statistics matches sacreBLEU (test_scoring, degenerate statistics)', () => {
  close(computeBleu([9, 7, 5, 3], [10, 8, 6, 4], 11, 11).score / 100, 0.8375922397, 1e-9);
  assert.is(computeBleu([0, 0, 0, 0], [4, 4, 2, 1], 0, 1, { smooth: 'floor', smoothValue: 0 }).score, 0);
  assert.is(computeBleu([6, 5, 4, 0], [6, 5, 4, 3], 6, 6, { smooth: 'floor', smoothValue: 0 }).score, 0);
  assert.is(computeBleu([0, 0, 0, 0], [0, 0, 0, 0], 0, 0).score, 0);
});

// sacrebleu.raw_corpus_bleu = tokenize 'none', smoothing 'floor', effective order.
const raw = (h: string[], r: string[], floor = 0.1) =>
  corpusBleu(h, r, { tokenize: 'none', smooth: 'floor', smoothValue: floor, effectiveOrder: true }).score / 100;

test('raw corpus BLEU cases of sacreBLEU (floor smoothing, effective order, statistics)', () => {
  // No match at all: 0 since sacreBLEU's early stop (#141); its older test value was 0.003799178428257963.
  assert.is(raw(['this is a test', 'another test'], ['ref1', 'ref2'], 0.01), 0);
  close(raw(['this is a test'], ['this is a test'], 0.01), 1, 1e-12);
  close(raw(['this is a fest'], ['this is a test'], 0.01), 0.223606797749979, 1e-8);
  close(raw(['test'], ['a test'], 0.01), 0.3678794411714425, 1e-8);
  close(raw(['a little test'], ['a test'], 0.01), 0.03218297948685433, 1e-8);
  close(raw(['am I am a character sequence'], ['I am a symbol string sequence a a']), 0.1555722182, 1e-8);
  assert.is(raw(['am I am a character sequence'], ['I am a symbol string sequence a a'], 0), 0);
  const s = corpusBleu(['am I am a character sequence'], ['I am a symbol string sequence a a'], { tokenize: 'none' });
  assert.equal(
    [s.counts, s.totals],
    [
      [4, 2, 1, 0],
      [6, 5, 4, 3],
    ],
  );
});

// Hand-computed: hyp "the cat sat on the mat" (6 words) vs ref "the cat sat on a mat" (6): matches 5/6, 3/5, 2/4, 1/3;
// BP 1; BLEU = (5/6 · 3/5 · 2/4 · 1/3)^(1/4) = (1/12)^(1/4).
test('a hand-computed case, clipping and the brevity penalty', () => {
  const s = corpusBleu(['the cat sat on the mat'], ['the cat sat on a mat']);
  assert.equal([s.counts, s.totals, s.sysLen, s.refLen, s.bp], [[5, 3, 2, 1], [6, 5, 4, 3], 6, 6, 1]);
  close(s.score, 100 * (1 / 12) ** 0.25, 1e-9);
  const clip = corpusBleu(['the the the the'], ['the cat']); // unigram 'the' clipped to 1 of 4; no bigram match
  assert.equal([clip.counts[0], clip.totals[0]], [1, 4]);
  const short = corpusBleu(['the cat'], ['the cat sat on the mat']); // BP = exp(1 − 6/2)
  close(short.bp, Math.exp(-2), 1e-12);
  assert.ok(
    formatBleu(s).startsWith('BLEU = 53.73 83.3/60.0/50.0/33.3 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)'),
  );
});

test('a single reference stream may be given as plain strings; mismatched lengths are PLANC_E501', () => {
  close(corpusBleu(HYPS, REFS[0]!).score, corpusBleu(HYPS, [REFS[0]!]).score, 1e-12);
  failsWith(() => corpusBleu(HYPS, ['a', 'b']), 'PLANC_E501', 'reference stream 1 has 2 lines, the hypotheses 3');
  failsWith(() => corpusBleu(HYPS, []), 'PLANC_E501', 'no reference stream');
});

// Values from sacreBLEU 2.6.0 (corpus_bleu(hyp, [ref]) and tokenize='none') on the same perturbed es-en test set.
const shared = sharedDir();
const TEST_EN = shared && path.join(shared, 'models', 'es-en', 'test.en');
if (!TEST_EN || !fs.existsSync(TEST_EN)) {
  skipSuite(test, needsShared('models/es-en'), [
    '1000 real sentences: identical to sacreBLEU 2.6.0 (statistics and score)',
  ]);
} else {
  test('1000 real sentences: identical to sacreBLEU 2.6.0 (statistics and score)', () => {
    const ref = fs.readFileSync(TEST_EN, 'utf8').split('\n').slice(0, 1000);
    const hyp = ref.map((s, i) => {
      const w = s.split(' ').filter((_, k) => (k + i) % 7 !== 3);
      if (i % 5 === 0 && w.length > 3) [w[0], w[1]] = [w[1]!, w[0]!];
      return w.join(' ');
    });
    const b = corpusBleu(hyp, ref);
    assert.equal(
      [b.counts, b.totals, b.sysLen, b.refLen],
      [[6363, 4570, 3226, 2222], [6363, 5378, 4505, 3797], 6363, 7414],
    );
    close(b.score, 65.4874526818976, 1e-9);
    const none = corpusBleu(hyp, ref, { tokenize: 'none' });
    assert.equal([none.counts, none.sysLen, none.refLen], [[5345, 3551, 2313, 1449], 5345, 6240]);
    close(none.score, 61.00777289040707, 1e-9);
  });
}

test.run();
