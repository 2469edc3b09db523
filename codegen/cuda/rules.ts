// CUDA kernel selection: each program kernel call → its launch variants (declared in compiler/kernel-schema.ts
// cudaVariants, launch shapes included), each a template instantiation (constants baked in) and its grid.
import { constExpr } from '../../compiler/plan/expr.ts';
import {
  ACTIVATIONS,
  DTYPE_CODE,
  MASK_KINDS,
  PLAN_DTYPE_BYTES,
  PLAN_DTYPES,
  QUANT_INPUTS,
} from '../../compiler/kernel-enums.ts';
import {
  CUDA_DEFAULT_VARIANTS,
  CUDA_GEMM_VARIANTS,
  WEIGHT_DTYPES,
  cudaVariant,
  iargIndex,
  type CudaVariantName,
  type IargName,
  type KernelName,
} from '../../compiler/kernel-schema.ts';
import { PlancError, type Text } from '../../compiler/diagnostics.ts';
import { worded } from '../../compiler/diagnostics-catalog.ts';
import { RESCORED } from '../../compiler/quant/pack.ts';
import {
  TENSOR_KIND,
  type CudaGrid,
  type PlanKernel,
  type PlanProgram,
  type PlanTensor,
} from '../../compiler/plan/types.ts';
import { cudaTuningArch, type CudaArch } from '../target.ts';
import { DEFAULT_ARCHS } from './nvcc.ts';
import { cudaTemplate } from './template-call.ts';

/** An operand as the rules see it: dtype, rank, the dims known at optimize time (undefined: runtime symbol). */
export interface Operand {
  tensor: number;
  dtype: number;
  rank: number;
  dims: (number | undefined)[];
  /** Expression indices of the dims (equal index ⇒ equal dim at every run). */
  exprs: number[];
  /** Bytes of the arena slot backing it at the plan's max shapes (0 when not in the arena). */
  slotBytes: number;
  kind: number;
}

export interface RuleCtx<K extends KernelName = KernelName> {
  kernel: PlanKernel;
  /** Inputs (undefined: omitted optional input). */
  ins: (Operand | undefined)[];
  outs: Operand[];
  /** The value of the kernel's int argument `name` (compiler/kernel-schema.ts), which must be a constant. */
  iarg(name: IargName<K>): number;
  /** Whether the call gives the (optional) int argument `name`. */
  hasIarg(name: IargName<K>): boolean;
  /** The hardware facts the launches are tuned for (codegen/target.ts cudaTuningArch of the plan's archs). */
  arch: CudaArch;
  fail(msg: Text): never;
}

/** One way to launch a call: its declared variant, the template call it runs, threads per block, grid rule, and when it applies. */
export interface Instance<V extends string = string> {
  /** The launch variant it is, one compiler/kernel-schema.ts declares for the kernel (block and maxRows are its). */
  variant: V;
  template: string;
  block: number;
  grid: CudaGrid[];
  /** 0: any number of rows of output 0; else only up to this many. */
  maxRows?: number;
  /** Device scratch this call needs at the plan's max shapes. */
  scratchBytes?: number;
  /**
   * __launch_bounds__'s second argument. 1 where ptxas, left to its own occupancy target, spilled a few bytes at
   * about 40 registers (the masked project_topk, cluster_mask): with it they use up to ~80 registers and no spills.
   */
  minBlocks?: number;
}

/** A kernel's rule: its instances, each of a variant the schema declares for it (an undeclared name does not type-check). */
export type CudaRule<K extends KernelName = KernelName> = (ctx: RuleCtx<K>) => Instance<CudaVariantName<K>>[];
/** The rule of any kernel with the one `default` launch (CUDA_DEFAULT_VARIANTS). */
type DefaultRule = (ctx: RuleCtx) => Instance<'default'>[];

/** Variant `name` of kernel K with its declared threads per block. */
const launch = <K extends KernelName>(kernel: K, name: CudaVariantName<K>) => ({
  variant: name,
  block: cudaVariant(kernel, name).block,
});
/** The `default` launch of a kernel that declares no CUDA variants. */
const DEFAULT = { variant: CUDA_DEFAULT_VARIANTS[0].name, block: CUDA_DEFAULT_VARIANTS[0].block };

// ---- limits of the launch ABI (codegen/cuda/kernels/common.cuh KArgs) ----
export const MAX_IN = 8,
  MAX_OUT = 4,
  MAX_IARGS = 32,
  MAX_FARGS = 4;
/** The scratch's ticket counters and where its data starts (common.cuh kScratchCounters, kScratchData). */
const SCRATCH_COUNTERS = 16384,
  SCRATCH_DATA = SCRATCH_COUNTERS * 4;

const CTYPE: Record<number, string> = Object.fromEntries(PLAN_DTYPES.map((d) => [d.code, d.cudaType]));
const UTYPE: Record<number, string> = { 1: 'uint8_t', 2: 'uint16_t', 4: 'uint32_t', 8: 'uint64_t' };
const NAME: Record<number, string> = Object.fromEntries(PLAN_DTYPES.map((d) => [d.code, d.name]));
/** Plan dtype codes by the names the rules use. */
const [F32, F64, I32, I64, I8, U8, BOOL] = (
  ['float32', 'float64', 'int32', 'int64', 'int8', 'uint8', 'bool'] as const
).map((n) => DTYPE_CODE[n]!);
/** A product's weight dtypes (compiler/kernel-schema.ts F32_OR_HALF): float32, or float16 / bfloat16 on tensor cores. */
const WEIGHT = WEIGHT_DTYPES.map((n) => DTYPE_CODE[n]!);
const MASK_ADD = MASK_KINDS.indexOf('add');

const ctype = (ctx: RuleCtx, o: Operand): string =>
  CTYPE[o.dtype] ?? ctx.fail(`dtype code ${o.dtype} has no CUDA type`);
/** The unsigned type of an element's size (movement kernels only copy bits). */
const utype = (ctx: RuleCtx, o: Operand): string =>
  UTYPE[PLAN_DTYPE_BYTES[o.dtype] ?? 0] ?? ctx.fail(`dtype code ${o.dtype} has no CUDA type`);
const dtypeName = (d: number) => NAME[d] ?? `code ${d}`;

function input(ctx: RuleCtx, i: number): Operand {
  return ctx.ins[i] ?? ctx.fail(`input ${i} is required`);
}

function requireDtype(ctx: RuleCtx, o: Operand, allowed: number[], what: string): void {
  if (!allowed.includes(o.dtype))
    ctx.fail(`${what} is ${dtypeName(o.dtype)}; the CUDA kernel takes ${allowed.map(dtypeName).join('/')}`);
}

const FLOATS = [F32, F64];
const SIGNED = [F32, F64, I32, I64, I8];
const NUMERIC = [...SIGNED, U8];

// ---- grid rules (operand: inputs first, then outputs) ----
const outOperand = (ctx: RuleCtx, k = 0) => ctx.ins.length + k;
const dims = (operand: number, from: number, to: number, div = 1, mul = 1): CudaGrid => ({
  operand,
  from,
  to,
  div,
  mul,
});
/** A grid-stride elementwise launch over output 0 (the default launch), about 4 elements per thread. */
const flat = (ctx: RuleCtx, template: string): Instance<'default'>[] => [
  { ...DEFAULT, template, grid: [dims(outOperand(ctx), 0, ctx.outs[0]!.rank, 1024)] },
];
/** Same, sized by an input's elements (kernels that walk their input). */
const flatIn = (ctx: RuleCtx, i: number, template: string): Instance<'default'>[] => [
  { ...DEFAULT, template, grid: [dims(i, 0, input(ctx, i).rank, 1024)] },
];

const sameDims = (a: Operand, b: Operand) => a.rank === b.rank && a.exprs.every((e, i) => e === b.exprs[i]);
const product = (o: Operand, from = 0, to = o.rank): number | undefined =>
  o.dims
    .slice(from, to)
    .reduce<number | undefined>((p, d) => (p === undefined || d === undefined ? undefined : p * d), 1);

// ---- elementwise ----
const binary =
  (op: string): DefaultRule =>
  (ctx) => {
    const [a, b] = [input(ctx, 0), input(ctx, 1)];
    const y = ctx.outs[0]!;
    requireDtype(ctx, a, NUMERIC, 'input 0');
    if (a.dtype !== b.dtype || y.dtype !== a.dtype)
      ctx.fail(`mixed dtypes ${dtypeName(a.dtype)}, ${dtypeName(b.dtype)} → ${dtypeName(y.dtype)}`);
    const isFlat = sameDims(a, y) && sameDims(b, y);
    return flat(ctx, cudaTemplate('binary', { Op: `planc::${op}`, T: ctype(ctx, a), R: y.rank, FLAT: isFlat }));
  };

const compare =
  (op: string, types: number[]): DefaultRule =>
  (ctx) => {
    const [a, b] = [input(ctx, 0), input(ctx, 1)];
    requireDtype(ctx, a, types, 'input 0');
    if (a.dtype !== b.dtype) ctx.fail(`mixed input dtypes ${dtypeName(a.dtype)} and ${dtypeName(b.dtype)}`);
    return flat(ctx, cudaTemplate('compare', { Op: `planc::${op}`, T: ctype(ctx, a), R: ctx.outs[0]!.rank }));
  };

const unary =
  (op: string, types: number[]): DefaultRule =>
  (ctx) => {
    const x = input(ctx, 0);
    requireDtype(ctx, x, types, 'input 0');
    return flat(ctx, cudaTemplate('unary', { Op: `planc::${op}`, T: ctype(ctx, x) }));
  };

const UNARY: Record<string, [string, number[]]> = {
  relu: ['URelu', NUMERIC],
  neg: ['UNeg', SIGNED],
  abs: ['UAbs', SIGNED],
  sign: ['USign', SIGNED],
  exp: ['UExp', FLOATS],
  log: ['ULog', FLOATS],
  sqrt: ['USqrt', FLOATS],
  reciprocal: ['URecip', FLOATS],
  tanh: ['UTanh', FLOATS],
  sigmoid: ['USigmoid', FLOATS],
  erf: ['UErf', FLOATS],
  floor: ['UFloor', FLOATS],
  ceil: ['UCeil', FLOATS],
  round: ['URound', FLOATS],
  sin: ['USin', FLOATS],
  cos: ['UCos', FLOATS],
  softplus: ['USoftplus', FLOATS],
  not: ['UNot', [BOOL]],
  gelu: ['UGelu', [F32]],
  leaky_relu: ['ULeakyRelu', [F32]],
  elu: ['UElu', [F32]],
  hard_sigmoid: ['UHardSigmoid', [F32]],
};

const cast: DefaultRule = (ctx) => {
  const x = input(ctx, 0);
  const y = ctx.outs[0]!;
  return flat(ctx, cudaTemplate('cast', { TX: ctype(ctx, x), TY: ctype(ctx, y), TO_BOOL: y.dtype === BOOL }));
};

const copy: DefaultRule = (ctx) => {
  const y = ctx.outs[0]!;
  const size = PLAN_DTYPE_BYTES[y.dtype] ?? 1;
  return [
    {
      ...DEFAULT,
      template: cudaTemplate('copy', { ELEM: size }),
      grid: [dims(outOperand(ctx), 0, y.rank, 4096, size)],
    },
  ];
};

const filled =
  (name: 'fill' | 'values', types: number[]): DefaultRule =>
  (ctx) => {
    const y = ctx.outs[0]!;
    requireDtype(ctx, y, types, 'the output');
    if (name === 'values' && ctx.kernel.iargs.length > MAX_IARGS)
      ctx.fail(`${ctx.kernel.iargs.length} values (the CUDA launch carries at most ${MAX_IARGS})`);
    return flat(ctx, cudaTemplate(name, { T: ctype(ctx, y) }));
  };

/** range: start and delta as fargs, or as iargs (integer ranges over runtime dims: planc::range_i). */
const range: CudaRule<'range'> = (ctx) => {
  const y = ctx.outs[0]!;
  requireDtype(ctx, y, NUMERIC, 'the output');
  return flat(ctx, cudaTemplate(ctx.hasIarg('start_int') ? 'range_i' : 'range', { T: ctype(ctx, y) }));
};

// ---- matrix products ----
/** The product launches (compiler/kernel-schema.ts CUDA_GEMM_VARIANTS): tile shapes and row bounds are declared there. */
const [GEMV, GEMM_TC] = CUDA_GEMM_VARIANTS;
const TILE = GEMM_TC.tile;
/** Blocks per SM the small-M gemv's split-K aims for (one block per column tile and K slice). */
const SPLIT_K_WAVES = 2;

function gemmInstances(ctx: RuleCtx, act: number, bias: boolean, res: boolean): Instance<CudaVariantName<'matmul'>>[] {
  const [a, b] = [input(ctx, 0), input(ctx, 1)];
  const y = ctx.outs[0]!;
  for (const [o, w] of [
    [a, 'A'],
    [y, 'Y'],
  ] as const)
    requireDtype(ctx, o, [F32], w);
  requireDtype(ctx, b, WEIGHT, 'B');
  if (a.rank < 2 || b.rank < 2) ctx.fail(`operands of rank ${a.rank} and ${b.rank} (the lowering makes them ≥ 2)`);
  const half = b.dtype !== F32;
  if (half && b.rank !== 2)
    ctx.fail(`a ${ctype(ctx, b)} B of rank ${b.rank}: float16 / bfloat16 products take a 2-D weight`);
  const k = a.dims[a.rank - 1];
  const n = y.dims[y.rank - 1];
  const vec = k !== undefined && n !== undefined && k % 4 === 0 && n % 4 === 0;
  const batched = b.rank > 2;
  const r = y.rank;
  const out = outOperand(ctx);
  const tc: Instance<'gemm_tc'> = half
    ? {
        variant: GEMM_TC.name,
        template: cudaTemplate('gemm_tc16', {
          TW: ctype(ctx, b),
          VEC: vec && n! % 8 === 0,
          ACT: act,
          BIAS: bias,
          RES: res,
        }),
        block: GEMM_TC.block,
        grid: [dims(out, r - 1, r, TILE.bn), dims(out, 0, r - 1, TILE.bm)],
      }
    : {
        variant: GEMM_TC.name,
        template: cudaTemplate('gemm_tc', {
          BM: TILE.bm,
          BN: TILE.bn,
          BK: vec ? TILE.bk : 16,
          PASSES: TILE.passes,
          VEC: vec,
          ACT: act,
          BIAS: bias,
          RES: res,
          R: r,
          BATCHED: batched,
        }),
        block: GEMM_TC.block,
        grid: batched
          ? [dims(out, r - 1, r, TILE.bn), dims(out, r - 2, r - 1, TILE.bm), dims(out, 0, r - 2)]
          : [dims(out, r - 1, r, TILE.bn), dims(out, 0, r - 1, TILE.bm)],
      };
  if (batched) return [tc];
  // Split K over KS blocks per column tile when the columns alone give too few blocks (about SPLIT_K_WAVES waves of the
  // tuning arch's SMs).
  const k0 = k ?? 0;
  const colBlocks = n === undefined ? 0 : Math.ceil(n / 64);
  const blocks = SPLIT_K_WAVES * ctx.arch.sms;
  const ks = colBlocks === 0 ? 1 : Math.max(1, Math.min(16, Math.floor(blocks / colBlocks), Math.floor(k0 / 64)));
  if (ks > 1 && colBlocks > SCRATCH_COUNTERS)
    ctx.fail(`${colBlocks} column blocks exceed the scratch's ticket counters`);
  const gemv: Instance<'gemv'> = {
    variant: GEMV.name,
    template: cudaTemplate('gemv', {
      ACT: act,
      BIAS: bias,
      RES: res,
      VEC2: n !== undefined && n % 2 === 0,
      KS: ks,
      TW: half ? ctype(ctx, b) : undefined,
    }),
    block: GEMV.block,
    grid: [dims(out, r - 1, r, 64), dims(out, 0, 0, 1, ks)],
    maxRows: GEMV.maxRows,
    scratchBytes: ks > 1 ? SCRATCH_DATA + colBlocks * ks * GEMV.maxRows * 64 * 4 : 0,
  };
  return [gemv, tc];
}

const matmul: CudaRule<'matmul'> = (ctx) => gemmInstances(ctx, 0, false, false);

const fusedMatmul: CudaRule<'fused_matmul'> = (ctx) => {
  const act = ctx.iarg('activation');
  if (act < 0 || act >= ACTIVATIONS.length) ctx.fail(`unknown activation ${act}`);
  if (input(ctx, 1).rank !== 2) ctx.fail(`W has rank ${input(ctx, 1).rank}, not 2`);
  return gemmInstances(ctx, act, ctx.ins[2] !== undefined, ctx.ins[3] !== undefined);
};

// ---- rows ----
const softmax: CudaRule<'softmax'> = (ctx) => {
  const x = input(ctx, 0);
  requireDtype(ctx, x, [F32], 'X');
  const axis = ctx.iarg('axis');
  const log = ctx.iarg('log') !== 0;
  const last = axis === x.rank - 1;
  if (last)
    return [
      {
        ...launch('softmax', 'rows'),
        template: cudaTemplate('softmax', { LOG: log, LAST: true }),
        grid: [dims(0, 0, x.rank - 1, 8)],
      },
    ];
  return [
    {
      ...launch('softmax', 'strided'),
      template: cudaTemplate('softmax', { LOG: log, LAST: false }),
      grid: [dims(0, 0, x.rank, 256)],
    },
  ];
};

const norm =
  (rms: boolean): CudaRule<'layer_norm' | 'rms_norm'> =>
  (ctx) => {
    const x = input(ctx, 0);
    requireDtype(ctx, x, [F32], 'X');
    const axis = ctx.iarg('axis');
    if (axis < 0 || axis >= x.rank) ctx.fail(`axis ${axis} out of range`);
    const d = product(x, axis);
    const scale = input(ctx, 1);
    const bias = !rms && ctx.ins[2] !== undefined;
    for (const [o, w] of (bias
      ? [
          [scale, 'scale'],
          [ctx.ins[2]!, 'bias'],
        ]
      : [[scale, 'scale']]) as [Operand, string][]) {
      requireDtype(ctx, o, [F32], w);
      const n = product(o);
      if (n === undefined || d === undefined || n !== d)
        ctx.fail(
          `${w} must have the ${d ?? 'normalized'} elements of the normalized dims (static), it has ${n ?? 'a dynamic number'}`,
        );
    }
    const d0 = d !== undefined && d % 32 === 0 && d <= 2048 ? d : 0;
    return [
      { ...DEFAULT, template: cudaTemplate('norm', { D0: d0, RMS: rms, BIAS: bias }), grid: [dims(0, 0, axis, 8)] },
    ];
  };

// ---- movement ----
const transpose: DefaultRule = (ctx) =>
  flat(ctx, cudaTemplate('transpose', { T: utype(ctx, input(ctx, 0)), R: ctx.outs[0]!.rank }));

const gather: CudaRule<'gather'> = (ctx) => {
  const x = input(ctx, 0);
  const idx = input(ctx, 1);
  requireDtype(ctx, idx, [I32, I64], 'the indices');
  const axis = ctx.iarg('axis');
  return flat(ctx, cudaTemplate('gather', { T: utype(ctx, x), TI: ctype(ctx, idx), AXIS: axis }));
};

const slice: DefaultRule = (ctx) => {
  const x = input(ctx, 0);
  if (2 * x.rank > MAX_IARGS) ctx.fail(`rank ${x.rank} is too high`);
  return flat(ctx, cudaTemplate('slice', { T: utype(ctx, x), R: x.rank }));
};

const concat: CudaRule<'concat'> = (ctx) =>
  flat(ctx, cudaTemplate('concat', { T: utype(ctx, ctx.outs[0]!), AXIS: ctx.iarg('axis') }));
const split: CudaRule<'split'> = (ctx) =>
  flatIn(ctx, 0, cudaTemplate('split', { T: utype(ctx, input(ctx, 0)), AXIS: ctx.iarg('axis') }));
const expand: DefaultRule = (ctx) =>
  flat(ctx, cudaTemplate('expand', { T: utype(ctx, input(ctx, 0)), R: ctx.outs[0]!.rank }));
const tile: DefaultRule = (ctx) =>
  flat(ctx, cudaTemplate('tile', { T: utype(ctx, input(ctx, 0)), R: ctx.outs[0]!.rank }));

const where: DefaultRule = (ctx) => {
  requireDtype(ctx, input(ctx, 0), [BOOL], 'the condition');
  return flat(ctx, cudaTemplate('where_select', { T: utype(ctx, input(ctx, 1)), R: ctx.outs[0]!.rank }));
};

const clip: DefaultRule = (ctx) => {
  const x = input(ctx, 0);
  requireDtype(ctx, x, NUMERIC, 'X');
  return flat(ctx, cudaTemplate('clip', { T: ctype(ctx, x) }));
};

const pow: DefaultRule = (ctx) => {
  const [a, b] = [input(ctx, 0), input(ctx, 1)];
  requireDtype(ctx, a, NUMERIC, 'the base');
  requireDtype(ctx, b, NUMERIC, 'the exponent');
  return flat(ctx, cudaTemplate('power', { TA: ctype(ctx, a), TB: ctype(ctx, b), R: ctx.outs[0]!.rank }));
};

const mod: CudaRule<'mod'> = (ctx) => {
  const fmod = ctx.hasIarg('fmod') ? ctx.iarg('fmod') : 0;
  const a = input(ctx, 0);
  requireDtype(ctx, a, NUMERIC, 'input 0');
  if (input(ctx, 1).dtype !== a.dtype) ctx.fail('mixed input dtypes');
  return flat(
    ctx,
    cudaTemplate('binary', { Op: `planc::OpMod<${fmod !== 0}>`, T: ctype(ctx, a), R: ctx.outs[0]!.rank, FLAT: false }),
  );
};

const trilu: CudaRule<'trilu'> = (ctx) => {
  const x = input(ctx, 0);
  if (x.rank < 2) ctx.fail(`rank ${x.rank} < 2`);
  if (ctx.ins[1] !== undefined) requireDtype(ctx, ctx.ins[1], [I64], 'k');
  return flat(ctx, cudaTemplate('trilu', { T: utype(ctx, x), UPPER: ctx.iarg('upper') !== 0 }));
};

// ---- attention, KV cache, output layer ----
const attention: CudaRule<'attention'> = (ctx) => {
  const [q, k, v] = [input(ctx, 0), input(ctx, 1), input(ctx, 2)];
  for (const [o, w] of [
    [q, 'Q'],
    [k, 'K'],
    [v, 'V'],
  ] as const)
    requireDtype(ctx, o, [F32], w);
  const h = ctx.iarg('num_heads');
  const layout = ctx.iarg('q_layout');
  const maskKind = ctx.iarg('mask_kind');
  const causal = ctx.iarg('is_causal') !== 0;
  if (k.rank !== 4 || v.rank !== 4) ctx.fail('K and V must be [B, H, C, D]');
  if (layout !== 0 && layout !== 1) ctx.fail(`q_layout ${layout}`);
  if (q.rank !== (layout === 0 ? 4 : 3)) ctx.fail(`Q has rank ${q.rank} for q_layout ${layout}`);
  const hd = layout === 0 ? q.dims[3] : q.dims[2] === undefined ? undefined : q.dims[2] / h;
  if (hd === undefined || hd % 32 !== 0 || hd > 512 || k.dims[3] !== hd)
    ctx.fail(`head dim ${hd ?? 'dynamic'}: the CUDA kernel wants a static multiple of 32, at most 512, equal to K's`);
  if (maskKind < 0 || maskKind >= MASK_KINDS.length) ctx.fail(`mask_kind ${maskKind}`);
  if (maskKind !== 0) {
    const m = input(ctx, 3);
    requireDtype(ctx, m, maskKind === MASK_ADD ? [F32] : [BOOL], 'the mask');
    if (m.rank !== 4) ctx.fail(`the mask has rank ${m.rank}, not 4`);
  } else if (ctx.ins[3] !== undefined) ctx.fail('mask_kind 0 with a mask');
  // past_lens (input 4, int64 [B]): each batch row's own cached length; the template's PAST (left off without it).
  const past = ctx.ins[4];
  if (past !== undefined) {
    requireDtype(ctx, past, [I64], 'past_lens');
    if (past.rank !== 1) ctx.fail(`past_lens has rank ${past.rank}, not 1 ([B])`);
  }
  // A warp per query row, 4 rows per block (the schema's attention launch).
  const grid = layout === 0 ? [dims(0, 0, 3, 4)] : [dims(0, 0, 2, 4, h)];
  return [
    {
      ...launch('attention', 'default'),
      template: cudaTemplate('attention', {
        D: hd,
        QL: layout,
        MK: maskKind,
        CAUSAL: causal,
        PAST: past ? true : undefined,
      }),
      grid,
    },
  ];
};

const cacheWrite: CudaRule<'cache_write'> = (ctx) => {
  const [c, n] = [input(ctx, 0), input(ctx, 1)];
  requireDtype(ctx, c, [F32], 'the cache');
  requireDtype(ctx, n, [F32], 'the new rows');
  if (c.rank !== 4) ctx.fail('the cache must be [B, H, C, D]');
  const layout = ctx.iarg('new_layout');
  if (layout !== 0 && layout !== 1) ctx.fail(`new_layout ${layout}`);
  // past_lens (input 2, int64 [B]): each batch row's first row written; the template's PAST (left off without it).
  const past = ctx.ins[2];
  if (past !== undefined) {
    requireDtype(ctx, past, [I64], 'past_lens');
    if (past.rank !== 1) ctx.fail(`past_lens has rank ${past.rank}, not 1 ([B])`);
  }
  return flatIn(ctx, 1, cudaTemplate('cache_write', { NL: layout, PAST: past ? true : undefined }));
};

/** Vocabulary ids per shard of project_topk (codegen/cuda/kernels/attention.cuh SHARD) and rows per block. */
const TOPK_SHARD = 512,
  TOPK_ROWS = 8;

const projectTopk: CudaRule<'project_topk'> = (ctx) => {
  const [x, w] = [input(ctx, 0), input(ctx, 1)];
  requireDtype(ctx, x, [F32], 'X');
  requireDtype(ctx, w, WEIGHT, 'W');
  const k = ctx.iarg('k');
  const transposed = ctx.iarg('transposed') !== 0;
  if (w.rank !== 2) ctx.fail('W must be 2-D');
  const d = x.dims[x.rank - 1];
  const vocab = transposed ? w.dims[0] : w.dims[1];
  if (d === undefined || vocab === undefined) ctx.fail('D and the vocabulary size must be static');
  if ((transposed ? w.dims[1] : w.dims[0]) !== d) ctx.fail(`W is [${w.dims}] for D ${d}`);
  if (d! % 32 !== 0 || d! > 1024) ctx.fail(`D ${d}: the CUDA kernel wants a multiple of 32, at most 1024`);
  if (k < 1 || k > 64 || k > vocab!) ctx.fail(`k ${k}: the CUDA kernel takes 1..64 (and at most the vocabulary)`);
  const act = ctx.ins[3];
  // float32 rows leave the quantized parameters at their defaults (and ACT too without a mask); half rows set them all
  const half = w.dtype === F32 ? {} : { ACT: act !== undefined, Q: false, KO: k, RESC: false, TW: ctype(ctx, w) };
  const template = cudaTemplate('project_topk', {
    D: d!,
    V: vocab!,
    KK: k,
    TRANS: transposed,
    BIAS: ctx.ins[2] !== undefined,
    ACT: act ? true : undefined,
    ...half,
  });
  return [topkLaunch(ctx, d!, vocab!, k, act, template)];
};

/**
 * The launch of project_topk's template (float32 or quantized rows): shards of the vocabulary × groups of rows, the
 * scratch for kk candidates per shard and row; checks the merge's shared memory, the active mask (uint8/bool [V],
 * optional) and the ticket counters.
 */
function topkLaunch(
  ctx: RuleCtx,
  d: number,
  vocab: number,
  kk: number,
  act: Operand | undefined,
  template: string,
): Instance<'default'> {
  const shards = Math.ceil(vocab / TOPK_SHARD);
  if (Math.ceil(shards / 32) * 32 > d)
    ctx.fail(`${shards} vocabulary shards do not fit the merge's shared memory for D ${d}`);
  if (act !== undefined) {
    requireDtype(ctx, act, [U8, BOOL], 'the active mask');
    if (act.rank !== 1 || act.dims[0] !== vocab)
      ctx.fail(`the active mask is [${act.dims.map((e) => e ?? '?')}], not [${vocab}]`);
  }
  const x = input(ctx, 0);
  const maxRows = Math.max(1, Math.floor(ctx.outs[0]!.slotBytes / (4 * ctx.outs[0]!.dims[ctx.outs[0]!.rank - 1]!)));
  if (Math.ceil(maxRows / TOPK_ROWS) > SCRATCH_COUNTERS)
    ctx.fail(`${maxRows} rows exceed the scratch's ticket counters`);
  return {
    ...DEFAULT,
    template,
    grid: [dims(0, 0, 0, 1, shards), dims(0, 0, x.rank - 1, TOPK_ROWS)],
    scratchBytes: SCRATCH_DATA + 4 * maxRows * shards * (2 + 2 * kk),
    ...(act ? { minBlocks: 1 } : {}),
  };
}

// ---- quantized (int8 weight-only: float32 input rows) ----
const W8_INPUT = QUANT_INPUTS.indexOf('float32');
const requireW8 = (ctx: RuleCtx<'qmatmul' | 'qproject_topk'>) => {
  const input = ctx.iarg('input');
  if (input !== W8_INPUT)
    ctx.fail(
      (opt) =>
        `input ${QUANT_INPUTS[input] ?? input}: the CUDA quantized kernels are weight-only (float32 input rows: ${opt('quantize')} w8)`,
    );
};

const qmatmul: CudaRule<'qmatmul'> = (ctx) => {
  requireW8(ctx);
  const [a, w] = [input(ctx, 0), input(ctx, 1)];
  requireDtype(ctx, a, [F32], 'A');
  requireDtype(ctx, w, [I8], 'Wq');
  const act = ctx.iarg('activation'),
    n = ctx.iarg('n'),
    k = ctx.iarg('k');
  if (act < 0 || act >= ACTIVATIONS.length) ctx.fail(`unknown activation ${act}`);
  if (w.rank !== 4 || w.dims[0] !== Math.ceil(n / 16) || w.dims[1] !== Math.ceil(k / 4))
    ctx.fail(
      `Wq is [${w.dims.map((x) => x ?? '?')}], not the packed [${Math.ceil(n / 16)}, ${Math.ceil(k / 4)}, 16, 4] of K ${k}, N ${n}`,
    );
  const y = ctx.outs[0]!;
  const bias = ctx.ins[4] !== undefined,
    res = ctx.ins[5] !== undefined;
  return [
    {
      ...DEFAULT,
      template: cudaTemplate('qmatmul_w8', { K: k, N: n, ACT: act, BIAS: bias, RES: res }),
      grid: [dims(outOperand(ctx), y.rank - 1, y.rank, 128), dims(outOperand(ctx), 0, y.rank - 1, 4)],
    },
  ];
};

const qgather: CudaRule<'qgather'> = (ctx) => {
  const [w, scale, idx] = [input(ctx, 0), input(ctx, 1), input(ctx, 2)];
  requireDtype(ctx, w, [I8], 'Wq');
  requireDtype(ctx, scale, [F32], 'scale');
  requireDtype(ctx, idx, [I32, I64], 'the indices');
  const res = ctx.ins[3];
  if (res !== undefined) requireDtype(ctx, res, [U8], 'the residual plane');
  return flat(ctx, cudaTemplate('qgather', { TI: ctype(ctx, idx), RES: res !== undefined }));
};

const qprojectTopk: CudaRule<'qproject_topk'> = (ctx) => {
  requireW8(ctx);
  const [x, w] = [input(ctx, 0), input(ctx, 1)];
  requireDtype(ctx, x, [F32], 'X');
  requireDtype(ctx, w, [I8], 'Wq');
  const k = ctx.iarg('k'),
    d = ctx.iarg('d');
  const vocab = w.dims[0];
  if (w.rank !== 2 || vocab === undefined || w.dims[1] !== Math.ceil(d / 64) * 64)
    ctx.fail(`Wq is [${w.dims.map((e) => e ?? '?')}], not a static [V, ${Math.ceil(d / 64) * 64}]`);
  if (x.dims[x.rank - 1] !== d) ctx.fail(`X's last dim is not D ${d}`);
  if (d % 32 !== 0 || d > 1024) ctx.fail(`D ${d}: the CUDA kernel wants a multiple of 32, at most 1024`);
  const resc = ctx.ins[6] !== undefined;
  if (resc) requireDtype(ctx, ctx.ins[6]!, [U8], 'the residual plane');
  const kk = resc ? Math.min(vocab!, Math.max(k, RESCORED)) : k;
  if (k < 1 || kk > 64 || k > vocab!) ctx.fail(`k ${k}: the CUDA kernel takes 1..64 (and at most the vocabulary)`);
  const act = ctx.ins[5];
  return [
    topkLaunch(
      ctx,
      d,
      vocab!,
      kk,
      act,
      cudaTemplate('project_topk', {
        D: d,
        V: vocab!,
        KK: kk,
        TRANS: true,
        BIAS: ctx.ins[4] !== undefined,
        ACT: act !== undefined,
        Q: true,
        KO: k,
        RESC: resc,
      }),
    ),
  ];
};

/** Blocks of a cluster_mask launch (a fixed grid: the last block writes the mask even when there are no rows). */
const CLUSTER_BLOCKS = 32;

const clusterMask: CudaRule<'cluster_mask'> = (ctx) => {
  const [x, c, cn, off, ids] = [input(ctx, 0), input(ctx, 1), input(ctx, 2), input(ctx, 3), input(ctx, 4)];
  for (const [o, w] of [
    [x, 'X'],
    [c, 'the centroids'],
    [cn, 'cnorm'],
  ] as const)
    requireDtype(ctx, o, [F32], w);
  requireDtype(ctx, off, [I32], 'offsets');
  requireDtype(ctx, ids, [I32], 'ids');
  const out = ctx.outs[0]!;
  requireDtype(ctx, out, [U8, BOOL], 'the active mask');
  const v = ctx.iarg('vocab');
  const d = x.dims[x.rank - 1];
  const r = c.dims[0];
  if (c.rank !== 2 || d === undefined || r === undefined || c.dims[1] !== d)
    ctx.fail(`the centroids must be a static [R, ${d ?? 'D'}], got [${c.dims.map((e) => e ?? '?')}]`);
  if (d! % 32 !== 0 || d! > 1024) ctx.fail(`D ${d}: the CUDA kernel wants a multiple of 32, at most 1024`);
  if (r! < 1 || 1 + Math.ceil(r! / 32) > SCRATCH_COUNTERS)
    ctx.fail(`R ${r}: the CUDA kernel takes 1..${(SCRATCH_COUNTERS - 1) * 32} clusters`);
  if (cn.rank !== 1 || cn.dims[0] !== r) ctx.fail(`cnorm must be [${r}]`);
  if (off.rank !== 1 || off.dims[0] !== r! + 1) ctx.fail(`offsets must be [${r! + 1}]`);
  if (ids.rank !== 1) ctx.fail('ids must be 1-D');
  if (out.rank !== 1 || out.dims[0] !== v) ctx.fail(`the output must be [${v}] (iarg vocab)`);
  return [
    {
      ...DEFAULT,
      template: cudaTemplate('cluster_mask', { D: d!, R: r! }),
      grid: [dims(0, 0, 0, 1, CLUSTER_BLOCKS)],
      scratchBytes: SCRATCH_DATA,
      minBlocks: 1,
    },
  ];
};

/** Kernel name → rule. A name missing here has no CUDA template: optimize --target cuda fails naming the node. */
export const CUDA_RULES: { readonly [K in KernelName]?: CudaRule<K> } = {
  add: binary('OpAdd'),
  sub: binary('OpSub'),
  mul: binary('OpMul'),
  div: binary('OpDiv'),
  max: binary('OpMax'),
  min: binary('OpMin'),
  mod,
  pow,
  equal: compare('OpEq', [...NUMERIC, BOOL]),
  less: compare('OpLt', NUMERIC),
  greater: compare('OpGt', NUMERIC),
  less_equal: compare('OpLe', NUMERIC),
  greater_equal: compare('OpGe', NUMERIC),
  and: compare('OpAnd', [BOOL]),
  or: compare('OpOr', [BOOL]),
  xor: compare('OpXor', [BOOL]),
  where,
  ...Object.fromEntries(Object.entries(UNARY).map(([k, [op, types]]) => [k, unary(op, types)])),
  clip,
  cast,
  copy,
  fill: filled('fill', NUMERIC),
  range,
  values: filled('values', [F32, I32, I64]),
  matmul,
  fused_matmul: fusedMatmul,
  softmax,
  layer_norm: norm(false),
  rms_norm: norm(true),
  transpose,
  gather,
  slice,
  concat,
  split,
  expand,
  tile,
  trilu,
  attention,
  cache_write: cacheWrite,
  project_topk: projectTopk,
  cluster_mask: clusterMask,
  qmatmul,
  qgather,
  qproject_topk: qprojectTopk,
};

// ---- operands of a program's kernels ----

/** The arena slot bytes behind a tensor (following aliases), 0 for weights and inputs. */
function slotBytes(p: PlanProgram, t: PlanTensor): number {
  let x = t;
  while (x.kind === TENSOR_KIND.ALIAS) x = p.tensors[x.ref]!;
  return x.kind === TENSOR_KIND.ARENA ? x.slotBytes : 0;
}

export function operand(p: PlanProgram, t: number): Operand {
  const x = p.tensors[t]!;
  return {
    tensor: t,
    dtype: x.dtype,
    rank: x.dims.length,
    dims: x.dims.map((e) => constExpr(p, e)),
    exprs: x.dims,
    slotBytes: slotBytes(p, x),
    kind: x.kind,
  };
}

/**
 * The launch variants of kernel call k of program p, tuned for `arch` (default: the tuning arch of the default archs);
 * fails (naming the node) when no CUDA template fits.
 */
export function selectCuda(p: PlanProgram, k: number, arch: CudaArch = cudaTuningArch(DEFAULT_ARCHS)): Instance[] {
  const kern = p.kernels[k]!;
  const where = { graph: p.graph, node: kern.node, stage: 'cuda codegen' };
  const fail = (msg: Text): never => {
    throw new PlancError('PLANC_E602', (opt) => `kernel '${kern.name}': ${worded(msg, opt)}`, where);
  };
  const rule = (CUDA_RULES as Partial<Record<string, CudaRule>>)[kern.name];
  if (!rule)
    fail(`no CUDA template for this kernel yet (CUDA templates: ${Object.keys(CUDA_RULES).sort().join(', ')})`);
  if (
    kern.inputs.length > MAX_IN ||
    kern.outputs.length > MAX_OUT ||
    kern.iargs.length > MAX_IARGS ||
    kern.fargs.length > MAX_FARGS
  ) {
    fail(
      `${kern.inputs.length} inputs, ${kern.outputs.length} outputs, ${kern.iargs.length} iargs, ${kern.fargs.length} fargs: over what a CUDA launch carries (${MAX_IN}, ${MAX_OUT}, ${MAX_IARGS}, ${MAX_FARGS})`,
    );
  }
  const ctx: RuleCtx = {
    kernel: kern,
    ins: kern.inputs.map((t) => (t < 0 ? undefined : operand(p, t))),
    outs: kern.outputs.map((t) => operand(p, t)),
    iarg: (name) => {
      const i = iargIndex(kern.name, name);
      const e = kern.iargs[i];
      if (e === undefined) return fail(`missing iarg ${i} (${name})`);
      const v = constExpr(p, e);
      if (v === undefined)
        return fail(`${name} (iarg ${i}) depends on a runtime dim; the CUDA template needs it at optimize time`);
      return v;
    },
    hasIarg: (name) => kern.iargs.length > iargIndex(kern.name, name),
    arch,
    fail,
  };
  return rule!(ctx);
}
