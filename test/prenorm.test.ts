// Pre-norm models (LN before each sub-layer, a final LN per stack): every fusion fires, the fused graphs match
// onnxruntime within 1e-4, and greedy decoding with the native runtime is token-identical to the reference greedy
// decoder over onnxruntime-node on the ONNX files, with equal scores.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { Tensor } from '../compiler/tensor.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { runPipeline, TRANSLATE_TOPK } from '../passes/pipeline.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { translateIds } from '../runtime/decode/translate-ids.ts';
import { greedyDecode, type GraphRunner } from './reference/greedy.ts';
import { conventionsOf } from '../runtime/decode/conventions.ts';
import { makeModel, type MakeModelOptions } from '../scripts/make-model/generate.ts';
import { checkGraph } from './helpers/cache-feeds.ts';
import { ort, runOrt } from './helpers/ort.ts';
import { seq2seqCases, type GraphCase } from './helpers/seq2seq-feeds.ts';
import { before } from './helpers/before.ts';
import { NEEDS_NATIVE, skipSuite } from './helpers/skip.ts';

const E = 2,
  L = 2,
  V = 1000;
const MAX_LEN = 24;
const N = 20;
/** A difference from the reference is accepted only where its top two log-probs are this close (a numerical tie). */
const TIE = 1e-4;
const TOL = 1e-4;
const GRAPHS = ['encoder', 'decoder', 'decoder_with_past'];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-prenorm-'));
const OPTS: MakeModelOptions = {
  arch: 'marian',
  d: 64,
  encoderLayers: E,
  decoderLayers: L,
  heads: 4,
  ffn: 128,
  vocab: V,
  maxPos: 128,
  activation: 'relu',
  // seed 13: some sources decode to eos at once, others run to the cap (random weights mostly repeat one token)
  preNorm: true,
  seed: 13,
  out: path.join(tmp, 'prenorm'),
};
const D = { startId: 0, eosId: 0, padId: 0 };

/** Seeded sources of 3..16 ids in [1, V), ending with the eos. */
function sources(n: number, seed: number): number[][] {
  let s = seed >>> 0;
  const rand = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
  return Array.from({ length: n }, () => [
    ...Array.from({ length: 3 + Math.floor(rand() * 14) }, () => 1 + Math.floor(rand() * (V - 1))),
    D.eosId,
  ]);
}

makeModel(OPTS);
const model = importSeq2SeqDir(OPTS.out);
/** The model's generate() conventions (make-model writes forced_eos_token_id 0: forced at the last allowed step). */
const C = conventionsOf(model.decoding, D);
const fused = runPipeline(model, { topk: TRANSLATE_TOPK });
const profile = { target: 'cpu' as const, maxBatch: 8, maxSrcLen: 32, maxTgtLen: MAX_LEN };
const built = buildPlan(fused, profile);
const toPlan = (b: ReturnType<typeof buildPlan>, name: string) => loadPlanBytes(encodePlan(b.header, b.blob), name);
const program = (g: string) => built.header.programs.find((p) => p.graph === g)!;

test('pre-norm model: config normalize_before, one LayerNormalization per sub-layer plus a final one per stack', () => {
  const cfg = JSON.parse(fs.readFileSync(path.join(OPTS.out, 'config.json'), 'utf8'));
  assert.is(cfg.normalize_before, true);
  const lns = (g: string) => model.graphs.get(g)!.nodes.filter((n) => n.op === 'LayerNormalization').length;
  assert.is(lns('encoder'), 2 * E + 1);
  assert.is(lns('decoder'), 3 * L + 1);
  assert.is(lns('decoder_with_past'), 3 * L + 1);
  // The encoder output is its final norm (make-model.test.ts checks the decoders' final norms feed the logits).
  const enc = model.graphs.get('encoder')!;
  assert.is(enc.nodes.find((n) => n.outputs.includes('last_hidden_state'))!.op, 'LayerNormalization');
});

test('every fusion fires on each graph (attention, layer norms incl. the final ones, cache writes, projection top-k)', () => {
  const want: Record<string, Record<string, number>> = {
    encoder: { 'planc.Attention': E, 'planc.LayerNorm': 2 * E + 1 },
    decoder: { 'planc.Attention': 2 * L, 'planc.LayerNorm': 3 * L + 1, 'planc.ProjectTopK': 1 },
    decoder_with_past: {
      'planc.Attention': 2 * L,
      'planc.LayerNorm': 3 * L + 1,
      'planc.CacheWrite': 2 * L,
      'planc.ProjectTopK': 1,
    },
  };
  for (const [g, ops] of Object.entries(want)) {
    const got = program(g).fusedOps;
    for (const [op, n] of Object.entries(ops)) assert.is(got[op], n, `${g}: ${op} (fused ops ${JSON.stringify(got)})`);
    assert.ok((got['planc.FusedMatMul'] ?? 0) > 0, `${g}: planc.FusedMatMul (fused ops ${JSON.stringify(got)})`);
  }
  assert.is(program('encoder').fusedOps['planc.CacheWrite'], undefined);
  assert.is(program('decoder').fusedOps['planc.CacheWrite'], undefined);
  const step = program('decoder_with_past');
  for (const k of ['attention', 'cache_write', 'project_topk', 'layer_norm', 'fused_matmul']) {
    assert.ok(
      step.kernels.some((x) => x.name === k),
      `decoder_with_past runs ${k} (kernels: ${[...new Set(step.kernels.map((x) => x.name))].join(', ')})`,
    );
  }
  assert.not.ok(
    step.kernels.some((x) => x.name === 'concat'),
    'no Concat of KV caches in the decoder step',
  );
  // No ONNX LayerNormalization or Softmax left anywhere.
  for (const g of fused.graphs.values()) {
    assert.not.ok(
      g.nodes.some((n) => n.domain === '' && (n.op === 'LayerNormalization' || n.op === 'Softmax')),
      `${g.name}: unfused norm or softmax`,
    );
  }
});

if (!nativeAvailable()) {
  skipSuite(test, NEEDS_NATIVE, [
    `fused pre-norm graphs (logits kept) and unfused ones match onnxruntime within ${TOL}`,
    'the reference outputs are mixed: some empty (eos first), some running to the cap (the eos forced there), several distinct tokens',
    'greedy translateIds at batch 1 (fused pre-norm plan): token-identical to the onnxruntime reference',
    'greedy translateIds at batch 8 with mixed lengths: token-identical to the onnxruntime reference',
  ]);
} else {
  const ids = sources(N, 5);
  let plan: Plan;
  let sessions: Record<string, ort.InferenceSession>;
  let runner: GraphRunner;
  let reference: number[][];

  let cases: Record<string, GraphCase>;

  before(test, async () => {
    plan = toPlan(built, 'prenorm.plan');
    cases = await seq2seqCases(model.sources, [ids[0]!, ids[1]!, ids[5]!, ids[7]!]);
    sessions = {};
    for (const g of ['encoder', 'decoder', 'decoder_with_past'])
      sessions[g] = await ort.InferenceSession.create(model.sources[g]!);
    runner = (g, feeds) => runOrt(sessions[g]!, feeds);
    reference = [];
    for (const s of ids) reference.push(...(await greedyDecode(runner, [s], { ...C, maxLength: MAX_LEN })));
  });
  test.after(async () => {
    plan?.close();
    for (const s of Object.values(sessions ?? {})) await s.release();
  });

  /** The reference's log-probs [positions][V] after feeding [start, ...prefix] (forced decoding with decoder_model). */
  async function refLogProbs(source: number[], prefix: number[]): Promise<Float64Array[]> {
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
    return input.map((_, t) => {
      const row = Float64Array.from(logits.nums.slice(t * V, (t + 1) * V));
      const max = row.reduce((a, b) => Math.max(a, b), -Infinity);
      const lse = max + Math.log(row.reduce((a, x) => a + Math.exp(x - max), 0));
      return row.map((x) => x - lse);
    });
  }

  /** Gap between the reference's top two log-probs after `prefix`. */
  async function topTwoGap(source: number[], prefix: number[]): Promise<number> {
    const lp = Array.from((await refLogProbs(source, prefix))[prefix.length]!).sort((a, b) => b - a);
    return lp[0]! - lp[1]!;
  }

  /** The reference's log-prob sum of an output (eos included when it ended before the cap; a forced one adds 0). */
  async function refScore(source: number[], out: number[]): Promise<number> {
    const lp = await refLogProbs(source, out);
    const seq = out.length < MAX_LEN ? [...out, D.eosId] : out;
    return seq.reduce((a, tok, j) => a + (j === MAX_LEN - 1 && C.forcedEosId !== undefined ? 0 : lp[j]![tok]!), 0);
  }

  test(`fused pre-norm graphs (logits kept) and unfused ones match onnxruntime within ${TOL}`, async () => {
    for (const [name, m] of [
      ['fused', runPipeline(model)],
      ['unfused', model],
    ] as const) {
      const p = toPlan(buildPlan(m, profile), `prenorm-${name}.plan`);
      try {
        for (const g of GRAPHS) await checkGraph(p, g, cases[g]!, TOL, 8);
      } finally {
        p.close();
      }
    }
  });

  /** Every output equals the reference's (a difference must be a near-tie); scores equal the reference's. */
  async function compare(label: string, results: { ids: number[]; score?: number }[]): Promise<void> {
    const got = results.map((r) => r.ids);
    let same = 0;
    for (let i = 0; i < ids.length; i++) {
      const want = reference[i]!;
      const score = await refScore(ids[i]!, got[i]!);
      assert.ok(
        Math.abs(results[i]!.score! - score) < 1e-3,
        `${label}: sentence ${i} score ${results[i]!.score} vs the reference's ${score}`,
      );
      if (got[i]!.join() === want.join()) {
        same++;
        continue;
      }
      let step = 0;
      while (step < want.length && want[step] === got[i]![step]) step++;
      const gap = await topTwoGap(ids[i]!, want.slice(0, step));
      console.log(`  ${label}: sentence ${i} differs at step ${step}; reference top-two gap ${gap.toExponential(2)}`);
      assert.ok(gap <= TIE, `${label}: sentence ${i} differs at step ${step} and is not a near-tie (gap ${gap})`);
    }
    assert.ok(same >= ids.length - 1, `${label}: only ${same}/${ids.length} identical`);
  }

  test('the reference outputs are mixed: some empty (eos first), some running to the cap (the eos forced there), several distinct tokens', () => {
    const lens = reference.map((r) => r.length);
    assert.ok(C.forcedEosId === 0, 'make-model sets forced_eos_token_id');
    assert.ok(lens.includes(0) && lens.includes(MAX_LEN - 1), `reference lengths ${lens.join(',')}`);
    assert.ok(new Set(reference.flat()).size >= 4, `reference outputs: ${JSON.stringify(reference)}`);
  });

  test('greedy translateIds at batch 1 (fused pre-norm plan): token-identical to the onnxruntime reference', async () => {
    const got = await translateIds(plan, ids, {
      batchSize: 1,
      maxLength: MAX_LEN,
      returnScores: true,
      lengthPenalty: 0,
    });
    await compare('batch 1', got);
  });

  test('greedy translateIds at batch 8 with mixed lengths: token-identical to the onnxruntime reference', async () => {
    const got = await translateIds(plan, ids, {
      batchSize: 8,
      maxLength: MAX_LEN,
      sortByLength: false,
      returnScores: true,
      lengthPenalty: 0,
    });
    await compare('batch 8', got);
  });
}

test.after(() => fs.rmSync(tmp, { recursive: true, force: true }));

test.run();
