// Control-flow operators: If (merged decoders use it to choose between the first step and the cached steps).
import type { ValueType } from '../../compiler/ir.ts';
import { dimEq, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import type { OpHandler } from './types.ts';
import { need } from './util.ts';

/** The type both branches agree on: equal dims kept, differing dims unknown. */
function mergeTypes(ctx: { fail(m: string): never }, a: ValueType, b: ValueType, i: number): ValueType {
  if (a.dtype !== b.dtype) ctx.fail(`branches disagree on output ${i}: ${a.dtype} vs ${b.dtype}`);
  if (!a.shape || !b.shape || a.shape.length !== b.shape.length) return { dtype: a.dtype };
  const shape: Dim[] = a.shape.map((d, k) => (dimEq(d, b.shape![k]!) ? d : unknownDim()));
  return { dtype: a.dtype, shape };
}

function tryInfer(f: () => ValueType[]): ValueType[] | Error {
  try {
    return f();
  } catch (err) {
    return err as Error;
  }
}

const IF: OpHandler = {
  op: 'If',
  infer(ctx, inputs) {
    const cond = need(ctx, inputs, 0);
    if (cond.dtype !== 'bool') ctx.fail(`condition must be bool, got ${cond.dtype}`);
    const thenG = ctx.graph('then_branch');
    const elseG = ctx.graph('else_branch');
    if (thenG.outputs.length !== elseG.outputs.length) {
      ctx.fail(`then_branch has ${thenG.outputs.length} outputs but else_branch has ${elseG.outputs.length}`);
    }
    if (cond.value) return ctx.inferSubgraph(cond.value.nums[0] ? thenG : elseG);
    // The condition is only known at run time: a branch that cannot type-check for these shapes is the one
    // never taken (exporters emit such dead branches), so the other one decides.
    const t = tryInfer(() => ctx.inferSubgraph(thenG));
    const e = tryInfer(() => ctx.inferSubgraph(elseG));
    if (t instanceof Error && e instanceof Error) throw t;
    if (t instanceof Error) return e as ValueType[];
    if (e instanceof Error) return t;
    return t.map((x, i) => mergeTypes(ctx, x, e[i]!, i));
  },
  eval(ctx, inputs) {
    const cond = need(ctx, inputs, 0);
    if (cond.size !== 1) ctx.fail(`condition must have one element, got dims [${cond.dims}]`);
    return ctx.runSubgraph(ctx.graph(cond.nums[0] ? 'then_branch' : 'else_branch'));
  },
};

export const CONTROL_OPS: OpHandler[] = [IF];
