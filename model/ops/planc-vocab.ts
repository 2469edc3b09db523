// planc.ClusterMask: the active vocabulary of a decoder step from its hidden states (seed 000 §2.3; the vocab pass).
import { Tensor } from '../../compiler/tensor.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

const differ = (a: unknown, b: unknown) => typeof a === 'number' && typeof b === 'number' && a !== b;

function vocabOf(ctx: OpContext): number {
  const v = ctx.int('vocab');
  if (!Number.isInteger(v) || v < 1) ctx.fail(`vocab must be an integer ≥ 1, got ${v}`);
  return v;
}

function checkInputs(
  ctx: OpContext,
  x: InferInput,
  c: InferInput,
  cnorm: InferInput,
  offsets: InferInput,
  ids: InferInput,
): void {
  for (const [name, t, want] of [
    ['X', x, 'float32'],
    ['centroids', c, 'float32'],
    ['cnorm', cnorm, 'float32'],
    ['offsets', offsets, 'int32'],
    ['ids', ids, 'int32'],
  ] as const) {
    if (t.dtype !== want) ctx.fail(`${name} must be ${want}, got ${t.dtype}`);
  }
  if (x.shape && x.shape.length < 1) ctx.fail('X needs rank ≥ 1');
  if (c.shape && c.shape.length !== 2) ctx.fail(`centroids must be [R, D], got rank ${c.shape.length}`);
  if (!c.shape) return;
  const [r, d] = c.shape;
  if (x.shape && differ(x.shape[x.shape.length - 1], d))
    ctx.fail(`X's last dim ${x.shape[x.shape.length - 1]} differs from the centroids' D = ${d}`);
  if (cnorm.shape && (cnorm.shape.length !== 1 || differ(cnorm.shape[0], r)))
    ctx.fail(`cnorm must be [${r}], got [${cnorm.shape.join(',')}]`);
  if (offsets.shape && (offsets.shape.length !== 1 || (typeof r === 'number' && differ(offsets.shape[0], r + 1)))) {
    ctx.fail(`offsets must be [R + 1 = ${typeof r === 'number' ? r + 1 : 'R+1'}], got [${offsets.shape.join(',')}]`);
  }
  if (ids.shape && ids.shape.length !== 1) ctx.fail(`ids must be 1-D, got rank ${ids.shape.length}`);
}

/**
 * Inputs X [rows..., D] float32, centroids [R, D], cnorm [R] (‖C_r‖²), offsets [R + 1] int32, ids [nnz] int32
 * (cluster r's active ids are ids[offsets[r] .. offsets[r + 1])); attr vocab V. Output active uint8 [V]: the union
 * over the rows of the ids of each row's nearest centroid, r* = argmin_r cnorm[r] − 2 x·C_r (ties: lower r).
 */
const CLUSTER_MASK: OpHandler = {
  op: 'ClusterMask',
  domain: 'planc',
  infer(ctx, inputs) {
    const [x, c, cn, off, ids] = [0, 1, 2, 3, 4].map((i) => need(ctx, inputs, i)) as [
      InferInput,
      InferInput,
      InferInput,
      InferInput,
      InferInput,
    ];
    checkInputs(ctx, x, c, cn, off, ids);
    return [{ dtype: 'uint8', shape: [vocabOf(ctx)] }];
  },
  eval(ctx, inputs) {
    const [x, c, cn, off, ids] = [0, 1, 2, 3, 4].map((i) => need(ctx, inputs, i)) as [
      Tensor,
      Tensor,
      Tensor,
      Tensor,
      Tensor,
    ];
    const t = (a: Tensor) => ({ dtype: a.dtype, shape: [...a.dims] });
    checkInputs(ctx, t(x), t(c), t(cn), t(off), t(ids));
    const v = vocabOf(ctx);
    const [r, d] = c.dims as [number, number];
    const on = off.nums,
      idv = ids.nums,
      cv = c.nums,
      nv = cn.nums,
      xv = x.nums;
    for (let j = 0; j < r; j++) {
      if (!(on[j]! >= 0 && on[j]! <= on[j + 1]! && on[j + 1]! <= idv.length))
        ctx.fail(`offsets must be non-decreasing within [0, ${idv.length}], got ${on[j]}, ${on[j + 1]} at ${j}`);
    }
    const mask = new Uint8Array(v);
    const rows = d > 0 ? x.size / d : 0;
    for (let row = 0; row < rows; row++) {
      let best = 0,
        bestScore = Infinity;
      for (let j = 0; j < r; j++) {
        let dot = 0;
        for (let p = 0; p < d; p++) dot += xv[row * d + p]! * cv[j * d + p]!;
        const s = nv[j]! - 2 * dot;
        if (s < bestScore) {
          bestScore = s;
          best = j;
        }
      }
      for (let p = on[best]!; p < on[best + 1]!; p++) {
        const id = idv[p]!;
        if (!(id >= 0 && id < v)) ctx.fail(`cluster ${best} holds id ${id}, outside [0, ${v})`);
        mask[id] = 1;
      }
    }
    return [new Tensor('uint8', [v], mask)];
  },
};

export const PLANC_VOCAB_OPS: OpHandler[] = [CLUSTER_MASK];
