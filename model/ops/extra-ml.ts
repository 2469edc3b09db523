// ai.onnx.ml (LabelEncoder, TreeEnsemble, Binarizer, ArrayFeatureExtractor) and ai.onnx.preview.training (Adagrad, Adam, Momentum).
import type { DType } from '../../compiler/dtype.ts';
import { unknownDim, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { fromF64, requireFloat } from './math-common.ts';
import type { InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need, same } from './util.ts';

const ML = 'ai.onnx.ml';
const TRAINING = 'ai.onnx.preview.training';

// ---- LabelEncoder ----

interface Mapping {
  keys: (number | string)[];
  values: (number | string)[];
  def: number | string;
  outType: DType;
}

/** Keys, values, default and output type from LabelEncoder-2+ attributes (tensor forms from opset 4). */
function mapping(ctx: OpContext): Mapping {
  const keysT = ctx.has('keys_tensor') ? ctx.tensor('keys_tensor') : undefined;
  const valuesT = ctx.has('values_tensor') ? ctx.tensor('values_tensor') : undefined;
  const keys: (number | string)[] = keysT
    ? Array.from(keysT.data as ArrayLike<number | string>)
    : ctx.has('keys_strings')
      ? ctx.strings('keys_strings')
      : ctx.has('keys_int64s')
        ? ctx.ints('keys_int64s')
        : ctx.floats('keys_floats', []).map(Math.fround);
  let values: (number | string)[];
  let outType: DType;
  let def: number | string;
  if (valuesT) {
    values = Array.from(valuesT.data as ArrayLike<number | string>);
    outType = valuesT.dtype;
    const d = ctx.has('default_tensor') ? ctx.tensor('default_tensor') : undefined;
    def = d
      ? (d.data as ArrayLike<number | string>)[0]!
      : outType === 'string'
        ? '_Unused'
        : outType === 'int64' || outType === 'int32' || outType === 'int16'
          ? -1
          : -0;
  } else if (ctx.has('values_strings')) {
    values = ctx.strings('values_strings');
    outType = 'string';
    def = ctx.string('default_string', '_Unused');
  } else if (ctx.has('values_int64s')) {
    values = ctx.ints('values_int64s');
    outType = 'int64';
    def = ctx.int('default_int64', -1);
  } else {
    values = ctx.floats('values_floats', []);
    outType = 'float32';
    def = ctx.float('default_float', -0);
  }
  if (keys.length !== values.length) ctx.fail(`${keys.length} keys but ${values.length} values`);
  return { keys, values, def, outType };
}

/** LabelEncoder-1: string → int64 index into classes_strings, or int64 → class string. */
function legacyMapping(ctx: OpContext, inType: DType): Mapping {
  const classes = ctx.strings('classes_strings', []);
  const idx = classes.map((_, i) => i);
  if (inType === 'string') return { keys: classes, values: idx, def: ctx.int('default_int64', -1), outType: 'int64' };
  return { keys: idx, values: classes, def: ctx.string('default_string', '_Unused'), outType: 'string' };
}

function encode(m: Mapping, x: Tensor): Tensor {
  const table = new Map<number | string, number | string>();
  m.keys.forEach((k, i) => table.set(k, m.values[i]!));
  const src = x.data as ArrayLike<number | string>;
  const out: (number | string)[] = [];
  for (let i = 0; i < x.size; i++) {
    const k = src[i]!;
    const key = typeof k === 'number' && x.dtype === 'float32' ? Math.fround(k) : k;
    out.push(table.get(key) ?? m.def);
  }
  if (m.outType === 'string') return Tensor.fromStrings(x.dims, out.map(String));
  return Tensor.fromNumbers(m.outType, x.dims, out.map(Number));
}

function labelEncoder(since: number, until: number | undefined): OpHandler {
  const mapOf = (ctx: OpContext, inType: DType) => (since === 1 ? legacyMapping(ctx, inType) : mapping(ctx));
  return {
    op: 'LabelEncoder',
    domain: ML,
    since,
    until,
    infer(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      return [{ dtype: mapOf(ctx, x.dtype).outType, shape: x.shape }];
    },
    eval(ctx, inputs) {
      const x = need(ctx, inputs, 0);
      return [encode(mapOf(ctx, x.dtype), x)];
    },
  };
}

// ---- TreeEnsemble (ml opset 5) ----

type TreeNode =
  | { leaf: true; weight: number; target: number }
  | { leaf: false; test: (v: number) => boolean; feature: number; t: TreeNode; f: TreeNode };

function compare(
  ctx: OpContext,
  mode: number,
  split: number,
  members: Set<number> | undefined,
  missingTrue: boolean,
): (v: number) => boolean {
  const miss = (v: number) => missingTrue && Number.isNaN(v);
  switch (mode) {
    case 0:
      return (v) => v <= split || miss(v);
    case 1:
      return (v) => v < split || miss(v);
    case 2:
      return (v) => v >= split || miss(v);
    case 3:
      return (v) => v > split || miss(v);
    case 4:
      return (v) => v === split || miss(v);
    case 5:
      return (v) => v !== split || miss(v);
    case 6:
      return (v) => members!.has(v) || miss(v);
    default:
      return ctx.fail(`node mode ${mode} is not valid`);
  }
}

function buildTrees(ctx: OpContext): TreeNode[] {
  const splits = Array.from(ctx.tensor('nodes_splits').nums);
  const features = ctx.ints('nodes_featureids');
  const modes = Array.from(ctx.tensor('nodes_modes').nums);
  const tIds = ctx.ints('nodes_truenodeids'),
    fIds = ctx.ints('nodes_falsenodeids');
  const tLeaf = ctx.ints('nodes_trueleafs'),
    fLeaf = ctx.ints('nodes_falseleafs');
  const leafTargets = ctx.ints('leaf_targetids');
  const leafWeights = Array.from(ctx.tensor('leaf_weights').nums);
  const missing = ctx.ints('nodes_missing_value_tracks_true', []);
  // membership sets in the order MEMBER nodes appear, each terminated by NaN
  const memberVals = ctx.has('membership_values') ? Array.from(ctx.tensor('membership_values').nums) : [];
  const sets = new Map<number, Set<number>>();
  let pos = 0;
  modes.forEach((m, i) => {
    if (m !== 6) return;
    const s = new Set<number>();
    while (pos < memberVals.length && !Number.isNaN(memberVals[pos]!)) s.add(memberVals[pos++]!);
    pos++;
    sets.set(i, s);
  });
  const leaf = (i: number): TreeNode => {
    if (i < 0 || i >= leafWeights.length) ctx.fail(`leaf index ${i} is out of range`);
    return { leaf: true, weight: leafWeights[i]!, target: leafTargets[i]! };
  };
  const build = (i: number, isLeaf: boolean, depth: number): TreeNode => {
    if (isLeaf) return leaf(i);
    if (i < 0 || i >= modes.length || depth > modes.length)
      ctx.fail(`node index ${i} is out of range or the tree has a cycle`);
    return {
      leaf: false,
      feature: features[i]!,
      test: compare(ctx, modes[i]!, splits[i]!, sets.get(i), (missing[i] ?? 0) !== 0),
      t: build(tIds[i]!, tLeaf[i]! !== 0, depth + 1),
      f: build(fIds[i]!, fLeaf[i]! !== 0, depth + 1),
    };
  };
  return ctx.ints('tree_roots').map((r) => build(r, tLeaf[r]! !== 0 && fLeaf[r]! !== 0 && tIds[r] === fIds[r], 0));
}

function postTransform(ctx: OpContext, row: Float64Array): void {
  const p = ctx.int('post_transform', 0);
  if (p === 0) return;
  if (p === 2) {
    for (let i = 0; i < row.length; i++) row[i] = 1 / (1 + Math.exp(-row[i]!));
    return;
  }
  if (p === 1 || p === 3) {
    const use = (v: number) => p === 1 || v !== 0;
    let max = -Infinity;
    for (const v of row) if (use(v)) max = Math.max(max, v);
    let s = 0;
    for (let i = 0; i < row.length; i++) {
      row[i] = use(row[i]!) ? Math.exp(row[i]! - max) : 0;
      s += row[i]!;
    }
    for (let i = 0; i < row.length; i++) row[i] = s > 0 ? row[i]! / s : 0;
    return;
  }
  ctx.fail(`post_transform ${p} is not supported`);
}

const TREE_ENSEMBLE: OpHandler = {
  op: 'TreeEnsemble',
  domain: ML,
  since: 5,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    const n: Dim = x.shape?.[0] ?? unknownDim();
    return [{ dtype: x.dtype, shape: [n, ctx.int('n_targets')] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    requireFloat(ctx, x.dtype);
    if (x.rank !== 2) ctx.fail(`X must be [N, F], got dims [${x.dims}]`);
    const trees = buildTrees(ctx);
    const nT = ctx.int('n_targets');
    const agg = ctx.int('aggregate_function', 1);
    if (agg < 0 || agg > 3) ctx.fail(`aggregate_function ${agg} is not valid`);
    const [n, f] = x.dims as [number, number];
    const out = new Float64Array(n * nT);
    const xv = x.nums;
    for (let r = 0; r < n; r++) {
      const row = new Float64Array(nT).fill(agg === 2 ? Infinity : agg === 3 ? -Infinity : 0);
      for (const tree of trees) {
        let node = tree;
        while (!node.leaf) {
          if (node.feature < 0 || node.feature >= f) ctx.fail(`feature ${node.feature} is out of range`);
          node = node.test(xv[r * f + node.feature]!) ? node.t : node.f;
        }
        if (node.target < 0 || node.target >= nT) ctx.fail(`target ${node.target} is out of range [0, ${nT})`);
        const k = node.target;
        if (agg === 1) row[k] += node.weight;
        else if (agg === 0) row[k] += node.weight / trees.length;
        else if (agg === 2) row[k] = Math.min(row[k]!, node.weight);
        else row[k] = Math.max(row[k]!, node.weight);
      }
      postTransform(ctx, row);
      out.set(row, r * nT);
    }
    return [fromF64(x.dtype, [n, nT], out)];
  },
};

// ---- Binarizer, ArrayFeatureExtractor ----

const BINARIZER: OpHandler = {
  op: 'Binarizer',
  domain: ML,
  since: 1,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    if (x.dtype === 'string' || x.dtype === 'bool') ctx.fail(`input must be numeric, got ${x.dtype}`);
    return [same(x)];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const th = ctx.float('threshold', 0);
    return [
      Tensor.fromNumbers(
        x.dtype,
        x.dims,
        Array.from(x.nums, (v) => (v > th ? 1 : 0)),
      ),
    ];
  },
};

const ARRAY_FEATURE_EXTRACTOR: OpHandler = {
  op: 'ArrayFeatureExtractor',
  domain: ML,
  since: 1,
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const y = need(ctx, inputs, 1);
    if (y.dtype !== 'int64') ctx.fail(`indices must be int64, got ${y.dtype}`);
    if (!x.shape || !y.shape) return [{ dtype: x.dtype }];
    let count: Dim = 1;
    for (const d of y.shape) count = typeof count === 'number' && typeof d === 'number' ? count * d : unknownDim();
    return [{ dtype: x.dtype, shape: x.shape.length === 1 ? [1, count] : [...x.shape.slice(0, -1), count] }];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const idx = Array.from(need(ctx, inputs, 1).nums, Number);
    if (x.rank < 1) ctx.fail('input must have rank >= 1');
    const last = x.dims[x.rank - 1]!;
    if (idx.some((i) => i < 0 || i >= last)) ctx.fail(`indices [${idx}] are out of range [0, ${last})`);
    const outer = x.size / Math.max(1, last);
    const src = x.data;
    const out = x.dtype === 'string' ? new Array<string>(outer * idx.length) : new Float64Array(outer * idx.length);
    for (let o = 0; o < outer; o++)
      idx.forEach((i, k) => {
        (out as (string | number)[])[o * idx.length + k] = src[o * last + i]!;
      });
    const dims = x.rank === 1 ? [1, idx.length] : [...x.dims.slice(0, -1), idx.length];
    return [
      x.dtype === 'string'
        ? Tensor.fromStrings(dims, out as string[])
        : Tensor.fromNumbers(x.dtype, dims, out as Float64Array),
    ];
  },
};

// ---- training optimizers: inputs R, T, then groups of per-tensor inputs ----

interface Groups {
  r: number;
  t: number;
  n: number;
  group: (k: number) => Tensor[];
}

function groups(ctx: OpContext, inputs: (Tensor | undefined)[], per: number): Groups {
  const ins = inputs.map((x, i) => x ?? ctx.fail(`input ${i} is required`));
  const n = (ins.length - 2) / per;
  if (!Number.isInteger(n) || n < 1) ctx.fail(`expected 2 + ${per}·n inputs, got ${ins.length}`);
  const r = Number(ins[0]!.nums[0]);
  const t = Number(ins[1]!.nums[0]);
  return { r, t, n, group: (k) => Array.from({ length: per }, (_, j) => ins[2 + j * n + k]!) };
}

function inferOptimizer(ctx: OpContext, inputs: (InferInput | undefined)[], per: number): InferOutput[] {
  const n = (inputs.length - 2) / per;
  if (!Number.isInteger(n) || n < 1) ctx.fail(`expected 2 + ${per}·n inputs, got ${inputs.length}`);
  const t = inputs[1];
  if (t && t.dtype !== 'int64') ctx.fail(`T must be int64, got ${t.dtype}`);
  // outputs: one per optimized tensor and per state, in the order of the inputs after R and T (gradients excluded)
  const outs: InferOutput[] = [];
  for (let j = 0; j < per; j++) {
    if (j === 1) continue; // gradients
    for (let k = 0; k < n; k++) {
      const x = need(ctx, inputs, 2 + j * n + k);
      outs.push({ dtype: x.dtype, shape: x.shape });
    }
  }
  return outs;
}

/** Runs an elementwise update per group; returns outputs grouped as [all X, all state1, all state2...]. */
function optimize(
  ctx: OpContext,
  inputs: (Tensor | undefined)[],
  per: number,
  update: (r: number, t: number, v: number[]) => number[],
): Tensor[] {
  const g = groups(ctx, inputs, per);
  const outs: Tensor[][] = Array.from({ length: per - 1 }, () => []);
  for (let k = 0; k < g.n; k++) {
    const ts = g.group(k);
    const x = ts[0]!;
    for (const other of ts) if (other.size !== x.size) ctx.fail(`tensor group ${k} has mismatched sizes`);
    const res = Array.from({ length: per - 1 }, () => new Float64Array(x.size));
    for (let i = 0; i < x.size; i++) {
      const r = update(
        g.r,
        g.t,
        ts.map((tt) => tt.nums[i]!),
      );
      r.forEach((v, j) => (res[j]![i] = v));
    }
    res.forEach((arr, j) => outs[j]!.push(fromF64(ts[j === 0 ? 0 : j + 1]!.dtype, ts[j === 0 ? 0 : j + 1]!.dims, arr)));
  }
  return outs.flat();
}

const ADAGRAD: OpHandler = {
  op: 'Adagrad',
  domain: TRAINING,
  since: 1,
  infer: (ctx, inputs) => inferOptimizer(ctx, inputs, 3),
  eval(ctx, inputs) {
    const decay = ctx.float('decay_factor', 0),
      eps = ctx.float('epsilon', 0),
      norm = ctx.float('norm_coefficient', 0);
    return optimize(ctx, inputs, 3, (r, t, [x, g, h]) => {
      const rAdj = r / (1 + t * decay);
      const gr = norm * x! + g!;
      const hNew = h! + gr * gr;
      return [x! - (rAdj * gr) / (Math.sqrt(hNew) + eps), hNew];
    });
  },
};

const ADAM: OpHandler = {
  op: 'Adam',
  domain: TRAINING,
  since: 1,
  infer: (ctx, inputs) => inferOptimizer(ctx, inputs, 4),
  eval(ctx, inputs) {
    const alpha = ctx.float('alpha', 0.9),
      beta = ctx.float('beta', 0.999),
      eps = ctx.float('epsilon', 0);
    const norm = ctx.float('norm_coefficient', 0),
      post = ctx.float('norm_coefficient_post', 0);
    return optimize(ctx, inputs, 4, (r, t, [x, g, v, h]) => {
      const gr = norm * x! + g!;
      const vNew = alpha * v! + (1 - alpha) * gr;
      const hNew = beta * h! + (1 - beta) * gr * gr;
      const rAdj = t > 0 ? (r * Math.sqrt(1 - beta ** t)) / (1 - alpha ** t) : r;
      const xNew = x! - rAdj * (vNew / (Math.sqrt(hNew) + eps));
      return [(1 - post) * xNew, vNew, hNew];
    });
  },
};

const MOMENTUM: OpHandler = {
  op: 'Momentum',
  domain: TRAINING,
  since: 1,
  infer: (ctx, inputs) => inferOptimizer(ctx, inputs, 3),
  eval(ctx, inputs) {
    const alpha = ctx.float('alpha'),
      beta = ctx.float('beta'),
      norm = ctx.float('norm_coefficient');
    const mode = ctx.string('mode');
    if (mode !== 'standard' && mode !== 'nesterov') ctx.fail(`mode must be standard or nesterov, got '${mode}'`);
    return optimize(ctx, inputs, 3, (r, t, [x, g, v]) => {
      const gr = norm * x! + g!;
      const vNew = alpha * v! + (t > 0 ? beta : 1) * gr;
      return [mode === 'standard' ? x! - r * vNew : x! - r * (gr + alpha * vNew), vNew];
    });
  },
};

export const ML_OPS: OpHandler[] = [
  labelEncoder(1, 2),
  labelEncoder(2, undefined),
  TREE_ENSEMBLE,
  BINARIZER,
  ARRAY_FEATURE_EXTRACTOR,
  ADAGRAD,
  ADAM,
  MOMENTUM,
];
