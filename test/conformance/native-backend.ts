// Runs a conformance model through optimize (lowering + memory plan + plan file bytes) and the native runtime.
import type { Model } from '../../compiler/ir.ts';
import { encodePlan } from '../../compiler/plan/format.ts';
import type { Tensor } from '../../compiler/tensor.ts';
import { isSym } from '../../compiler/symbolic.ts';
import { fromRt, toRt } from '../reference/rt-tensors.ts';
import { buildPlan } from '../../codegen/build-plan.ts';
import { loadPlanBytes } from '../../runtime/plan.ts';
import type { RtTensor } from '../../runtime/tensor.ts';

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
