// The kernel contract, declared once: every native kernel's operands (dtypes, optional or not), its named int and
// float arguments, its CPU variants and its CUDA launch variants. Lowering builds calls by name (`call`), the CUDA
// rules read arguments by name and build the declared launches, select-variants picks a variant per call, and native/src/generated/kernel_args.h, codegen/cuda/kernels/kernel_args.cuh
// are generated from it (npm run gen:kernel-enums).
import {
  KERNEL_ENUMS,
  PLAN_DTYPES,
  enumCode,
  type KernelEnumName,
  type KernelEnumValue,
  type PlanDTypeName,
} from './kernel-enums.ts';
import type { Dim } from './symbolic.ts';

/** One input or output of a kernel. */
export interface OperandSpec {
  readonly name: string;
  readonly doc: string;
  /** The dtypes the kernel accepts here (relations between operands are the kernel's to check). */
  readonly dtypes: readonly PlanDTypeName[];
  /** May be omitted: -1 in its slot, or left off the end of the list (unless keepSlot). */
  readonly optional?: boolean;
  /** An omitted optional operand still takes its slot (-1). */
  readonly keepSlot?: boolean;
  /** The last operand repeats: one or more (zero or more when optional). */
  readonly variadic?: boolean;
}

/** One int or float argument of a kernel. */
export interface ArgSpec {
  readonly name: string;
  readonly doc: string;
  /** May be left off (only trailing arguments; the kernel then applies its default). */
  readonly optional?: boolean;
  /** The last argument is a list of values (zero or more). */
  readonly variadic?: boolean;
  /** An int argument whose codes are a kernel enum of compiler/kernel-enums.ts. */
  readonly enum?: KernelEnumName;
}

/**
 * One alternative implementation of a CPU kernel. A plan's kernel call names the one it runs (compiler/plan/types.ts
 * PlanKernel.variant); its code is its position in the kernel's list (KernelArgs::variant, `k<Name>` codes in
 * kernel_args.h). The first variant of a kernel that has any is `auto`: the kernel decides at run time.
 */
export interface VariantSpec {
  readonly name: string;
  readonly doc: string;
  /** What a machine must have to run it (the native runtime refuses a plan that names it where it is missing). */
  readonly needs?: string;
  /**
   * A weight input it reads in a layout of its own, built once per plan by the kernel's prepare step (native
   * KernelDef::prepare; position in kernel_args.h kVariantPreparedInput) and kept in memory beside the plan's weights.
   */
  readonly prepares?: { readonly input: string; readonly doc: string };
}

/**
 * One way the generated CUDA launches a kernel (codegen/cuda/rules.ts builds its instance per call; select-variants
 * records the names per call in the plan's tuning, in the order the runtime tries them). Its launch shape is declared
 * here only: the rules read block, maxRows and tile from it.
 */
export interface CudaVariantSpec {
  readonly name: string;
  readonly doc: string;
  /** Threads per block. */
  readonly block: number;
  /** Runs only calls of up to this many rows of output 0 (absent: any number). */
  readonly maxRows?: number;
  /** Block tile BM × BN × BK and the tf32 passes per product (3: 3xTF32, fp32 accuracy on tensor cores). */
  readonly tile?: { readonly bm: number; readonly bn: number; readonly bk: number; readonly passes: number };
}

export interface KernelSpec {
  readonly doc: string;
  readonly inputs: readonly OperandSpec[];
  readonly outputs: readonly OperandSpec[];
  readonly iargs?: readonly ArgSpec[];
  readonly fargs?: readonly ArgSpec[];
  /** Its alternative implementations, `auto` first; absent: it has one implementation. */
  readonly variants?: readonly VariantSpec[];
  /** Its CUDA launch variants; absent: its one launch, CUDA_DEFAULT_VARIANTS (`default`, a grid-stride launch). */
  readonly cudaVariants?: readonly CudaVariantSpec[];
  /** Only in native builds configured with PLANC_TEST_KERNELS=ON (native/test/test_kernels.cc). */
  readonly testOnly?: boolean;
}

// ---- dtype sets ----
const ANY = PLAN_DTYPES.map((d) => d.name);
const F32 = ['float32'] as const;
/**
 * A product's weight in float32, or in float16 / bfloat16 (`--quantize fp16|bf16`): then the other operand's values are
 * rounded to the weight's dtype (nearest even) before the product, as tensor cores take them; products of two such
 * values are exact in float32 and are summed in float32.
 */
export const WEIGHT_DTYPES = ['float32', 'float16', 'bfloat16'] as const;
const HALF_DOC = "; float16 / bfloat16: A's values rounded to its dtype first (kernel-schema.ts WEIGHT_DTYPES)";
const FLOAT = ['float32', 'float64'] as const;
const SIGNED = ['float32', 'float64', 'int32', 'int64', 'int8'] as const;
const NUMERIC = [...SIGNED, 'uint8'] as const;
const NUMERIC_BOOL = [...NUMERIC, 'bool'] as const;
const WIDE = ['float32', 'float64', 'int32', 'int64'] as const;
const INDEX = ['int32', 'int64'] as const;
const BOOL = ['bool'] as const;
const BYTE_MASK = ['uint8', 'bool'] as const;

// ---- operand and argument shorthands ----
const x = (dtypes: readonly PlanDTypeName[], doc = 'the input') => ({ name: 'x', doc, dtypes });
const y = (dtypes: readonly PlanDTypeName[], doc = 'the output') => ({ name: 'y', doc, dtypes });
const ab = (dtypes: readonly PlanDTypeName[]) => [
  { name: 'a', doc: 'left operand', dtypes },
  { name: 'b', doc: 'right operand (broadcast with a)', dtypes },
];
const AXIS = { name: 'axis', doc: 'the axis (negative counts from the end)' } as const;

/** Y = op(A, B) with numpy broadcasting, Y of A's dtype. */
const arith = (doc: string) => ({ doc, inputs: ab(NUMERIC), outputs: [y(NUMERIC)] });
/** Y (bool) = A op B with broadcasting. */
const compare = (doc: string, dtypes: readonly PlanDTypeName[] = NUMERIC_BOOL) => ({
  doc,
  inputs: ab(dtypes),
  outputs: [y(BOOL)],
});
/** Y = f(X) elementwise, same dims and dtype. */
const unary = (doc: string, dtypes: readonly PlanDTypeName[]) => ({ doc, inputs: [x(dtypes)], outputs: [y(dtypes)] });
/** Y = X reduced over the axes of a bitmask (reduced axes kept as 1). */
const reduce = (doc: string, dtypes: readonly PlanDTypeName[] = NUMERIC) =>
  ({
    doc,
    inputs: [x(dtypes)],
    outputs: [y(dtypes)],
    iargs: [{ name: 'axes', doc: 'bitmask of the reduced axes (bit i: axis i)' }],
  }) as const;
/** Y (int64) = the index of the best element along an axis (kept as 1). */
const argReduce = (doc: string) =>
  ({
    doc,
    inputs: [x(NUMERIC_BOOL)],
    outputs: [y(['int64'], 'indices (int64)')],
    iargs: [AXIS, { name: 'select_last_index', doc: '1: the last of equal best elements, 0: the first' }],
  }) as const;

/**
 * The paths of the matrix-product kernels (matmul, gemm, fused_matmul share them: native/src/cpu/gemm.cc `sgemm`).
 * `auto` is gemm.cc's run-time rule (`prefer_gemv`): GEMV for small M (at most GEMM_AUTO.gemvMaxM rows, how small
 * depends on the machine's other paths and on B's layout; always for M ≤ GEMM_AUTO.gemvEverywhereMaxM), else the
 * AVX-512 kernels where the CPU has them, else OpenBLAS, else the built-in blocked GEMM.
 */
export const GEMM_VARIANTS = [
  {
    name: 'auto',
    doc: "chosen per product at run time by M, B's layout and what the machine has (gemm.cc prefer_gemv)",
  },
  { name: 'gemv', doc: 'the weight streamed once, rows of A against it (correct at any M, fast for small M)' },
  { name: 'blocked', doc: "planc's own cache-blocked GEMM (6x16 micro-kernel)" },
  {
    name: 'blas',
    doc: 'OpenBLAS cblas_sgemm, one thread per slab of the product',
    needs: 'a native build linked with OpenBLAS',
  },
  {
    name: 'avx512',
    doc: "planc's AVX-512 GEMM (14x32 micro-kernel)",
    needs: 'a CPU with AVX-512 F, BW, VL, DQ and FMA',
  },
] as const satisfies readonly VariantSpec[];

/**
 * Bounds of the `auto` rule of GEMM_VARIANTS, shared by gemm.cc (generated into kernel_args.h `gemm_auto`) and
 * select-variants: auto never takes GEMV above gemvMaxM rows, and takes it on every machine and build (with or
 * without AVX-512 or OpenBLAS, either layout of B) up to gemvEverywhereMaxM rows.
 */
export const GEMM_AUTO = { gemvMaxM: 16, gemvEverywhereMaxM: 2 } as const;

/**
 * The CPU paths of the quantized products (native/src/cpu/qgemm*.cc): every path computes the same int32 dot products,
 * so with int8 or int16 inputs their outputs are bit-identical (float32 inputs: equal within float rounding).
 * `auto` takes the best path this CPU has (amx > avx512vnni > avxvnni > avx512bw > avx2 > ref; amx hands inputs of
 * few rows to the avx512vnni kernels, so it is never slower than them: bench/results/qgemm.jsonl `variants`).
 */
export const QGEMM_VARIANTS = [
  { name: 'auto', doc: 'the best path this CPU has, chosen at run time' },
  { name: 'ref', doc: 'portable scalar C++ (the reference the vector paths must match)' },
  {
    name: 'avx2',
    doc: 'AVX2: int8 widened to int16, vpmaddwd into int32 (no saturation)',
    needs: 'a CPU with AVX2 and FMA',
  },
  { name: 'avx512bw', doc: 'AVX-512BW: vpmaddwd on 512-bit vectors', needs: 'a CPU with AVX-512 F and BW' },
  { name: 'avxvnni', doc: 'AVX-VNNI: vpdpbusd / vpdpwssd on 256-bit vectors', needs: 'a CPU with AVX-VNNI' },
  {
    name: 'avx512vnni',
    doc: 'AVX-512 VNNI: vpdpbusd / vpdpwssd on 512-bit vectors',
    needs: 'a CPU with AVX-512 F, BW and VNNI',
  },
  {
    name: 'amx',
    doc: 'AMX-INT8: tdpbusd / tdpbsud on 16×64-byte tiles for int8 inputs (few rows, int16 and float32 inputs: the avx512vnni kernels)',
    needs: 'a CPU with AMX-TILE, AMX-INT8 and AVX-512 VNNI, and a Linux kernel that grants the tile state (XTILEDATA)',
  },
] as const satisfies readonly VariantSpec[];

/**
 * The CPU paths of project_topk's float32 products. `packed` reads W from a copy reordered once, when the plan first
 * runs, into the 32-column panels the AVX-512 GEMM multiplies (native/src/cpu/project_topk.cc prepare_packed): no
 * per-call transposing or copying of W, at the cost of one float32 copy of W in memory (V·D·4 bytes, shared by every
 * call of that weight). It applies to the whole vocabulary at every row count: one or two rows too, where the GEMM's
 * one- and two-row micro-kernels stream the panels (reading the original W there as well would keep two copies of W
 * moving through the caches: at batch 32, the steps with one or two sentences left ran 12% slower than auto's). A
 * call with an active mask runs `auto`'s path.
 */
export const PROJECT_TOPK_VARIANTS = [
  {
    name: 'auto',
    doc: "per tile of the vocabulary: dot products for few rows, else the GEMM on W packed per call (gemm.cc's rule)",
  },
  {
    name: 'packed',
    doc: "the AVX-512 GEMM on W reordered once into 32-column panels (one float32 copy of W more in memory; any rows; an active mask: auto's path)",
    needs: 'a CPU with AVX-512 F, BW, VL, DQ and FMA',
    prepares: { input: 'w', doc: 'W as float32 in 32-column panels' },
  },
] as const satisfies readonly VariantSpec[];

/** The CUDA launch of a kernel that declares none (elementwise ones: a grid-stride loop, about 4 elements a thread). */
export const CUDA_DEFAULT_VARIANTS = [
  { name: 'default', doc: 'its one launch, 256 threads a block (codegen/cuda/rules.ts sizes the grid)', block: 256 },
] as const satisfies readonly CudaVariantSpec[];

/**
 * The CUDA launches of the matrix products (matmul, fused_matmul), tried in this order: gemv where output 0 has at
 * most maxRows rows, else gemm_tc (batched products only have gemm_tc).
 */
export const CUDA_GEMM_VARIANTS = [
  {
    name: 'gemv',
    doc: "rows ≤ 16: 64 columns a block, K split over enough blocks to fill about 2 waves of the target's SMs",
    block: 256,
    maxRows: 16,
  },
  {
    name: 'gemm_tc',
    doc: 'tensor-core tiles BM × BN × BK (BK 16 where K or N is not a multiple of 4), 3xTF32; a float16 / bfloat16 W: m16n16k16 in its dtype, BK 32',
    block: 128,
    tile: { bm: 64, bn: 64, bk: 32, passes: 3 },
  },
] as const satisfies readonly CudaVariantSpec[];

/** Every kernel of the native runtime (native/src/cpu/*.cc kDefs) by table name. */
export const KERNELS = {
  // ---- elementwise binary (native/src/cpu/elementwise.cc) ----
  add: arith('Y = A + B'),
  sub: arith('Y = A - B'),
  mul: arith('Y = A * B'),
  div: arith('Y = A / B (integer division truncates)'),
  max: arith('Y = max(A, B) (NaN wins)'),
  min: arith('Y = min(A, B) (NaN wins)'),
  mod: {
    ...arith('Y = A mod B'),
    iargs: [{ name: 'fmod', doc: "0: remainder with the divisor's sign (default), 1: C fmod", optional: true }],
  },
  pow: {
    doc: 'Y = A ^ B (the exponent may have another dtype)',
    outputs: [y(WIDE, "the base's dtype")],
    inputs: [
      { name: 'a', doc: 'the base', dtypes: WIDE },
      { name: 'b', doc: 'the exponent', dtypes: WIDE },
    ],
  },
  equal: compare('Y = A == B'),
  less: compare('Y = A < B', NUMERIC),
  greater: compare('Y = A > B', NUMERIC),
  less_equal: compare('Y = A <= B', NUMERIC),
  greater_equal: compare('Y = A >= B', NUMERIC),
  and: compare('Y = A and B', BOOL),
  or: compare('Y = A or B', BOOL),
  xor: compare('Y = A xor B', BOOL),
  where: {
    doc: 'Y = C ? A : B with broadcasting',
    outputs: [y(ANY)],
    inputs: [
      { name: 'condition', doc: 'the condition', dtypes: BOOL },
      { name: 'a', doc: 'where true', dtypes: ANY },
      { name: 'b', doc: 'where false', dtypes: ANY },
    ],
  },
  // ---- elementwise unary (unary.cc) ----
  relu: unary('max(x, 0)', SIGNED),
  neg: unary('-x', SIGNED),
  abs: unary('|x|', SIGNED),
  sign: unary('-1, 0 or 1', SIGNED),
  exp: unary('e^x', FLOAT),
  log: unary('ln x', FLOAT),
  sqrt: unary('square root', FLOAT),
  reciprocal: unary('1 / x', FLOAT),
  tanh: unary('tanh x', FLOAT),
  sigmoid: unary('1 / (1 + e^-x)', FLOAT),
  erf: unary('the error function', FLOAT),
  floor: unary('round down', FLOAT),
  ceil: unary('round up', FLOAT),
  round: unary('round half to even', FLOAT),
  sin: unary('sin x', FLOAT),
  cos: unary('cos x', FLOAT),
  softplus: unary('ln(1 + e^x)', FLOAT),
  not: unary('logical not', BOOL),
  gelu: {
    ...unary('x·Φ(x)', FLOAT),
    iargs: [
      { name: 'approximate', doc: 'none: exact (erf), tanh: the tanh approximation', enum: 'gelu_approximation' },
    ],
  },
  leaky_relu: { ...unary('x ≥ 0 ? x : alpha·x', FLOAT), fargs: [{ name: 'alpha', doc: 'the slope below 0' }] },
  elu: { ...unary('x ≥ 0 ? x : alpha·(e^x - 1)', FLOAT), fargs: [{ name: 'alpha', doc: 'the scale below 0' }] },
  hard_sigmoid: {
    ...unary('clamp(alpha·x + beta, 0, 1)', FLOAT),
    fargs: [
      { name: 'alpha', doc: 'the slope' },
      { name: 'beta', doc: 'the offset' },
    ],
  },
  clip: {
    doc: 'Y = min(max(X, min), max) (max wins when min > max; NaN passes)',
    outputs: [y(NUMERIC)],
    inputs: [
      x(NUMERIC),
      { name: 'min', doc: "lower bound, a scalar of X's dtype", dtypes: NUMERIC, optional: true },
      { name: 'max', doc: "upper bound, a scalar of X's dtype", dtypes: NUMERIC, optional: true },
    ],
  },
  // ---- conversion and fill (cast.cc) ----
  cast: {
    doc: 'numeric conversion as ONNX Cast (float to int truncates; bool = x != 0)',
    inputs: [x(ANY)],
    outputs: [y(ANY)],
  },
  copy: { doc: 'byte copy (same byte size)', inputs: [x(ANY)], outputs: [y(ANY)] },
  fill: { doc: 'every element = value', inputs: [], outputs: [y(ANY)], fargs: [{ name: 'value', doc: 'the value' }] },
  range: {
    doc: 'Y[i] = start + i·delta: start and delta as two fargs, or as two iargs (integer ranges over runtime dims)',
    inputs: [],
    outputs: [y(['float32', 'float64', 'int32', 'int64', 'int8', 'uint8', 'float16'], 'Y [n]')],
    iargs: [
      { name: 'start_int', doc: 'start (integer form)', optional: true },
      { name: 'delta_int', doc: 'delta (integer form)', optional: true },
    ],
    fargs: [
      { name: 'start', doc: 'start (float form)', optional: true },
      { name: 'delta', doc: 'delta (float form)', optional: true },
    ],
  },
  values: {
    doc: 'Y[i] = values[i]: integers computed from shapes, materialized',
    inputs: [],
    outputs: [y(['int64', 'int32', 'float32', 'float64'], 'Y [n]')],
    iargs: [{ name: 'values', doc: 'the n values', variadic: true }],
  },
  // ---- reductions (reduce.cc) ----
  reduce_sum: reduce('sum'),
  reduce_mean: reduce('mean'),
  reduce_max: reduce('max (bool: any)', NUMERIC_BOOL),
  reduce_min: reduce('min (bool: all)', NUMERIC_BOOL),
  reduce_prod: reduce('product'),
  reduce_sum_square: reduce('sum of squares'),
  reduce_l1: reduce('sum of |x|'),
  reduce_l2: reduce('sqrt of the sum of squares'),
  reduce_log_sum_exp: reduce('ln of the sum of e^x'),
  argmax: argReduce('index of the largest element along an axis'),
  argmin: argReduce('index of the smallest element along an axis'),
  cumsum: {
    doc: 'running sum along an axis',
    outputs: [y(WIDE)],
    inputs: [x(WIDE), { name: 'axis', doc: 'the axis, one int32 or int64 element', dtypes: INDEX }],
    iargs: [
      { name: 'exclusive', doc: '1: each sum leaves its own element out' },
      { name: 'reverse', doc: '1: sums run from the end' },
    ],
  },
  // ---- selection (select.cc) ----
  topk: {
    doc: 'the K largest (or smallest) elements along an axis and their indices (ties: lower index first)',
    inputs: [x(NUMERIC), { name: 'k', doc: 'K, one int64 element', dtypes: ['int64'] }],
    outputs: [
      { name: 'values', doc: "the values (X's dtype)", dtypes: NUMERIC },
      { name: 'indices', doc: 'their indices', dtypes: ['int64'] },
    ],
    iargs: [
      AXIS,
      { name: 'largest', doc: '1: largest first, 0: smallest first' },
      { name: 'sorted', doc: '1: sorted (always done)' },
    ],
  },
  trilu: {
    doc: 'keeps the upper or lower triangle of the last two dims (the rest zeroed)',
    outputs: [y(ANY)],
    inputs: [
      x(ANY),
      { name: 'k', doc: 'diagonal offset, one int64 element (default 0)', dtypes: ['int64'], optional: true },
    ],
    iargs: [{ name: 'upper', doc: '1: upper triangle, 0: lower' }],
  },
  one_hot: {
    doc: 'Y = values[1] where the index equals the position along the new axis, else values[0]',
    outputs: [y(ANY)],
    inputs: [
      { name: 'indices', doc: 'the indices', dtypes: ['int64', 'int32', 'float32', 'float64'] },
      { name: 'depth', doc: 'the depth, one numeric element', dtypes: ['int64', 'int32', 'float32', 'float64'] },
      { name: 'values', doc: "[off, on], the output's dtype", dtypes: ANY },
    ],
    iargs: [{ name: 'axis', doc: 'the new axis in the output (negative counts from the end)' }],
  },
  // ---- matrix products (gemm.cc) ----
  matmul: {
    doc: 'Y = A × B over the last two dims, batch dims broadcast',
    outputs: [y(F32)],
    inputs: [
      { name: 'a', doc: 'A [..., M, K]', dtypes: F32 },
      { name: 'b', doc: `B [..., K, N]${HALF_DOC} (B 2-D)`, dtypes: WEIGHT_DTYPES },
    ],
    variants: GEMM_VARIANTS,
    cudaVariants: CUDA_GEMM_VARIANTS,
  },
  gemm: {
    doc: 'Y = alpha·op(A)·op(B) + beta·C',
    outputs: [y(F32, 'Y [M, N]')],
    inputs: [
      { name: 'a', doc: 'A (2-D)', dtypes: F32 },
      { name: 'b', doc: 'B (2-D)', dtypes: F32 },
      { name: 'c', doc: 'C, broadcast to [M, N]', dtypes: F32, optional: true },
    ],
    iargs: [
      { name: 'trans_a', doc: '1: A is transposed' },
      { name: 'trans_b', doc: '1: B is transposed' },
    ],
    fargs: [
      { name: 'alpha', doc: 'scale of the product' },
      { name: 'beta', doc: 'scale of C' },
    ],
    variants: GEMM_VARIANTS,
  },
  fused_matmul: {
    doc: 'Y = act(A × W + bias) + residual (planc.FusedMatMul)',
    outputs: [y(F32)],
    inputs: [
      { name: 'a', doc: 'A [..., K]', dtypes: F32 },
      { name: 'w', doc: `W [K, N]${HALF_DOC}`, dtypes: WEIGHT_DTYPES },
      { name: 'bias', doc: 'bias [N]', dtypes: F32, optional: true, keepSlot: true },
      { name: 'residual', doc: "added after the activation (Y's dims)", dtypes: F32, optional: true, keepSlot: true },
    ],
    iargs: [{ name: 'activation', doc: 'the epilogue activation', enum: 'activation' }],
    variants: GEMM_VARIANTS,
    cudaVariants: CUDA_GEMM_VARIANTS,
  },
  qmatmul: {
    doc:
      'Y = act(dequant(quant(A) × Wq) + bias) + residual, a quantized planc.FusedMatMul (qgemm.cc; the output step in qgemm_epilogue.cc): ' +
      'Y[m, n] = act(float(acc[m, n]) · (sa[m] · w_scale[n]) + bias[n]) + residual[m, n], in that order, without FMA contraction',
    outputs: [y(F32)],
    inputs: [
      {
        name: 'a',
        doc:
          'A [..., K] float32 (rows M = its elements / K), or A quantized by quantize_rows (int8 input: uint8 ' +
          '[..., kp], int16 input: int16 [..., kp]) with a_scale',
        dtypes: ['float32', 'uint8', 'int16'],
      },
      {
        name: 'w',
        doc:
          'Wq packed in blocks of 16 output channels: int8 [ceil(N/16), ceil(K/4), 16, 4], element (k, n) at ' +
          '[n/16][k/4][n%16][k%4]; int16 [ceil(N/16), ceil(K/2), 16, 2], (k, n) at [n/16][k/2][n%16][k%2]; zero padded',
        dtypes: ['int8', 'int16'],
      },
      { name: 'w_scale', doc: 'W[k][n] ≈ w_scale[n] · Wq(k, n) ([N])', dtypes: F32 },
      {
        name: 'w_sum',
        doc: 'Σ_k Wq(k, n) ([N]; for int8 inputs: the unsigned-input offset of vpdpbusd)',
        dtypes: ['int32'],
        optional: true,
        keepSlot: true,
      },
      { name: 'bias', doc: 'bias [N]', dtypes: F32, optional: true, keepSlot: true },
      { name: 'residual', doc: "added after the activation (Y's dims)", dtypes: F32, optional: true, keepSlot: true },
      {
        name: 'a_scale',
        doc: "the row scales of a quantized A (quantize_rows' scale, A's leading dims); given exactly when A is quantized",
        dtypes: F32,
        optional: true,
      },
    ],
    iargs: [
      { name: 'activation', doc: 'the epilogue activation', enum: 'activation' },
      { name: 'input', doc: 'how rows of A are quantized', enum: 'quant_input' },
      { name: 'n', doc: 'output channels N' },
      { name: 'k', doc: 'reduction length K' },
    ],
    variants: QGEMM_VARIANTS,
  },
  quantize_rows: {
    doc:
      "A's rows quantized once for the qmatmul calls that share them (quantize_rows.cc), exactly as qmatmul " +
      'quantizes a float32 A itself (compiler/kernel-enums.ts QUANT_INPUTS), zero padded from K to kp',
    inputs: [{ name: 'x', doc: 'A [..., K]', dtypes: F32 }],
    outputs: [
      {
        name: 'q',
        doc:
          'int8 input: uint8 [..., kp] = q + 128 (the unsigned form vpdpbusd reads), kp = K rounded up to 4, padding 128; ' +
          'int16 input: int16 [..., kp] = q, kp = K rounded up to 2, padding 0',
        dtypes: ['uint8', 'int16'],
      },
      {
        name: 'scale',
        doc: "each row's scale sa [...] (0 for a zero row, NaN for a row with inf or NaN)",
        dtypes: F32,
      },
    ],
    iargs: [
      { name: 'input', doc: "int8 or int16 (the consuming qmatmul calls' input)", enum: 'quant_input' },
      { name: 'k', doc: 'the row length K' },
    ],
  },
  qgather: {
    doc: 'Y = rows of an int8 table dequantized: Y[i, :] = scale[ids[i]] · Wq[ids[i], :D] (a quantized embedding Gather along axis 0, qgather.cc)',
    inputs: [
      {
        name: 'w',
        doc: "Wq int8 [V, Dp] (compiler/quant/pack.ts quantizeRows: qproject_topk's layout, so a tied output layer shares it)",
        dtypes: ['int8'],
      },
      { name: 'scale', doc: 'per-row scales [V]', dtypes: F32 },
      { name: 'indices', doc: 'row ids (negative ids count from the end; out of range: an error)', dtypes: INDEX },
      {
        name: 'residual',
        doc: 'the 4-bit residual plane of Wq, uint8 [V, Dp / 2]: when given, Y[i, :] = (15 · Wq[ids[i], :D] + r) · (scale / 15)',
        dtypes: ['uint8'],
        optional: true,
      },
    ],
    outputs: [y(F32, 'Y [indices dims..., D]')],
    iargs: [{ name: 'd', doc: 'the row length D (≤ Dp)' }],
  },
  qproject_topk: {
    doc: "the k best of log_softmax(dequant(quant(X) · Wqᵀ) + bias) per row over int8 weights (planc.ProjectTopK quantized; logits as qmatmul's)",
    inputs: [
      { name: 'x', doc: 'X [rows..., D]', dtypes: F32 },
      {
        name: 'w',
        doc: 'Wq int8 [V, Dp], row v = vocabulary id v, Dp = D rounded up to a multiple of 64, zero padded',
        dtypes: ['int8'],
      },
      { name: 'w_scale', doc: 'W[d][v] ≈ w_scale[v] · Wq[v][d] ([V])', dtypes: F32 },
      { name: 'w_sum', doc: 'Σ_d Wq[v][d] ([V])', dtypes: ['int32'] },
      { name: 'bias', doc: 'bias [V]', dtypes: F32, optional: true, keepSlot: true },
      {
        name: 'active',
        doc: 'active ids [V] (nonzero: computed; omitted: every id)',
        dtypes: BYTE_MASK,
        optional: true,
      },
      {
        name: 'w_res',
        doc:
          'the 4-bit residual plane of Wq, uint8 [V, Dp / 2] (compiler/quant/pack.ts residualRows): when given, the ' +
          'max(k, 8) best ids by the int8 logits are rescored from float32 X and the 12-bit rows, ' +
          'float(Σ_d x[d] · (15 · Wq[v][d] + r[v][d]) in float64) · (w_scale[v] / 15) + bias[v], and the normalizer corrected by them',
        dtypes: ['uint8'],
        optional: true,
      },
    ],
    outputs: [
      { name: 'values', doc: 'log-probabilities [rows..., k], best first', dtypes: F32 },
      { name: 'indices', doc: 'their ids [rows..., k]', dtypes: ['int64'] },
    ],
    iargs: [
      { name: 'k', doc: 'how many per row' },
      { name: 'input', doc: 'how rows of X are quantized (int8 or float32)', enum: 'quant_input' },
      { name: 'd', doc: 'the model dimension D' },
    ],
    variants: QGEMM_VARIANTS,
  },
  // ---- rows (softmax.cc, norm.cc) ----
  softmax: {
    doc: 'softmax (or log-softmax) along one axis',
    inputs: [x(F32)],
    outputs: [y(F32)],
    iargs: [AXIS, { name: 'log', doc: '1: log-softmax' }],
    cudaVariants: [
      { name: 'rows', doc: 'the last axis: a warp per row, 8 rows a block', block: 256 },
      { name: 'strided', doc: 'another axis: a thread per element, 256 a block', block: 256 },
    ],
  },
  layer_norm: {
    doc: 'Y = (X - mean) / sqrt(var + epsilon) · scale + bias over the dims from axis on',
    inputs: [
      x(F32),
      { name: 'scale', doc: 'broadcast over the normalized dims', dtypes: F32 },
      { name: 'bias', doc: 'broadcast over the normalized dims', dtypes: F32, optional: true },
    ],
    outputs: [
      y(F32),
      { name: 'mean', doc: "each row's mean", dtypes: F32, optional: true },
      { name: 'inv_std_dev', doc: "each row's 1 / sqrt(var + epsilon)", dtypes: F32, optional: true },
    ],
    iargs: [{ name: 'axis', doc: 'the first normalized axis' }],
    fargs: [{ name: 'epsilon', doc: 'added to the variance' }],
  },
  rms_norm: {
    doc: 'Y = X / sqrt(mean(X²) + epsilon) · scale over the dims from axis on',
    inputs: [x(F32), { name: 'scale', doc: 'broadcast over the normalized dims', dtypes: F32 }],
    outputs: [y(F32)],
    iargs: [{ name: 'axis', doc: 'the first normalized axis' }],
    fargs: [{ name: 'epsilon', doc: 'added to the mean square' }],
  },
  // ---- data movement (movement.cc) ----
  transpose: {
    doc: 'Y = X with its axes permuted',
    inputs: [x(ANY)],
    outputs: [y(ANY)],
    iargs: [{ name: 'perm', doc: "Y's axis i is X's axis perm[i] (one per axis)", variadic: true }],
  },
  gather: {
    doc: 'Y = X indexed along an axis (negative indices wrap; out of range: an error)',
    outputs: [y(ANY)],
    inputs: [x(ANY), { name: 'indices', doc: 'the indices', dtypes: INDEX }],
    iargs: [AXIS],
  },
  gather_elements: {
    doc: 'ONNX GatherElements',
    outputs: [y(ANY)],
    inputs: [x(ANY), { name: 'indices', doc: "the indices (X's rank)", dtypes: INDEX }],
    iargs: [AXIS],
  },
  scatter_nd: {
    doc: 'Y = X with the slices the indices address replaced (or reduced) by the updates',
    outputs: [y(ANY)],
    inputs: [
      x(ANY, 'the data'),
      { name: 'indices', doc: 'the indices (last axis: index depth)', dtypes: INDEX },
      { name: 'updates', doc: "the updates (X's dtype)", dtypes: ANY },
    ],
    iargs: [{ name: 'reduction', doc: 'how an update combines with the data', enum: 'scatter_reduction' }],
  },
  slice: {
    doc: 'Y[i] = X[start + i·step] per axis (starts normalized as ONNX Slice, then checked in range)',
    inputs: [x(ANY)],
    outputs: [y(ANY)],
    iargs: [
      {
        name: 'starts_steps',
        doc: "start and step of each of X's axes (2 × rank: start0, step0, start1, ...)",
        variadic: true,
      },
    ],
  },
  concat: {
    doc: 'Y = the inputs joined along an axis',
    outputs: [y(ANY)],
    inputs: [{ name: 'parts', doc: 'the parts, in order', dtypes: ANY, variadic: true }],
    iargs: [AXIS],
  },
  split: {
    doc: "the outputs = X cut along an axis (sizes from the outputs' dims)",
    inputs: [x(ANY)],
    outputs: [{ name: 'parts', doc: 'the parts, in order', dtypes: ANY, variadic: true }],
    iargs: [AXIS],
  },
  expand: { doc: "Y = X broadcast to Y's dims", inputs: [x(ANY)], outputs: [y(ANY)] },
  tile: { doc: 'Y = X repeated (repeats = Y dims / X dims)', inputs: [x(ANY)], outputs: [y(ANY)] },
  pad: {
    doc: 'Y = X padded (or cropped by negative pads)',
    outputs: [y(ANY)],
    inputs: [
      x(ANY),
      { name: 'value', doc: "the constant fill, a scalar of X's dtype (default 0)", dtypes: ANY, optional: true },
    ],
    iargs: [
      { name: 'mode', doc: 'how the padding is filled', enum: 'pad_mode' },
      { name: 'pads', doc: 'begins of every axis, then ends (2 × rank)', variadic: true },
    ],
  },
  // ---- fused decoder kernels (attention.cc, project_topk.cc, vocab.cc) ----
  attention: {
    doc: 'Y = softmax(scale·Q·K[:, :, :L]ᵀ + mask)·V[:, :, :L] (planc.Attention; K/V rows ≥ L never read)',
    inputs: [
      { name: 'q', doc: 'Q (q_layout 0: [B, H, Sq, D], 1: [B, Sq, H·D])', dtypes: F32 },
      { name: 'k', doc: 'K [B, H, C, D]', dtypes: F32 },
      { name: 'v', doc: 'V [B, H, C, D]', dtypes: F32 },
      {
        name: 'mask',
        doc: 'rank 4, broadcast to [B, H, Sq, L] (float32 for add, bool otherwise)',
        dtypes: ['float32', 'bool'],
        optional: true,
      },
      {
        name: 'past_lens',
        doc: 'keys already cached per batch row [B]: row b attends L_b = past_lens[b] + Sq keys (1..L) instead of L',
        dtypes: ['int64'],
        optional: true,
      },
    ],
    outputs: [y(F32, 'Y (dims of Q)')],
    iargs: [
      { name: 'num_heads', doc: "heads H (K's dim 1)" },
      { name: 'q_layout', doc: '0: Q and Y are [B, H, Sq, D], 1: [B, Sq, H·D]' },
      { name: 'kv_len', doc: "keys attended L (1..C; with past_lens the longest row's, and the mask's L)" },
      { name: 'mask_kind', doc: 'how the mask applies', enum: 'mask_kind' },
      { name: 'is_causal', doc: '1: query row i attends keys j ≤ L - Sq + i only (L_b with past_lens)' },
    ],
    fargs: [{ name: 'scale', doc: 'multiplies Q·Kᵀ' }],
    cudaVariants: [{ name: 'default', doc: 'a warp per query row, 4 rows a block', block: 128 }],
  },
  cache_write: {
    doc: "Y = Cache with rows pos..pos+Sn-1 of every (b, h) replaced by New's (planc.CacheWrite, in place)",
    inputs: [
      { name: 'cache', doc: 'Cache [B, H, C, D]', dtypes: F32 },
      { name: 'new', doc: 'New (new_layout 0: [B, H, Sn, D], 1: [B, Sn, H·D])', dtypes: F32 },
      {
        name: 'past_lens',
        doc: 'first row written per batch row [B] (in place of pos)',
        dtypes: ['int64'],
        optional: true,
      },
    ],
    outputs: [y(F32, "Y (Cache's dims; the lowering makes it Cache's buffer)")],
    iargs: [
      { name: 'pos', doc: 'first row written (unused with past_lens)' },
      { name: 'new_layout', doc: '0: New is [B, H, Sn, D], 1: [B, Sn, H·D]' },
      { name: 'num_heads', doc: "heads H (Cache's dim 1)" },
    ],
  },
  project_topk: {
    doc: 'the k best of log_softmax(X·W + bias) per row, logits never materialized (planc.ProjectTopK)',
    inputs: [
      { name: 'x', doc: 'X [rows..., D]', dtypes: F32 },
      { name: 'w', doc: `W [D, V] (transposed: [V, D])${HALF_DOC.replace("A's", "X's")}`, dtypes: WEIGHT_DTYPES },
      { name: 'bias', doc: 'bias [V]', dtypes: F32, optional: true, keepSlot: true },
      {
        name: 'active',
        doc: 'active ids [V] (nonzero: computed; omitted: every id)',
        dtypes: BYTE_MASK,
        optional: true,
      },
    ],
    outputs: [
      { name: 'values', doc: 'log-probabilities [rows..., k], best first', dtypes: F32 },
      { name: 'indices', doc: 'their ids [rows..., k]', dtypes: ['int64'] },
    ],
    iargs: [
      { name: 'k', doc: 'how many per row' },
      { name: 'transposed', doc: '1: W is [V, D]' },
    ],
    variants: PROJECT_TOPK_VARIANTS,
  },
  cluster_mask: {
    doc: "active = the ids of the nearest centroid's cluster of every row (planc.ClusterMask)",
    inputs: [
      { name: 'x', doc: 'X [rows..., D]', dtypes: F32 },
      { name: 'centroids', doc: 'centroids [R, D]', dtypes: F32 },
      { name: 'cnorm', doc: '‖C_r‖² [R]', dtypes: F32 },
      { name: 'offsets', doc: "cluster r's ids are ids[offsets[r]..offsets[r+1]) ([R+1])", dtypes: ['int32'] },
      { name: 'ids', doc: "the clusters' ids [nnz]", dtypes: ['int32'] },
    ],
    outputs: [{ name: 'active', doc: 'active ids [V]', dtypes: BYTE_MASK }],
    iargs: [{ name: 'vocab', doc: 'the vocabulary size V' }],
  },
  // ---- test builds only (native/test/test_kernels.cc) ----
  test_copy: { doc: 'Y = X byte for byte', inputs: [x(ANY)], outputs: [y(ANY)], testOnly: true },
  test_fail: {
    doc: 'always an error',
    testOnly: true,
    inputs: [{ name: 'inputs', doc: 'any', dtypes: ANY, optional: true, variadic: true }],
    outputs: [{ name: 'outputs', doc: 'any', dtypes: ANY, optional: true, variadic: true }],
  },
  test_echo: {
    doc: "Y = the iargs, then the fargs' bit patterns",
    testOnly: true,
    inputs: [],
    outputs: [y(['int64'])],
    iargs: [{ name: 'ints', doc: 'any', variadic: true }],
    fargs: [{ name: 'floats', doc: 'any', variadic: true }],
  },
} as const satisfies Record<string, KernelSpec>;

export type KernelName = keyof typeof KERNELS;

// ---- typed calls ----

type Spec<K extends KernelName> = (typeof KERNELS)[K];
type ArgList<S, F extends 'iargs' | 'fargs'> = S extends { readonly [P in F]: infer L extends readonly ArgSpec[] }
  ? L
  : readonly [];
type IargValue<A> = A extends { enum: infer E extends KernelEnumName } ? Dim | KernelEnumValue<E> : Dim;
type ArgValues<L extends readonly ArgSpec[], Float extends boolean> = {
  [A in L[number] as A extends { optional: true } ? never : A['name']]: Value<A, Float>;
} & { [A in L[number] as A extends { optional: true } ? A['name'] : never]?: Value<A, Float> };
type Value<A, Float extends boolean> = A extends { variadic: true }
  ? readonly (Float extends true ? number : Dim)[]
  : Float extends true
    ? number
    : IargValue<A>;

/** The arguments of kernel K by name: its iargs (Dim, or an enum value's name) and fargs (number). */
export type CallArgs<K extends KernelName> = ArgValues<ArgList<Spec<K>, 'iargs'>, false> &
  ArgValues<ArgList<Spec<K>, 'fargs'>, true>;
/** The name of one of kernel K's int arguments. */
export type IargName<K extends KernelName> = K extends KernelName ? ArgList<Spec<K>, 'iargs'>[number]['name'] : never;

declare const CALL: unique symbol;
/** A kernel call's name and ordered arguments, made only by `call` (so positional arguments cannot be written by hand). */
export interface KernelCall {
  readonly kernel: KernelName;
  readonly iargs: Dim[];
  readonly fargs: number[];
  readonly [CALL]: true;
}

/** The schema of a kernel by name (throws for an unknown one). */
export function kernelSpec(name: string): KernelSpec {
  const s = (KERNELS as Record<string, KernelSpec>)[name];
  if (!s) throw new Error(`internal: no kernel '${name}' in compiler/kernel-schema.ts`);
  return s;
}

/** Orders named arguments as the kernel's list declares them; throws on a missing, unknown or misplaced name. */
function ordered(
  kernel: string,
  list: readonly ArgSpec[],
  args: Record<string, unknown>,
  float: boolean,
): (Dim | number)[] {
  const out: (Dim | number)[] = [];
  let gap: string | undefined;
  for (const a of list) {
    const v = args[a.name];
    if (v === undefined) {
      if (!a.optional && !a.variadic) throw new Error(`internal: kernel '${kernel}' call lacks argument '${a.name}'`);
      gap ??= a.name;
      continue;
    }
    if (gap) throw new Error(`internal: kernel '${kernel}' call gives '${a.name}' but not '${gap}' before it`);
    if (a.variadic) {
      if (!Array.isArray(v)) throw new Error(`internal: kernel '${kernel}' argument '${a.name}' takes a list`);
      out.push(...(v as (Dim | number)[]));
    } else if (typeof v === 'string') {
      const code = a.enum && !float ? enumCode(a.enum, v) : undefined;
      if (code === undefined)
        throw new Error(
          `internal: kernel '${kernel}' argument '${a.name}' = '${v}' is not a value of ${a.enum ? `enum ${a.enum} (${KERNEL_ENUMS[a.enum].values.join(', ')})` : 'a number'}`,
        );
      out.push(code);
    } else {
      out.push(v as Dim | number);
    }
  }
  return out;
}

/**
 * A call of `kernel` with its arguments by name → the kernel name with its iargs and fargs in the kernel's order.
 * Names are checked by the compiler (an unknown kernel or argument, or a missing required one, does not type-check)
 * and again here (an internal Error), as are enum value names, which become their codes.
 */
export function call<K extends KernelName>(
  kernel: K,
  // biome-ignore lint/complexity/noBannedTypes: `{} extends T` asks whether every argument of T is optional
  ...args: keyof CallArgs<K> extends never ? [] : {} extends CallArgs<K> ? [args?: CallArgs<K>] : [args: CallArgs<K>]
): KernelCall {
  const spec = kernelSpec(kernel);
  const given = (args[0] ?? {}) as Record<string, unknown>;
  const known = new Set([...(spec.iargs ?? []), ...(spec.fargs ?? [])].map((a) => a.name));
  for (const name of Object.keys(given)) {
    if (!known.has(name))
      throw new Error(
        `internal: kernel '${kernel}' has no argument '${name}' (arguments: ${[...known].join(', ') || 'none'})`,
      );
  }
  const iargs = ordered(kernel, spec.iargs ?? [], given, false) as Dim[];
  const fargs = ordered(kernel, spec.fargs ?? [], given, true) as number[];
  return { kernel, iargs, fargs } as unknown as KernelCall;
}

/** The position of int argument `name` of kernel `kernel` (throws when it has none of that name). */
export function iargIndex(kernel: string, name: string): number {
  const i = (kernelSpec(kernel).iargs ?? []).findIndex((a) => a.name === name);
  if (i < 0) throw new Error(`internal: kernel '${kernel}' has no int argument '${name}'`);
  return i;
}

/** The position of float argument `name` of kernel `kernel` (throws when it has none of that name). */
export function fargIndex(kernel: string, name: string): number {
  const i = (kernelSpec(kernel).fargs ?? []).findIndex((a) => a.name === name);
  if (i < 0) throw new Error(`internal: kernel '${kernel}' has no float argument '${name}'`);
  return i;
}

// ---- variants ----

/** The name of one of kernel K's variants (never: it has one implementation). */
export type VariantName<K extends KernelName> = K extends KernelName
  ? Spec<K> extends { readonly variants: infer L extends readonly VariantSpec[] }
    ? L[number]['name']
    : never
  : never;

/** The variants of a kernel by name, `auto` first ([] when it has one implementation); throws for an unknown kernel. */
export function kernelVariants(kernel: string): readonly VariantSpec[] {
  return kernelSpec(kernel).variants ?? [];
}

/**
 * The code of a call's variant in the program code and KernelArgs::variant: its position in the kernel's list; ''
 * (none named) is 0, the kernel's default (`auto`, or its only implementation). undefined: the kernel has no such
 * variant (or is unknown).
 */
export function variantCode(kernel: string, variant: string): number | undefined {
  if (variant === '') return 0;
  const spec = (KERNELS as Record<string, KernelSpec>)[kernel];
  const i = (spec?.variants ?? []).findIndex((v) => v.name === variant);
  return i < 0 ? undefined : i;
}

/** The name of one of kernel K's CUDA launch variants (`default` where it declares none). */
export type CudaVariantName<K extends KernelName> = K extends KernelName
  ? Spec<K> extends { readonly cudaVariants: infer L extends readonly CudaVariantSpec[] }
    ? L[number]['name']
    : (typeof CUDA_DEFAULT_VARIANTS)[number]['name']
  : never;

/** The CUDA launch variants of a kernel (CUDA_DEFAULT_VARIANTS where it declares none); throws for an unknown kernel. */
export function cudaVariants(kernel: string): readonly CudaVariantSpec[] {
  return kernelSpec(kernel).cudaVariants ?? CUDA_DEFAULT_VARIANTS;
}

/** CUDA launch variant `name` of kernel K, launch shape included (typed: only a declared name type-checks). */
export function cudaVariant<K extends KernelName>(kernel: K, name: CudaVariantName<K>): CudaVariantSpec {
  const v = cudaVariants(kernel).find((x) => x.name === name);
  if (!v) throw new Error(`internal: kernel '${kernel}' has no CUDA variant '${name}'`);
  return v;
}

/** The operand spec of input (or output) i of a kernel, following a variadic last operand; undefined past the end. */
export function operandSpec(kernel: string, io: 'inputs' | 'outputs', i: number): OperandSpec | undefined {
  const list = kernelSpec(kernel)[io];
  const last = list[list.length - 1];
  return list[i] ?? (last?.variadic ? last : undefined);
}

// ---- counts ----

/** Operand and argument counts a call of the kernel may have (max: Infinity when a variadic last one repeats). */
export interface Arity {
  minIn: number;
  maxIn: number;
  minOut: number;
  maxOut: number;
  minIargs: number;
  maxIargs: number;
  minFargs: number;
  maxFargs: number;
}

function operandRange(list: readonly OperandSpec[]): [number, number] {
  let min = 0;
  list.forEach((o, i) => {
    if (!o.optional || o.keepSlot) min = i + 1;
  });
  const last = list[list.length - 1];
  return [min, last?.variadic ? Infinity : list.length];
}

function argRange(list: readonly ArgSpec[] = []): [number, number] {
  const fixed = list.filter((a) => !a.variadic);
  return [fixed.filter((a) => !a.optional).length, list.some((a) => a.variadic) ? Infinity : list.length];
}

export function arity(spec: KernelSpec): Arity {
  const [minIn, maxIn] = operandRange(spec.inputs);
  const [minOut, maxOut] = operandRange(spec.outputs);
  const [minIargs, maxIargs] = argRange(spec.iargs);
  const [minFargs, maxFargs] = argRange(spec.fargs);
  return { minIn, maxIn, minOut, maxOut, minIargs, maxIargs, minFargs, maxFargs };
}

/** Problems with the declarations themselves (names, order of optional and variadic entries); [] when sound. */
export function schemaProblems(): string[] {
  const bad: string[] = [];
  for (const [k, s] of Object.entries(KERNELS as Record<string, KernelSpec>)) {
    if (!/^[a-z][a-z0-9_]*$/.test(k)) bad.push(`${k}: kernel names are snake_case`);
    const args = [...(s.iargs ?? []), ...(s.fargs ?? [])];
    const names = args.map((a) => a.name);
    for (const n of names) {
      if (!/^[a-z][a-z0-9_]*$/.test(n)) bad.push(`${k}.${n}: argument names are snake_case`);
      if (names.indexOf(n) !== names.lastIndexOf(n))
        bad.push(`${k}.${n}: argument names are unique among a kernel's iargs and fargs`);
    }
    for (const [what, list] of [
      ['inputs', s.inputs],
      ['outputs', s.outputs],
      ['iargs', s.iargs ?? []],
      ['fargs', s.fargs ?? []],
    ] as const) {
      list.forEach((e: OperandSpec | ArgSpec, i: number) => {
        if (e.variadic && i !== list.length - 1)
          bad.push(`${k}.${e.name}: only the last of the ${what} may be variadic`);
        const later = list.slice(i + 1) as (OperandSpec | ArgSpec)[];
        if ((what === 'iargs' || what === 'fargs') && e.optional && later.some((a) => !a.optional && !a.variadic))
          bad.push(`${k}.${e.name}: optional ${what} come last`);
      });
    }
    for (const a of s.fargs ?? []) if (a.enum) bad.push(`${k}.${a.name}: a float argument cannot be an enum`);
    const variants = (s.variants ?? []).map((v) => v.name);
    if (variants.length && variants[0] !== 'auto')
      bad.push(`${k}: a kernel's variants start with auto (the run-time choice)`);
    for (const n of variants) {
      if (!/^[a-z][a-z0-9_]*$/.test(n)) bad.push(`${k} variant ${n}: variant names are snake_case`);
      if (variants.indexOf(n) !== variants.lastIndexOf(n)) bad.push(`${k} variant ${n}: variant names are unique`);
    }
    for (const v of s.variants ?? []) {
      if (v.prepares && !s.inputs.some((i) => i.name === v.prepares!.input && !i.variadic))
        bad.push(`${k} variant ${v.name}: prepares '${v.prepares.input}', which is not one of its inputs`);
    }
    const cuda = (s.cudaVariants ?? []).map((v) => v.name);
    for (const v of s.cudaVariants ?? []) {
      if (!/^[a-z][a-z0-9_]*$/.test(v.name)) bad.push(`${k} CUDA variant ${v.name}: variant names are snake_case`);
      if (cuda.indexOf(v.name) !== cuda.lastIndexOf(v.name))
        bad.push(`${k} CUDA variant ${v.name}: variant names are unique`);
      if (!Number.isInteger(v.block) || v.block < 32 || v.block > 1024 || v.block % 32 !== 0)
        bad.push(`${k} CUDA variant ${v.name}: block ${v.block} is not a multiple of 32 in 32..1024`);
    }
  }
  return bad;
}

/**
 * The CUDA kernel templates' parameter lists, as the C++ text of codegen/cuda/kernels/*.cuh (`template <LIST>
 * __device__ void NAME(const KArgs& a)`): codegen/cuda/rules.ts instantiates them by parameter name through
 * codegen/cuda/template-call.ts, and test/kernel-schema.test.ts checks that the .cuh files declare exactly these.
 */
export const CUDA_TEMPLATES = {
  attention: 'int D, int QL, int MK, bool CAUSAL, bool PAST = false',
  cache_write: 'int NL, bool PAST = false',
  project_topk:
    'int D, int V, int KK, bool TRANS, bool BIAS, bool ACT = false, bool Q = false, int KO = KK, bool RESC = false, class TW = float',
  binary: 'class Op, class T, int R, bool FLAT',
  power: 'class TA, class TB, int R',
  compare: 'class Op, class T, int R',
  where_select: 'class T, int R',
  unary: 'class Op, class T',
  clip: 'class T',
  cast: 'class TX, class TY, bool TO_BOOL',
  copy: 'int ELEM',
  fill: 'class T',
  range: 'class T',
  range_i: 'class T',
  values: 'class T',
  gemm_tc: 'int BM, int BN, int BK, int PASSES, bool VEC, int ACT, bool BIAS, bool RES, int R, bool BATCHED',
  gemm_tc16: 'class TW, bool VEC, int ACT, bool BIAS, bool RES',
  gemv: 'int ACT, bool BIAS, bool RES, bool VEC2, int KS, class TW = float',
  transpose: 'class T, int R',
  gather: 'class T, class TI, int AXIS',
  slice: 'class T, int R',
  concat: 'class T, int AXIS',
  split: 'class T, int AXIS',
  expand: 'class T, int R',
  tile: 'class T, int R',
  trilu: 'class T, bool UPPER',
  qmatmul_w8: 'int K, int N, int ACT, bool BIAS, bool RES',
  qgather: 'class TI, bool RES',
  norm: 'int D0, bool RMS, bool BIAS',
  softmax: 'bool LOG, bool LAST',
  cluster_mask: 'int D, int R',
} as const;

export type CudaTemplateName = keyof typeof CUDA_TEMPLATES;
