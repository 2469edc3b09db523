// Runs a conformance model through optimize (lowering + memory plan + plan file bytes) and the native runtime.
import { PlancError } from '../../compiler/diagnostics.ts';
import type { Model } from '../../compiler/ir.ts';
import { encodePlan } from '../../compiler/plan/format.ts';
import { f16BitsToNumber, numberToF16Bits } from '../../compiler/float16.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { isSym } from '../../compiler/symbolic.ts';
import { buildPlan } from '../../cli/build-plan.ts';
import { loadPlanBytes } from '../../runtime/plan.ts';
import type { RtTensor } from '../../runtime/tensor.ts';

/** Evaluator tensor → runtime tensor (int64 as BigInt64Array, float16 as bits). */
export function toRt(t: Tensor): RtTensor {
  const dims = [...t.dims];
  const n = t.nums;
  switch (t.dtype) {
    case 'float32': return { dtype: 'float32', dims, data: Float32Array.from(n) };
    case 'float64': return { dtype: 'float64', dims, data: Float64Array.from(n) };
    case 'int32': return { dtype: 'int32', dims, data: Int32Array.from(n) };
    case 'int64': return { dtype: 'int64', dims, data: BigInt64Array.from(n, (x) => BigInt(Math.max(-9223372036854775808, Math.min(9223372036854775807, x)))) };
    case 'int8': return { dtype: 'int8', dims, data: Int8Array.from(n) };
    case 'uint8': return { dtype: 'uint8', dims, data: Uint8Array.from(n) };
    case 'bool': return { dtype: 'bool', dims, data: Uint8Array.from(n) };
    case 'float16': return { dtype: 'float16', dims, data: Uint16Array.from(n, numberToF16Bits) };
    default: throw new PlancError('PLANC_E404', `dtype ${t.dtype} is not supported by plans`);
  }
}

/** Runtime tensor → evaluator tensor. */
export function fromRt(t: RtTensor): Tensor {
  const values = t.dtype === 'float16'
    ? Array.from(t.data as Uint16Array, f16BitsToNumber)
    : Array.from(t.data as ArrayLike<number | bigint>, (x) => Number(x));
  return Tensor.fromNumbers(t.dtype, t.dims, values);
}

/** Builds a plan for the model sized for these feeds and runs graph `main` natively. */
export function runNative(model: Model, feedSets: Record<string, Tensor>[]): Record<string, Tensor>[] {
  const graph = model.graphs.get('main')!;
  const maxDims: Record<string, number> = {};
  for (const feeds of feedSets) {
    for (const name of graph.inputs) {
      const shape = graph.values.get(name)?.type?.shape ?? [];
      shape.forEach((d, axis) => {
        if (isSym(d) && d.terms.size === 1) {
          const k = [...d.terms.keys()][0]!;
          if (k && !k.includes('*')) maxDims[k] = Math.max(maxDims[k] ?? 0, feeds[name]?.dims[axis] ?? 0);
        }
      });
    }
  }
  const built = buildPlan(model, { target: 'cpu', maxBatch: 1, maxSrcLen: 1, maxTgtLen: 1, maxDims });
  const plan = loadPlanBytes(encodePlan(built.header, built.blob), 'conformance plan');
  try {
    return feedSets.map((feeds) => {
      const rt: Record<string, RtTensor> = {};
      for (const [k, v] of Object.entries(feeds)) rt[k] = toRt(v);
      const out = plan.runSync('main', rt);
      return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, fromRt(v)]));
    });
  } finally {
    plan.close();
  }
}
