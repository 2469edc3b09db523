// The precisions a product of a plan may have after quantization, the record of each quantized layer, and the plan's
// quantization record before anything is measured.

/**
 * The precision of one product: int8 (weights per output channel, input rows quantized per row at run time), w8
 * (int8 weights, float32 inputs), int16 (int16 weights per output channel and input rows per row, about 11-12 bits
 * each: Marian's int16 product with data-read scales), fp16 / bf16 (the weight in float16 / bfloat16 and the product's
 * other operand rounded to it, float32 sums: the CUDA tensor cores' precisions), float32 (left as it is).
 */
export const LAYER_PRECISIONS = ['int8', 'w8', 'int16', 'fp16', 'bf16', 'float32'] as const;
export type LayerPrecision = (typeof LAYER_PRECISIONS)[number];

/** The weight dtype of the half precisions. */
export const HALF_DTYPE = { fp16: 'float16', bf16: 'bfloat16' } as const;
export type HalfPrecision = keyof typeof HALF_DTYPE;
export const isHalf = (p: LayerPrecision): p is HalfPrecision => p in HALF_DTYPE;

/** One product the quantize pass rewrote, as the plan's report lists it. */
export interface QuantizedLayer {
  graph: string;
  /** The IR node (planc.FusedMatMul or planc.ProjectTopK before the pass). */
  node: string;
  op: string;
  precision: LayerPrecision;
  /** The id of its float32 weight (layers of several graphs may share one), and of the weights made from it. */
  weight: string;
  derived: string[];
  /** Weight bytes before and after. */
  bytesBefore: number;
  bytesAfter: number;
}
