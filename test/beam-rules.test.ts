// planc's beam search rules (runtime/decode/beam-rules.ts + beam.ts topCandidates) against the reference transliterated
// from transformers' _beam_search (test/reference/beam.ts beamSearch), on a synthetic model: every early_stopping value.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { beamSearch, type BeamOptions } from './reference/beam.ts';
import { rng } from './reference/rng.ts';
import { Tensor } from '../compiler/tensor.ts';
import { advance, byScore, newSearch, type BeamRules, type Cand, type Finished } from '../runtime/decode/beam-rules.ts';
import { topCandidates } from '../runtime/decode/beam.ts';
import { DecodingRules } from '../runtime/decode/conventions.ts';
import type { RtTensor } from '../runtime/tensor.ts';

const V = 12;

/** A synthetic decoder: next-token logits (float32) as a pseudo-random function of the prefix; eos grows likelier. */
function model(seed: number, eos: number[]): (prefix: readonly number[]) => Float32Array {
  return (prefix) => {
    let h = seed;
    for (const t of prefix) h = Math.imul(h ^ (t + 0x9e37), 0x85ebca6b) >>> 0;
    const r = rng(h ^ (prefix.length * 0x27d4eb2f));
    const x = Float32Array.from({ length: V }, () => 4 * r() - 2);
    for (const e of eos) x[e] = x[e]! + 0.4 * prefix.length - 1.5;
    return x;
  };
}

/** planc's per-sentence loop of runtime/decode/beam.ts beamSteps, over the synthetic model. */
function plancSearch(next: (p: readonly number[]) => Float32Array, o: BeamOptions, b: BeamRules): Finished[] {
  const rules = new DecodingRules(o);
  const s = newSearch(0);
  for (let t = 0; !s.done; t++) {
    s.live.forEach((x, i) => (x.row = i));
    const forced = rules.forced(t, t + 1 >= o.maxLength);
    const data = new Float32Array(s.live.length * V);
    s.live.forEach((x, i) => data.set(next(x.ids), i * V));
    const out: Record<string, RtTensor> = { logits: { dtype: 'float32', dims: [s.live.length, 1, V], data } };
    const cands: Cand[] =
      forced !== undefined
        ? s.live.map((x) => ({ score: x.logProb, row: x.row, tok: forced })).sort(byScore)
        : topCandidates(
            out,
            s.live.map((x) => x.row),
            s.live.map((x) => x.logProb),
            rules.candidates(b.k),
            s.live.map((x) => rules.banned(x.ids, o.source)),
            rules.penalty,
            s.live.map((x) => rules.seen(x.ids)),
          );
    advance(s, cands, new Map(s.live.map((x) => [x.row, x])), b, (tok) => rules.isEos(tok), t, o.maxLength);
  }
  return s.finished;
}

function referenceSearch(next: (p: readonly number[]) => Float32Array, o: BeamOptions) {
  return beamSearch(async (_t, running) => {
    const values = new Float32Array(running.length * V);
    running.forEach((seq, i) => values.set(next(seq), i * V));
    return Tensor.fromNumbers('float32', [running.length, 1, V], values);
  }, o);
}

for (const earlyStopping of [true, false, 'never'] as const) {
  test(`early_stopping ${earlyStopping}: planc's beam search equals the reference on 150 synthetic searches (k 2-4, length and repetition penalties, forced tokens, min_new_tokens, no_repeat_ngram_size, encoder_no_repeat_ngram_size, bad words, two eos ids)`, async () => {
    const pick = rng(earlyStopping === true ? 1 : earlyStopping === false ? 2 : 3);
    const choose = <T>(xs: readonly T[]): T => xs[Math.floor(pick() * xs.length)]!;
    let longer = 0;
    for (let i = 0; i < 150; i++) {
      const eosIds = choose([[0], [0], [0, 1]]);
      const o: BeamOptions = {
        startId: 11,
        eosId: eosIds[0]!,
        padId: 11,
        eosIds,
        beamSize: choose([2, 3, 4]),
        maxLength: choose([3, 6, 9, 14]),
        lengthPenalty: choose([1, 1, 0, 2, -0.5]),
        earlyStopping,
        ...(pick() < 0.3 ? { forcedBosId: 5 } : {}),
        ...(pick() < 0.3 ? { forcedEosId: 0 } : {}),
        ...(pick() < 0.3 ? { minNewTokens: 2 } : {}),
        ...(pick() < 0.2 ? { badWords: [[7], [3, 4]] } : {}),
        ...(pick() < 0.3 ? { noRepeatNgramSize: choose([1, 2, 3]) } : {}),
        ...(pick() < 0.3
          ? {
              encoderNoRepeatNgramSize: choose([1, 2, 3]),
              source: Array.from({ length: 6 }, () => Math.floor(pick() * V)),
            }
          : {}),
        ...(pick() < 0.3 ? { repetitionPenalty: choose([1.3, 0.7]) } : {}),
      };
      const next = model(i * 7919 + 13, eosIds);
      const want = await referenceSearch(next, o);
      const got = plancSearch(next, o, { k: o.beamSize, alpha: o.lengthPenalty, earlyStopping });
      const what = `case ${i} ${JSON.stringify(o)}`;
      assert.equal(
        got.map((h) => h.ids),
        want.map((h) => h.ids),
        what,
      );
      got.forEach((h, j) =>
        assert.ok(
          Math.abs(h.score - want[j]!.score) < 1e-9,
          `${what}: hypothesis ${j} score ${h.score} vs ${want[j]!.score}`,
        ),
      );
      if (Math.max(...want.map((h) => h.ids.length)) > Math.min(...want.map((h) => h.ids.length))) longer++;
    }
    assert.ok(longer > 30, `the cases end at varied lengths (${longer})`);
  });
}

/** transformers' _get_ngrams / _calc_banned_ngram_tokens over input_ids = [start, ...generated], transliterated. */
function bannedNgrams(n: number, inputIds: number[]): number[] {
  const curLen = inputIds.length;
  if (curLen + 1 < n) return [];
  const ngrams = new Map<string, number[]>();
  for (let i = 0; i + n <= inputIds.length; i++) {
    const key = inputIds.slice(i, i + n - 1).join();
    ngrams.set(key, [...(ngrams.get(key) ?? []), inputIds[i + n - 1]!]);
  }
  return ngrams.get(inputIds.slice(curLen + 1 - n, curLen).join()) ?? [];
}

test('no_repeat_ngram_size bans what NoRepeatNGramLogitsProcessor bans (the decoder start counts), at every n and step', () => {
  const r = rng(5);
  for (let c = 0; c < 400; c++) {
    const n = 1 + Math.floor(r() * 4);
    const gen = Array.from({ length: Math.floor(r() * 12) }, () => Math.floor(r() * 4));
    const rules = new DecodingRules({ startId: 3, eosId: 0, padId: 3, noRepeatNgramSize: n });
    assert.equal(
      [...rules.banned(gen)].sort(),
      [...new Set(bannedNgrams(n, [3, ...gen]))].sort(),
      `n ${n} after ${gen.join(' ')}`,
    );
  }
});

test('the rules decide differently: true stops at k finished, false and never search on while a running beam can win', async () => {
  // a case where the three rules give three different best hypotheses (found by scanning seeds)
  const o = (earlyStopping: boolean | 'never'): BeamOptions => ({
    startId: 11,
    eosId: 0,
    padId: 11,
    beamSize: 2,
    maxLength: 14,
    lengthPenalty: 1,
    earlyStopping,
  });
  let differs = 0;
  for (let seed = 0; seed < 60; seed++) {
    const next = model(seed * 31 + 1, [0]);
    const best = await Promise.all(
      ([true, false, 'never'] as const).map(async (e) => (await referenceSearch(next, o(e)))[0]!.ids.join()),
    );
    if (best[0] !== best[1] || best[1] !== best[2]) differs++;
  }
  assert.ok(differs > 0, 'some synthetic search depends on early_stopping');
});

test('advance: an eos beyond the first k ranks neither finishes nor runs on; the last step finishes only the first k', () => {
  const s = newSearch(0);
  const rows = new Map(s.live.map((x) => [x.row, x]));
  const isEos = (t: number) => t === 0;
  advance(
    s,
    [
      { score: -1, row: 0, tok: 4 },
      { score: -2, row: 0, tok: 5 },
      { score: -3, row: 0, tok: 0 },
      { score: -4, row: 0, tok: 6 },
    ],
    rows,
    { k: 2, alpha: 1, earlyStopping: false },
    isEos,
    0,
    5,
  );
  assert.equal([s.finished.length, s.live.map((x) => x.ids)], [0, [[4], [5]]]);
  const last = newSearch(0);
  advance(
    last,
    [
      { score: -1, row: 0, tok: 4 },
      { score: -2, row: 0, tok: 0 },
      { score: -3, row: 0, tok: 6 },
    ],
    new Map(last.live.map((x) => [x.row, x])),
    { k: 2, alpha: 1, earlyStopping: false },
    isEos,
    0,
    1,
  );
  assert.equal(
    last.finished.map((h) => [h.ids, h.length]),
    [
      [[4], 1],
      [[], 1],
    ],
  );
  assert.ok(last.done);
});

test.run();
