// Sampling (generate()'s do_sample, temperature, top_k, top_p; runtime/decode/sampling.ts): the sampler's frequencies
// against the exact distribution, seeds, batch independence, greedy limits, option errors, top-k plans, plan defaults.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { validateDecodingOptions } from '../runtime/decode/options.ts';
import { mix64, RandomStream } from '../runtime/decode/random.ts';
import { sampleRow, type Warpers } from '../runtime/decode/sampling.ts';
import { checkSampling } from '../runtime/decode/sampling-check.ts';
import { Scheduler } from '../runtime/decode/scheduler.ts';
import { planDefaults, planRules, translateIds } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { translateIdsStream } from '../runtime/translate.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { failsWith, rejected, thrown } from './helpers/expect-error.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, testIf } from './helpers/skip.ts';

// ---- the exact distribution, written here from transformers 4.57's warpers over a full row (-inf = removed) ----

/** TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper (min_tokens_to_keep 1), softmax: one probability per token. */
function reference(logits: number[], w: Warpers, banned: number[] = []): number[] {
  let s = logits.map((x, t) => (banned.includes(t) ? -Infinity : x));
  if (w.temperature !== 1) s = s.map((x) => x / w.temperature);
  if (w.topK > 0) {
    const kth = [...s].sort((a, b) => b - a)[Math.min(w.topK, s.length) - 1]!;
    s = s.map((x) => (x < kth ? -Infinity : x));
  }
  if (w.topP < 1) {
    const order = s.map((_, t) => t).sort((a, b) => s[a]! - s[b]! || b - a); // ascending; among ties the higher id first
    const p = softmax(order.map((t) => s[t]!));
    let cum = 0;
    const remove = p.map((q) => (cum += q) <= 1 - w.topP);
    remove[remove.length - 1] = false;
    order.forEach((t, i) => {
      if (remove[i]) s[t] = -Infinity;
    });
  }
  return softmax(s);
}

function softmax(s: number[]): number[] {
  const m = Math.max(...s);
  const e = s.map((x) => (x === -Infinity ? 0 : Math.exp(x - m)));
  const z = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / z);
}

/** Pearson's chi-square of observed counts against probabilities (tokens of probability 0 must never be drawn: Infinity). */
function chiSquare(counts: number[], probs: number[], n: number): { chi2: number; df: number } {
  let chi2 = 0;
  let df = -1;
  counts.forEach((c, t) => {
    const e = probs[t]! * n;
    if (e === 0) {
      if (c > 0) chi2 = Infinity;
      return;
    }
    chi2 += (c - e) ** 2 / e;
    df++;
  });
  return { chi2, df };
}

/** The chi-square quantile at p = 0.9999 (Wilson–Hilferty; z = 3.719): a correct sampler exceeds it once in 10,000 runs. */
const critical = (df: number) => df * (1 - 2 / (9 * df) + 3.719 * Math.sqrt(2 / (9 * df))) ** 3;

const LOGITS = [2.1, -0.4, 1.7, 0.3, 2.1, -1.5, 0.9, 1.2, -0.2, 0.6, 3.0, -2.5];
const rng = (seed: number) => {
  const st = new RandomStream(seed, 1 << 20);
  return () => st.next();
};
const row = (x: number[]): Record<string, RtTensor> => ({
  logits: { dtype: 'float32', dims: [1, 1, x.length], data: Float32Array.from(x) } as RtTensor,
});
const NO_SEEN = () => new Set<number>();

/** n draws of sampleRow over one row: the counts per token. */
function drawCounts(out: Record<string, RtTensor>, w: Warpers, banned: number[], n: number, seed: number): number[] {
  const counts = new Array<number>(LOGITS.length).fill(0);
  const stream = new RandomStream(seed, 0);
  for (let i = 0; i < n; i++) counts[sampleRow(out, 0, w, new Set(banned), NO_SEEN, 1, stream.next()).tok]!++;
  return counts;
}

const CASES: { w: Warpers; banned: number[]; wrong: Warpers }[] = [
  { w: { temperature: 1, topK: 0, topP: 1 }, banned: [], wrong: { temperature: 1.3, topK: 0, topP: 1 } },
  { w: { temperature: 0.7, topK: 5, topP: 1 }, banned: [10], wrong: { temperature: 0.7, topK: 6, topP: 1 } },
  { w: { temperature: 1.5, topK: 0, topP: 0.8 }, banned: [], wrong: { temperature: 1.5, topK: 0, topP: 0.9 } },
  { w: { temperature: 0.9, topK: 8, topP: 0.75 }, banned: [2], wrong: { temperature: 1, topK: 8, topP: 0.75 } },
  { w: { temperature: 2, topK: 2, topP: 1 }, banned: [], wrong: { temperature: 2, topK: 1, topP: 1 } }, // 2.1 twice: top_k 2 keeps 3 tokens
  { w: { temperature: 2, topK: 3, topP: 0.5 }, banned: [], wrong: { temperature: 2, topK: 0, topP: 0.5 } },
];

test('the sampler draws from the exact warped distribution (chi-square at p 0.9999, 200,000 draws per case), and the same check fails against a wrong one', () => {
  const n = 200_000;
  for (const [i, c] of CASES.entries()) {
    const counts = drawCounts(row(LOGITS), c.w, c.banned, n, 100 + i);
    const right = chiSquare(counts, reference(LOGITS, c.w, c.banned), n);
    assert.ok(
      right.chi2 < critical(right.df),
      `case ${i} ${JSON.stringify(c.w)}: chi2 ${right.chi2.toFixed(1)} over ${critical(right.df).toFixed(1)} (df ${right.df})`,
    );
    const wrong = chiSquare(counts, reference(LOGITS, c.wrong, c.banned), n);
    assert.ok(
      !(wrong.chi2 < critical(wrong.df)),
      `case ${i}: the check must reject ${JSON.stringify(c.wrong)} (chi2 ${wrong.chi2.toFixed(1)})`,
    );
    // and the largest frequency error is within 5 standard deviations of a binomial count
    const p = reference(LOGITS, c.w, c.banned);
    counts.forEach((k, t) =>
      assert.ok(
        Math.abs(k / n - p[t]!) <= 5 * Math.sqrt((p[t]! * (1 - p[t]!)) / n) + 1e-12,
        `case ${i} token ${t}: ${k / n} vs ${p[t]}`,
      ),
    );
  }
});

/** chiSquare with the tokens of expected count < 5 merged into one bin (so that the statistic holds on long rows). */
function binnedChiSquare(counts: number[], probs: number[], n: number): { chi2: number; df: number } {
  const c: number[] = [];
  const p: number[] = [];
  let rc = 0;
  let rp = 0;
  counts.forEach((k, t) => {
    if (probs[t]! * n >= 5 || probs[t] === 0) {
      c.push(k);
      p.push(probs[t]!);
    } else {
      rc += k;
      rp += probs[t]!;
    }
  });
  if (rp > 0) {
    c.push(rc);
    p.push(rp);
  }
  return chiSquare(c, p, n);
}

test('long rows (600 tokens): the one-pass draw, with a top_k floor, and the bucketed top_p search (ties in the crossing bucket too) all draw the exact distribution (100,000 draws each)', () => {
  const r = rng(17);
  // a peaked row (12 high scores, a tail of 588 low ones), a flat one, and one of 5 values (ties across top_p's cut)
  const peaked = [...LOGITS.map((x) => x + 8), ...Array.from({ length: 588 }, () => -3 * r())];
  const flat = Array.from({ length: 600 }, () => 2 * r() - 1);
  const steps = flat.map((x) => Math.round(x * 2) / 2);
  const cases: { x: number[]; w: Warpers; banned: number[]; wrong: Warpers }[] = [
    {
      x: flat,
      w: { temperature: 1, topK: 0, topP: 1 },
      banned: [3, 599],
      wrong: { temperature: 1.2, topK: 0, topP: 1 },
    },
    {
      x: flat,
      w: { temperature: 0.7, topK: 300, topP: 1 },
      banned: [],
      wrong: { temperature: 0.7, topK: 330, topP: 1 },
    },
    { x: flat, w: { temperature: 1, topK: 0, topP: 0.5 }, banned: [], wrong: { temperature: 1, topK: 0, topP: 0.6 } },
    {
      x: flat,
      w: { temperature: 1, topK: 300, topP: 0.95 },
      banned: [7],
      wrong: { temperature: 1, topK: 300, topP: 0.85 },
    },
    {
      x: peaked,
      w: { temperature: 1, topK: 0, topP: 0.9 },
      banned: [10],
      wrong: { temperature: 1, topK: 0, topP: 0.7 },
    },
    { x: peaked, w: { temperature: 2, topK: 0, topP: 0.8 }, banned: [], wrong: { temperature: 2, topK: 0, topP: 1 } },
    { x: steps, w: { temperature: 1, topK: 0, topP: 0.5 }, banned: [], wrong: { temperature: 1, topK: 0, topP: 0.55 } },
  ];
  const n = 100_000;
  for (const [i, c] of cases.entries()) {
    const counts = new Array<number>(c.x.length).fill(0);
    const stream = new RandomStream(300 + i, 0);
    const out = row(c.x);
    const banned = new Set(c.banned);
    for (let j = 0; j < n; j++) counts[sampleRow(out, 0, c.w, banned, NO_SEEN, 1, stream.next(), false).tok]!++;
    const right = binnedChiSquare(counts, reference(c.x, c.w, c.banned), n);
    assert.ok(
      right.chi2 < critical(right.df),
      `long case ${i} ${JSON.stringify(c.w)}: chi2 ${right.chi2.toFixed(1)} over ${critical(right.df).toFixed(1)} (df ${right.df})`,
    );
    const wrong = binnedChiSquare(counts, reference(c.x, c.wrong, c.banned), n);
    assert.ok(
      !(wrong.chi2 < critical(wrong.df)),
      `long case ${i}: the check must reject ${JSON.stringify(c.wrong)} (chi2 ${wrong.chi2.toFixed(1)})`,
    );
  }
});

test("a top-k plan's row (log-probs of its k best) samples as the full logits do when top_k leaves one of its k below; otherwise the step is an error naming --topk", () => {
  const k = 8;
  const order = LOGITS.map((_, t) => t)
    .sort((a, b) => LOGITS[b]! - LOGITS[a]! || a - b)
    .slice(0, k);
  const lse = Math.log(LOGITS.reduce((a, x) => a + Math.exp(x), 0));
  const topk: Record<string, RtTensor> = {
    topk_ids: { dtype: 'int64', dims: [1, 1, k], data: BigInt64Array.from(order, (t) => BigInt(t)) } as RtTensor,
    topk_logprobs: {
      dtype: 'float32',
      dims: [1, 1, k],
      data: Float32Array.from(order, (t) => LOGITS[t]! - lse),
    } as RtTensor,
  };
  const w = { temperature: 0.8, topK: 6, topP: 0.9 };
  const a = new RandomStream(9, 0);
  const b = new RandomStream(9, 0);
  for (let i = 0; i < 5000; i++) {
    const u = a.next();
    assert.is(b.next(), u);
    const full = sampleRow(row(LOGITS), 0, w, new Set([4]), NO_SEEN, 1, u);
    const part = sampleRow(topk, 0, w, new Set([4]), NO_SEEN, 1, u);
    assert.is(part.tok, full.tok);
    assert.ok(Math.abs(part.logProb - full.logProb) < 1e-5, 'the log-prob is normalized over the whole vocabulary');
  }
  failsWith(() => sampleRow(topk, 0, { ...w, topK: 8 }, new Set(), NO_SEEN, 1, 0.5), 'PLANC_E411', 'topk');
  failsWith(
    () => sampleRow(topk, 0, { ...w, topK: 6 }, new Set([10, 0, 4]), NO_SEEN, 1, 0.5),
    'PLANC_E411',
    'only 5 of them are allowed',
  );
  failsWith(() => sampleRow(topk, 0, { ...w, topK: 0 }, new Set(), NO_SEEN, 1, 0.5), 'PLANC_E411', 'top_k 0');
});

test('RandomStream: SplitMix64 per (seed, index), reproducible, uniform, different streams differ', () => {
  const take = (s: RandomStream, n: number) => Array.from({ length: n }, () => s.next());
  assert.equal(take(new RandomStream(42, 3), 50), take(new RandomStream(42, 3), 50));
  assert.not.equal(take(new RandomStream(42, 3), 5), take(new RandomStream(42, 4), 5));
  assert.not.equal(take(new RandomStream(42, 3), 5), take(new RandomStream(43, 3), 5));
  const xs = take(new RandomStream(7, 0), 100_000);
  assert.ok(xs.every((x) => x >= 0 && x < 1));
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  assert.ok(Math.abs(mean - 0.5) < 0.005, `mean ${mean}`);
  // SplitMix64 seeded with 0 (state 0 + gamma): its first output is 0xe220a8397b1dcdaf, a published test vector
  assert.is(mix64(0x9e3779b97f4a7c15n), 0xe220a8397b1dcdafn);
});

test('bad sampling options: PLANC_E411 naming the option', () => {
  const cases: [object, string][] = [
    [{ temperature: 0 }, 'temperature = 0; it must be a number > 0'],
    [{ temperature: -1 }, 'temperature = -1'],
    [{ temperature: Number.NaN }, 'temperature = '],
    [{ topP: 0 }, 'topP = 0; it must be a number in (0, 1]'],
    [{ topP: 1.5 }, 'topP = 1.5'],
    [{ topP: -0.1 }, 'topP = -0.1'],
    [{ topK: -1 }, 'topK = -1; it must be an integer in [0, 2147483647]'],
    [{ topK: 2.5 }, 'topK = 2.5'],
    [{ seed: 1.5 }, 'seed = 1.5; it must be an integer in [0, 9007199254740991]'],
    [{ seed: -1 }, 'seed = -1'],
    [{ seed: '3' }, 'seed = "3"'],
    [{ doSample: 'yes' }, 'doSample = "yes"; it must be true or false'],
    [{ sampleIndices: [0, 1.5] }, 'sampleIndices[1] = 1.5'],
  ];
  for (const [o, want] of cases) {
    const m = thrown(() => validateDecodingOptions(o as never));
    assert.ok(m.startsWith('PLANC_E411: bad decoding option: ') && m.includes(want), `${JSON.stringify(o)}: ${m}`);
  }
  const d = validateDecodingOptions({});
  assert.equal(
    [d.doSample, d.temperature, d.topK, d.topP, d.seed],
    [false, 1, 50, 1, 0],
    "generate()'s defaults (top_k 50)",
  );
});

// ---- on a small synthetic model: a plan that keeps the logits, and a top-k plan ----

const it = testIf(test, !nativeAvailable() && NEEDS_NATIVE);
const V = 48;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-sampling-'));
const modelDir = path.join(tmp, 'model');
let full: Plan;
let topk: Plan;
/** 10 sources of 3 to 12 ids ending in the eos 0. */
const sources = Array.from({ length: 10 }, (_, i) => [
  ...Array.from({ length: 3 + i }, (_, j) => 2 + ((i * 13 + j * 7) % (V - 2))),
  0,
]);
const MAX = 16;
const text = (rs: { ids: number[] }[]) => rs.map((r) => r.ids.join(' '));

test.before(() => {
  if (!nativeAvailable()) return;
  makeModel({
    arch: 'marian',
    d: 32,
    encoderLayers: 1,
    decoderLayers: 1,
    heads: 2,
    ffn: 64,
    vocab: V,
    maxPos: 64,
    activation: 'relu',
    seed: 7,
    out: modelDir,
  });
  const make = (k: number | undefined, name: string) => {
    const b = buildPlan(runPipeline(importSeq2SeqDir(modelDir), { topk: k }), {
      target: 'cpu',
      maxBatch: 8,
      maxSrcLen: 16,
      maxTgtLen: 24,
    });
    const bytes = encodePlan(b.header, b.blob);
    fs.writeFileSync(path.join(tmp, name), bytes);
    return loadPlanBytes(bytes, name);
  };
  full = make(undefined, 'full.plan');
  topk = make(16, 'topk16.plan');
});

test.after(() => {
  full?.close();
  topk?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

it('the same seed gives the same samples; other seeds give other samples; sampling differs from greedy', async () => {
  const o = { maxLength: MAX, doSample: true };
  const a = text(await translateIds(full, sources, { ...o, seed: 11 }));
  assert.equal(text(await translateIds(full, sources, { ...o, seed: 11 })), a);
  const b = text(await translateIds(full, sources, { ...o, seed: 12 }));
  assert.ok(
    a.some((s, i) => s !== b[i]),
    'seed 12 samples differently from seed 11 on some sentence',
  );
  const greedy = text(await translateIds(full, sources, { maxLength: MAX }));
  assert.ok(
    a.some((s, i) => s !== greedy[i]),
    'samples are not the greedy output',
  );
});

it('a sentence samples the same alone, in batches of any size and order (its stream is (seed, its index)), in streamed chunks, and through the serving scheduler', async () => {
  const o = { maxLength: MAX, doSample: true, seed: 5, topP: 0.95, temperature: 1.2 };
  const all = text(await translateIds(full, sources, o));
  for (const batchSize of [1, 3, 8])
    assert.equal(
      text(await translateIds(full, sources, { ...o, batchSize, sortByLength: batchSize !== 3 })),
      all,
      `batchSize ${batchSize}`,
    );
  for (const i of [0, 4, 9])
    assert.equal(
      text(await translateIds(full, [sources[i]!], { ...o, sampleIndices: [i] })),
      [all[i]!],
      `sentence ${i} alone`,
    );
  const rev = [...sources.keys()].reverse();
  assert.equal(
    text(
      await translateIds(
        full,
        rev.map((i) => sources[i]!),
        { ...o, sampleIndices: rev },
      ),
    ),
    rev.map((i) => all[i]!),
    'reversed, with their indices',
  );
  const streamed: string[] = [];
  for await (const r of translateIdsStream(full, sources, { ...o, chunkSize: 3 })) streamed[r.index] = r.ids.join(' ');
  assert.equal(streamed, all, 'translateIdsStream in chunks of 3');
  const s = new Scheduler(full, { maxRows: 4 });
  const outcomes = await Promise.all([
    s.submit(sources.slice(0, 5), o),
    s.submit(sources.slice(5), { ...o, sampleIndices: [5, 6, 7, 8, 9] }),
  ]);
  assert.equal(
    outcomes.flat().map((x) => x.result!.ids.join(' ')),
    all,
    'the scheduler samples as translateIds',
  );
});

it('top_k 1 and a tiny temperature give greedy output; scores are the model log-probs of the samples', async () => {
  const greedy = await translateIds(full, sources, { maxLength: MAX, returnScores: true });
  const k1 = await translateIds(full, sources, {
    maxLength: MAX,
    doSample: true,
    topK: 1,
    seed: 3,
    returnScores: true,
  });
  assert.equal(text(k1), text(greedy));
  k1.forEach((r, i) => assert.ok(Math.abs(r.score! - greedy[i]!.score!) < 1e-6, `score ${i}`));
  assert.equal(
    text(await translateIds(full, sources, { maxLength: MAX, doSample: true, temperature: 1e-6, topK: 0, seed: 4 })),
    text(greedy),
  );
});

it('a top-k plan samples exactly what the full logits sample when top_k + 1 fits its k; otherwise it refuses, naming topK and --topk', async () => {
  const o = { maxLength: MAX, doSample: true, seed: 21, topK: 12, topP: 0.9, temperature: 0.9 };
  assert.equal(text(await translateIds(topk, sources, o)), text(await translateIds(full, sources, o)));
  let m = await rejected(translateIds(topk, sources, { doSample: true }));
  assert.match(
    m,
    /^PLANC_E411: bad decoding option: topK = 50; it must be at most 15 with plan topk16\.plan: it keeps only its 16 best tokens per step.*topk 51 or more, or topk 0/,
  );
  m = await rejected(translateIds(topk, sources, { doSample: true, topK: 0 }));
  assert.match(m, /topK = 0; .*top_k 0 samples from the whole vocabulary.*topk 0 to keep the logits/);
  m = await rejected(translateIds(topk, sources, { doSample: true, topK: 10, repetitionPenalty: 1.2 }));
  assert.match(m, /repetition_penalty 1\.2 .*topk 0/);
});

it('beam sampling and the Jacobi strategies refuse doSample, naming it', async () => {
  const m = await rejected(translateIds(full, sources, { doSample: true, beamSize: 3 }));
  assert.match(
    m,
    /^PLANC_E411: bad decoding option: doSample with beamSize 3 is generate\(\)'s beam sampling, which planc does not implement/,
  );
  const rules = await planRules(full);
  for (const name of ['pj', 'pgj', 'hgj']) {
    failsWith(
      () => checkSampling(full, validateDecodingOptions({ doSample: true }), rules, name),
      'PLANC_E411',
      `doSample works with strategy greedy (generate()'s sample mode), not '${name}'`,
    );
  }
});

it("planc translate --do-sample: the library's samples whatever the chunking; bad values name the flag", () => {
  const input = sources.map((s) => s.join(' ')).join('\n') + '\n';
  const file = path.join(tmp, 'full.plan');
  const args = [
    'translate',
    file,
    '--ids',
    '--max-length',
    String(MAX),
    '--do-sample',
    'true',
    '--seed',
    '8',
    '--top-p',
    '0.9',
    '--quiet',
  ];
  const one = planc([...args, '--batch', '8'], input);
  assert.is(one.status, 0, one.stderr);
  const chunked = planc([...args, '--batch', '2'], input);
  assert.is(chunked.stdout, one.stdout, 'chunks of 2 lines sample as chunks of 8');
  return translateIds(full, sources, { maxLength: MAX, doSample: true, seed: 8, topP: 0.9 }).then((lib) => {
    assert.equal(one.stdout.trimEnd().split('\n'), text(lib));
    for (const [flag, v, want] of [
      ['--temperature', '0', '--temperature 0: it must be a number > 0'],
      ['--top-p', '1.5', '--top-p 1.5: it must be a number in (0, 1]'],
      ['--top-k', '-1', '--top-k -1: it must be an integer in [0, 2147483647]'],
      ['--seed', '0.5', '--seed 0.5: it must be an integer'],
      ['--do-sample', 'yes', '--do-sample yes: it must be true or false'],
    ]) {
      const r = planc(['translate', file, '--ids', flag!, v!, '--quiet'], '5 6 0\n');
      assert.is.not(r.status, 0);
      assert.ok(r.stderr.includes(`PLANC_E301: ${want}`), r.stderr);
    }
    const beam = planc(['translate', file, '--ids', '--do-sample', 'true', '--beam', '3', '--quiet'], '5 6 0\n');
    assert.ok(
      beam.stderr.includes('PLANC_E301: --do-sample true: it must be false with beamSize 3: beam sampling'),
      beam.stderr,
    );
    const help = planc(['translate', '--help']).stdout;
    for (const [flag, name] of [
      ['--do-sample', 'do_sample'],
      ['--temperature', 'temperature'],
      ['--top-k', 'top_k'],
      ['--top-p', 'top_p'],
    ]) {
      assert.match(
        help,
        new RegExp(`${flag} [^\\n]*\\n?[^\\n]*generate\\(\\)'s ${name}`),
        `${flag} names generate()'s ${name}`,
      );
    }
  });
});

it("generation_config's do_sample, temperature, top_k and top_p: into the plan (inspect), the call's defaults, a default --topk that keeps top_k exact", async () => {
  const dir = path.join(tmp, 'model-sample');
  fs.cpSync(modelDir, dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'generation_config.json'),
    JSON.stringify({ do_sample: true, temperature: 0.8, top_k: 20, top_p: 0.9 }),
  );
  const file = path.join(tmp, 'sample.plan');
  const r = planc([
    'optimize',
    dir,
    '-o',
    file,
    '--quiet',
    '--max-batch',
    '8',
    '--max-src-len',
    '16',
    '--max-tgt-len',
    '24',
  ]);
  assert.is(r.status, 0, r.stderr);
  assert.match(planc(['inspect', file]).stdout, /doSample true, temperature 0\.8, topK 20, topP 0\.9/);
  const plan = await loadPlan(file);
  try {
    assert.equal(planDefaults(plan), { doSample: true, temperature: 0.8, topK: 20, topP: 0.9 });
    assert.is(
      Number(
        plan
          .outputs('decoder_with_past')
          .find((x) => x.name === 'topk_ids')!
          .dims.at(-1),
      ),
      21,
      'top_k 20 and one below',
    );
    const own = await translateIds(plan, sources, { maxLength: MAX, seed: 2 });
    assert.equal(
      text(own),
      text(
        await translateIds(full, sources, {
          maxLength: MAX,
          seed: 2,
          doSample: true,
          temperature: 0.8,
          topK: 20,
          topP: 0.9,
        }),
      ),
    );
    assert.equal(
      text(await translateIds(plan, sources, { maxLength: MAX, doSample: false })),
      text(await translateIds(full, sources, { maxLength: MAX })),
    );
  } finally {
    plan.close();
  }
});

test.run();
