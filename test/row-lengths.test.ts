// passes/row-lengths.ts: decoder_with_past_rows and decoder_positions added beside decoder_with_past (issue 27):
// golden IR on a small step, declines explained, the zoo and es-en covered, and the rows step computing what
// decoder_with_past does when every row has the same past length (reference evaluator).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { evaluate } from '../model/eval/evaluate.ts';
import { inferModel } from '../model/infer/infer.ts';
import type { Graph, Model } from '../compiler/ir.ts';
import { importOnnxFile, importSeq2SeqDir } from '../model/onnx/import-model.ts';
import { sharedDir } from '../compiler/paths.ts';
import {
  PAST_LENGTH_INPUT,
  POSITIONS_GRAPH,
  ROW_PAST_LENGTHS_INPUT,
  ROWS_STEP_GRAPH,
  STEP_INPUT,
} from '../compiler/plan/io-names.ts';
import { printModel } from '../model/printer.ts';
import { dimStr } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';
import { FUSE_ATTENTION } from '../passes/fuse-attention.ts';
import { KV_CACHE_IN_PLACE } from '../passes/kv-cache-in-place.ts';
import { PIPELINE, runPipeline } from '../passes/pipeline.ts';
import { ROW_LENGTHS } from '../passes/row-lengths.ts';
import { STEP_TOKENS } from '../passes/step-tokens.ts';
import { matchGolden } from './helpers/golden.ts';
import { buildModel, floatInit, type NodeSpec, headSplit, permAttr, int64Init } from './helpers/onnx-build.ts';
import { needsShared, skipPart, testIf } from './helpers/skip.ts';
import { ZOO } from './helpers/zoo.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'planc-rows-'));
const vals = (n: number, seed: number) => Array.from({ length: n }, (_, i) => Math.sin(i * 1.3 + seed) * 0.7);
const H = 2,
  D = 4,
  V = 10,
  MAXPOS = 16;

/**
 * A decoder step the way es-en writes its positions: the past length read from Shape(past key), a sinusoid-like
 * table sliced at [past, past + S), added to the token embeddings; then one self-attention over past + new rows.
 */
function stepModel(variant: 'plain' | 'shape-math' = 'plain'): string {
  // shape-math: the step length, recomputed as (past + S) - past, shapes a Reshape of the hidden state
  const shapeMath: NodeSpec[] = [
    { op: 'Sub', inputs: ['end', 'past_len'], outputs: ['s_again'], name: 's_again' },
    { op: 'Unsqueeze', inputs: ['s_again', 'axes0'], outputs: ['s_again1'], name: 's_again1' },
    {
      op: 'Concat',
      inputs: ['zero1', 's_again1', 'minus1'],
      outputs: ['h_shape'],
      name: 'h_shape',
      attrs: [{ name: 'axis', type: 2, i: 0 }],
    },
    { op: 'Reshape', inputs: ['h0', 'h_shape'], outputs: ['h'], name: 'h_reshape' },
  ];
  const bytes = buildModel({
    inputs: [
      [STEP_INPUT, 'int64', ['batch', 1]],
      ['past_key_values.0.decoder.key', 'float32', ['batch', H, 'past', D]],
      ['past_key_values.0.decoder.value', 'float32', ['batch', H, 'past', D]],
    ],
    outputs: [
      ['y', 'float32', ['batch', 1, H * D]],
      ['present.0.decoder.key', 'float32', ['batch', H, 'total', D]],
      ['present.0.decoder.value', 'float32', ['batch', H, 'total', D]],
    ],
    initializers: [
      floatInit('emb', [V, H * D], vals(V * H * D, 7)),
      floatInit('pos_table', [MAXPOS, H * D], vals(MAXPOS * H * D, 8)),
      floatInit('ck', [H * D], vals(H * D, 9)),
      floatInit('cv', [H * D], vals(H * D, 10)),
      int64Init('heads_shape', [4], [0, 0, H, D]),
      int64Init('merge_shape', [3], [0, 0, H * D]),
      floatInit('scale', [], [0.5]),
      int64Init('two', [], [2]),
      int64Init('one', [], [1]),
      int64Init('axes0', [1], [0]),
      ...(variant === 'plain' ? [] : [int64Init('zero1', [1], [0]), int64Init('minus1', [1], [-1])]),
    ],
    nodes: [
      { op: 'Shape', inputs: ['past_key_values.0.decoder.key'], outputs: ['past_shape'], name: 'past_shape' },
      {
        op: 'Gather',
        inputs: ['past_shape', 'two'],
        outputs: ['past_len'],
        name: 'past_len',
        attrs: [{ name: 'axis', type: 2, i: 0 }],
      },
      { op: 'Shape', inputs: [STEP_INPUT], outputs: ['ids_shape'], name: 'ids_shape' },
      {
        op: 'Gather',
        inputs: ['ids_shape', 'one'],
        outputs: ['new_len'],
        name: 'new_len',
        attrs: [{ name: 'axis', type: 2, i: 0 }],
      },
      { op: 'Add', inputs: ['past_len', 'new_len'], outputs: ['end'], name: 'end' },
      { op: 'Unsqueeze', inputs: ['past_len', 'axes0'], outputs: ['start1'], name: 'start1' },
      { op: 'Unsqueeze', inputs: ['end', 'axes0'], outputs: ['end1'], name: 'end1' },
      { op: 'Slice', inputs: ['pos_table', 'start1', 'end1', 'axes0'], outputs: ['pos2'], name: 'pos_slice' },
      { op: 'Unsqueeze', inputs: ['pos2', 'axes0'], outputs: ['pos3'], name: 'pos3' },
      { op: 'Gather', inputs: ['emb', STEP_INPUT], outputs: ['tok'], name: 'embed' },
      ...(variant === 'plain'
        ? [{ op: 'Add', inputs: ['tok', 'pos3'], outputs: ['h'], name: 'add_positions' }]
        : [{ op: 'Add', inputs: ['tok', 'pos3'], outputs: ['h0'], name: 'add_positions' }, ...shapeMath]),
      { op: 'Mul', inputs: ['h', 'ck'], outputs: ['k3'], name: 'k' },
      { op: 'Mul', inputs: ['h', 'cv'], outputs: ['v3'], name: 'v' },
      ...headSplit('h', 'q4'),
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
    ],
  });
  const p = path.join(tmp, `step-${variant}.onnx`);
  fs.writeFileSync(p, bytes);
  return p;
}

/** The step model as a seq2seq decoder step (graph decoder_with_past), fused and its caches in place. */
/** The test step as decoder_with_past with in-place caches; stepTokens > 1: taking up to that many new tokens. */
function cachedStep(variant: 'plain' | 'shape-math' = 'plain', stepTokens = 1): Model {
  let m = importOnnxFile(stepModel(variant));
  const g = [...m.graphs.values()][0]!;
  g.name = 'decoder_with_past';
  m.graphs = new Map([[g.name, g]]);
  inferModel(m);
  if (stepTokens > 1) {
    m = STEP_TOKENS.run(m, { stepTokens });
    inferModel(m);
  }
  const c = KV_CACHE_IN_PLACE.run(FUSE_ATTENTION.run(m, {}), {});
  inferModel(c);
  return c;
}

/** The declared inputs of a graph, as 'name: dtype[dims]'. */
function signature(g: Graph): string[] {
  return g.inputs.map((x) => {
    const t = g.values.get(x)!.type!;
    return `${x}: ${t.dtype}[${(t.shape ?? []).map(dimStr).join(',')}]`;
  });
}

/** Random feeds for decoder_with_past's inputs at batch B, past length p (caches of capacity cap, NaN after p). */
function stepFeeds(
  g: Graph,
  B: number,
  p: number,
  cap: number,
  seed: number,
  dims: Record<string, number> = {},
): Record<string, Tensor> {
  const feeds: Record<string, Tensor> = {};
  const bind: Record<string, number> = { ...dims };
  for (const x of g.inputs) {
    const t = g.values.get(x)!.type!;
    if (x === PAST_LENGTH_INPUT) {
      feeds[x] = Tensor.fromNumbers('int64', [], [p]);
      continue;
    }
    const shape = (t.shape ?? []).map((d, a) => {
      if (typeof d === 'number') return d;
      if (a === 0) return B;
      if (x === STEP_INPUT) return 1;
      if (d.key === 'cache_capacity') return cap;
      return bind[d.key] ?? (bind[d.key] = 3);
    });
    const n = shape.reduce((a, b) => a * b, 1);
    if (t.dtype === 'int64') {
      feeds[x] = Tensor.fromNumbers(
        'int64',
        shape,
        Array.from({ length: n }, (_, i) => (x === STEP_INPUT ? ((i * 7 + seed) % 9) + 1 : 1)),
      );
      continue;
    }
    const data = Float32Array.from(vals(n, seed + x.length));
    if (x.startsWith('kv_cache.'))
      for (let r = 0; r < shape[0]! * shape[1]!; r++)
        data.fill(NaN, (r * cap + p) * shape[3]!, (r + 1) * cap * shape[3]!);
    feeds[x] = new Tensor('float32', shape, data);
  }
  return feeds;
}

/** Feeds of decoder_positions at past length p: zeros, every symbolic dim 1 (what runtime/decode/row-batch.ts feeds). */
function positionFeeds(g: Graph, p: number): Record<string, Tensor> {
  const feeds: Record<string, Tensor> = {};
  for (const x of g.inputs) {
    const t = g.values.get(x)!.type!;
    feeds[x] =
      x === PAST_LENGTH_INPUT
        ? Tensor.fromNumbers('int64', [], [p])
        : Tensor.zeros(
            t.dtype,
            (t.shape ?? []).map((d) => (typeof d === 'number' ? d : 1)),
          );
  }
  return feeds;
}

/** decoder_with_past_rows' feeds: decoder_with_past's, past_lengths, and row_position.K stacked from decoder_positions. */
function rowFeeds(m: Model, base: Record<string, Tensor>, lengths: number[]): Record<string, Tensor> {
  const rows = m.graphs.get(ROWS_STEP_GRAPH)!;
  const feeds: Record<string, Tensor> = {
    ...base,
    [ROW_PAST_LENGTHS_INPUT]: Tensor.fromNumbers('int64', [lengths.length], lengths),
  };
  const per = lengths.map((p) => evaluate(m, POSITIONS_GRAPH, positionFeeds(m.graphs.get(POSITIONS_GRAPH)!, p)));
  for (const x of rows.inputs.filter((i) => !(i in feeds))) {
    const rank = rows.values.get(x)!.type!.shape!.length;
    const first = per[0]![x]!;
    const data = new Float32Array(first.size * lengths.length);
    per.forEach((v, r) => data.set(v[x]!.nums as Float32Array, r * first.size));
    feeds[x] = new Tensor(
      first.dtype,
      rank === first.rank ? [lengths.length, ...first.dims.slice(1)] : [lengths.length, ...first.dims],
      data,
    );
  }
  return feeds;
}

function maxDiff(a: Tensor, b: Tensor): number {
  assert.equal(a.dims, b.dims);
  let d = 0;
  for (let i = 0; i < a.size; i++) d = Math.max(d, Math.abs(Number(a.nums[i]) - Number(b.nums[i])));
  return d;
}

/** decoder_with_past_rows, every row at past length p, gives decoder_with_past's outputs at p. */
function sameAsStep(m: Model, B: number, p: number, cap: number, tol: number): number {
  const g = m.graphs.get('decoder_with_past')!;
  const base = stepFeeds(g, B, p, cap, 3);
  const want = evaluate(m, 'decoder_with_past', base);
  const got = evaluate(m, ROWS_STEP_GRAPH, rowFeeds(m, stepFeeds(g, B, p, cap, 3), new Array(B).fill(p)));
  let worst = 0;
  for (const o of g.outputs) {
    const d = maxDiff(got[o]!, want[o]!);
    assert.ok(d <= tol, `${o} differs by ${d} at past ${p}`);
    worst = Math.max(worst, d);
  }
  return worst;
}

/** Row b of a batch tensor (dim 0), keeping the dim. */
function rowOf(t: Tensor, b: number): Tensor {
  const n = t.size / t.dims[0]!;
  return new Tensor(t.dtype, [1, ...t.dims.slice(1)], (t.nums as Float32Array).slice(b * n, (b + 1) * n));
}

/**
 * Whether the reference evaluator runs planc.Attention's past_lengths (input 5): the per-row kernels' semantics are
 * being added beside this pass; until then rows of different lengths cannot be checked here.
 */
function evalHasRowLengths(): boolean {
  const g: Graph = {
    name: 'probe',
    inputs: ['q', 'k', 'v', 'L', 'P'],
    outputs: ['y'],
    initializers: new Map(),
    nodes: [
      {
        name: 'a',
        op: 'Attention',
        domain: 'planc',
        inputs: ['q', 'k', 'v', '', 'L', 'P'],
        outputs: ['y'],
        origin: [],
        attrs: { num_heads: { kind: 'int', value: 1 } },
      },
    ],
    values: new Map(),
  };
  const m: Model = {
    graphs: new Map([['probe', g]]),
    weights: new Map(),
    opsets: { '': 17, planc: 1 },
    irVersion: 8,
    decoding: {},
    sources: {},
    storedWeightBytes: 0,
  };
  try {
    const y = evaluate(m, 'probe', {
      q: Tensor.fromNumbers('float32', [1, 1, 1, 1], [1]),
      k: Tensor.fromNumbers('float32', [1, 1, 2, 1], [0, 5]),
      v: Tensor.fromNumbers('float32', [1, 1, 2, 1], [1, 2]),
      L: Tensor.fromNumbers('int64', [], [2]),
      P: Tensor.fromNumbers('int64', [1], [0]),
    }).y!;
    return y.nums[0] === 1; // row 0 has no past: it attends its first key only
  } catch {
    return false;
  }
}

/** decoder_with_past_rows with rows at their own past lengths gives each row what decoder_with_past gives it alone. */
function rowsAtOwnLengths(m: Model, lengths: number[], cap: number, tol: number): number {
  const g = m.graphs.get('decoder_with_past')!;
  const B = lengths.length,
    P = Math.max(...lengths);
  const base = stepFeeds(g, B, P, cap, 5);
  for (const [x, t] of Object.entries(base)) {
    if (!x.startsWith('kv_cache.')) continue;
    const [, h, , d] = t.dims as [number, number, number, number];
    const data = t.nums as Float32Array;
    lengths.forEach((p, b) => {
      for (let r = b * h; r < (b + 1) * h; r++) data.fill(NaN, (r * cap + p) * d, (r + 1) * cap * d);
    });
  }
  const got = evaluate(m, ROWS_STEP_GRAPH, rowFeeds(m, { ...base }, lengths));
  let worst = 0;
  lengths.forEach((p, b) => {
    const one: Record<string, Tensor> = {};
    for (const [x, t] of Object.entries(base))
      one[x] = x === PAST_LENGTH_INPUT ? Tensor.fromNumbers('int64', [], [p]) : rowOf(t, b);
    const want = evaluate(m, 'decoder_with_past', one);
    for (const o of g.outputs) {
      const d = maxDiff(rowOf(got[o]!, b), want[o]!);
      assert.ok(d <= tol, `${o} of row ${b} (past ${p}) differs by ${d}`);
      worst = Math.max(worst, d);
    }
  });
  return worst;
}

test('row-lengths: golden IR before and after (a sliced position table)', () => {
  const c = cachedStep();
  matchGolden('row-lengths.before.txt', printModel(c));
  const r = ROW_LENGTHS.run(c, {});
  inferModel(r);
  matchGolden('row-lengths.after.txt', printModel(r));
  assert.equal([...r.graphs.keys()], ['decoder_with_past', ROWS_STEP_GRAPH, POSITIONS_GRAPH]);
  assert.equal(
    printModel({ ...r, graphs: new Map([['decoder_with_past', r.graphs.get('decoder_with_past')!]]) }),
    printModel(c),
    'decoder_with_past is left as it was',
  );
  const rows = r.graphs.get(ROWS_STEP_GRAPH)!;
  assert.equal(signature(rows).slice(-2), [
    `${ROW_PAST_LENGTHS_INPUT}: int64[batch]`,
    'row_position.0: float32[batch,1,8]',
  ]);
  for (const n of rows.nodes.filter((x) => x.domain === 'planc')) {
    assert.is(n.inputs[n.op === 'CacheWrite' ? 3 : 5], ROW_PAST_LENGTHS_INPUT, `${n.op} ${n.name} reads past_lengths`);
  }
  assert.not.ok(
    rows.nodes.some((n) => n.op === 'Slice'),
    'the position slice is gone from the rows step',
  );
  const pos = r.graphs.get(POSITIONS_GRAPH)!;
  assert.equal(pos.outputs, ['row_position.0']);
  assert.equal(
    pos.inputs,
    [STEP_INPUT, 'kv_cache.0.decoder.key', PAST_LENGTH_INPUT],
    'the inputs it reads through Shape, and the past length',
  );
});

test('row-lengths: the rows step at one past length for every row computes what decoder_with_past does (evaluator)', () => {
  const r = ROW_LENGTHS.run(cachedStep(), {});
  inferModel(r);
  for (const p of [0, 1, 4]) sameAsStep(r, 2, p, 6, 0);
  // decoder_positions at p is the table's row p
  const at = evaluate(r, POSITIONS_GRAPH, positionFeeds(r.graphs.get(POSITIONS_GRAPH)!, 5))['row_position.0']!;
  assert.equal(at.dims, [1, 1, H * D]);
  assert.equal([...at.nums], [...Float32Array.from(vals(MAXPOS * H * D, 8).slice(5 * H * D, 6 * H * D))]);
});

test('row-lengths: rows at their own past lengths each compute what decoder_with_past does for that row alone (evaluator)', () => {
  if (!evalHasRowLengths())
    return skipPart('the evaluator has no planc.Attention past_lengths yet', 'rows of different lengths (row-lengths)');
  const r = ROW_LENGTHS.run(cachedStep(), {});
  inferModel(r);
  rowsAtOwnLengths(r, [0, 2, 5], 7, 1e-6);
});

test('row-lengths: a step of up to 3 tokens (step-tokens) gets its rows graphs at one token, computing what that step does for each row alone (evaluator)', () => {
  const r = ROW_LENGTHS.run(cachedStep('plain', 3), {});
  inferModel(r);
  assert.is(r.decoding.stepTokens, 3);
  assert.is(dimStr(r.graphs.get('decoder_with_past')!.values.get(STEP_INPUT)!.type!.shape![1]!), 'step_tokens');
  assert.is(r.graphs.get(ROWS_STEP_GRAPH)!.values.get(STEP_INPUT)!.type!.shape![1], 1);
  if (!evalHasRowLengths())
    return skipPart(
      'the evaluator has no planc.Attention past_lengths yet',
      'rows of a multi-token step (row-lengths)',
    );
  rowsAtOwnLengths(r, [0, 2, 5], 7, 1e-6);
});

test('row-lengths: declines, explained (no in-place caches, host shape math)', () => {
  const why: string[] = [];
  const explain = (pass: string, node: string, w: string) => why.push(`${pass} ${node}: ${w}`);
  const m = importOnnxFile(stepModel());
  const g = [...m.graphs.values()][0]!;
  g.name = 'decoder_with_past';
  m.graphs = new Map([[g.name, g]]);
  inferModel(m);
  assert.is(ROW_LENGTHS.run(m, { explain }), m);
  assert.match(why.join('\n'), /no in-place caches/);
  why.length = 0;
  const s = cachedStep('shape-math');
  assert.is(ROW_LENGTHS.run(s, { explain }), s);
  assert.equal(why, [
    `row-lengths h_reshape: input 1 'h_shape' of Reshape is host shape math computed from the past length; no ${ROWS_STEP_GRAPH} or ${POSITIONS_GRAPH}`,
  ]);
});

const ESEN = sharedDir() && path.join(sharedDir()!, 'models', 'es-en');
const haveModels = ESEN && ZOO && fs.existsSync(ESEN) && fs.existsSync(ZOO);
const shared = testIf(test, !haveModels && needsShared('models/es-en and models/zoo'));
const compiled = new Map<string, { model: Model; why: string[] }>();
/** The IR `planc optimize` makes of a model folder (after every IR pass), and the row-lengths explain lines. */
function optimized(name: string): { model: Model; why: string[] } {
  if (!compiled.has(name)) {
    const why: string[] = [];
    const explain = (pass: string, node: string, w: string) => {
      if (pass === 'row-lengths') why.push(`${node}: ${w}`);
    };
    const model = runPipeline(importSeq2SeqDir(name === 'es-en' ? ESEN! : path.join(ZOO!, name)), { explain });
    compiled.set(name, { model, why });
  }
  return compiled.get(name)!;
}

test('row-lengths runs in the pipeline right after kv-cache-in-place', () => {
  const names = PIPELINE.map((p) => p.name);
  assert.is(names[names.indexOf('kv-cache-in-place') + 1], ROW_LENGTHS.name);
});

shared('row-lengths: zoo t5 is declined (its relative position bias depends on the past length), explained', () => {
  const { model, why } = optimized('t5');
  assert.not.ok(model.graphs.has(ROWS_STEP_GRAPH));
  assert.not.ok(model.graphs.has(POSITIONS_GRAPH));
  assert.is(why.length, 1, why.join('\n'));
  assert.match(
    why[0]!,
    /Attention.*: its mask '.*' is computed from the past length with dims that depend on it, and its values .* differ between past lengths .*; no decoder_with_past_rows or decoder_positions/,
  );
});

const EXPECT: Record<string, { positions: string[]; rowPosition: string }> = {
  'es-en': {
    positions: [STEP_INPUT, 'kv_cache.0.decoder.key', PAST_LENGTH_INPUT],
    rowPosition: 'row_position.0: float32[batch_size,1,256]',
  },
  marian: {
    positions: [STEP_INPUT, 'kv_cache.0.decoder.key', PAST_LENGTH_INPUT],
    rowPosition: 'row_position.0: float32[batch_size,decoder_sequence_length,64]',
  },
  bart: {
    positions: [STEP_INPUT, 'kv_cache.0.decoder.key', PAST_LENGTH_INPUT],
    rowPosition: 'row_position.0: float32[batch_size,decoder_sequence_length,64]',
  },
  mbart: {
    positions: [STEP_INPUT, 'kv_cache.0.decoder.key', PAST_LENGTH_INPUT],
    rowPosition: 'row_position.0: float32[batch_size,decoder_sequence_length,64]',
  },
};
for (const [name, want] of Object.entries(EXPECT)) {
  shared(
    `row-lengths: ${name} gets ${ROWS_STEP_GRAPH} and ${POSITIONS_GRAPH}; rows at one past length, and at their own, compute decoder_with_past's logits (evaluator)`,
    () => {
      const { model, why } = optimized(name);
      assert.equal(why, []);
      const step = model.graphs.get('decoder_with_past')!;
      const rows = model.graphs.get(ROWS_STEP_GRAPH)!;
      const pos = model.graphs.get(POSITIONS_GRAPH)!;
      assert.ok(rows && pos);
      assert.equal(signature(rows), [
        ...signature(step),
        `${ROW_PAST_LENGTHS_INPUT}: int64[batch_size]`,
        want.rowPosition,
      ]);
      assert.equal(rows.outputs, step.outputs);
      assert.equal(pos.inputs, want.positions);
      assert.equal(pos.outputs, ['row_position.0']);
      const cached = (g: Graph) =>
        g.nodes.filter((n) => n.domain === 'planc' && (n.op === 'CacheWrite' || (n.op === 'Attention' && n.inputs[4])))
          .length;
      assert.ok(cached(rows) > 0 && cached(rows) === cached(step));
      for (const n of rows.nodes.filter((x) => x.domain === 'planc')) {
        if (n.op === 'CacheWrite') assert.is(n.inputs[3], ROW_PAST_LENGTHS_INPUT);
        if (n.op === 'Attention') assert.is(n.inputs[5], n.inputs[4] ? ROW_PAST_LENGTHS_INPUT : undefined);
      }
      for (const p of [0, 2]) sameAsStep(model, 2, p, 4, 1e-5);
      if (evalHasRowLengths()) rowsAtOwnLengths(model, [3, 0, 1], 5, 1e-5);
      else
        skipPart(
          'the evaluator has no planc.Attention past_lengths yet',
          `${name} rows of different lengths (row-lengths)`,
        );
    },
  );
}

test.run();
