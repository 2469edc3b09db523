// Helpers shared by operator handlers: shape broadcasting over symbolic dims, axis handling, reading int inputs.
import type { ValueType } from '../../compiler/ir.ts';
import { dimBroadcast, unknownDim, type Dim } from '../../compiler/symbolic.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import type { InferInput, OpContext } from './types.ts';

/** Multidirectional (numpy) broadcast of symbolic shapes; undefined if any rank is unknown. Fails on proven mismatch. */
export function broadcastShapes(ctx: OpContext, shapes: (readonly Dim[] | undefined)[]): Dim[] | undefined {
  if (shapes.some((s) => s === undefined)) return undefined;
  const ss = shapes as (readonly Dim[])[];
  const n = Math.max(0, ...ss.map((s) => s.length));
  const out: Dim[] = [];
  for (let i = 0; i < n; i++) {
    let d: Dim = 1;
    for (const s of ss) {
      const x = s[s.length - n + i] ?? 1;
      const b = dimBroadcast(d, x);
      if (b === undefined) {
        if (typeof d === 'number' && typeof x === 'number')
          ctx.fail(`cannot broadcast shapes ${ss.map((s) => `[${s.join(',')}]`).join(' and ')}`);
        // symbolic vs different value: assume compatible, prefer a number (a symbol must then be 1 or equal)
        d = typeof d === 'number' ? d : typeof x === 'number' ? x : unknownDim();
      } else d = b;
    }
    out.push(d);
  }
  return out;
}

/** Output type with the input's dtype and shape. */
export function same(x: InferInput): ValueType {
  return { dtype: x.dtype, shape: x.shape };
}

/** Required input or a clear error. */
export function need<T>(ctx: OpContext, inputs: (T | undefined)[], i: number): T {
  const v = inputs[i];
  if (v === undefined) ctx.fail(`input ${i} is required`);
  return v;
}

/** A 0-D or 1-D integer tensor's elements as numbers. */
export function intsOf(t: Tensor): number[] {
  return Array.from(t.nums, (x) => Number(x));
}

/** Normalizes an axis for a given rank or fails naming the node. */
export function axisOf(ctx: OpContext, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) ctx.fail(`axis ${axis} is out of range for rank ${rank}`);
  return a;
}
