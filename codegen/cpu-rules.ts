// CPU lowering rules: ONNX op → native kernel call (or a view of an input), one table keyed by op type.
import { enumCode, PAD_MODES, SCATTER_REDUCTIONS } from '../compiler/kernel-enums.ts';
import { call, WEIGHT_DTYPES, type KernelCall } from '../compiler/kernel-schema.ts';
import type { OpContext, InferInput } from '../model/ops/types.ts';
import { dimAdd, dimCompare, dimProduct, type Dim } from '../compiler/symbolic.ts';
import { Tensor } from '../compiler/tensor.ts';

export interface RuleCtx extends OpContext {
  inputs: (InferInput | undefined)[];
  outputs: (InferInput | undefined)[];
  /** Shape of input i (fails when unknown). */
  shape(i: number): Dim[];
  /** Elements of integer input i, known before running (constant or computed from shapes). */
  known(i: number): Dim[];
}

export type Lowering =
  | { alias: number }
  | (KernelCall & {
      /** Node input indices feeding the kernel (-1 omitted), or constant tensors made weights. Default: all inputs. */
      inputs?: (number | Tensor)[];
      /** Inputs the kernel sees with other dims (views). */
      inViews?: Record<number, Dim[]>;
      /** Kernel output dims when they differ from the node's (the node output becomes a view). */
      outDims?: (Dim[] | undefined)[];
      /** Node outputs beyond this count are not produced by the kernel. */
      maxOutputs?: number;
      /** The first n outputs must be present. */
      requireOutputs?: number;
      /** Output 0 is this kernel input's buffer, written in place (a STATE input, i.e. a KV cache). */
      inPlace?: number;
    });

export type Rule = (ctx: RuleCtx) => Lowering;

const unsupported = (ctx: RuleCtx, why: string): never => {
  ctx.fail(`${ctx.node.op}: ${why} (not supported by the CPU backend yet)`);
};

const axisOf = (ctx: RuleCtx, axis: number, rank: number): number => {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) ctx.fail(`axis ${axis} out of range for rank ${rank}`);
  return a;
};

const FLOAT_KERNEL_TYPES = new Set(['float32']);
/** A product's weight (compiler/kernel-schema.ts F32_OR_HALF). */
const WEIGHT_TYPES = new Set<string>(WEIGHT_DTYPES);
const UNARY_FLOAT_TYPES = new Set(['float32', 'float64']);
const NUM_TYPES = new Set(['float32', 'float64', 'int32', 'int64', 'int8', 'uint8']);
const INT64_TYPE = new Set(['int64']);

function requireTypes(ctx: RuleCtx, allowed: Set<string>, ...idx: number[]): void {
  for (const i of idx) {
    const d = ctx.inputs[i]?.dtype;
    if (d && !allowed.has(d)) unsupported(ctx, `input ${i} has dtype ${d}`);
  }
}

function oldBroadcast(ctx: RuleCtx): void {
  if (ctx.opset < 7 && ctx.has('broadcast') && ctx.has('axis')) unsupported(ctx, 'legacy broadcast with axis');
}

/** The kernels binary ops lower to (two inputs, no arguments). */
type BinaryKernel =
  | 'add'
  | 'sub'
  | 'mul'
  | 'div'
  | 'pow'
  | 'max'
  | 'min'
  | 'equal'
  | 'less'
  | 'greater'
  | 'less_equal'
  | 'greater_equal';

/** The checks of a broadcasting binary op (legacy broadcast, dtypes). */
function binaryChecks(ctx: RuleCtx, types: Set<string>, mixed: boolean): void {
  oldBroadcast(ctx);
  requireTypes(ctx, types, 0, 1);
  if (!mixed && ctx.inputs[0]?.dtype !== ctx.inputs[1]?.dtype) unsupported(ctx, 'mixed input dtypes');
}

const binary =
  (kernel: BinaryKernel, types = NUM_TYPES, mixed = false): Rule =>
  (ctx) => {
    binaryChecks(ctx, types, mixed);
    return call(kernel);
  };

const logic =
  (kernel: 'and' | 'or' | 'xor'): Rule =>
  () =>
    call(kernel);

type UnaryKernel =
  | 'relu'
  | 'neg'
  | 'abs'
  | 'exp'
  | 'log'
  | 'sqrt'
  | 'reciprocal'
  | 'tanh'
  | 'sigmoid'
  | 'erf'
  | 'floor'
  | 'ceil'
  | 'round'
  | 'sin'
  | 'cos'
  | 'sign'
  | 'softplus';

const unary =
  (kernel: UnaryKernel, types = UNARY_FLOAT_TYPES): Rule =>
  (ctx) => {
    requireTypes(ctx, types, 0);
    return call(kernel);
  };

/** Variadic Max/Min/Sum with one or two inputs. */
const variadic =
  (kernel: 'max' | 'min' | 'add'): Rule =>
  (ctx) => {
    const n = ctx.node.inputs.length;
    if (n === 1) return { alias: 0 };
    if (n !== 2) unsupported(ctx, `${n} inputs`);
    return binary(kernel)(ctx);
  };

/** Rank-1 MatMul operands become [1, K] / [K, 1]; the output view drops those dims again. */
const matmul: Rule = (ctx) => {
  requireTypes(ctx, FLOAT_KERNEL_TYPES, 0, 1);
  const a = ctx.shape(0);
  const b = ctx.shape(1);
  const inViews: Record<number, Dim[]> = {};
  if (a.length === 1) inViews[0] = [1, a[0]!];
  if (b.length === 1) inViews[1] = [b[0]!, 1];
  if (a.length > 1 && b.length > 1) return call('matmul');
  const av = inViews[0] ?? a;
  const bv = inViews[1] ?? b;
  const batch = (av.length > bv.length ? av : bv).slice(0, -2);
  return { ...call('matmul'), inViews, outDims: [[...batch, av[av.length - 2]!, bv[bv.length - 1]!]] };
};

const gemm: Rule = (ctx) => {
  requireTypes(ctx, FLOAT_KERNEL_TYPES, 0, 1, 2);
  return call('gemm', {
    trans_a: ctx.int('transA', 0),
    trans_b: ctx.int('transB', 0),
    alpha: ctx.float('alpha', 1),
    beta: ctx.float('beta', 1),
  });
};

const softmax =
  (log: number): Rule =>
  (ctx) => {
    requireTypes(ctx, FLOAT_KERNEL_TYPES, 0);
    const x = ctx.shape(0);
    if (ctx.opset >= 13) return call('softmax', { axis: axisOf(ctx, ctx.int('axis', -1), x.length), log });
    const a = x.length === 0 ? 0 : axisOf(ctx, ctx.int('axis', 1), x.length);
    const flat: Dim[] = [dimProduct(x.slice(0, a)), dimProduct(x.slice(a))];
    return { ...call('softmax', { axis: 1, log }), inViews: { 0: flat }, outDims: [flat] };
  };

const layerNorm =
  (kernel: 'layer_norm' | 'rms_norm', defaultAxis: number): Rule =>
  (ctx) => {
    requireTypes(ctx, FLOAT_KERNEL_TYPES, 0, 1, 2);
    const x = ctx.shape(0);
    return {
      ...call(kernel, {
        axis: axisOf(ctx, ctx.int('axis', defaultAxis), x.length),
        epsilon: ctx.float('epsilon', 1e-5),
      }),
      maxOutputs: 1,
    };
  };

/** Axes of a reduction: attribute before the opset where they moved to an input. */
function reduceAxes(ctx: RuleCtx, axesInputSince: number): number[] | undefined {
  if (ctx.opset >= axesInputSince) {
    if (!ctx.node.inputs[1]) return undefined;
    return ctx.known(1).map((d) => (typeof d === 'number' ? d : unsupported(ctx, 'symbolic axes')));
  }
  return ctx.has('axes') ? ctx.ints('axes') : undefined;
}

type ReduceKernel =
  | 'reduce_sum'
  | 'reduce_mean'
  | 'reduce_max'
  | 'reduce_min'
  | 'reduce_prod'
  | 'reduce_sum_square'
  | 'reduce_l1'
  | 'reduce_l2'
  | 'reduce_log_sum_exp';

const reduce =
  (kernel: ReduceKernel, axesInputSince: number): Rule =>
  (ctx) => {
    requireTypes(
      ctx,
      kernel === 'reduce_max' || kernel === 'reduce_min' ? new Set([...NUM_TYPES, 'bool']) : NUM_TYPES,
      0,
    );
    const x = ctx.shape(0);
    let axes = reduceAxes(ctx, axesInputSince);
    if (!axes || axes.length === 0) {
      if (ctx.int('noop_with_empty_axes', 0)) return { alias: 0 };
      axes = x.map((_, i) => i);
    }
    let mask = 0;
    for (const a of axes) mask |= 1 << axisOf(ctx, a, x.length);
    const kept = x.map((d, i) => (mask & (1 << i) ? 1 : d));
    return { ...call(kernel, { axes: mask }), inputs: [0], outDims: [kept] };
  };

const argReduce =
  (kernel: 'argmax' | 'argmin'): Rule =>
  (ctx) => {
    requireTypes(ctx, NUM_TYPES, 0);
    const x = ctx.shape(0);
    const axis = axisOf(ctx, ctx.int('axis', 0), x.length);
    return {
      ...call(kernel, { axis, select_last_index: ctx.int('select_last_index', 0) }),
      outDims: [x.map((d, i) => (i === axis ? 1 : d))],
    };
  };

const transpose: Rule = (ctx) => {
  const r = ctx.shape(0).length;
  return call('transpose', { perm: ctx.has('perm') ? ctx.ints('perm') : [...Array(r).keys()].reverse() });
};

/** Slice's start and step per axis of the input, with ONNX clamping where dims are numbers. */
const slice: Rule = (ctx) => {
  const x = ctx.shape(0);
  const r = x.length;
  let starts: Dim[], axes: Dim[], steps: Dim[];
  if (ctx.opset < 10) {
    starts = ctx.ints('starts');
    axes = ctx.has('axes') ? ctx.ints('axes') : starts.map((_, i) => i);
    steps = starts.map(() => 1);
  } else {
    starts = ctx.known(1);
    axes = ctx.node.inputs[3] ? ctx.known(3) : starts.map((_, i) => i);
    steps = ctx.node.inputs[4] ? ctx.known(4) : starts.map(() => 1);
  }
  const startsSteps: Dim[] = [];
  const start: Dim[] = x.map(() => 0);
  const step: Dim[] = x.map(() => 1);
  axes.forEach((ad, k) => {
    if (typeof ad !== 'number') unsupported(ctx, 'symbolic axes');
    const a = axisOf(ctx, ad as number, r);
    const st = steps[k]!;
    if (typeof st !== 'number' || st === 0) unsupported(ctx, 'symbolic or zero step');
    const dim = x[a]!;
    let s = starts[k]!;
    if (typeof s === 'number') {
      if (s < 0) s = dimAdd(s, dim);
      if (typeof s === 'number' && typeof dim === 'number') {
        s = (st as number) > 0 ? Math.min(Math.max(s, 0), dim) : Math.min(Math.max(s, -1), dim - 1);
      } else if (typeof s === 'number' && s > 1e15) {
        unsupported(ctx, 'huge start on a symbolic dim');
      }
    } else if (dimCompare(s, 0) === -1) {
      s = dimAdd(s, dim); // below zero for every size: counts from the end (the kernels also normalize at run time)
    }
    start[a] = s;
    step[a] = st as number;
  });
  for (let i = 0; i < r; i++) startsSteps.push(start[i]!, step[i]!);
  return { ...call('slice', { starts_steps: startsSteps }), inputs: [0] };
};

const concat: Rule = (ctx) => call('concat', { axis: axisOf(ctx, ctx.int('axis', 0), ctx.shape(0).length) });

const split: Rule = (ctx) => ({
  ...call('split', { axis: axisOf(ctx, ctx.int('axis', 0), ctx.shape(0).length) }),
  inputs: [0],
  requireOutputs: ctx.node.outputs.length,
});

const gather =
  (kernel: 'gather' | 'gather_elements'): Rule =>
  (ctx) =>
    call(kernel, { axis: axisOf(ctx, ctx.int('axis', 0), ctx.shape(0).length) });

/** A string attribute that names a value of a kernel enum (unsupported otherwise). */
function enumAttr<T extends string>(ctx: RuleCtx, attr: string, values: readonly T[], dflt: T): T {
  const v = ctx.string(attr, dflt);
  if (!(values as readonly string[]).includes(v)) unsupported(ctx, `${attr} ${v}`);
  return v as T;
}

const scatterNd: Rule = (ctx) =>
  call('scatter_nd', { reduction: enumAttr(ctx, 'reduction', SCATTER_REDUCTIONS, 'none') });

const pad: Rule = (ctx) => {
  const x = ctx.shape(0);
  const r = x.length;
  const mode = enumAttr(ctx, 'mode', PAD_MODES, 'constant');
  let pads: Dim[];
  let value: number | Tensor = -1;
  if (ctx.opset < 11) {
    pads = ctx.has('pads') ? ctx.ints('pads') : ctx.ints('paddings');
    value = Tensor.scalar(ctx.inputs[0]!.dtype, ctx.float('value', 0));
  } else {
    const p = ctx.known(1);
    if (ctx.node.inputs[3]) {
      const axes = ctx.known(3).map((a) => axisOf(ctx, a as number, r));
      pads = new Array(2 * r).fill(0);
      axes.forEach((a, k) => {
        pads[a] = p[k]!;
        pads[a + r] = p[k + axes.length]!;
      });
    } else pads = p;
    value = ctx.node.inputs[2] ? 2 : -1;
  }
  if (pads.length !== 2 * r) ctx.fail(`pads has ${pads.length} values for rank ${r}`);
  return { ...call('pad', { mode, pads }), inputs: [0, value] };
};

const range: Rule = (ctx) => {
  const start = ctx.inputs[0]?.value?.nums[0];
  const delta = ctx.inputs[2]?.value?.nums[0];
  if (start !== undefined && delta !== undefined) return { ...call('range', { start, delta }), inputs: [] };
  // integer ranges over runtime dimensions (positions past_len .. past_len + T): start and delta as expressions
  const s = ctx.inputs[0]?.sym;
  const d = ctx.inputs[2]?.sym;
  if (s?.length === 1 && d?.length === 1)
    return { ...call('range', { start_int: s[0]!, delta_int: d[0]! }), inputs: [] };
  return unsupported(ctx, 'start and delta must be constants or computed from shapes');
};

const constantOfShape: Rule = (ctx) => {
  const v = ctx.has('value') ? (ctx.tensor('value').nums[0] ?? 0) : 0;
  return { ...call('fill', { value: v }), inputs: [] };
};

const clip: Rule = (ctx) => {
  requireTypes(ctx, NUM_TYPES, 0);
  if (ctx.opset < 11) {
    const dt = ctx.inputs[0]!.dtype;
    return {
      ...call('clip'),
      inputs: [
        0,
        Tensor.scalar(dt, ctx.float('min', -3.4028234663852886e38)),
        Tensor.scalar(dt, ctx.float('max', 3.4028234663852886e38)),
      ],
    };
  }
  return call('clip');
};

const cast: Rule = () => ({ ...call('cast'), inputs: [0] });

const gelu: Rule = (ctx) => {
  requireTypes(ctx, FLOAT_KERNEL_TYPES, 0);
  return call('gelu', { approximate: ctx.string('approximate', 'none') === 'tanh' ? 'tanh' : 'none' });
};

const withAlpha =
  (kernel: 'leaky_relu' | 'elu', alpha: number): Rule =>
  (ctx) => {
    requireTypes(ctx, FLOAT_KERNEL_TYPES, 0);
    return call(kernel, { alpha: ctx.float('alpha', alpha) });
  };

const dropout: Rule = (ctx) => {
  if (ctx.node.outputs[1]) unsupported(ctx, 'the mask output');
  if (ctx.node.inputs[2]) {
    const t = ctx.inputs[2]?.value;
    if (!t || t.nums[0]) unsupported(ctx, 'training mode');
  }
  return { alias: 0 };
};

const topk: Rule = (ctx) => {
  if (ctx.opset < 10) unsupported(ctx, 'opset < 10');
  return {
    ...call('topk', {
      axis: axisOf(ctx, ctx.int('axis', -1), ctx.shape(0).length),
      largest: ctx.int('largest', 1),
      sorted: ctx.int('sorted', 1),
    }),
    requireOutputs: 2,
  };
};

const trilu: Rule = (ctx) => call('trilu', { upper: ctx.int('upper', 1) });

const cumsum: Rule = (ctx) => call('cumsum', { exclusive: ctx.int('exclusive', 0), reverse: ctx.int('reverse', 0) });

const oneHot: Rule = (ctx) => call('one_hot', { axis: axisOf(ctx, ctx.int('axis', -1), ctx.shape(0).length + 1) });

const where: Rule = (ctx) => {
  requireTypes(ctx, NUM_TYPES, 1, 2);
  return call('where');
};

const UNARY_OPS: Record<string, UnaryKernel> = {
  Relu: 'relu',
  Neg: 'neg',
  Abs: 'abs',
  Exp: 'exp',
  Log: 'log',
  Sqrt: 'sqrt',
  Reciprocal: 'reciprocal',
  Tanh: 'tanh',
  Sigmoid: 'sigmoid',
  Erf: 'erf',
  Floor: 'floor',
  Ceil: 'ceil',
  Round: 'round',
  Sin: 'sin',
  Cos: 'cos',
  Sign: 'sign',
  Softplus: 'softplus',
};
const INT_UNARY = new Set(['Neg', 'Abs', 'Sign', 'Relu']);

export const CPU_RULES: Record<string, Rule> = {
  ...Object.fromEntries(
    Object.entries(UNARY_OPS).map(([op, k]) => [op, unary(k, INT_UNARY.has(op) ? NUM_TYPES : UNARY_FLOAT_TYPES)]),
  ),
  Add: binary('add'),
  Sub: binary('sub'),
  Mul: binary('mul'),
  Div: binary('div'),
  Pow: binary('pow', NUM_TYPES, true),
  Mod: (ctx) => {
    binaryChecks(ctx, NUM_TYPES, false);
    return call('mod', { fmod: ctx.int('fmod', 0) });
  },
  Max: variadic('max'),
  Min: variadic('min'),
  Sum: variadic('add'),
  Equal: binary('equal', new Set([...NUM_TYPES, 'bool'])),
  Less: binary('less'),
  Greater: binary('greater'),
  LessOrEqual: binary('less_equal'),
  GreaterOrEqual: binary('greater_equal'),
  And: logic('and'),
  Or: logic('or'),
  Xor: logic('xor'),
  Not: () => call('not'),
  Where: where,
  Gelu: gelu,
  LeakyRelu: withAlpha('leaky_relu', 0.01),
  Elu: withAlpha('elu', 1),
  HardSigmoid: (ctx) => call('hard_sigmoid', { alpha: ctx.float('alpha', 0.2), beta: ctx.float('beta', 0.5) }),
  Clip: clip,
  Cast: cast,
  CastLike: cast,
  Identity: () => ({ alias: 0 }),
  Dropout: dropout,
  Reshape: () => ({ alias: 0 }),
  Flatten: () => ({ alias: 0 }),
  Squeeze: () => ({ alias: 0 }),
  Unsqueeze: () => ({ alias: 0 }),
  MatMul: matmul,
  Gemm: gemm,
  Softmax: softmax(0),
  LogSoftmax: softmax(1),
  LayerNormalization: layerNorm('layer_norm', -1),
  RMSNormalization: layerNorm('rms_norm', -1),
  'planc.LayerNorm': layerNorm('layer_norm', -1),
  'planc.RMSNorm': layerNorm('rms_norm', -1),
  ReduceSum: reduce('reduce_sum', 13),
  ReduceMean: reduce('reduce_mean', 18),
  ReduceMax: reduce('reduce_max', 18),
  ReduceMin: reduce('reduce_min', 18),
  ReduceProd: reduce('reduce_prod', 18),
  ReduceSumSquare: reduce('reduce_sum_square', 18),
  ReduceL1: reduce('reduce_l1', 18),
  ReduceL2: reduce('reduce_l2', 18),
  ReduceLogSumExp: reduce('reduce_log_sum_exp', 18),
  ArgMax: argReduce('argmax'),
  ArgMin: argReduce('argmin'),
  Transpose: transpose,
  Gather: gather('gather'),
  ScatterND: scatterNd,
  GatherElements: gather('gather_elements'),
  Slice: slice,
  Concat: concat,
  Split: split,
  Expand: () => ({ ...call('expand'), inputs: [0] }),
  Tile: () => ({ ...call('tile'), inputs: [0] }),
  'planc.FusedMatMul': (ctx) => {
    const code = enumCode('activation', ctx.string('activation', 'none'));
    if (code === undefined) ctx.fail(`unknown activation ${ctx.string('activation', '')}`);
    return {
      ...call('fused_matmul', { activation: code! }),
      inputs: [0, 1, ctx.node.inputs[2] ? 2 : -1, ctx.node.inputs[3] ? 3 : -1],
    };
  },
  'planc.QMatMul': (ctx) => {
    const activation = enumCode('activation', ctx.string('activation', 'none'));
    const input = enumCode('quant_input', ctx.string('input', 'int8'));
    if (activation === undefined || input === undefined)
      ctx.fail(`unknown activation or input ${ctx.string('activation', '')} / ${ctx.string('input', '')}`);
    const opt = (i: number) => (ctx.node.inputs[i] ? i : -1);
    // a_scale (input 6): A is planc.QuantizeRows' rows (passes/share-quantized-rows.ts)
    return {
      ...call('qmatmul', { activation: activation!, input: input!, n: ctx.int('n'), k: ctx.int('k') }),
      inputs: [0, 1, 2, opt(3), opt(4), opt(5), ...(ctx.node.inputs[6] ? [6] : [])],
    };
  },
  'planc.QuantizeRows': (ctx) => {
    const input = enumCode('quant_input', ctx.string('input', 'int8'));
    if (input === undefined) ctx.fail(`unknown input ${ctx.string('input', '')}`);
    return { ...call('quantize_rows', { input: input!, k: ctx.int('k') }), inputs: [0], requireOutputs: 2 };
  },
  'planc.Attention': (ctx) => {
    requireTypes(ctx, FLOAT_KERNEL_TYPES, 0, 1, 2);
    const kvLen = ctx.node.inputs[4] ? ctx.known(4)[0]! : ctx.shape(1)[2]!;
    const hasMask = !!ctx.node.inputs[3];
    const m = hasMask ? ctx.shape(3) : [];
    const inViews = hasMask && m.length < 4 ? { 3: [...new Array<Dim>(4 - m.length).fill(1), ...m] } : undefined;
    // past_lens (node input 5, int64 [B]: each row's own cached length) is kernel input 4, passed only when present.
    const hasPast = !!ctx.node.inputs[5];
    if (hasPast) requireTypes(ctx, INT64_TYPE, 5);
    return {
      ...call('attention', {
        num_heads: ctx.int('num_heads'),
        q_layout: ctx.int('q_layout', 0),
        kv_len: kvLen,
        mask_kind: ctx.int('mask_kind', 0),
        is_causal: ctx.int('is_causal', 0),
        scale: ctx.float('scale', 1),
      }),
      inputs: [0, 1, 2, hasMask ? 3 : -1, ...(hasPast ? [5] : [])],
      inViews,
    };
  },
  'planc.CacheWrite': (ctx) => {
    requireTypes(ctx, FLOAT_KERNEL_TYPES, 0, 1);
    // past_lens (node input 3, int64 [B]: each row's first position) is kernel input 2, passed only when present; pos is then unused.
    const hasPast = !!ctx.node.inputs[3];
    if (hasPast) requireTypes(ctx, INT64_TYPE, 3);
    const pos = hasPast && !ctx.inputs[2]?.sym && !ctx.inputs[2]?.value ? 0 : ctx.known(2)[0]!;
    return {
      ...call('cache_write', { pos, new_layout: ctx.int('new_layout', 0), num_heads: ctx.int('num_heads', 0) }),
      inputs: [0, 1, ...(hasPast ? [3] : [])],
      inPlace: 0,
    };
  },
  'planc.ProjectTopK': (ctx) => {
    requireTypes(ctx, FLOAT_KERNEL_TYPES, 0, 2);
    requireTypes(ctx, WEIGHT_TYPES, 1);
    // The active mask (input 3, the vocab pass) is passed only when present: plans without it keep 3 kernel inputs.
    const inputs = [0, 1, ctx.node.inputs[2] ? 2 : -1, ...(ctx.node.inputs[3] ? [3] : [])];
    return {
      ...call('project_topk', { k: ctx.int('k'), transposed: ctx.int('transposed', 0) }),
      inputs,
      requireOutputs: 2,
    };
  },
  'planc.QGather': (ctx) => ({
    ...call('qgather', { d: ctx.int('d') }),
    inputs: [0, 1, 2, ...(ctx.node.inputs[3] ? [3] : [])],
  }),
  'planc.QProjectTopK': (ctx) => {
    const input = enumCode('quant_input', ctx.string('input', 'int8'));
    if (input === undefined) ctx.fail(`unknown input ${ctx.string('input', '')}`);
    // active (5) and w_res (6) are passed only when present; an absent active before w_res keeps its slot (-1)
    const has = (i: number) => Boolean(ctx.node.inputs[i]);
    const inputs = [
      0,
      1,
      2,
      3,
      has(4) ? 4 : -1,
      ...(has(5) || has(6) ? [has(5) ? 5 : -1] : []),
      ...(has(6) ? [6] : []),
    ];
    return { ...call('qproject_topk', { k: ctx.int('k'), input: input!, d: ctx.int('d') }), inputs, requireOutputs: 2 };
  },
  'planc.ClusterMask': (ctx) => {
    requireTypes(ctx, FLOAT_KERNEL_TYPES, 0, 1, 2);
    return { ...call('cluster_mask', { vocab: ctx.int('vocab') }), inputs: [0, 1, 2, 3, 4] };
  },
  Pad: pad,
  Range: range,
  ConstantOfShape: constantOfShape,
  Trilu: trilu,
  CumSum: cumsum,
  TopK: topk,
  OneHot: oneHot,
};
