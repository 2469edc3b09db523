// Attention fusion and the in-place KV cache: golden IR, declines explained, and equal outputs (reference evaluator).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import type { Model } from '../compiler/ir.ts';
import { importOnnxFile } from '../model/onnx/import-model.ts';
import { printModel } from '../model/printer.ts';
import { Tensor } from '../compiler/tensor.ts';
import { FUSE_ATTENTION } from '../passes/fuse-attention.ts';
import { KV_CACHE_IN_PLACE } from '../passes/kv-cache-in-place.ts';
import { runPipeline } from '../passes/pipeline.ts';
import { toCacheFeeds, cacheRows } from './helpers/cache-feeds.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit, headSplit, permAttr } from './helpers/onnx-build.ts';
import { buildPlan } from '../codegen/build-plan.ts';
import { encodePlan } from '../compiler/plan/format.ts';
import { loadPlanBytes } from '../runtime/plan.ts';
import { nativeAvailable } from '../runtime/native.ts';
import { fromRt, toRt } from './reference/rt-tensors.ts';
import type { NodeSpec } from './helpers/onnx-build.ts';
import { NEEDS_NATIVE, skipPart } from './helpers/skip.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-attn-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.3 + seed) * 0.7);
const H = 2,
  D = 4;
const ints = (name: string, v: number[]) => ({ name, dims: [v.length], dataType: 7, int64Data: v });

/**
 * One decoder step of self-attention the way exporters write it: Q/K/V heads split, K/V appended to the past by
 * Concat (present outputs), QKᵀ, scale, additive mask, Softmax, ·V, heads merged; `mask` picks the mask form.
 */
function stepModel(mask: 'add' | 'where'): string {
  const maskInput: [string, 'float32' | 'bool', (number | string)[]] =
    mask === 'add' ? ['m', 'float32', ['batch', 1, 1, 'past + 1']] : ['m', 'bool', ['batch', 1, 1, 'past + 1']];
  const masked: NodeSpec[] =
    mask === 'add'
      ? [{ op: 'Add', inputs: ['scaled', 'm'], outputs: ['masked'], name: 'mask_add' }]
      : [{ op: 'Where', inputs: ['m', 'scaled', 'neg_inf'], outputs: ['masked'], name: 'mask_where' }];
  const bytes = buildModel({
    inputs: [
      ['q3', 'float32', ['batch', 1, H * D]],
      ['k3', 'float32', ['batch', 1, H * D]],
      ['v3', 'float32', ['batch', 1, H * D]],
      ['past_key_values.0.decoder.key', 'float32', ['batch', H, 'past', D]],
      ['past_key_values.0.decoder.value', 'float32', ['batch', H, 'past', D]],
      maskInput,
    ],
    outputs: [
      ['y', 'float32', ['batch', 1, H * D]],
      ['present.0.decoder.key', 'float32', ['batch', H, 'total', D]],
      ['present.0.decoder.value', 'float32', ['batch', H, 'total', D]],
    ],
    initializers: [
      ints('heads_shape', [0, 0, H, D]),
      ints('merge_shape', [0, 0, H * D]),
      floatInit('scale', [], [0.5]),
      floatInit('neg_inf', [], [-Infinity]),
    ],
    nodes: [
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
      ...masked,
      { op: 'Softmax', inputs: ['masked'], outputs: ['p'], name: 'softmax', attrs: [{ name: 'axis', type: 2, i: -1 }] },
      { op: 'MatMul', inputs: ['p', 'present.0.decoder.value'], outputs: ['o4'], name: 'pv' },
      { op: 'Transpose', inputs: ['o4'], outputs: ['o3'], name: 'merge', attrs: permAttr([0, 2, 1, 3]) },
      { op: 'Reshape', inputs: ['o3', 'merge_shape'], outputs: ['y'], name: 'merge_reshape' },
    ],
  });
  const p = path.join(tmp, `step-${mask}.onnx`);
  fs.writeFileSync(p, bytes);
  return p;
}

function stepFeeds(mask: 'add' | 'where', past: number): Record<string, Tensor> {
  const B = 2,
    total = past + 1;
  const m = Array.from({ length: B * total }, (_, i) => (i % total === 1 ? 0 : 1));
  return {
    q3: Tensor.fromNumbers('float32', [B, 1, H * D], vals(B * H * D, 1)),
    k3: Tensor.fromNumbers('float32', [B, 1, H * D], vals(B * H * D, 2)),
    v3: Tensor.fromNumbers('float32', [B, 1, H * D], vals(B * H * D, 3)),
    'past_key_values.0.decoder.key': Tensor.fromNumbers('float32', [B, H, past, D], vals(B * H * past * D, 4)),
    'past_key_values.0.decoder.value': Tensor.fromNumbers('float32', [B, H, past, D], vals(B * H * past * D, 5)),
    m:
      mask === 'add'
        ? Tensor.fromNumbers(
            'float32',
            [B, 1, 1, total],
            m.map((x) => (x ? 0 : -1e9)),
          )
        : Tensor.fromNumbers('bool', [B, 1, 1, total], m),
  };
}

/** fuse-attention then kv-cache-in-place on a step model, its IR matched to the goldens before and after each pass. */
function fuseStepWithGoldens(file: string, before: string, afterAttention: string, afterCache: string): Model {
  const m = importOnnxFile(file);
  inferModel(m);
  matchGolden(before, printModel(m));
  const a = FUSE_ATTENTION.run(m, {});
  inferModel(a);
  matchGolden(afterAttention, printModel(a));
  const c = KV_CACHE_IN_PLACE.run(a, {});
  inferModel(c);
  matchGolden(afterCache, printModel(c));
  return c;
}

test('fuse-attention + kv-cache-in-place: golden IR before and after', () => {
  const g = fuseStepWithGoldens(
    stepModel('add'),
    'fuse-attention.before.txt',
    'fuse-attention.after.txt',
    'kv-cache-in-place.after.txt',
  ).graphs.get('main')!;
  assert.equal(
    g.nodes
      .filter((n) => n.domain === 'planc')
      .map((n) => n.op)
      .sort(),
    ['Attention', 'CacheWrite', 'CacheWrite'],
  );
  assert.not.ok(
    g.nodes.some((n) => n.op === 'Concat' && n.inputs.some((x) => x.startsWith('kv_cache'))),
    'no Concat of caches remains',
  );
  assert.equal(g.outputs, ['y'], 'present outputs are gone: the cache holds them');
});

for (const mask of ['add', 'where'] as const) {
  test(`${mask} mask: the fused in-place step computes what the exported one does, and appends the new rows`, () => {
    const m = importOnnxFile(stepModel(mask));
    const f = runPipeline(m);
    const g = f.graphs.get('main')!;
    assert.is(g.nodes.filter((n) => n.op === 'Attention' && n.domain === 'planc').length, 1);
    const feeds = stepFeeds(mask, 3);
    const want = evaluate(m, 'main', feeds);
    const cacheFeeds = toCacheFeeds(feeds, 6);
    const got = evaluate(f, 'main', cacheFeeds);
    const diff = Math.max(...Array.from(want.y!.nums, (x, i) => Math.abs(x - got.y!.nums[i]!)));
    assert.ok(diff < 1e-6, `max diff ${diff}`);
    // the evaluator's CacheWrite is functional: its output holds the appended cache
    let written: Tensor | undefined;
    const writer = g.nodes.find((n) => n.op === 'CacheWrite' && n.inputs[0] === 'kv_cache.0.decoder.key')!.name;
    evaluate(f, 'main', cacheFeeds, {
      onNode: (node, outs) => {
        if (node === writer) written = outs[0];
      },
    });
    const rows = cacheRows(written!.data as Float32Array, [2, H, 6, D], 4);
    assert.equal(Array.from(rows.nums), Array.from(want['present.0.decoder.key']!.nums));
  });
}

/**
 * A decoder step the way optimum's TorchScript exports of transformers 4.5x write it: √scale on Q and on Kᵀ (Kᵀ a
 * Transpose of the present K), a per-head additive bias [1,H,1,L] (T5's position bias) sliced to the present length
 * read through Shape(present K), and a float→float Cast before the Softmax.
 */
function sdpaStepModel(): string {
  const bytes = buildModel({
    inputs: [
      ['q3', 'float32', ['batch', 1, H * D]],
      ['k3', 'float32', ['batch', 1, H * D]],
      ['v3', 'float32', ['batch', 1, H * D]],
      ['past_key_values.0.decoder.key', 'float32', ['batch', H, 'past', D]],
      ['past_key_values.0.decoder.value', 'float32', ['batch', H, 'past', D]],
      ['bias', 'float32', [1, H, 1, 'past + 1']],
    ],
    outputs: [
      ['y', 'float32', ['batch', 1, H * D]],
      ['present.0.decoder.key', 'float32', ['batch', H, 'total', D]],
      ['present.0.decoder.value', 'float32', ['batch', H, 'total', D]],
    ],
    initializers: [
      ints('heads_shape', [0, 0, H, D]),
      ints('merge_shape', [0, 0, H * D]),
      floatInit('root_scale', [], [Math.sqrt(0.5)]),
      { name: 'two', dims: [], dataType: 7, int64Data: [2] },
      ints('zero', [0]),
      ints('three', [3]),
    ],
    nodes: [
      ...headSplit('q3', 'q4'),
      ...headSplit('k3', 'k4'),
      ...headSplit('v3', 'v4'),
      {
        op: 'Concat',
        inputs: ['past_key_values.0.decoder.key', 'k4'],
        outputs: ['present.0.decoder.key'],
        name: 'cat_k',
        attrs: [{ name: 'axis', type: 2, i: -2 }],
      },
      {
        op: 'Concat',
        inputs: ['past_key_values.0.decoder.value', 'v4'],
        outputs: ['present.0.decoder.value'],
        name: 'cat_v',
        attrs: [{ name: 'axis', type: 2, i: -2 }],
      },
      { op: 'Shape', inputs: ['present.0.decoder.key'], outputs: ['kshape'], name: 'kshape' },
      {
        op: 'Gather',
        inputs: ['kshape', 'two'],
        outputs: ['klen'],
        name: 'klen',
        attrs: [{ name: 'axis', type: 2, i: 0 }],
      },
      { op: 'Unsqueeze', inputs: ['klen', 'zero'], outputs: ['klen1'], name: 'klen1' },
      { op: 'Slice', inputs: ['bias', 'zero', 'klen1', 'three'], outputs: ['bias_s'], name: 'bias_slice' },
      { op: 'Mul', inputs: ['q4', 'root_scale'], outputs: ['qs'], name: 'q_scale' },
      {
        op: 'Transpose',
        inputs: ['present.0.decoder.key'],
        outputs: ['kt'],
        name: 'kt',
        attrs: permAttr([0, 1, 3, 2]),
      },
      { op: 'Mul', inputs: ['kt', 'root_scale'], outputs: ['kts'], name: 'kt_scale' },
      { op: 'MatMul', inputs: ['qs', 'kts'], outputs: ['qk'], name: 'qk' },
      { op: 'Add', inputs: ['qk', 'bias_s'], outputs: ['biased'], name: 'bias_add' },
      { op: 'Cast', inputs: ['biased'], outputs: ['biased_f'], name: 'cast', attrs: [{ name: 'to', type: 2, i: 1 }] },
      {
        op: 'Softmax',
        inputs: ['biased_f'],
        outputs: ['p'],
        name: 'softmax',
        attrs: [{ name: 'axis', type: 2, i: -1 }],
      },
      { op: 'MatMul', inputs: ['p', 'present.0.decoder.value'], outputs: ['o4'], name: 'pv' },
      { op: 'Transpose', inputs: ['o4'], outputs: ['o3'], name: 'merge', attrs: permAttr([0, 2, 1, 3]) },
      { op: 'Reshape', inputs: ['o3', 'merge_shape'], outputs: ['y'], name: 'merge_reshape' },
    ],
  });
  const p = path.join(tmp, 'step-sdpa.onnx');
  fs.writeFileSync(p, bytes);
  return p;
}

test('split-scale exports with a per-head bias: golden IR, the step fused in place, its Shape(present) rebuilt', () => {
  const c = fuseStepWithGoldens(
    sdpaStepModel(),
    'fuse-attention.sdpa.before.txt',
    'fuse-attention.sdpa.after.txt',
    'kv-cache-in-place.sdpa.after.txt',
  );
  const g = c.graphs.get('main')!;
  assert.equal(
    g.nodes
      .filter((n) => n.domain === 'planc')
      .map((n) => n.op)
      .sort(),
    ['Attention', 'CacheWrite', 'CacheWrite'],
  );
  const att = g.nodes.find((n) => n.op === 'Attention')!;
  assert.ok(att.attrs.scale?.kind === 'float' && Math.abs(att.attrs.scale.value - 0.5) < 1e-6, 'scale is √s·√s');
  assert.ok(
    !g.nodes.some((n) => n.op === 'Softmax' || (n.op === 'Concat' && n.inputs.some((x) => x.startsWith('kv_cache')))),
  );
  assert.equal(g.outputs, ['y']);
});

test('split-scale exports with a per-head bias: the fused step (evaluator and native plan) computes what the export does', () => {
  const m = importOnnxFile(sdpaStepModel());
  const f = runPipeline(m);
  const past = 3,
    B = 2;
  const feeds = stepFeeds('add', past);
  delete feeds.m;
  // per-head bias with a masked key (-1e9) in head 1 only
  feeds.bias = Tensor.fromNumbers(
    'float32',
    [1, H, 1, past + 1],
    vals(H * (past + 1), 6).map((x, i) => (i === past + 2 ? -1e9 : x)),
  );
  const want = evaluate(m, 'main', feeds);
  const cacheFeeds = toCacheFeeds(feeds, 6);
  const maxDiff = (y: Tensor) => Math.max(...Array.from(want.y!.nums, (x, i) => Math.abs(x - y.nums[i]!)));
  const got = evaluate(f, 'main', cacheFeeds);
  assert.ok(maxDiff(got.y!) < 1e-6, `evaluator: max diff ${maxDiff(got.y!)}`);
  if (!nativeAvailable()) return skipPart(NEEDS_NATIVE, 'the native half of a split-scale test');
  const built = buildPlan(f, { target: 'cpu', maxBatch: B, maxSrcLen: 8, maxTgtLen: 8 });
  const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'sdpa-step.plan');
  try {
    const rt = Object.fromEntries(Object.entries(cacheFeeds).map(([k, v]) => [k, toRt(v)]));
    const y = fromRt(plan.runSync('main', rt).y!);
    assert.ok(maxDiff(y) < 1e-5, `native: max diff ${maxDiff(y)}`);
    const cache = rt['kv_cache.0.decoder.value']!;
    assert.equal(
      Array.from(cacheRows(cache.data as Float32Array, cache.dims, past + 1).nums),
      Array.from(want['present.0.decoder.value']!.nums),
    );
  } finally {
    plan.close();
  }
});

test('fuse-attention explains why it declines: a Softmax not over QKᵀ', () => {
  const bytes = buildModel({
    inputs: [['x', 'float32', [1, 2, 3, 3]]],
    outputs: [['y', 'float32', [1, 2, 3, 3]]],
    initializers: [],
    nodes: [{ op: 'Softmax', inputs: ['x'], outputs: ['y'], name: 'sm', attrs: [{ name: 'axis', type: 2, i: -1 }] }],
  });
  const p = path.join(tmp, 'softmax.onnx');
  fs.writeFileSync(p, bytes);
  const why: string[] = [];
  const m = importOnnxFile(p);
  inferModel(m);
  const out = FUSE_ATTENTION.run(m, { explain: (_p, node, w) => why.push(`${node}: ${w}`) });
  assert.equal(why, ['sm: no MatMul(Q, Kᵀ) before the Softmax']);
  assert.is(printModel(out), printModel(m), 'nothing to do leaves the graph unchanged');
});

test.run();
