// planc --strategy hrt equals the onnxruntime reference HRT decoder (test/reference/hrt.ts) token for token on a synthetic HRT-contract model (make-model --hrt), k = 1, 2, 3, greedy and beam; the contract checked at optimize and the refusals named.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { GraphRunner } from './reference/greedy.ts';
import { hrtDecodeOne, type HrtConfig, type HrtOptions } from './reference/hrt.ts';
import { rng } from './reference/rng.ts';
import { findNvcc } from '../codegen/cuda/nvcc.ts';
import type { Shortlist } from '../compiler/vocab/shortlist.ts';
import { encodeMarianBinaryShortlist } from '../compiler/vocab/shortlist-marian-binary.ts';
import { vocabFeeds } from '../runtime/vocab.ts';
import { conventionsOf } from '../runtime/decode/conventions.ts';
import { Scheduler } from '../runtime/decode/scheduler.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlan, type Plan } from '../runtime/plan.ts';
import { makeModel } from '../scripts/make-model/generate.ts';
import { before } from './helpers/before.ts';
import { ort, runOrt } from './helpers/ort.ts';
import { planc } from './helpers/planc-cli.ts';
import { wordTokenizer } from './helpers/tiny-text-plan.ts';
import { NEEDS_NATIVE, skipSuite, testIf } from './helpers/skip.ts';

const VOCAB = 61;
const MAX_LEN = 14;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-hrt-decode-'));
const model = path.join(tmp, 'hrt');
/** A second seed: the first model mostly ends early (eos from either stage), this one mostly runs to the cap. */
const model2 = path.join(tmp, 'hrt2');
const plain = path.join(tmp, 'plain');
const optimize = (dir: string, out: string, extra: string[] = []) =>
  planc([
    'optimize',
    dir,
    '-o',
    out,
    '--no-tokenizer',
    '--max-batch',
    '12',
    '--max-src-len',
    '24',
    '--max-tgt-len',
    '32',
    '--quiet',
    ...extra,
  ]);

/** Sources of 2..12 ids in [2, VOCAB), each ending with the eos 0. */
function sources(n: number, seed: number): number[][] {
  const r = rng(seed);
  return Array.from({ length: n }, () => [
    ...Array.from({ length: 2 + Math.floor(r() * 11) }, () => 2 + Math.floor(r() * (VOCAB - 2))),
    0,
  ]);
}

const NAMES = [
  "the plan records the contract: chunk sizes 1, 2, 3, their start ids, the mask id; decoder_nat compiled with the decoders' fusions and top-k; no rows graph",
  'greedy k = 1, 2, 3 (top-k plan, batches of 5), two models: equal to the reference',
  'greedy k = 2 on a --topk 0 plan (full logits) and on an int8 plan against itself at batch 1 vs 12',
  'beam 3 (b_nat 3 and 1), k = 2 and 3, two models: equal to the reference',
  'ordinary strategies on an HRT plan feed position_ids 0, 1, 2, …: greedy equals hrt k = 1; a --step-tokens 4 plan (position_ids [batch, step_tokens]): pgj and lookup equal greedy, hrt k = 3 as on the one-token plan',
  'refused: a plan without the contract (PLANC_E410), a chunk not in bos_k_ids (PLANC_E410, CLI too), natBeams > beamSize and sampling (PLANC_E411)',
  'optimize refuses a broken contract with PLANC_E013 listing what is missing',
  "a shortlist plan (--vocab shortlist): decoder_nat takes vocab_active, and every output id of both stages lies in the batch's active set",
  'a cuda plan (decoder_nat with the CUDA kernels) on the emulated device: planc translate --device sim --strategy hrt equals the cpu plan, k = 2 and 3',
  "planc serve's scheduler: requests that differ only in chunk or natBeams decode apart, each as translateIds",
];

const noCuda = (() => {
  try {
    findNvcc();
  } catch {
    return 'need nvcc (a cuda plan carries its compiled kernels)';
  }
  return spawnSync('g++', ['--version']).status === 0
    ? undefined
    : 'need g++ (the emulated device compiles kernels for the CPU)';
})();

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, NAMES);
} else {
  let plan: Plan;
  let plan2: Plan;
  let logitsPlan: Plan;
  let runner: GraphRunner;
  let runner2: GraphRunner;
  let hrt: HrtConfig;
  const sessions: ort.InferenceSession[] = [];
  const SRC = sources(12, 7);

  before(test, async () => {
    for (const [out, seed] of [
      [model, 1],
      [model2, 7],
    ] as const)
      makeModel({
        arch: 'marian',
        d: 32,
        encoderLayers: 1,
        decoderLayers: 2,
        heads: 2,
        ffn: 64,
        vocab: VOCAB,
        maxPos: 128,
        activation: 'relu',
        seed,
        out,
        hrt: true,
      });
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
      out: plain,
    });
    for (const [dir, file, extra] of [
      [model, 'hrt.plan', []],
      [model2, 'hrt2.plan', []],
      [model, 'hrt-logits.plan', ['--topk', '0']],
      [plain, 'plain.plan', []],
    ] as const) {
      const r = optimize(dir, path.join(tmp, file), [...extra]);
      if (r.status !== 0) throw new Error(`optimize ${file}: ${r.stderr}`);
    }
    plan = await loadPlan(path.join(tmp, 'hrt.plan'));
    plan2 = await loadPlan(path.join(tmp, 'hrt2.plan'));
    logitsPlan = await loadPlan(path.join(tmp, 'hrt-logits.plan'));
    hrt = (JSON.parse(fs.readFileSync(path.join(model, 'config.json'), 'utf8')) as { hrt: HrtConfig }).hrt;
    const ortRunner = async (dir: string): Promise<GraphRunner> => {
      const s: Record<string, ort.InferenceSession> = {};
      for (const [g, f] of [
        ['encoder', 'encoder_model.onnx'],
        ['decoder', 'decoder_model.onnx'],
        ['decoder_with_past', 'decoder_with_past_model.onnx'],
        ['decoder_nat', hrt.nat_graph],
      ] as const) {
        s[g] = await ort.InferenceSession.create(path.join(dir, f), { intraOpNumThreads: 1 });
        sessions.push(s[g]);
      }
      return (g, feeds) => runOrt(s[g]!, feeds);
    };
    runner = await ortRunner(model);
    runner2 = await ortRunner(model2);
  });

  const reference = async (k: number, o: Partial<HrtOptions> = {}, run = runner) => {
    const base: HrtOptions = {
      ...conventionsOf(plan.header.decoding),
      k,
      hrt,
      maxLength: MAX_LEN,
      beamSize: 1,
      lengthPenalty: 1,
      ...o,
    };
    const out = [];
    for (const src of SRC) out.push(await hrtDecodeOne(run, src, base));
    return out;
  };
  const both = () =>
    [
      [plan, runner],
      [plan2, runner2],
    ] as const;

  test(NAMES[0]!, () => {
    const h = plan.header.decoding.hrt!;
    assert.equal(h.chunkSizes, [1, 2, 3]);
    assert.equal(h.bosIds, [0, VOCAB, VOCAB + 1]);
    assert.is(h.maskId, VOCAB + 2);
    assert.is(h.inputVocabSize, VOCAB + 3);
    assert.is(h.maxPositions, 128);
    const nat = plan.header.programs.find((p) => p.graph === 'decoder_nat')!;
    const dec = plan.header.programs.find((p) => p.graph === 'decoder')!;
    assert.equal(
      nat.inputs.map((i) => i.name),
      ['input_ids', 'position_ids', 'decoder_attention_mask', 'encoder_attention_mask', 'encoder_hidden_states'],
    );
    assert.equal(
      nat.outputs.map((o) => o.name),
      ['topk_logprobs', 'topk_ids'],
    );
    assert.equal(nat.fusedOps, dec.fusedOps);
    assert.ok(plan.inputs('decoder_with_past').some((i) => i.name === 'position_ids'));
    assert.not.ok(plan.graphs.includes('decoder_with_past_rows'), 'row-lengths declines a step with position_ids');
    assert.is(plan.header.profile.symbolMax.nat_sequence_length, 32 + 3 - 1);
    const inspect = planc(['inspect', path.join(tmp, 'hrt.plan')]);
    assert.match(inspect.stdout, new RegExp(`hrt \\{chunkSizes \\[1, 2, 3\\], bosIds \\[0, ${VOCAB}, ${VOCAB + 1}\\]`));
  });

  test(NAMES[1]!, async () => {
    const lengths = new Set<number>();
    for (const [p, run] of both()) {
      for (const k of [1, 2, 3]) {
        const want = await reference(k, {}, run);
        const got = await translateIds(p, SRC, { strategy: 'hrt', chunk: k, maxLength: MAX_LEN, batchSize: 5 });
        assert.equal(
          got.map((r) => r.ids),
          want.map((r) => r.ids),
          `${p.source} k = ${k}`,
        );
        for (const r of got) lengths.add(r.ids.length);
      }
    }
    // outputs cut by an eos of either stage and outputs at the cap: eos inside stage II's masks, rows of unequal length
    assert.ok(
      lengths.has(0) && lengths.has(MAX_LEN - 1) && [...lengths].some((n) => n > 0 && n < MAX_LEN - 1 && n % 3 !== 2),
      [...lengths].join(),
    );
  });

  test(NAMES[2]!, async () => {
    const want = await reference(2);
    const got = await translateIds(logitsPlan, SRC, { strategy: 'hrt', chunk: 2, maxLength: MAX_LEN, batchSize: 12 });
    assert.equal(
      got.map((r) => r.ids),
      want.map((r) => r.ids),
    );
    const q = path.join(tmp, 'hrt-int8.plan');
    const r = optimize(model, q, ['--quantize', 'int8']);
    assert.is(r.status, 0, r.stderr);
    const int8 = await loadPlan(q);
    assert.ok(
      int8.header.quantization!.layers.some((l) => l.graph === 'decoder_nat'),
      'decoder_nat quantized',
    );
    const whole = await translateIds(int8, SRC, { strategy: 'hrt', chunk: 3, maxLength: MAX_LEN, batchSize: 12 });
    const alone = [];
    for (const s of SRC)
      alone.push((await translateIds(int8, [s], { strategy: 'hrt', chunk: 3, maxLength: MAX_LEN }))[0]!);
    assert.equal(
      whole.map((x) => x.ids),
      alone.map((x) => x.ids),
    );
    int8.close();
  });

  test(NAMES[3]!, async () => {
    let changed = 0;
    for (const [p, run] of both()) {
      for (const k of [2, 3]) {
        const byNat: number[][][] = [];
        for (const natBeams of [3, 1]) {
          const want = await reference(k, { beamSize: 3, natBeams }, run);
          const got = await translateIds(p, SRC, {
            strategy: 'hrt',
            chunk: k,
            beamSize: 3,
            natBeams,
            maxLength: MAX_LEN,
            batchSize: 4,
          });
          assert.equal(
            got.map((r) => r.ids),
            want.map((r) => r.ids),
            `${p.source} k = ${k}, natBeams ${natBeams}`,
          );
          byNat.push(got.map((r) => r.ids));
        }
        changed += byNat[0]!.filter((ids, i) => ids.join() !== byNat[1]![i]!.join()).length;
      }
    }
    assert.ok(changed > 0, 'eq. 2 over 3 filled hypotheses picks another than the best Skip-AT one somewhere');
  });

  test(NAMES[4]!, async () => {
    const greedy = await translateIds(plan, SRC, { maxLength: MAX_LEN });
    const hrt1 = await translateIds(plan, SRC, { strategy: 'hrt', chunk: 1, maxLength: MAX_LEN });
    assert.equal(
      greedy.map((r) => r.ids),
      hrt1.map((r) => r.ids),
    );
    const beam = await translateIds(plan, SRC, { beamSize: 2, maxLength: MAX_LEN });
    assert.equal(beam.length, SRC.length);
    const r = optimize(model, path.join(tmp, 'hrt-steps.plan'), ['--step-tokens', '4']);
    assert.is(r.status, 0, r.stderr);
    const steps = await loadPlan(path.join(tmp, 'hrt-steps.plan'));
    assert.equal(steps.inputs('decoder_with_past').find((i) => i.name === 'position_ids')!.dims, [
      'batch_size',
      'step_tokens',
    ]);
    for (const strategy of ['pgj', 'lookup'])
      assert.equal(
        (await translateIds(steps, SRC, { strategy, maxLength: MAX_LEN })).map((x) => x.ids),
        greedy.map((x) => x.ids),
        strategy,
      );
    const hrt3 = await translateIds(plan, SRC, { strategy: 'hrt', chunk: 3, maxLength: MAX_LEN });
    assert.equal(
      (await translateIds(steps, SRC, { strategy: 'hrt', chunk: 3, maxLength: MAX_LEN })).map((x) => x.ids),
      hrt3.map((x) => x.ids),
    );
    steps.close();
  });

  const rejects = async (f: () => Promise<unknown>, code: string, pattern: RegExp) => {
    try {
      await f();
    } catch (e) {
      assert.match((e as Error).message, new RegExp(`^${code}: `));
      assert.match((e as Error).message, pattern);
      return;
    }
    assert.unreachable(`no ${code}`);
  };

  test(NAMES[9]!, async () => {
    const s = new Scheduler(plan);
    const variants = [
      { chunk: 2 },
      { chunk: 3 },
      { chunk: 2, beamSize: 3, natBeams: 3 },
      { chunk: 2, beamSize: 3, natBeams: 1 },
    ];
    // a running cohort first, so that the variants wait together and open cohorts by key: without chunk and natBeams
    // in the key, sentences of both chunk sizes (and both natBeams) would share one, decoded with the first's options
    const busy = s.submit(SRC, { strategy: 'hrt', chunk: 3, maxLength: MAX_LEN });
    const src = SRC.slice(0, 3);
    const got = await Promise.all(variants.map((v) => s.submit(src, { strategy: 'hrt', maxLength: MAX_LEN, ...v })));
    await busy;
    for (const [i, v] of variants.entries()) {
      const want = await translateIds(plan, src, { strategy: 'hrt', maxLength: MAX_LEN, ...v });
      assert.equal(
        got[i]!.map((o) => o.result?.ids ?? o.error!.message),
        want.map((r) => r.ids),
        JSON.stringify(v),
      );
    }
    await s.drain();
  });

  test(NAMES[5]!, async () => {
    const ordinary = await loadPlan(path.join(tmp, 'plain.plan'));
    await rejects(
      () => translateIds(ordinary, [[5, 0]], { strategy: 'hrt' }),
      'PLANC_E410',
      /not an HRT plan: its model's config\.json had no hrt section/,
    );
    ordinary.close();
    await rejects(
      () => translateIds(plan, [[5, 0]], { strategy: 'hrt', chunk: 4 }),
      'PLANC_E410',
      /'hrt': chunk 4, but plan .* decodes chunk sizes 1, 2, 3/,
    );
    await rejects(
      () => translateIds(plan, [[5, 0]], { strategy: 'hrt', beamSize: 2, natBeams: 3 }),
      'PLANC_E411',
      /natBeams = 3; it must be in \[0, beamSize = 2\]/,
    );
    await rejects(
      () => translateIds(plan, [[5, 0]], { strategy: 'hrt', doSample: true }),
      'PLANC_E411',
      /doSample = true does not work with strategy 'hrt'/,
    );
    await rejects(
      () => translateIds(plan, [[5, 0]], { chunk: 2 }),
      'PLANC_E411',
      /chunk = 2; it must be 0 unless strategy is 'hrt'/,
    );
    const cli = planc(
      ['translate', path.join(tmp, 'hrt.plan'), '--ids', '--strategy', 'hrt', '--chunk', '5'],
      '5 6 0\n',
    );
    assert.is.not(cli.status, 0);
    assert.match(cli.stderr, /PLANC_E410: strategy 'hrt': --chunk 5, but plan/);
    const ok = planc(
      [
        'translate',
        path.join(tmp, 'hrt.plan'),
        '--ids',
        '--strategy',
        'hrt',
        '--chunk',
        '2',
        '--beam',
        '2',
        '--nat-beams',
        '1',
        '--max-length',
        String(MAX_LEN),
      ],
      '5 6 0\n',
    );
    assert.is(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /^\d+( \d+)*\n$/);
  });

  test(NAMES[6]!, () => {
    // an ordinary model with an hrt section: no position_ids, no NAT graph file
    const fake = path.join(tmp, 'fake-hrt');
    fs.cpSync(plain, fake, { recursive: true });
    const config = JSON.parse(fs.readFileSync(path.join(fake, 'config.json'), 'utf8')) as Record<string, unknown>;
    fs.writeFileSync(path.join(fake, 'config.json'), JSON.stringify({ ...config, hrt: { ...hrt, mask_id: 0 } }));
    const r = optimize(fake, path.join(tmp, 'fake.plan'));
    assert.is.not(r.status, 0);
    assert.match(r.stderr, /PLANC_E013: the model does not meet the HRT contract/);
    assert.match(r.stderr, /a \[BOS_k\] id or hrt\.mask_id equals the eos id 0/);
    assert.match(r.stderr, /hrt\.nat_graph "decoder_nat_model\.onnx" is not a file of the model folder/);
    // the NAT graph present (the decoder's file), the decoders still without position_ids
    fs.copyFileSync(path.join(fake, 'decoder_model.onnx'), path.join(fake, 'decoder_nat_model.onnx'));
    fs.writeFileSync(path.join(fake, 'config.json'), JSON.stringify({ ...config, hrt }));
    const r2 = optimize(fake, path.join(tmp, 'fake.plan'));
    assert.is.not(r2.status, 0);
    assert.match(
      r2.stderr,
      /PLANC_E013: .*graph 'decoder' has no input 'position_ids'.*graph 'decoder_with_past' has no input 'position_ids'/s,
    );
    assert.match(r2.stderr, /embeds input_ids in a table of 61 rows, fewer than hrt\.input_vocab_size = 64/);
    assert.match(r2.stderr, /graph 'decoder_nat' must have one output 'logits'/);
  });

  test(NAMES[7]!, async () => {
    // each source id s translates to s and 2s mod V: a third of the vocabulary or so is active for a batch
    const lists = Array.from({ length: VOCAB }, (_, x) => [...new Set([x, (2 * x) % VOCAB])].sort((a, b) => a - b));
    const offsets = Int32Array.from([0, ...lists.map((_, i) => lists.slice(0, i + 1).flat().length)]);
    const list: Shortlist = {
      file: 'synthetic',
      format: 'marian-binary',
      offsets,
      targets: Int32Array.from(lists.flat()),
      probs: null,
      frequent: Int32Array.from({ length: VOCAB }, (_, i) => i),
      ngrams: new Map(),
      maxNgram: 1,
      targetBound: VOCAB,
      skipped: 0,
    };
    const file = path.join(tmp, 'lex.bin');
    fs.writeFileSync(file, encodeMarianBinaryShortlist(list, 2, 100));
    const tokenizer = path.join(tmp, 'tokenizer.json');
    fs.writeFileSync(tokenizer, JSON.stringify(wordTokenizer(VOCAB)));
    const r = planc([
      'optimize',
      model,
      '-o',
      path.join(tmp, 'hrt-lex.plan'),
      '--tokenizer',
      tokenizer,
      '--vocab',
      `shortlist=${file}`,
      '--max-batch',
      '12',
      '--max-src-len',
      '24',
      '--max-tgt-len',
      '32',
      '--quiet',
    ]);
    assert.is(r.status, 0, r.stderr);
    const lex = await loadPlan(path.join(tmp, 'hrt-lex.plan'));
    assert.ok(lex.inputs('decoder_nat').some((i) => i.name === 'vocab_active'));
    const active = vocabFeeds(lex.header, SRC).vocab_active!.data as Uint8Array;
    assert.ok(active.reduce((a, x) => a + x, 0) < VOCAB, 'a real shortlist');
    for (const k of [2, 3]) {
      const got = await translateIds(lex, SRC, {
        strategy: 'hrt',
        chunk: k,
        maxLength: MAX_LEN,
        batchSize: SRC.length,
      });
      for (const x of got) for (const id of x.ids) assert.is(active[id], 1, `k = ${k}: id ${id} outside the shortlist`);
    }
    lex.close();
  });

  testIf(test, noCuda)(NAMES[8]!, () => {
    // d 64: the CUDA attention kernel takes head dims of multiples of 32
    const dir = path.join(tmp, 'hrt64');
    makeModel({
      arch: 'marian',
      d: 64,
      encoderLayers: 1,
      decoderLayers: 2,
      heads: 2,
      ffn: 64,
      vocab: VOCAB,
      maxPos: 128,
      activation: 'relu',
      seed: 1,
      out: dir,
      hrt: true,
    });
    for (const target of ['cpu', 'cuda']) {
      const r = optimize(dir, path.join(tmp, `hrt64-${target}.plan`), ['--target', target, '--max-batch', '8']);
      assert.is(r.status, 0, r.stderr);
    }
    const input = SRC.map((x) => x.join(' ')).join('\n') + '\n';
    for (const k of ['2', '3']) {
      const args = ['--ids', '--strategy', 'hrt', '--chunk', k, '--max-length', String(MAX_LEN), '--quiet'];
      const cpu = planc(['translate', path.join(tmp, 'hrt64-cpu.plan'), ...args], input);
      const sim = planc(['translate', path.join(tmp, 'hrt64-cuda.plan'), '--device', 'sim', ...args], input);
      assert.is(sim.status, 0, sim.stderr);
      assert.is(sim.stdout, cpu.stdout, `k = ${k}`);
    }
  });

  test.after(() => {
    plan?.close();
    plan2?.close();
    logitsPlan?.close();
    for (const s of sessions) void s.release();
    fs.rmSync(tmp, { recursive: true, force: true });
  });
}

test.run();
