// passes/cross-kv.ts: decoder_cross_kv, the first decoder step cut to its encoder K/V: golden IR on a small first
// step (and one whose K/V read the tokens), declines explained, the cut computing the first step's present.*.encoder.* exactly (reference evaluator and
// a compiled zoo plan), and the zoo families that get it.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import { importOnnxFile } from '../model/onnx/import-model.ts';
import { CROSS_KV_GRAPH, ROWS_STEP_GRAPH } from '../compiler/plan/io-names.ts';
import { printModel } from '../model/printer.ts';
import { Tensor } from '../compiler/tensor.ts';
import { addCrossKvGraph } from '../passes/cross-kv.ts';
import { loadPlan } from '../runtime/plan.ts';
import type { RtTensor } from '../runtime/tensor.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit, headSplit, permAttr, int64Init } from './helpers/onnx-build.ts';
import { planc } from './helpers/planc-cli.ts';
import { NEEDS_NATIVE, needsShared, testIf } from './helpers/skip.ts';
import { ZOO } from './helpers/zoo.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-crosskv-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.7 + seed) * 0.6);
const H = 2,
  D = 4,
  V = 10;

/**
 * A first decoder step: token embedding, one cross-attention over K/V projected from encoder_hidden_states, logits.
 * tokenInKv: the encoder keys also read the token's embedding (a decoder whose encoder K/V are not the encoder's alone).
 */
function firstStep(tokenInKv = false): Model {
  const keyInput = tokenInKv ? 'enc_plus' : 'encoder_hidden_states';
  const bytes = buildModel({
    inputs: [
      ['input_ids', 'int64', ['batch', 1]],
      ['encoder_hidden_states', 'float32', ['batch', 'src', H * D]],
      ['encoder_attention_mask', 'int64', ['batch', 'src']],
    ],
    outputs: [
      ['logits', 'float32', ['batch', 1, V]],
      ['present.0.encoder.key', 'float32', ['batch', H, 'src', D]],
      ['present.0.encoder.value', 'float32', ['batch', H, 'src', D]],
    ],
    initializers: [
      floatInit('emb', [V, H * D], vals(V * H * D, 1)),
      floatInit('wk', [H * D, H * D], vals(H * D * H * D, 2)),
      floatInit('bk', [H * D], vals(H * D, 3)),
      floatInit('wv', [H * D, H * D], vals(H * D * H * D, 4)),
      floatInit('wout', [H * D, V], vals(H * D * V, 5)),
      int64Init('heads_shape', [4], [0, 0, H, D]),
      int64Init('merge_shape', [3], [0, 0, H * D]),
    ],
    nodes: [
      { op: 'Gather', inputs: ['emb', 'input_ids'], outputs: ['tok'], name: 'embed' },
      ...(tokenInKv
        ? [{ op: 'Add', inputs: ['encoder_hidden_states', 'tok'], outputs: ['enc_plus'], name: 'mix' }]
        : []),
      { op: 'MatMul', inputs: [keyInput, 'wk'], outputs: ['k0'], name: 'k_proj' },
      { op: 'Add', inputs: ['k0', 'bk'], outputs: ['k3'], name: 'k_bias' },
      { op: 'MatMul', inputs: ['encoder_hidden_states', 'wv'], outputs: ['v3'], name: 'v_proj' },
      ...headSplit('tok', 'q4'),
      ...headSplit('k3', 'present.0.encoder.key'),
      ...headSplit('v3', 'present.0.encoder.value'),
      {
        op: 'Transpose',
        inputs: ['present.0.encoder.key'],
        outputs: ['kt'],
        name: 'kt',
        attrs: permAttr([0, 1, 3, 2]),
      },
      { op: 'MatMul', inputs: ['q4', 'kt'], outputs: ['qk'], name: 'qk' },
      { op: 'Softmax', inputs: ['qk'], outputs: ['p'], name: 'softmax', attrs: [{ name: 'axis', type: 2, i: -1 }] },
      { op: 'MatMul', inputs: ['p', 'present.0.encoder.value'], outputs: ['o4'], name: 'pv' },
      { op: 'Transpose', inputs: ['o4'], outputs: ['o3'], name: 'merge', attrs: permAttr([0, 2, 1, 3]) },
      { op: 'Reshape', inputs: ['o3', 'merge_shape'], outputs: ['h'], name: 'merge_reshape' },
      { op: 'MatMul', inputs: ['h', 'wout'], outputs: ['logits'], name: 'lm_head' },
    ],
  });
  const file = path.join(tmp, `first-${tokenInKv ? 'mixed' : 'plain'}.onnx`);
  fs.writeFileSync(file, bytes);
  const m = importOnnxFile(file);
  const g = [...m.graphs.values()][0]!;
  g.name = 'decoder';
  // the pass only asks that a per-row step exists: an empty stand-in
  m.graphs = new Map([
    [g.name, g],
    [ROWS_STEP_GRAPH, { ...g, name: ROWS_STEP_GRAPH }],
  ]);
  inferModel(m);
  return m;
}

/** Runs the pass, collecting what it explains. */
function run(m: Model): { out: Model; why: string[] } {
  const why: string[] = [];
  const out = addCrossKvGraph(m, { explain: (_pass, node, w) => why.push(`${node}: ${w}`) });
  return { out, why };
}

test('golden: the first step cut to its encoder K/V (the embedding, the query, the logits and input_ids gone)', () => {
  const { out, why } = run(firstStep());
  assert.equal(why, []);
  const g = out.graphs.get(CROSS_KV_GRAPH)!;
  assert.ok(g, 'decoder_cross_kv added');
  assert.equal(g.inputs, ['encoder_hidden_states']);
  assert.equal(g.outputs, ['present.0.encoder.key', 'present.0.encoder.value']);
  inferModel(out);
  matchGolden('cross-kv.txt', printModel({ ...out, graphs: new Map([[CROSS_KV_GRAPH, g]]) }));
});

test('the cut computes the first step encoder K/V exactly (reference evaluator)', () => {
  const m = firstStep();
  const { out } = run(m);
  const B = 2,
    S = 3;
  const enc = Tensor.fromNumbers('float32', [B, S, H * D], vals(B * S * H * D, 9));
  const full = evaluate(m, 'decoder', {
    input_ids: Tensor.fromNumbers('int64', [B, 1], [4, 7]),
    encoder_hidden_states: enc,
    encoder_attention_mask: Tensor.fromNumbers('int64', [B, S], new Array(B * S).fill(1)),
  });
  const cut = evaluate(out, CROSS_KV_GRAPH, { encoder_hidden_states: enc });
  for (const name of ['present.0.encoder.key', 'present.0.encoder.value']) {
    assert.equal(cut[name]!.dims, full[name]!.dims, name);
    assert.equal([...cut[name]!.nums], [...full[name]!.nums], name);
  }
});

test('encoder K/V that read the tokens: the cut takes input_ids too and computes what the first step does', () => {
  const m = firstStep(true);
  const { out, why } = run(m);
  assert.equal(why, []);
  const g = out.graphs.get(CROSS_KV_GRAPH)!;
  assert.equal(g.inputs, ['input_ids', 'encoder_hidden_states']);
  const feeds = {
    input_ids: Tensor.fromNumbers('int64', [2, 1], [4, 7]),
    encoder_hidden_states: Tensor.fromNumbers('float32', [2, 3, H * D], vals(2 * 3 * H * D, 9)),
    encoder_attention_mask: Tensor.fromNumbers('int64', [2, 3], new Array(6).fill(1)),
  };
  const full = evaluate(m, 'decoder', feeds);
  const cut = evaluate(out, CROSS_KV_GRAPH, {
    input_ids: feeds.input_ids,
    encoder_hidden_states: feeds.encoder_hidden_states,
  });
  assert.equal([...cut['present.0.encoder.key']!.nums], [...full['present.0.encoder.key']!.nums]);
});

test('declines, saying why: no per-row step, no encoder K/V', () => {
  const noRows = firstStep();
  noRows.graphs.delete(ROWS_STEP_GRAPH);
  const r2 = run(noRows);
  assert.not.ok(r2.out.graphs.has(CROSS_KV_GRAPH));
  assert.match(r2.why.join('\n'), /no decoder_with_past_rows/);
  const noKv = firstStep();
  noKv.graphs.get('decoder')!.outputs = ['logits'];
  const r3 = run(noKv);
  assert.not.ok(r3.out.graphs.has(CROSS_KV_GRAPH));
  assert.match(r3.why.join('\n'), /outputs no encoder K\/V/);
});

for (const family of ['marian', 'bart', 'mbart', 't5']) {
  const zooIt = testIf(test, (!nativeAvailable() && NEEDS_NATIVE) || (!ZOO && needsShared('models/zoo')));
  zooIt(
    `zoo ${family}: decoder_cross_kv where rows can join, giving the first step's encoder K/V bit for bit`,
    async () => {
      const file = path.join(tmp, `${family}.plan`);
      const r = planc([
        'optimize',
        path.join(ZOO!, family),
        '-o',
        file,
        '--quiet',
        '--max-batch',
        '4',
        '--max-tgt-len',
        '16',
      ]);
      assert.is(r.status, 0, r.stderr);
      const plan = await loadPlan(file);
      try {
        if (family === 't5') {
          assert.not.ok(plan.graphs.includes(ROWS_STEP_GRAPH), 't5 (relative position bias) has no per-row step');
          assert.not.ok(plan.graphs.includes(CROSS_KV_GRAPH), 'no per-row step, no cut');
          return;
        }
        assert.ok(plan.graphs.includes(CROSS_KV_GRAPH));
        const [B, S] = [2, 5];
        const ids = BigInt64Array.from({ length: B * S }, (_, i) => BigInt(3 + i));
        const mask = BigInt64Array.from([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], BigInt);
        const encFeeds: Record<string, RtTensor> = {
          input_ids: { dtype: 'int64', dims: [B, S], data: ids },
          attention_mask: { dtype: 'int64', dims: [B, S], data: mask },
        };
        const hidden = plan.runSync('encoder', encFeeds).last_hidden_state!;
        const start = BigInt(plan.header.decoding.decoderStartId ?? 0);
        const side: Record<string, RtTensor> = {
          encoder_hidden_states: hidden,
          encoder_attention_mask: encFeeds.attention_mask!,
          input_ids: { dtype: 'int64', dims: [B, 1], data: new BigInt64Array(B).fill(start) },
        };
        const first = plan.runSync('decoder', side);
        const cut = plan.runSync(
          CROSS_KV_GRAPH,
          Object.fromEntries(plan.inputs(CROSS_KV_GRAPH).map((i) => [i.name, side[i.name]!])),
        );
        const names = Object.keys(first).filter((k) => k.startsWith('present.') && k.includes('.encoder.'));
        assert.ok(names.length > 0);
        assert.equal(Object.keys(cut).sort(), names.sort());
        for (const k of names) {
          assert.equal(cut[k]!.dims, first[k]!.dims, k);
          const a = cut[k]!.data as Float32Array,
            b = first[k]!.data as Float32Array;
          assert.ok(a.length > 0 && a.every((x, i) => Object.is(x, b[i])), `${k}: bit for bit`);
        }
      } finally {
        plan.close();
      }
    },
  );
}

test.run();
