// Decoder steps of n new tokens (--step-tokens N): the step-tokens pass (golden IR, refusals), and one step of n tokens
// equal to n single steps (logits and cache rows) on a small export, es-en (N 4) and every zoo family (N 3).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import { importOnnxFile, importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { CACHE_INPUT_PREFIX, PAST_LENGTH_INPUT, STEP_TOKENS_SYMBOL } from '../compiler/plan/io-names.ts';
import { printModel } from '../model/printer.ts';
import { Tensor } from '../compiler/tensor.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { fromRt, toRt } from './reference/rt-tensors.ts';
import { KV_CACHE_IN_PLACE } from '../passes/kv-cache-in-place.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { STEP_TOKENS } from '../passes/step-tokens.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { loadPlanBytes, type Plan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { cacheRows, toCacheFeeds } from './helpers/cache-feeds.ts';
import { failsWith } from './helpers/expect-error.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit, headSplit, permAttr } from './helpers/onnx-build.ts';
import { relErr } from './helpers/ort.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, skipSuite, testIf } from './helpers/skip.ts';
import { ZOO, zooFamilies, zooReference } from './helpers/zoo.ts';

const TOL = 1e-4;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-steps-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.3 + seed) * 0.7);

// ---- a small decoder step, exported the way es-en's is: input_ids [batch, 1], positions sliced past..past+len ----

const H = 2,
  D = 4,
  V = 11,
  P = 16;
const ints = (name: string, v: number[]) => ({ name, dims: [v.length], dataType: 7, int64Data: v });
const scalar = (name: string, v: number) => ({ name, dims: [], dataType: 7, int64Data: [v] });

/**
 * Embedding + position window, one self-attention over past K/V (Concat, no mask: exported with one token), logits.
 * `window`: 'step' slices the position table past..past+len(input_ids); 'one' hard-codes past..past+1.
 */
function stepExport(window: 'step' | 'one'): string {
  const bytes = buildModel({
    inputs: [
      ['input_ids', 'int64', ['batch', 1]],
      ['past_key_values.0.decoder.key', 'float32', ['batch', H, 'past', D]],
      ['past_key_values.0.decoder.value', 'float32', ['batch', H, 'past', D]],
    ],
    outputs: [
      ['logits', 'float32', ['batch', 1, V]],
      ['present.0.decoder.key', 'float32', ['batch', H, 'total', D]],
      ['present.0.decoder.value', 'float32', ['batch', H, 'total', D]],
    ],
    initializers: [
      floatInit('emb', [V, H * D], vals(V * H * D, 1)),
      floatInit('pos', [P, H * D], vals(P * H * D, 2)),
      ...['wq', 'wk', 'wv'].map((w, k) => floatInit(w, [H * D, H * D], vals(H * D * H * D, 3 + k))),
      floatInit('wo', [H * D, V], vals(H * D * V, 7)),
      ints('heads_shape', [0, 0, H, D]),
      ints('merge_shape', [0, 0, H * D]),
      floatInit('scale', [], [0.5]),
      scalar('two', 2),
      scalar('one', 1),
      ints('axis0', [0]),
      ints('one_1', [1]),
    ],
    nodes: [
      { op: 'Gather', inputs: ['emb', 'input_ids'], outputs: ['x0'], name: 'embed' },
      { op: 'Shape', inputs: ['past_key_values.0.decoder.key'], outputs: ['past_shape'], name: 'past_shape' },
      {
        op: 'Gather',
        inputs: ['past_shape', 'two'],
        outputs: ['past_len'],
        name: 'past_len',
        attrs: [{ name: 'axis', type: 2, i: 0 }],
      },
      { op: 'Unsqueeze', inputs: ['past_len', 'axis0'], outputs: ['start'], name: 'start' },
      ...(window === 'step'
        ? [
            { op: 'Shape', inputs: ['input_ids'], outputs: ['ids_shape'], name: 'ids_shape' },
            {
              op: 'Gather',
              inputs: ['ids_shape', 'one'],
              outputs: ['new_len'],
              name: 'new_len',
              attrs: [{ name: 'axis', type: 2, i: 0 }],
            },
            { op: 'Unsqueeze', inputs: ['new_len', 'axis0'], outputs: ['new_len1'], name: 'new_len1' },
            { op: 'Add', inputs: ['start', 'new_len1'], outputs: ['end'], name: 'end' },
          ]
        : [{ op: 'Add', inputs: ['start', 'one_1'], outputs: ['end'], name: 'end' }]),
      { op: 'Slice', inputs: ['pos', 'start', 'end', 'axis0'], outputs: ['positions'], name: 'positions' },
      { op: 'Add', inputs: ['x0', 'positions'], outputs: ['x'], name: 'add_positions' },
      { op: 'MatMul', inputs: ['x', 'wq'], outputs: ['q3'], name: 'q' },
      { op: 'MatMul', inputs: ['x', 'wk'], outputs: ['k3'], name: 'k' },
      { op: 'MatMul', inputs: ['x', 'wv'], outputs: ['v3'], name: 'v' },
      ...headSplit('q3', 'q4'),
      ...headSplit('k3', 'k4'),
      ...headSplit('v3', 'v4'),
      {
        op: 'Concat',
        inputs: ['past_key_values.0.decoder.key', 'k4'],
        outputs: ['present.0.decoder.key'],
        name: 'cat_k',
        attrs: [{ name: 'axis', type: 2, i: 2 }],
      },
      {
        op: 'Concat',
        inputs: ['past_key_values.0.decoder.value', 'v4'],
        outputs: ['present.0.decoder.value'],
        name: 'cat_v',
        attrs: [{ name: 'axis', type: 2, i: 2 }],
      },
      {
        op: 'Transpose',
        inputs: ['present.0.decoder.key'],
        outputs: ['kt'],
        name: 'kt',
        attrs: permAttr([0, 1, 3, 2]),
      },
      { op: 'MatMul', inputs: ['q4', 'kt'], outputs: ['qk'], name: 'qk' },
      { op: 'Mul', inputs: ['qk', 'scale'], outputs: ['scaled'], name: 'scale' },
      { op: 'Softmax', inputs: ['scaled'], outputs: ['p'], name: 'softmax', attrs: [{ name: 'axis', type: 2, i: -1 }] },
      { op: 'MatMul', inputs: ['p', 'present.0.decoder.value'], outputs: ['o4'], name: 'pv' },
      { op: 'Transpose', inputs: ['o4'], outputs: ['o3'], name: 'merge', attrs: permAttr([0, 2, 1, 3]) },
      { op: 'Reshape', inputs: ['o3', 'merge_shape'], outputs: ['y'], name: 'merge_reshape' },
      { op: 'MatMul', inputs: ['y', 'wo'], outputs: ['logits'], name: 'project' },
    ],
  });
  const p = path.join(tmp, `step-${window}.onnx`);
  fs.writeFileSync(p, bytes);
  return p;
}

/** Concatenates [B, n_k, ...] tensors along axis 1. */
function concat1(ts: Tensor[]): Tensor {
  const [b, ...rest] = ts[0]!.dims as number[];
  const inner = rest.slice(1).reduce((a, x) => a * x, 1);
  const n = ts.reduce((a, t) => a + t.dims[1]!, 0);
  const out = new Float32Array(b! * n * inner);
  let at = 0;
  for (const t of ts) {
    const k = t.dims[1]!;
    for (let r = 0; r < b!; r++)
      out.set(t.nums.subarray(r * k * inner, (r + 1) * k * inner) as Float32Array, (r * n + at) * inner);
    at += k;
  }
  return new Tensor('float32', [b!, n, ...rest.slice(1)], out);
}

test('step-tokens: golden IR before and after (input_ids [batch, step_tokens], positions past..past+step_tokens), then causal cached attention', () => {
  const m = importOnnxFile(stepExport('step'));
  inferModel(m);
  matchGolden('step-tokens.before.txt', printModel(m));
  const s = STEP_TOKENS.run(m, { stepTokens: 3 });
  inferModel(s);
  matchGolden('step-tokens.after.txt', printModel(s));
  assert.is(s.decoding.stepTokens, 3);
  assert.is(m.graphs.get('main')!.values.get('input_ids')!.type!.shape![1], 1, 'the input model is untouched');
  const f = runPipeline(importOnnxFile(stepExport('step')), { stepTokens: 3 });
  matchGolden('kv-cache-in-place.step-tokens.after.txt', printModel(f));
  const att = f.graphs.get('main')!.nodes.filter((n) => n.op === 'Attention');
  assert.equal(
    att.map((n) => n.attrs.is_causal),
    [{ kind: 'int', value: 1 }],
  );
  assert.is(STEP_TOKENS.run(m, {}), m, 'stepTokens 1 leaves the model as it is');
});

test('step-tokens: one fused step of 3 tokens (evaluator) equals three exported single steps, logits and cache rows', () => {
  const m = importOnnxFile(stepExport('step'));
  const f = runPipeline(importOnnxFile(stepExport('step')), { stepTokens: 3 });
  const B = 2,
    past = 2,
    tokens = [
      [3, 7, 1],
      [9, 0, 4],
    ];
  let feeds: Record<string, Tensor> = {
    'past_key_values.0.decoder.key': Tensor.fromNumbers('float32', [B, H, past, D], vals(B * H * past * D, 11)),
    'past_key_values.0.decoder.value': Tensor.fromNumbers('float32', [B, H, past, D], vals(B * H * past * D, 12)),
  };
  const cacheFeeds = toCacheFeeds({ ...feeds, input_ids: Tensor.fromNumbers('int64', [B, 3], tokens.flat()) }, 8);
  const single: Tensor[] = [];
  let last: Record<string, Tensor> = {};
  for (let t = 0; t < 3; t++) {
    last = evaluate(m, 'main', {
      ...feeds,
      input_ids: Tensor.fromNumbers(
        'int64',
        [B, 1],
        tokens.map((r) => r[t]!),
      ),
    });
    single.push(last.logits!);
    feeds = {
      'past_key_values.0.decoder.key': last['present.0.decoder.key']!,
      'past_key_values.0.decoder.value': last['present.0.decoder.value']!,
    };
  }
  const writer = f.graphs
    .get('main')!
    .nodes.find((n) => n.op === 'CacheWrite' && n.inputs[0] === 'kv_cache.0.decoder.value')!.name;
  let written: Tensor | undefined;
  const got = evaluate(f, 'main', cacheFeeds, {
    onNode: (node, outs) => {
      if (node === writer) written = outs[0];
    },
  });
  const e = relErr(got.logits!, concat1(single));
  assert.ok(e < 1e-5, `logits: relative error ${e.toExponential(2)}`);
  const rows = cacheRows(written!.nums as Float32Array, [B, H, 8, D], past + 3);
  assert.ok(
    relErr(rows, last['present.0.decoder.value']!) < 1e-5,
    'the cache holds past + 3 rows as the single steps left them',
  );
});

test('step-tokens: an export that fixes the step at one token is refused naming the node; bad N and --no-fuse are usage errors', () => {
  const fixed = importOnnxFile(stepExport('one'));
  failsWith(
    () => runPipeline(fixed, { stepTokens: 2 }),
    'PLANC_E404',
    "stepTokens 2: node 'positions' takes the window past..past+1 of fixed extent 1 at the past length: the export fixes the step at one token [graph main, node 'positions' (Slice), during step-tokens]",
  );
  // as a default (planc optimize without --step-tokens) the same export keeps one token, explained
  const why: string[] = [];
  const kept = STEP_TOKENS.run(fixed, {
    stepTokens: 8,
    stepTokensDefault: true,
    explain: (pass, node, w) => why.push(`${pass} ${node}: ${w}`),
  });
  assert.is(kept, fixed);
  assert.equal(why, [
    "step-tokens positions: the default of 8 step tokens is not taken: PLANC_E404: stepTokens 8: node 'positions' takes the window past..past+1 of fixed extent 1 at the past length: the export fixes the step at one token [graph main, node 'positions' (Slice), during step-tokens]",
  ]);
  const m = importOnnxFile(stepExport('step'));
  // kv-cache-in-place alone (no planc.Attention reads the present K/V): the past stays a Concat, refused naming it
  const relaxed = STEP_TOKENS.run(m, { stepTokens: 2 });
  inferModel(relaxed);
  failsWith(
    () => KV_CACHE_IN_PLACE.run(relaxed, { stepTokens: 2 }),
    'PLANC_E404',
    /stepTokens 2: past input 'past_key_values.0.decoder.key' did not become an in-place cache read by planc.Attention \('present.0.decoder.key' is read by something other than planc.Attention.*\), so its attention cannot be made causal among the new tokens \[graph main, node 'cat_k' \(Concat\)/,
  );
  failsWith(() => runPipeline(m, { stepTokens: 0 }), 'PLANC_E302', /stepTokens must be an integer ≥ 1.*got 0/);
  failsWith(() => runPipeline(m, { stepTokens: 1.5 }), 'PLANC_E302', /got 1\.5/);
  failsWith(
    () => runPipeline(m, { stepTokens: 2, disable: ['fuse'] }),
    'PLANC_E302',
    /stepTokens 2 needs fuse-attention and kv-cache-in-place.*fuse leaves/,
  );
  failsWith(
    () => runPipeline(m, { stepTokens: 2, disable: ['kv-cache-in-place'] }),
    'PLANC_E302',
    /disabling kv-cache-in-place/,
  );
  assert.ok(
    runPipeline(m, { disable: ['fuse'] })
      .graphs.get('main')!
      .nodes.some((n) => n.op === 'Softmax'),
    '--no-fuse alone still plans',
  );
});

test('planc optimize: --step-tokens 0 and --step-tokens 2 --no-fuse fail with clear usage errors', () => {
  const file = stepExport('step');
  const out = path.join(tmp, 'x.plan');
  for (const [args, want] of [
    [
      ['--step-tokens', '0'],
      /PLANC_E301: --step-tokens must be an integer ≥ 1 \(the most new tokens one decoder step takes\), got 0/,
    ],
    [
      ['--step-tokens', '2', '--no-fuse'],
      /PLANC_E301: --step-tokens 2 needs fuse-attention and kv-cache-in-place: .* --no-fuse leaves it unfused/,
    ],
  ] as const) {
    const r = planc(['optimize', file, '-o', out, '--no-tokenizer', '--quiet', ...args]);
    assert.is.not(r.status, 0, `${args.join(' ')} fails`);
    assert.match(r.stderr, want);
    assert.not.ok(fs.existsSync(out), 'no plan is written');
  }
});

// ---- real exports on the native runtime: a step of n tokens against n single steps ----

/** A batch mid-decoding: the encoder's outputs, cross K/V and the self-attention caches (mutated by steps). */
interface Decoding {
  feeds: Record<string, RtTensor>;
  past: number;
}

const rt = (t: Tensor) => toRt(t);
const ids = (rows: number[][]) => rt(Tensor.fromNumbers('int64', [rows.length, rows[0]!.length], rows.flat()));
const cloneFeeds = (f: Record<string, RtTensor>) =>
  Object.fromEntries(
    Object.entries(f).map(([k, v]) => [k, { ...v, dims: [...v.dims], data: v.data.slice() } as RtTensor]),
  );

/** Encoder on the padded sources, the first decoder step on the start token; the caches hold its row. */
function begin(
  plan: Plan,
  sources: number[][],
  startId: number,
  padId: number,
  capacity: number,
): { state: Decoding; logits: Tensor } {
  const len = Math.max(...sources.map((s) => s.length));
  const srcIds = sources.map((s) => [...s, ...new Array<number>(len - s.length).fill(padId)]);
  const mask = ids(sources.map((s) => [...s.map(() => 1), ...new Array<number>(len - s.length).fill(0)]));
  const enc = plan.runSync('encoder', { input_ids: ids(srcIds), attention_mask: mask });
  const first = plan.runSync('decoder', {
    input_ids: ids(sources.map(() => [startId])),
    encoder_attention_mask: mask,
    encoder_hidden_states: enc.last_hidden_state!,
  });
  const past: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(first))
    if (k.startsWith('present.')) past[k.replace('present.', 'past_key_values.')] = fromRt(v);
  const feeds = Object.fromEntries(Object.entries(toCacheFeeds(past, capacity)).map(([k, v]) => [k, rt(v)]));
  feeds.encoder_attention_mask = mask;
  return { state: { feeds, past: 1 }, logits: fromRt(first.logits!) };
}

/** One decoder_with_past step of rows.length × n tokens; appends to the caches in place. */
function step(plan: Plan, s: Decoding, rows: number[][]): Tensor {
  s.feeds.input_ids = ids(rows);
  s.feeds[PAST_LENGTH_INPUT] = rt(Tensor.fromNumbers('int64', [], [s.past]));
  const out = plan.runSync('decoder_with_past', s.feeds);
  s.past += rows[0]!.length;
  return fromRt(out.logits!);
}

/** argmax over the last axis of the last position of each row. */
function lastArgmax(logits: Tensor): number[] {
  const [b, n, v] = logits.dims as [number, number, number];
  return Array.from({ length: b }, (_, r) => {
    const row = logits.nums.subarray((r * n + n - 1) * v, (r * n + n) * v);
    let best = 0;
    for (let i = 1; i < v; i++) if (row[i]! > row[best]!) best = i;
    return best;
  });
}

/** Largest relative error between the valid rows of two states' caches. */
function cacheErr(a: Decoding, b: Decoding): number {
  let worst = 0;
  for (const k of Object.keys(a.feeds).filter((x) => x.startsWith(CACHE_INPUT_PREFIX))) {
    const [x, y] = [a.feeds[k]!, b.feeds[k]!];
    worst = Math.max(
      worst,
      relErr(cacheRows(x.data as Float32Array, x.dims, a.past), cacheRows(y.data as Float32Array, y.dims, b.past)),
    );
  }
  return worst;
}

function planOf(model: Model, name: string): Plan {
  const built = buildPlan(model, { target: 'cpu', maxBatch: 2, maxSrcLen: 128, maxTgtLen: 8 });
  return loadPlanBytes(encodePlan(built.header, built.blob), name);
}

/**
 * From the same first step: n single steps on the one-token plan, then one step of those n tokens on the n-token
 * plan; its logits row i must be single step i's, and the caches must hold the same rows. The tokens are the first
 * step's best one, then ids that differ per row and position (a small model's greedy path may repeat one id).
 */
function compareSteps(one: Plan, many: Plan, sources: number[][], startId: number, padId: number, n: number): void {
  const { state, logits } = begin(one, sources, startId, padId, 8);
  const multi: Decoding = { feeds: cloneFeeds(state.feeds), past: state.past };
  const vocab = logits.dims[2]!;
  const tokens = lastArgmax(logits).map((best, r) =>
    Array.from({ length: n }, (_, t) => (t === 0 ? best : (5 + 37 * t + 101 * r) % vocab)),
  );
  const single = Array.from({ length: n }, (_, t) =>
    step(
      one,
      state,
      tokens.map((row) => [row[t]!]),
    ),
  );
  const got = step(many, multi, tokens);
  assert.equal(got.dims, [sources.length, n, single[0]!.dims[2]]);
  const e = relErr(got, concat1(single));
  assert.ok(
    e < TOL,
    `logits of one step of ${n} tokens vs ${n} single steps: relative error ${e.toExponential(2)} (tokens ${JSON.stringify(tokens)})`,
  );
  const c = cacheErr(multi, state);
  assert.ok(multi.past === state.past && c < TOL, `cache rows: relative error ${c.toExponential(2)}`);
}

const shared = sharedDir();
const ES_EN = shared && path.join(shared, 'models', 'es-en');
const haveEsEn = !!ES_EN && fs.existsSync(ES_EN);
const native = nativeAvailable();
const esEnSkip = !haveEsEn ? needsShared('models/es-en') : !native && NEEDS_NATIVE;

testIf(test, esEnSkip)(
  'es-en --step-tokens 4 (batch 2, two sources): one step of 4 tokens equals 4 single steps; n = 1 equals the one-token plan',
  () => {
    const srcIds: number[][] = JSON.parse(fs.readFileSync(path.join(ES_EN!, 'test_ids.json'), 'utf8')).src_ids;
    const sources = [srcIds[0]!, srcIds[5]!];
    const model = importSeq2SeqDir(ES_EN!);
    const one = planOf(runPipeline(model), 'es-en-1.plan');
    const four = planOf(runPipeline(importSeq2SeqDir(ES_EN!), { stepTokens: 4 }), 'es-en-4.plan');
    try {
      assert.is(four.header.decoding.stepTokens, 4);
      assert.is(four.header.profile.symbolMax[STEP_TOKENS_SYMBOL], 4);
      assert.is(one.header.decoding.stepTokens, undefined);
      const d = model.decoding;
      compareSteps(one, four, sources, d.decoderStartId!, d.padId!, 4);
      // n = 1 on the 4-token plan: the one-token plan's logits and cache row
      const a = begin(one, sources, d.decoderStartId!, d.padId!, 8);
      const b: Decoding = { feeds: cloneFeeds(a.state.feeds), past: a.state.past };
      const next = lastArgmax(a.logits).map((id) => [id]);
      const [x, y] = [step(one, a.state, next), step(four, b, next)];
      assert.ok(relErr(y, x) < 1e-6, `n = 1: relative error ${relErr(y, x).toExponential(2)}`);
      assert.ok(cacheErr(b, a.state) < 1e-6, 'n = 1: the same cache row');
      // more than N is refused by the plan's bound
      assert.throws(
        () =>
          step(
            four,
            b,
            next.map((r) => [...r, ...r, ...r, ...r, ...r]),
          ),
        /step_tokens = 5.*maximum 4 \(optimize with stepTokens N\)/,
      );
    } finally {
      one.close();
      four.close();
    }
  },
);

testIf(test, esEnSkip)(
  'planc optimize --step-tokens 4 es-en: inspect shows it, the plan takes 4 tokens per step',
  () => {
    const out = path.join(tmp, 'es-en-4.plan');
    const r = planc(['optimize', ES_EN!, '-o', out, '--step-tokens', '4', '--quiet']);
    assert.is(r.status, 0, r.stderr);
    const shown = planc(['inspect', out]);
    assert.match(shown.stdout, /decoding: .*stepTokens 4/);
    const json = JSON.parse(planc(['inspect', out, '--json']).stdout);
    assert.is(json.decoding.stepTokens, 4);
    assert.is(json.profile.symbolMax[STEP_TOKENS_SYMBOL], 4);
    const ids = json.graphs.find((g: { name: string }) => g.name === 'decoder_with_past').inputs;
    assert.ok(ids.includes('input_ids') && ids.includes(PAST_LENGTH_INPUT));
  },
);

const FAMILIES = ['marian', 'mbart', 't5', 'bart'];
const families = zooFamilies();
if (families.length === 0 || !native) {
  skipSuite(
    test,
    families.length === 0 ? needsShared('models/zoo') : NEEDS_NATIVE,
    FAMILIES.map((f) => `${f} --step-tokens 3: one step of 3 tokens equals 3 single steps (batch 2)`),
  );
} else {
  for (const family of FAMILIES.filter((f) => families.includes(f))) {
    test(`${family} --step-tokens 3: one step of 3 tokens equals 3 single steps (batch 2)`, () => {
      const dir = path.join(ZOO!, family);
      const ref = zooReference(family);
      const model = importSeq2SeqDir(dir);
      const one = planOf(runPipeline(model), `${family}-1.plan`);
      const three = planOf(runPipeline(importSeq2SeqDir(dir), { stepTokens: 3 }), `${family}-3.plan`);
      try {
        assert.is(three.header.decoding.stepTokens, 3);
        compareSteps(
          one,
          three,
          [ref.src_ids[0]!, ref.src_ids[5]!],
          model.decoding.decoderStartId ?? 0,
          model.decoding.padId ?? 0,
          3,
        );
      } finally {
        one.close();
        three.close();
      }
    });
  }
}

test.run();
