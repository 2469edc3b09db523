// planc's own fused ops (domain 'planc'): reference semantics composed from the ONNX ops they replace.
import type { Node } from '../../compiler/ir.ts';
import type { Activation } from '../../compiler/kernel-enums.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { makeOpContext } from './context.ts';
import type { EvalContext, InferInput, OpHandler } from './types.ts';
import { need } from './util.ts';
import { WEIGHT_DTYPES } from '../../compiler/kernel-schema.ts';

type Apply = (op: string, attrs: Node['attrs'], inputs: Tensor[]) => Tensor;

type ApplyActivation = (y: Tensor, apply: Apply) => Tensor;

/** The activations planc.FusedMatMul applies after the bias, by attribute value (compiler/kernel-enums.ts), as ONNX ops. */
export const FUSED_ACTIVATIONS: Record<string, ApplyActivation> = {
  none: (y) => y,
  relu: (y, f) => f('Relu', {}, [y]),
  gelu: (y, f) => f('Gelu', {}, [y]),
  gelu_tanh: (y, f) => f('Gelu', { approximate: { kind: 'string', value: 'tanh' } }, [y]),
  silu: (y, f) => f('Mul', {}, [y, f('Sigmoid', {}, [y])]),
} satisfies Record<Activation, ApplyActivation>;

type Find = (domain: string, op: string, opset: number) => OpHandler | undefined;
let find: Find | undefined;

/** The table registers its lookup here (it imports this file, so the import cannot go the other way). */
export function setHandlerLookup(f: Find): void {
  find = f;
}

/** Runs one ONNX op's reference implementation on tensors. */
export function applyOnnx(ctx: EvalContext, op: string, attrs: Node['attrs'], inputs: Tensor[]): Tensor {
  const opset = op === 'Gelu' ? 20 : 17;
  const h = find?.('', op, opset);
  if (!h) return ctx.fail(`internal: no ${op} handler`);
  const node: Node = {
    name: ctx.node.name,
    op,
    domain: '',
    inputs: inputs.map((_, i) => `in${i}`),
    outputs: ['out'],
    attrs,
    origin: ctx.node.origin,
  };
  return h.eval({ ...makeOpContext(node, opset, 'PLANC_E202'), runSubgraph: ctx.runSubgraph }, inputs)[0]!;
}

/** A weight's dtypes: float32, or float16 / bfloat16 (--quantize fp16|bf16; compiler/kernel-schema.ts F32_OR_HALF). */

/**
 * The operands of a product over weight w as float32 tensors: with a float16 / bfloat16 w, x's values rounded to w's
 * dtype first (products of the two are then exact in float32, as on the tensor cores).
 */
export function halfOperands(x: Tensor, w: Tensor): [Tensor, Tensor] {
  if (w.dtype === 'float32') return [x, w];
  return [
    new Tensor('float32', x.dims, Tensor.fromNumbers(w.dtype, x.dims, x.nums).nums),
    new Tensor('float32', w.dims, w.nums),
  ];
}

/** Y = act(A·W + bias) + residual; inputs A, W (float32, or float16 / bfloat16: halfOperands), bias? (last-dim vector), residual? (Y's shape). */
const FUSED_MATMUL: OpHandler = {
  op: 'FusedMatMul',
  domain: 'planc',
  infer(ctx, inputs) {
    const a = need(ctx, inputs, 0);
    const w = need(ctx, inputs, 1);
    if (a.dtype !== 'float32' || !(WEIGHT_DTYPES as readonly string[]).includes(w.dtype))
      ctx.fail(`A float32 and W float32, float16 or bfloat16 only, got ${a.dtype} and ${w.dtype}`);
    if (!FUSED_ACTIVATIONS[ctx.string('activation', 'none')])
      ctx.fail(`unknown activation '${ctx.string('activation', 'none')}'`);
    if (!a.shape || !w.shape) return [{ dtype: 'float32' }];
    if (w.shape.length !== 2 || a.shape.length < 2)
      ctx.fail(`needs A of rank ≥ 2 and a 2-D W, got ranks ${a.shape.length} and ${w.shape.length}`);
    const res: InferInput | undefined = inputs[3];
    const shape = [...a.shape.slice(0, -1), w.shape[1]!];
    if (res?.shape && res.shape.length !== shape.length)
      ctx.fail(`residual has rank ${res.shape.length}, the product ${shape.length}`);
    return [{ dtype: 'float32', shape }];
  },
  eval(ctx, inputs) {
    let y = applyOnnx(ctx, 'MatMul', {}, halfOperands(need(ctx, inputs, 0), need(ctx, inputs, 1)));
    if (inputs[2]) y = applyOnnx(ctx, 'Add', {}, [y, inputs[2]]);
    const act = FUSED_ACTIVATIONS[ctx.string('activation', 'none')];
    if (!act) return ctx.fail(`unknown activation '${ctx.string('activation', 'none')}'`);
    y = act(y, (op, attrs, ins) => applyOnnx(ctx, op, attrs, ins));
    if (inputs[3]) {
      if (inputs[3].dims.join() !== y.dims.join())
        ctx.fail(`residual dims [${inputs[3].dims}] differ from the product's [${y.dims}]`);
      y = applyOnnx(ctx, 'Add', {}, [y, inputs[3]]);
    }
    return [y];
  },
};

/** A norm over the last axis with the semantics of the ONNX op it stands for (whatever the model's opset). */
function norm(op: string, onnxOp: string, opset: number): OpHandler {
  const delegate = () => find?.('', onnxOp, opset);
  return {
    op,
    domain: 'planc',
    infer(ctx, inputs) {
      const h = delegate();
      if (!h) return ctx.fail(`internal: no ${onnxOp} handler`);
      return h.infer({ ...ctx, opset }, inputs).slice(0, 1);
    },
    eval(ctx, inputs) {
      const h = delegate();
      if (!h) return ctx.fail(`internal: no ${onnxOp} handler`);
      return h.eval({ ...ctx, opset }, inputs).slice(0, 1);
    },
  };
}

export const PLANC_FUSED_OPS: OpHandler[] = [
  FUSED_MATMUL,
  norm('LayerNorm', 'LayerNormalization', 17),
  norm('RMSNorm', 'RMSNormalization', 23),
];
