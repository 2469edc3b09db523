// Decoding runtime (runtime/decode): greedy and beam translateIds on es-en match the references over onnxruntime-node.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { Tensor } from '../compiler/tensor.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { validateDecodingOptions } from '../runtime/decode/options.ts';
import { makeBatches } from '../runtime/decode/batching.ts';
import { conventionsOf } from '../runtime/decode/conventions.ts';
import { greedyDecode, type GraphRunner } from './reference/greedy.ts';
import { beamDecodeOne } from './reference/beam.ts';
import { ort } from './helpers/ort.ts';
import { before } from './helpers/before.ts';
import { NEEDS_NATIVE, needsShared, skipSuite } from './helpers/skip.ts';
import { thrown, rejected } from './helpers/expect-error.ts';

const MAX_LEN = 64;
const TIE = 1e-4;

/** Runs an onnxruntime session on planc tensors, passing float32 data without copies through number[] or iterators. */
async function runFast(session: ort.InferenceSession, feeds: Record<string, Tensor>): Promise<Record<string, Tensor>> {
  const toOrt = (t: Tensor): ort.Tensor =>
    t.dtype === 'int64'
      ? new ort.Tensor(
          'int64',
          BigInt64Array.from(t.nums, (x) => BigInt(x)),
          [...t.dims],
        )
      : new ort.Tensor('float32', t.nums as Float32Array, [...t.dims]);
  const out = await session.run(Object.fromEntries(Object.entries(feeds).map(([k, v]) => [k, toOrt(v)])));
  const back = (t: ort.Tensor): Tensor =>
    t.type === 'float32'
      ? Tensor.fromNumbers('float32', t.dims.map(Number), t.data as Float32Array)
      : Tensor.fromNumbers('int64', t.dims.map(Number), Array.from(t.data as BigInt64Array, Number));
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, back(v)]));
}

test('validateDecodingOptions: defaults and errors naming the option and its range', () => {
  const o = validateDecodingOptions({});
  assert.equal(o.beamSize, 1);
  assert.equal(o.sortByLength, true);
  assert.is(
    thrown(() => validateDecodingOptions({ beamSize: 0 })),
    'PLANC_E411: bad decoding option: beamSize = 0; it must be an integer in [1, 64]',
  );
  assert.is(
    thrown(() => validateDecodingOptions({ lengthPenalty: -11 })),
    'PLANC_E411: bad decoding option: lengthPenalty = -11; it must be a number in [-10, 10]',
  );
  assert.is(
    thrown(() => validateDecodingOptions({ earlyStopping: 'always' as never })),
    'PLANC_E411: bad decoding option: earlyStopping = "always"; it must be true, false or \'never\'',
  );
  assert.is(
    thrown(() => validateDecodingOptions({ minNewTokens: -1 })),
    'PLANC_E411: bad decoding option: minNewTokens = -1; it must be an integer in [0, 65536]',
  );
  assert.equal([o.earlyStopping, o.lengthPenalty, o.minNewTokens], [false, 1, 0], "generate()'s defaults");
  assert.is(
    thrown(() => validateDecodingOptions({ batchSize: 2.5 })),
    'PLANC_E411: bad decoding option: batchSize = 2.5; it must be an integer in [1, 65536]',
  );
  assert.is(
    thrown(() => validateDecodingOptions({ beamSize: 2, returnAlternatives: 3 })),
    'PLANC_E411: bad decoding option: returnAlternatives = 3; it must be in [0, beamSize = 2]',
  );
  assert.is(
    thrown(() => validateDecodingOptions({ sortByLength: 'yes' as unknown as boolean })),
    'PLANC_E411: bad decoding option: sortByLength = "yes"; it must be true or false',
  );
  assert.match(
    thrown(() => validateDecodingOptions({ beam: 4 } as never)),
    "PLANC_E411: bad decoding option: unknown option 'beam'",
  );
});

test('makeBatches: sorted by length, cut by sentences or tokens, beams count against maxBatch', () => {
  const lengths = [3, 9, 5, 9, 1];
  const o = validateDecodingOptions({ batchSize: 2 });
  assert.equal(makeBatches(lengths, o, 32), [[1, 3], [2, 0], [4]]);
  assert.equal(makeBatches(lengths, validateDecodingOptions({ batchTokens: 18 }), 32), [
    [1, 3],
    [2, 0, 4],
  ]);
  assert.equal(makeBatches(lengths, validateDecodingOptions({ sortByLength: false, beamSize: 4 }), 8), [
    [0, 1],
    [2, 3],
    [4],
  ]);
  assert.is(
    thrown(() => makeBatches(lengths, validateDecodingOptions({ beamSize: 16 }), 8)),
    "PLANC_E411: bad decoding option: beamSize = 16; it must be in [1, 8] (the plan's maxBatch)",
  );
});

const shared = sharedDir();
const esen = shared ? path.join(shared, 'models', 'es-en') : '';
if (!nativeAvailable() || !esen || !fs.existsSync(esen)) {
  skipSuite(test, !nativeAvailable() ? NEEDS_NATIVE : needsShared('models/es-en'), [
    'es-en greedy, one sentence at a time (fused plan): token-identical to the onnxruntime reference (≥ 99.5%, the rest near-ties)',
    'es-en greedy, batches of 32 with mixed lengths (batch shrinking), with and without fusion: token-identical to the reference',
    'es-en beam 4: equals the reference beam search over onnxruntime (differences only near-ties)',
    'translateIds errors: bad ids, too-long source, bad options (as text)',
  ]);
} else {
  const model = importSeq2SeqDir(esen);
  const ids: number[][] = JSON.parse(fs.readFileSync(path.join(esen, 'test_ids.json'), 'utf8')).src_ids;
  // es-en's conventions: start, eos and pad 0, forced_eos_token_id 0 (forced at the last allowed step)
  const D = conventionsOf(model.decoding, { startId: 0, eosId: 0, padId: 0 });
  let plan: Plan;
  let fused: Plan;
  let sessions: Record<string, ort.InferenceSession>;
  let runner: GraphRunner;
  let reference: number[][];

  before(test, async () => {
    const profile = {
      target: 'cpu' as const,
      maxBatch: 32,
      maxSrcLen: Math.max(128, ...ids.map((s) => s.length)),
      maxTgtLen: MAX_LEN,
    };
    const built = buildPlan(model, profile);
    plan = loadPlanBytes(encodePlan(built.header, built.blob), 'es-en.plan');
    const withFusion = buildPlan(runPipeline(model, { topk: TRANSLATE_TOPK }), profile);
    assert.ok(
      withFusion.header.programs
        .filter((p) => p.graph !== 'decoder_positions')
        .every((p) => p.kernels.some((k) => k.name === 'fused_matmul')),
      'fusion fired',
    );
    const step = withFusion.header.programs.find((p) => p.graph === 'decoder_with_past')!;
    for (const k of ['attention', 'cache_write', 'project_topk'])
      assert.ok(
        step.kernels.some((x) => x.name === k),
        `decoder_with_past runs ${k}`,
      );
    assert.not.ok(
      step.kernels.some((x) => x.name === 'concat'),
      'no Concat of KV caches in the decoder step',
    );
    fused = loadPlanBytes(encodePlan(withFusion.header, withFusion.blob), 'es-en-fused.plan');
    sessions = {};
    for (const g of ['encoder', 'decoder', 'decoder_with_past'])
      sessions[g] = await ort.InferenceSession.create(model.sources[g]!);
    runner = (g, feeds) => runFast(sessions[g]!, feeds);
    reference = [];
    for (let i = 0; i < ids.length; i += 16)
      reference.push(...(await greedyDecode(runner, ids.slice(i, i + 16), { ...D, maxLength: MAX_LEN })));
  });
  test.after(async () => {
    plan?.close();
    fused?.close();
    for (const s of Object.values(sessions ?? {})) await s.release();
  });

  /** The reference's log-probs at the last position after feeding `prefix` (forced decoding with decoder_model). */
  async function refLogProbs(source: number[], prefix: number[]): Promise<Float64Array> {
    const mask = Tensor.fromNumbers(
      'int64',
      [1, source.length],
      source.map(() => 1),
    );
    const enc = (
      await runner('encoder', {
        input_ids: Tensor.fromNumbers('int64', [1, source.length], source),
        attention_mask: mask,
      })
    ).last_hidden_state!;
    const input = [D.startId, ...prefix];
    const logits = (
      await runner('decoder', {
        input_ids: Tensor.fromNumbers('int64', [1, input.length], input),
        encoder_attention_mask: mask,
        encoder_hidden_states: enc,
      })
    ).logits!;
    const v = logits.dims[2]!;
    const row = Float64Array.from(logits.nums.slice((input.length - 1) * v, input.length * v));
    const max = row.reduce((a, b) => Math.max(a, b), -Infinity);
    const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
    return row.map((x) => x - lse);
  }

  /** Gap between the reference's top two log-probs at the first step where `got` leaves `want`. */
  async function tieGap(source: number[], want: number[], got: number[]): Promise<{ step: number; gap: number }> {
    let step = 0;
    while (step < want.length && want[step] === got[step]) step++;
    const lp = Array.from(await refLogProbs(source, want.slice(0, step))).sort((a, b) => b - a);
    return { step, gap: lp[0]! - lp[1]! };
  }

  /** Counts identical outputs; every difference must be a near-tie; prints each. */
  async function compareGreedy(label: string, got: number[][]): Promise<void> {
    let same = 0;
    for (let i = 0; i < ids.length; i++) {
      if (got[i]!.join() === reference[i]!.join()) {
        same++;
        continue;
      }
      const { step, gap } = await tieGap(ids[i]!, reference[i]!, got[i]!);
      console.log(
        `  ${label}: sentence ${i} differs at step ${step}; reference top-two log-prob gap ${gap.toExponential(2)}`,
      );
      assert.ok(gap <= TIE, `${label}: sentence ${i} differs at step ${step} and is not a near-tie (gap ${gap})`);
    }
    console.log(`  ${label}: ${same}/${ids.length} identical to the onnxruntime reference`);
    assert.ok(same >= 0.995 * ids.length, `${label}: only ${same}/${ids.length} identical`);
  }

  test('es-en greedy, one sentence at a time (fused plan): token-identical to the onnxruntime reference (≥ 99.5%, the rest near-ties)', async () => {
    const got = await translateIds(fused, ids, { batchSize: 1, maxLength: MAX_LEN });
    await compareGreedy(
      'greedy batch 1, fused',
      got.map((r) => r.ids),
    );
  });

  test('es-en greedy, batches of 32 with mixed lengths (batch shrinking), with and without fusion: token-identical to the reference', async () => {
    const got = await translateIds(fused, ids, { batchSize: 32, maxLength: MAX_LEN, sortByLength: false });
    await compareGreedy(
      'greedy batch 32, fused',
      got.map((r) => r.ids),
    );
    const plain = await translateIds(plan, ids, { batchSize: 32, maxLength: MAX_LEN, sortByLength: false });
    await compareGreedy(
      'greedy batch 32, no fusion',
      plain.map((r) => r.ids),
    );
  });

  /**
   * Reference (ORT) length-penalized score of an output: forced decoding, eos included when shorter than the cap; an
   * eos at the last allowed step is the forced one (log-prob 0).
   */
  async function refScore(source: number[], out: number[], alpha: number): Promise<number> {
    const seq = out.length < MAX_LEN ? [...out, D.eosId] : out;
    let sum = 0;
    for (let j = 0; j < seq.length; j++) {
      if (j === MAX_LEN - 1 && D.forcedEosId !== undefined) continue;
      sum += (await refLogProbs(source, seq.slice(0, j)))[seq[j]!]!;
    }
    return sum / seq.length ** alpha;
  }

  // CI checks the first 40 sentences (about a minute on 2 cores; beam-generate.test.ts checks beam search against
  // generate() on the zoo models); PLANC_BEAM_SENTENCES=1000 checks the whole test set (about twenty minutes).
  const beamN = Number(process.env.PLANC_BEAM_SENTENCES ?? 40);
  test(`es-en beam 4 (first ${beamN}): equals the reference beam search over onnxruntime (differences only near-ties)`, async () => {
    const n = Math.min(beamN, ids.length);
    const opts = { beamSize: 4, maxLength: MAX_LEN, lengthPenalty: 1, returnScores: true, returnAlternatives: 4 };
    const got = await translateIds(fused, ids.slice(0, n), opts);
    let same = 0;
    for (let i = 0; i < n; i++) {
      const ref = await beamDecodeOne(runner, ids[i]!, { ...D, maxLength: MAX_LEN, beamSize: 4, lengthPenalty: 1 });
      assert.ok(got[i]!.alternatives!.length >= 1 && got[i]!.alternatives![0]!.ids.join() === got[i]!.ids.join());
      if (got[i]!.ids.join() === ref[0]!.ids.join()) {
        same++;
        assert.ok(
          Math.abs(got[i]!.score! - ref[0]!.score) < 1e-3,
          `sentence ${i}: score ${got[i]!.score} vs ${ref[0]!.score}`,
        );
        continue;
      }
      const mine = await refScore(ids[i]!, got[i]!.ids, 1);
      console.log(
        `  beam 4: sentence ${i} differs; reference scores: its best ${ref[0]!.score.toFixed(6)}, planc's output ${mine.toFixed(6)}`,
      );
      assert.ok(Math.abs(mine - ref[0]!.score) <= TIE, `beam 4: sentence ${i} differs and is not a near-tie`);
    }
    console.log(`  beam 4: ${same}/${n} identical to the onnxruntime reference beam search`);
    assert.ok(same >= 0.95 * n);
  });

  test('translateIds errors: bad ids, too-long source, bad options (as text)', async () => {
    assert.is(
      await rejected(
        translateIds(plan, [
          [5, 0],
          [3, 32000, 0],
        ]),
      ),
      'PLANC_E405: sentence 1 holds id 32000 at position 1; ids must be integers in [0, 32000)',
    );
    assert.is(
      await rejected(translateIds(plan, [[5, 0], [1.5]])),
      'PLANC_E405: sentence 1 holds id 1.5 at position 0; ids must be integers in [0, 32000)',
    );
    assert.is(
      await rejected(translateIds(fused, [[5, 0]], { beamSize: 5 })),
      'PLANC_E411: beamSize 5 needs the 10 best tokens per step but plan es-en-fused.plan keeps 8; optimize with topk 10 or more',
    );
    const long = new Array<number>(plan.header.profile.maxSrcLen + 5).fill(7);
    const max = plan.header.profile.maxSrcLen;
    assert.is(
      await rejected(translateIds(plan, [[5, 0], [6, 0], long])),
      `PLANC_E408: sentence 2 has ${max + 5} tokens, over the plan's maxSrcLen ${max}: split it, pass truncate, or build the plan with a larger maxSrcLen`,
    );
    assert.is(
      await rejected(translateIds(plan, [[5, 0]], { beamSize: 33 })),
      "PLANC_E411: bad decoding option: beamSize = 33; it must be in [1, 32] (the plan's maxBatch)",
    );
    assert.is(
      await rejected(translateIds(plan, [[5, 0]], { maxLength: 0 })),
      'PLANC_E411: bad decoding option: maxLength = 0; it must be an integer in [1, 65536]',
    );
    // ids are taken verbatim (no eos appended); an empty source gives an empty translation
    const r = await translateIds(plan, [ids[3]!, []], { returnScores: true });
    assert.equal(r[0]!.ids, reference[3]);
    assert.ok(typeof r[0]!.score === 'number' && r[0]!.score <= 0);
    assert.equal(r[1], { ids: [], score: 0 });
    const cut = await translateIds(plan, [[...new Array<number>(max + 5).fill(7), 0]], {
      truncate: true,
      maxLength: 4,
    });
    assert.is(cut.length, 1, 'truncate: the first maxSrcLen - 1 ids and the eos');
  });
}

test.run();
