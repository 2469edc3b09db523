// The codes kernels and plans share — plan dtypes, fused-matmul activations, attention mask kinds and the other
// enum-typed kernel arguments — declared once. native/src/generated/kernel_enums.h and codegen/cuda/kernels/enums.cuh
// are generated from these tables (`npm run gen:kernel-enums`; test/kernel-enums.test.ts fails when a checked-in
// header is stale). The kernels' operands and arguments are declared in compiler/kernel-schema.ts.
import { BYTES, ONNX_CODE, type DType } from './dtype.ts';

/** A dtype plans and kernels support: its ONNX code (the plan's dtype code), bytes, C++ and CUDA element types. */
export interface PlanDType {
  name: PlanDTypeName;
  code: number;
  bytes: number;
  cpp: string;
  cudaType: string;
}

/** The dtypes a plan tensor may have, with their C++ enum and CUDA element type names. */
const PLAN_DTYPE_TYPES = {
  float32: { cpp: 'kFloat32', cudaType: 'float' },
  uint8: { cpp: 'kUint8', cudaType: 'uint8_t' },
  int8: { cpp: 'kInt8', cudaType: 'int8_t' },
  int16: { cpp: 'kInt16', cudaType: 'int16_t' },
  int32: { cpp: 'kInt32', cudaType: 'int32_t' },
  int64: { cpp: 'kInt64', cudaType: 'int64_t' },
  bool: { cpp: 'kBool', cudaType: 'uint8_t' },
  float16: { cpp: 'kFloat16', cudaType: '__half' },
  float64: { cpp: 'kFloat64', cudaType: 'double' },
  bfloat16: { cpp: 'kBFloat16', cudaType: '__nv_bfloat16' },
} as const satisfies Partial<Record<DType, { cpp: string; cudaType: string }>>;

export type PlanDTypeName = keyof typeof PLAN_DTYPE_TYPES;

/**
 * Every dtype a plan tensor may have, in code order. Plan dtype codes are ONNX TensorProto codes and the sizes ONNX's
 * (compiler/dtype.ts ONNX_CODE and BYTES, the one table of them): no other file names a dtype's code.
 */
export const PLAN_DTYPES: readonly PlanDType[] = (Object.keys(PLAN_DTYPE_TYPES) as PlanDTypeName[])
  .map((name) => ({ name, code: ONNX_CODE[name], bytes: BYTES[name], ...PLAN_DTYPE_TYPES[name] }))
  .sort((a, b) => a.code - b.code);

/** Plan dtype code by name (only the dtypes plans support). */
export const DTYPE_CODE = Object.fromEntries(PLAN_DTYPES.map((d) => [d.name, d.code])) as Readonly<
  Record<string, number>
>;

/** Bytes per element by plan dtype code; undefined for a code plans do not support. */
export const PLAN_DTYPE_BYTES: Readonly<Record<number, number>> = Object.fromEntries(
  PLAN_DTYPES.map((d) => [d.code, d.bytes]),
);

/** planc.FusedMatMul's epilogue activation: the attribute's value names, in code order (code = index). */
export const ACTIVATIONS = ['none', 'relu', 'gelu', 'gelu_tanh', 'silu'] as const;
export type Activation = (typeof ACTIVATIONS)[number];

/** planc.Attention's mask_kind: how its mask input applies (code = index). */
export const MASK_KINDS = ['none', 'add', 'bool_keep', 'bool_drop'] as const;

/** pad's mode (ONNX Pad's mode attribute; code = index). */
export const PAD_MODES = ['constant', 'reflect', 'edge', 'wrap'] as const;

/** scatter_nd's reduction (ONNX ScatterND's reduction attribute; code = index). */
export const SCATTER_REDUCTIONS = ['none', 'add', 'mul', 'max', 'min'] as const;

/** gelu's approximation (ONNX Gelu's approximate attribute; code = index). */
export const GELU_APPROXIMATIONS = ['none', 'tanh'] as const;

/**
 * How a quantized product (qmatmul, qproject_topk) treats its float32 input rows (code = index):
 * int8: each row quantized at run time, symmetric, s = max|row| / 127, q = round-half-even(x / s) in [-127, 127]
 * (weights int8); float32: rows stay float32, the int8 weights are dequantized in registers (weight-only);
 * int16: each row quantized at run time like int8 on [-L, L], L = the largest value ≤ 32767 with K · L² ≤ 2^31 − 1
 * (weights int16 per output channel on the same [-L, L]: no int32 sum can wrap). Marian's int16 product (vpmaddwd)
 * with scales read from the data instead of its fixed 2^10, which saturates on large activations.
 */
export const QUANT_INPUTS = ['int8', 'float32', 'int16'] as const;

/** The enums kernel arguments may have, by the name kernel-schema.ts gives an argument's `enum`. */
export const KERNEL_ENUMS = {
  activation: { values: ACTIVATIONS, cpp: 'Activation', prefix: 'Act', doc: "fused_matmul's activation" },
  mask_kind: { values: MASK_KINDS, cpp: 'MaskKind', prefix: 'Mask', doc: "attention's mask_kind" },
  pad_mode: { values: PAD_MODES, cpp: 'PadMode', prefix: 'Pad', doc: "pad's mode" },
  scatter_reduction: {
    values: SCATTER_REDUCTIONS,
    cpp: 'ScatterReduction',
    prefix: 'Scatter',
    doc: "scatter_nd's reduction",
  },
  quant_input: { values: QUANT_INPUTS, cpp: 'QuantInput', prefix: 'QuantIn', doc: "a quantized product's input rows" },
  gelu_approximation: { values: GELU_APPROXIMATIONS, cpp: 'GeluApprox', prefix: 'Gelu', doc: "gelu's approximation" },
} as const;

export type KernelEnumName = keyof typeof KERNEL_ENUMS;
/** The value names of a kernel enum. */
export type KernelEnumValue<E extends KernelEnumName> = (typeof KERNEL_ENUMS)[E]['values'][number];

/** The code of an enum value name, or undefined for an unknown one. */
export function enumCode(e: KernelEnumName, name: string): number | undefined {
  const i = (KERNEL_ENUMS[e].values as readonly string[]).indexOf(name);
  return i < 0 ? undefined : i;
}

const camel = (s: string) =>
  s
    .split('_')
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');

/** C++ enum lines: `kPrefixName = code,`. */
function enumLines(prefix: string, names: readonly string[]): string {
  return names.map((n, i) => `  k${prefix}${camel(n)} = ${i},`).join('\n');
}

const HEADER =
  '// Generated by scripts/gen-kernel-enums.ts from compiler/kernel-enums.ts: do not edit (npm run gen:kernel-enums).';

/** native/src/generated/kernel_enums.h: the dtype enum with its sizes and names, and the kernel enums. */
export function nativeEnumsHeader(): string {
  return `${HEADER}
#pragma once
#include <cstddef>
#include <cstdint>

namespace planc {

// Plan dtype codes (ONNX TensorProto codes).
enum DType : int32_t {
${PLAN_DTYPES.map((d) => `  ${d.cpp} = ${d.code},`).join('\n')}
};

// Bytes per element of a dtype, 0 if plans do not support it.
inline size_t dtype_size(int32_t dtype) {
  switch (dtype) {
${PLAN_DTYPES.map((d) => `    case ${d.cpp}: return ${d.bytes};`).join('\n')}
    default: return 0;
  }
}

// The dtype's name ("unknown" for an unsupported code).
inline const char* dtype_name(int32_t dtype) {
  switch (dtype) {
${PLAN_DTYPES.map((d) => `    case ${d.cpp}: return "${d.name}";`).join('\n')}
    default: return "unknown";
  }
}

${Object.values(KERNEL_ENUMS)
  .map(
    (e) => `// ${e.doc} (an iarg).
enum ${e.cpp} : int64_t {
${enumLines(e.prefix, e.values)}
  k${e.prefix}Count = ${e.values.length},
};
`,
  )
  .join('\n')}
}  // namespace planc
`;
}

/** codegen/cuda/kernels/enums.cuh: the same kernel enums for the CUDA templates. */
export function cudaEnumsHeader(): string {
  return `${HEADER}
namespace planc {

${Object.values(KERNEL_ENUMS)
  .map(
    (e) => `// ${e.doc}.
enum ${e.cpp} : int {
${enumLines(e.prefix, e.values)}
};
`,
  )
  .join('\n')}
}  // namespace planc
`;
}
