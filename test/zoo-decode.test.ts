// Decoding the way generate() does (forced bos/eos, banned ids, eos lists) and, on the zoo families: greedy equals
// greedy_ids_hf_generation_config, beam 4 equals the reference beam search over onnxruntime on the unmodified files,
// text goes through tokenizer.json, blank lines give empty ones, over-long lines fail alone or are truncated.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { beamDecodeOne } from './reference/beam.ts';
import type { GraphRunner } from './reference/greedy.ts';
import { conventionsOf, DecodingRules } from '../runtime/decode/conventions.ts';
import { rowTop } from '../runtime/decode/scores.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { planTokenizer, sourceIds } from '../runtime/translate.ts';
import { before } from './helpers/before.ts';
import { ort, runOrt } from './helpers/ort.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipPart, skipSuite, testIf } from './helpers/skip.ts';
import { ZOO, zooFamilies, zooReference } from './helpers/zoo.ts';

const zoo = ZOO;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-zoo-decode-'));
const lines = (out: string) => out.split('\n').slice(0, -1);
const idLines = (out: string) => lines(out).map((l) => (l.trim() ? l.trim().split(/\s+/).map(Number) : []));
const MAX_NEW = 32;
const plans: Record<string, Plan> = {};

test('DecodingRules: forced bos first, forced eos at the last step (winning), bans as generate() applies them', () => {
  const rules = new DecodingRules({
    startId: 9,
    eosId: 2,
    padId: 1,
    eosIds: [2, 3],
    forcedBosId: 7,
    forcedEosId: 2,
    suppressTokens: [5],
    beginSuppressTokens: [6],
    badWords: [[1], [2], [9, 4], [7, 8, 4]],
  });
  assert.equal(
    [rules.forced(0, false), rules.forced(1, false), rules.forced(0, true), rules.forced(5, true)],
    [7, undefined, 2, 2],
  );
  assert.ok(rules.isEos(2) && rules.isEos(3) && !rules.isEos(1));
  // [2] is an eos: dropped like generate() does; [9, 4]: the decoder start counts as history
  assert.equal([...rules.banned([])].sort(), [1, 4, 5]);
  assert.equal([...rules.banned([7])].sort(), [1, 5, 6], 'begin_suppress at the first step forced_bos leaves free');
  assert.equal([...rules.banned([7, 8])].sort(), [1, 4, 5]);
  assert.equal([...rules.banned([7, 0])].sort(), [1, 5]);
  assert.is(rules.maxBanned, 2 + 2 + 1);
  assert.equal([rules.candidates(1), rules.candidates(4), rules.topkNeeded(4)], [1, 12, 17]);
  const plain = new DecodingRules({ startId: 0, eosId: 0, padId: 0 });
  assert.equal(
    [plain.topkNeeded(1), plain.topkNeeded(4), plain.banned([3]).size, plain.forced(0, true)],
    [1, 8, 0, undefined],
  );
});

test('rowTop on a top-k output: banned ids are skipped, the rest keep their log-probs; too few allowed is an error', () => {
  const out = {
    topk_ids: { dtype: 'int64' as const, dims: [1, 1, 4], data: BigInt64Array.from([5n, 1n, 8n, 3n]) },
    topk_logprobs: { dtype: 'float32' as const, dims: [1, 1, 4], data: Float32Array.from([-0.1, -1, -2, -3]) },
  };
  assert.equal(rowTop(out, 0, 2, new Set([5])), { ids: [1, 8], logProbs: [-1, -2] });
  assert.equal(rowTop(out, 0, 3, new Set([1])), { ids: [5, 8, 3], logProbs: [Math.fround(-0.1), -2, -3] });
  assert.throws(
    () => rowTop(out, 0, 3, new Set([5, 1])),
    /needs the 3 best tokens per step besides 2 banned ones but the plan keeps 4; optimize with topk 5 or more/,
  );
});

const families = zooFamilies();
if (families.length === 0 || !nativeAvailable()) {
  skipSuite(test, families.length === 0 ? needsShared('models/zoo') : NEEDS_NATIVE, [
    ...(families.length ? families : ['<family>']).flatMap((family) => [
      `${family}: greedy --ids --max-length ${MAX_NEW} equals greedy_ids_hf_generation_config (20/20)`,
      `${family}: beam 4 equals the reference beam search over onnxruntime on the unmodified files (20/20)`,
      `${family}: text in, text out through tokenizer.json; blank lines give empty lines`,
      `${family}: an over-long line fails alone with its line number; --truncate keeps its first tokens and the framing`,
    ]),
    '--target-lang picks the forced first token by its name; an unknown one is an error naming the option',
    'inspect shows the recorded conventions; the default top-k allows max(4, num_beams) beams besides the banned ids',
  ]);
} else {
  for (const family of families) {
    const dir = path.join(zoo!, family);
    const ref = zooReference(family);
    const planFile = path.join(tmp, `${family}.plan`);
    const idsIn = ref.src_ids.map((s) => s.join(' ')).join('\n') + '\n';
    let plan: Plan;
    let greedy: number[][];

    before(test, async () => {
      const r = planc(['optimize', dir, '-o', planFile, '--quiet']);
      if (r.status !== 0) throw new Error(`optimize ${family}: ${r.stderr}`);
      plan = plans[family] = await loadPlan(planFile);
    });

    test(`${family}: greedy --ids --max-length ${MAX_NEW} equals greedy_ids_hf_generation_config (20/20)`, () => {
      const r = planc(
        ['translate', planFile, '--ids', '--beam', '1', '--max-length', String(MAX_NEW), '--quiet'],
        idsIn,
      );
      assert.is(r.status, 0, r.stderr);
      greedy = idLines(r.stdout);
      const same = greedy.filter((ids, i) => ids.join() === ref.greedy_ids_hf_generation_config[i]!.join()).length;
      console.log(`  ${family} greedy: ${same}/${ref.src_ids.length} identical to greedy_ids_hf_generation_config`);
      assert.is(same, ref.src_ids.length);
    });

    test(`${family}: beam 4 equals the reference beam search over onnxruntime on the unmodified files (20/20)`, async () => {
      const sessions: Record<string, ort.InferenceSession> = {};
      for (const [g, f] of [
        ['encoder', 'encoder_model.onnx'],
        ['decoder', 'decoder_model.onnx'],
        ['decoder_with_past', 'decoder_with_past_model.onnx'],
      ]) {
        sessions[g!] = await ort.InferenceSession.create(path.join(dir, f!));
      }
      const runner: GraphRunner = (g, feeds) => runOrt(sessions[g]!, feeds);
      const c = conventionsOf(plan.header.decoding);
      try {
        const got = await translateIds(plan, ref.src_ids, {
          beamSize: 4,
          maxLength: MAX_NEW,
          lengthPenalty: 1,
          returnScores: true,
        });
        let same = 0;
        for (let i = 0; i < ref.src_ids.length; i++) {
          const want = (
            await beamDecodeOne(runner, ref.src_ids[i]!, { ...c, maxLength: MAX_NEW, beamSize: 4, lengthPenalty: 1 })
          )[0]!;
          if (got[i]!.ids.join() === want.ids.join() && Math.abs(got[i]!.score! - want.score) < 1e-3) same++;
          else
            console.log(
              `  ${family} beam 4: sentence ${i}: planc ${got[i]!.ids.join(' ')} (${got[i]!.score}) vs ${want.ids.join(' ')} (${want.score})`,
            );
        }
        console.log(`  ${family} beam 4: ${same}/${ref.src_ids.length} identical to the reference beam search`);
        assert.is(same, ref.src_ids.length);
        if (c.forcedBosId !== undefined)
          assert.ok(
            got.every((r) => r.ids[0] === c.forcedBosId),
            'every beam output starts with the forced bos',
          );
      } finally {
        for (const s of Object.values(sessions)) await s.release();
      }
    });

    test(`${family}: text in, text out through tokenizer.json; blank lines give empty lines`, async () => {
      const tok = await planTokenizer(plan);
      ref.src_text.forEach((t, i) =>
        assert.equal(sourceIds(tok, t), ref.src_ids[i], `text ${i} frames like the reference src_ids`),
      );
      const input = [ref.src_text[0], '', ...ref.src_text.slice(1), '   '].join('\n') + '\n';
      const r = planc(['translate', planFile, '--beam', '1', '--max-length', String(MAX_NEW), '--quiet'], input);
      assert.is(r.status, 0, r.stderr);
      const out = lines(r.stdout);
      assert.is(out.length, ref.src_text.length + 2);
      assert.is(out[1], '');
      assert.is(out[out.length - 1], '');
      const texts = [out[0], ...out.slice(2, -1)];
      texts.forEach((t, i) => assert.is(t, tok.decode(greedy[i]!), `sentence ${i}: the decode of the ids --ids gave`));
      const ids = planc(['translate', planFile, '--ids', '--quiet'], '\n');
      assert.is(ids.status, 0, ids.stderr);
      assert.is(ids.stdout, '\n', 'an empty --ids line gives an empty line');
    });

    test(`${family}: an over-long line fails alone with its line number; --truncate keeps its first tokens and the framing`, async () => {
      const max = plan.header.profile.maxSrcLen;
      const tok = await planTokenizer(plan);
      const long = Array.from({ length: 40 }, () => ref.src_text[0]).join(' ');
      assert.ok(tok.encodeSource(long).length > max);
      const input = [ref.src_text[1], long, ref.src_text[2]].join('\n') + '\n';
      const r = planc(['translate', planFile, '--beam', '1', '--max-length', '8'], input);
      assert.is(r.status, 2, r.stderr);
      assert.match(
        r.stderr,
        new RegExp(`line 2: PLANC_E408: the source has \\d+ tokens, over the plan's maxSrcLen ${max}`),
      );
      assert.not.match(r.stderr, /line [13]:/);
      const out = lines(r.stdout);
      assert.is(out.length, 3);
      assert.is(out[1], '');
      const cut = sourceIds(tok, long, max);
      assert.is(cut.length, max);
      const framed = tok.encodeSource(long);
      assert.is(cut[cut.length - 1], framed[framed.length - 1], "the framing's last token (eos) is kept");
      assert.is(cut[0], framed[0], "the framing's first token is kept");
      const t = planc(['translate', planFile, '--beam', '1', '--max-length', '8', '--truncate', '--quiet'], input);
      assert.is(t.status, 0, t.stderr);
      const truncated = lines(t.stdout);
      assert.is(truncated[0], out[0]);
      assert.is(truncated[2], out[2]);
      assert.is(truncated[1], tok.decode((await translateIds(plan, [cut], { beamSize: 1, maxLength: 8 }))[0]!.ids));
      const idsLong = [
        ...ref.src_ids[0]!.slice(0, -1),
        ...new Array<number>(max).fill(ref.src_ids[0]![1]!),
        ref.src_ids[0]!.at(-1)!,
      ];
      const ids = planc(
        ['translate', planFile, '--ids', '--beam', '1', '--max-length', '8', '--quiet'],
        `${ref.src_ids[0]!.join(' ')}\n${idsLong.join(' ')}\n`,
      );
      assert.is(ids.status, 2);
      assert.match(ids.stderr, /line 2: PLANC_E408/);
      assert.is(idLines(ids.stdout)[1]!.length, 0);
      const idsCut = planc(
        ['translate', planFile, '--ids', '--beam', '1', '--max-length', '8', '--truncate', '--quiet'],
        `${idsLong.join(' ')}\n`,
      );
      assert.is(idsCut.status, 0, idsCut.stderr);
      const want = (
        await translateIds(plan, [[...idsLong.slice(0, max - 1), idsLong.at(-1)!]], { beamSize: 1, maxLength: 8 })
      )[0]!.ids;
      assert.equal(idLines(idsCut.stdout)[0], want);
    });
  }

  const mbart = families.includes('mbart') ? 'mbart' : undefined;
  testIf(test, !mbart && needsShared('models/zoo/mbart'))(
    '--target-lang picks the forced first token by its name; an unknown one is an error naming the option',
    () => {
      const family = mbart!;
      const planFile = path.join(tmp, 'mbart.plan');
      const ref = zooReference(family);
      const input =
        ref.src_ids
          .slice(0, 3)
          .map((s) => s.join(' '))
          .join('\n') + '\n';
      const de = planc(
        ['translate', planFile, '--ids', '--beam', '1', '--max-length', '8', '--target-lang', 'de_DE', '--quiet'],
        input,
      );
      assert.is(de.status, 0, de.stderr);
      assert.ok(
        idLines(de.stdout).every((ids) => ids[0] === 976),
        de.stdout,
      );
      const beam = planc(
        ['translate', planFile, '--ids', '--beam', '4', '--max-length', '8', '--target-lang', 'fr_XX', '--quiet'],
        input,
      );
      assert.ok(
        idLines(beam.stdout).every((ids) => ids[0] === 981),
        beam.stdout,
      );
      const bad = planc(['translate', planFile, '--ids', '--target-lang', 'xx_YY'], input);
      assert.is(bad.status, 2);
      assert.match(
        bad.stderr,
        /PLANC_E409: unknown target language 'xx_YY' \(--target-lang\): .* its language tokens: ar_AR, cs_CZ, de_DE, en_XX/,
      );
    },
  );

  test('inspect shows the recorded conventions; the default top-k allows max(4, num_beams) beams besides the banned ids', () => {
    const inspect = (f: string) => JSON.parse(planc(['inspect', path.join(tmp, `${f}.plan`), '--json']).stdout);
    const topk = (f: string) =>
      Number(
        plans[f]!.outputs('decoder_with_past')
          .find((o) => o.name === 'topk_ids')!
          .dims.at(-1),
      );
    const want: Record<string, number> = { marian: 2 * 4 + 1, mbart: 2 * 5, t5: 2 * 4, bart: 2 * 4 };
    for (const f of families) if (want[f]) assert.is(topk(f), want[f], `${f}: default --topk`);
    if (families.includes('marian')) {
      const j = inspect('marian');
      assert.equal(
        [
          j.decoding.decoderStartId,
          j.decoding.eosIds,
          j.decoding.forcedEosId,
          j.decoding.badWords,
          j.decoding.numBeams,
        ],
        [999, [0], 0, [{ ids: [999] }], 4],
      );
      assert.match(
        planc(['inspect', path.join(tmp, 'marian.plan')]).stdout,
        /decoding: decoderStartId 999, eosId 0, padId 999, .*forcedEosId 0, badWords \[\[999\]\], numBeams 4/,
      );
      const r = planc([
        'optimize',
        path.join(zoo!, 'marian'),
        '-o',
        path.join(tmp, 'k1.plan'),
        '--topk',
        '1',
        '--quiet',
      ]);
      assert.is(r.status, 2);
      assert.match(r.stderr, /PLANC_E301: --topk 1 cannot decode this model exactly: .* needs --topk 2 or more/);
    } else {
      skipPart(needsShared('models/zoo/marian'), "marian's conventions in inspect and --topk 1 refused");
    }
    if (families.includes('mbart')) {
      const j = inspect('mbart');
      assert.equal([j.decoding.forcedBosId, j.decoding.forcedEosId, j.decoding.numBeams], [977, 2, 5]);
    } else {
      skipPart(needsShared('models/zoo/mbart'), "mbart's conventions in inspect");
    }
  });
}

test.after(() => {
  for (const p of Object.values(plans)) p.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});
test.run();
