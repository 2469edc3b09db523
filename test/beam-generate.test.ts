// Beam search as transformers' generate() (4.57 _beam_search): the zoo's generate_beam.json 20/20 from the reference
// over onnxruntime and from planc (one at a time and batch 8); generation_config's beam settings through inspect and
// the CLI. Each early_stopping value against the reference: test/beam-rules.test.ts.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { beamDecodeOne, type BeamOptions } from './reference/beam.ts';
import type { GraphRunner } from './reference/greedy.ts';
import { conventionsOf } from '../runtime/decode/conventions.ts';
import { translateIds, type TranslationResult } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { before } from './helpers/before.ts';
import { ort, runOrt } from './helpers/ort.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipSuite } from './helpers/skip.ts';
import { ZOO, zooFamilies, zooReference } from './helpers/zoo.ts';

interface GenerateBeam {
  num_beams: number;
  max_new_tokens: number;
  early_stopping: boolean;
  length_penalty: number;
  ids: number[][];
  scores: number[];
}

const MAX_NEW = 32;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-beam-generate-'));
const plans: Plan[] = [];

const families = zooFamilies().filter((f) => fs.existsSync(path.join(ZOO!, f, 'generate_beam.json')));
if (families.length === 0 || !nativeAvailable()) {
  skipSuite(test, families.length === 0 ? needsShared('models/zoo') : NEEDS_NATIVE, [
    ...(families.length ? families : ['<family>']).flatMap((f) => [
      `${f}: the reference beam search over onnxruntime reproduces generate_beam.json (20/20)`,
      `${f}: planc beam with the generation config equals generate_beam.json (20/20), one at a time and at batch 8`,
      `${f}: no_repeat_ngram_size, encoder_no_repeat_ngram_size and repetition_penalty: planc (a --topk 0 plan) equals the reference`,
    ]),
    'generation_config early_stopping, length_penalty, min_length reach the plan (inspect) and the defaults; CLI flags override them',
  ]);
} else {
  for (const family of families) {
    const dir = path.join(ZOO!, family);
    const ref = zooReference(family);
    const gen = JSON.parse(fs.readFileSync(path.join(dir, 'generate_beam.json'), 'utf8')) as GenerateBeam;
    let plan: Plan;
    let runner: GraphRunner;
    const sessions: ort.InferenceSession[] = [];
    let base: BeamOptions;

    before(test, async () => {
      const planFile = path.join(tmp, `${family}.plan`);
      const r = planc(['optimize', dir, '-o', planFile, '--quiet']);
      if (r.status !== 0) throw new Error(`optimize ${family}: ${r.stderr}`);
      plan = await loadPlan(planFile);
      plans.push(plan);
      const s: Record<string, ort.InferenceSession> = {};
      for (const [g, f] of [
        ['encoder', 'encoder_model.onnx'],
        ['decoder', 'decoder_model.onnx'],
        ['decoder_with_past', 'decoder_with_past_model.onnx'],
      ] as const) {
        s[g] = await ort.InferenceSession.create(path.join(dir, f));
        sessions.push(s[g]);
      }
      runner = (g, feeds) => runOrt(s[g]!, feeds);
      base = {
        ...conventionsOf(plan.header.decoding),
        maxLength: gen.max_new_tokens,
        beamSize: gen.num_beams,
        lengthPenalty: gen.length_penalty,
        earlyStopping: gen.early_stopping,
      };
    });

    const agree = (
      what: string,
      got: { ids: number[]; score: number }[],
      wantIds: number[][],
      wantScores: number[],
    ) => {
      let same = 0;
      let maxDiff = 0;
      got.forEach((g, i) => {
        const ok = g.ids.join() === wantIds[i]!.join();
        if (ok) maxDiff = Math.max(maxDiff, Math.abs(g.score - wantScores[i]!));
        if (ok && Math.abs(g.score - wantScores[i]!) < 1e-3) same++;
        else
          console.log(
            `  ${family} ${what}: sentence ${i}: ${g.ids.join(' ')} (${g.score}) vs ${wantIds[i]!.join(' ')} (${wantScores[i]})`,
          );
      });
      console.log(`  ${family} ${what}: ${same}/${got.length} identical, max score diff ${maxDiff.toExponential(2)}`);
      return same;
    };

    test(`${family}: the reference beam search over onnxruntime reproduces generate_beam.json (20/20)`, async () => {
      const got = [];
      for (const src of ref.src_ids) got.push((await beamDecodeOne(runner, src, base))[0]!);
      assert.is(agree('reference vs generate()', got, gen.ids, gen.scores), ref.src_ids.length);
    });

    test(`${family}: planc beam with the generation config equals generate_beam.json (20/20), one at a time and at batch 8`, async () => {
      // marian and mbart take num_beams from their generation config; t5 and bart are given 4
      const beam = plan.header.decoding.numBeams === undefined ? { beamSize: gen.num_beams } : {};
      if (plan.header.decoding.numBeams !== undefined) assert.is(plan.header.decoding.numBeams, gen.num_beams);
      const o = { ...beam, maxLength: MAX_NEW, returnScores: true };
      const asHyp = (r: TranslationResult) => ({ ids: r.ids, score: r.score! });
      const one: TranslationResult[] = [];
      for (const src of ref.src_ids) one.push((await translateIds(plan, [src], { ...o, batchSize: 1 }))[0]!);
      assert.is(agree('planc one at a time', one.map(asHyp), gen.ids, gen.scores), ref.src_ids.length);
      const batched = await translateIds(plan, ref.src_ids, { ...o, batchSize: 8, sortByLength: false });
      assert.is(agree('planc batch 8 (mixed lengths)', batched.map(asHyp), gen.ids, gen.scores), ref.src_ids.length);
    });

    test(`${family}: no_repeat_ngram_size, encoder_no_repeat_ngram_size and repetition_penalty: planc (a --topk 0 plan) equals the reference`, async () => {
      const planFile = path.join(tmp, `${family}-logits.plan`);
      const r = planc(['optimize', dir, '-o', planFile, '--topk', '0', '--quiet']);
      assert.is(r.status, 0, r.stderr);
      const full = await loadPlan(planFile);
      plans.push(full);
      const srcs = ref.src_ids.slice(0, 5);
      // on the top-k plan: greedy refuses a repetition penalty before decoding; beam is exact or refuses the step
      await translateIds(plan, srcs, { beamSize: 1, repetitionPenalty: 1.2 }).then(
        () => assert.unreachable('greedy with a penalty on a top-k plan'),
        (e: Error) =>
          assert.match(
            e.message,
            /PLANC_E411: repetition_penalty 1.2 with greedy decoding acts on the logits .* optimize with topk 0/,
          ),
      );
      await translateIds(plan, srcs, { beamSize: 3, maxLength: 12, repetitionPenalty: 1.5, batchSize: 1 }).then(
        async (got) => {
          for (let i = 0; i < srcs.length; i++)
            assert.equal(
              got[i]!.ids,
              (
                await beamDecodeOne(runner, srcs[i]!, { ...base, beamSize: 3, maxLength: 12, repetitionPenalty: 1.5 })
              )[0]!.ids,
            );
        },
        (e: Error) =>
          assert.match(
            e.message,
            /PLANC_E411: repetition_penalty 1.5: this step's 6 best tokens are not certain among the \d+ the plan keeps; optimize with a larger topk, or topk 0/,
          ),
      );
      for (const proc of [
        { noRepeatNgramSize: 2 },
        { repetitionPenalty: 1.5 },
        { noRepeatNgramSize: 3, repetitionPenalty: 0.8 },
        { encoderNoRepeatNgramSize: 2 },
      ]) {
        const got = await translateIds(full, srcs, {
          beamSize: 3,
          maxLength: 12,
          returnScores: true,
          batchSize: 1,
          ...proc,
        });
        for (let i = 0; i < srcs.length; i++) {
          const want = (await beamDecodeOne(runner, srcs[i]!, { ...base, beamSize: 3, maxLength: 12, ...proc }))[0]!;
          assert.equal(got[i]!.ids, want.ids, `${JSON.stringify(proc)} sentence ${i}`);
          assert.ok(
            Math.abs(got[i]!.score! - want.score) < 1e-3,
            `${JSON.stringify(proc)} sentence ${i}: ${got[i]!.score} vs ${want.score}`,
          );
        }
      }
    });

    test.after(async () => {
      for (const s of sessions) await s.release();
    });
  }
}

if (families.includes('marian') && nativeAvailable()) {
  test('generation_config early_stopping, length_penalty, min_length reach the plan (inspect) and the defaults; CLI flags override them', async () => {
    const dir = path.join(tmp, 'marian-gen');
    fs.cpSync(path.join(ZOO!, 'marian'), dir, { recursive: true });
    const genFile = path.join(dir, 'generation_config.json');
    const cfg = JSON.parse(fs.readFileSync(genFile, 'utf8'));
    fs.writeFileSync(
      genFile,
      JSON.stringify({ ...cfg, early_stopping: 'never', length_penalty: 0.5, min_length: 3, num_return_sequences: 2 }),
    );
    // a second folder whose config sets the logits processors: its plan keeps the logits (a penalty can lift any token)
    const dir2 = path.join(tmp, 'marian-proc');
    fs.cpSync(path.join(ZOO!, 'marian'), dir2, { recursive: true });
    fs.writeFileSync(
      path.join(dir2, 'generation_config.json'),
      JSON.stringify({ ...cfg, no_repeat_ngram_size: 3, repetition_penalty: 1.2 }),
    );
    const plan2File = path.join(tmp, 'marian-proc.plan');
    assert.is(planc(['optimize', dir2, '-o', plan2File, '--quiet']).status, 0);
    const plan2 = await loadPlan(plan2File);
    plans.push(plan2);
    assert.ok(
      !plan2.outputs('decoder_with_past').some((x) => x.name === 'topk_ids'),
      'a repetition_penalty model keeps its logits',
    );
    assert.match(planc(['inspect', plan2File]).stdout, /noRepeatNgramSize 3, repetitionPenalty 1.2/);
    const planFile = path.join(tmp, 'marian-gen.plan');
    const r = planc(['optimize', dir, '-o', planFile, '--quiet']);
    assert.is(r.status, 0, r.stderr);
    const j = JSON.parse(planc(['inspect', planFile, '--json']).stdout);
    assert.equal(
      [j.decoding.earlyStopping, j.decoding.lengthPenalty, j.decoding.minLength, j.decoding.numReturnSequences],
      ['never', 0.5, 3, 2],
    );
    assert.match(
      planc(['inspect', planFile]).stdout,
      /numBeams 4, earlyStopping never, lengthPenalty 0.5, numReturnSequences 2, minLength 3/,
    );
    const plan = await loadPlan(planFile);
    plans.push(plan);
    const { planDefaults } = await import('../runtime/decode/translate-ids.ts');
    assert.equal(planDefaults(plan), {
      beamSize: 4,
      earlyStopping: 'never',
      lengthPenalty: 0.5,
      minNewTokens: 2,
      maxLength: 511,
    });
    const src = zooReference('marian').src_ids.slice(0, 4);
    // the plan's own min_length 3: no eos before 2 tokens, and its default top-k counts that ban (2 × 4 + 999 + eos)
    assert.is(
      Number(
        plan
          .outputs('decoder_with_past')
          .find((x) => x.name === 'topk_ids')!
          .dims.at(-1),
      ),
      10,
    );
    const own = await translateIds(plan, zooReference('marian').src_ids, { maxLength: 12 });
    assert.ok(
      own.every((x) => x.ids.length >= 2),
      'min_length 3 from the plan',
    );
    const proc = await translateIds(plan2, src, { maxLength: 12 });
    for (const x of proc) {
      const grams = x.ids.slice(0, -2).map((_, i) => x.ids.slice(i, i + 3).join());
      assert.is(new Set(grams).size, grams.length, `no 3-gram twice: ${x.ids.join(' ')}`);
    }
    const input = src.map((s) => s.join(' ')).join('\n') + '\n';
    const lib = await translateIds(plan, src, {
      maxLength: 12,
      earlyStopping: true,
      lengthPenalty: 1,
      minNewTokens: 0,
      returnScores: true,
    });
    const cli = planc(
      [
        'translate',
        planFile,
        '--ids',
        '--max-length',
        '12',
        '--early-stopping',
        'true',
        '--length-penalty',
        '1',
        '--min-new-tokens',
        '0',
        '--scores',
        '--quiet',
      ],
      input,
    );
    assert.is(cli.status, 0, cli.stderr);
    assert.equal(
      cli.stdout.split('\n').slice(0, -1),
      lib.map((x) => `${x.ids.join(' ')} ||| ${x.score!.toFixed(6)}`),
    );
    const bad = planc(['translate', planFile, '--ids', '--early-stopping', 'sometimes'], input);
    assert.is(bad.status, 2);
    assert.match(bad.stderr, /PLANC_E301: --early-stopping sometimes: it must be true, false or never/);
    const help = planc(['translate', '--help']).stdout;
    for (const name of [
      'num_beams',
      'early_stopping',
      'length_penalty',
      'max_new_tokens',
      'min_new_tokens',
      'num_return_sequences',
      'sequences_scores',
      'no_repeat_ngram_size',
      'encoder_no_repeat_ngram_size',
      'repetition_penalty',
    ])
      assert.ok(help.includes(`${name}`), name);
  });
}

test.after(() => {
  for (const p of plans) p.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});
test.run();
