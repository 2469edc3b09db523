// planc.ProjectTopK: the fused output layer, logits = X·W (+ bias) → the k best log-softmax entries and their ids.
import { halfOperands } from './planc-fused.ts';
import type { Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';
import { WEIGHT_DTYPES } from '../../compiler/kernel-schema.ts';

/** k and transposed, checked. */
function attrs(ctx: OpContext): { k: number; transposed: boolean } {
  const k = ctx.int('k');
  const t = ctx.int('transposed', 0);
  if (!Number.isInteger(k) || k < 1) ctx.fail(`k must be an integer ≥ 1, got ${k}`);
  if (t !== 0 && t !== 1) ctx.fail(`transposed must be 0 or 1, got ${t}`);
  return { k, transposed: t === 1 };
}

/** [D, V] of the weight (W is [D, V], or [V, D] when transposed). */
function weightDims(w: readonly Dim[], transposed: boolean): [Dim, Dim] {
  return transposed ? [w[1]!, w[0]!] : [w[0]!, w[1]!];
}

const differ = (a: Dim | undefined, b: Dim | undefined) => typeof a === 'number' && typeof b === 'number' && a !== b;

function checkInputs(
  ctx: OpContext,
  x: InferInput,
  w: InferInput,
  bias: InferInput | undefined,
  k: number,
  transposed: boolean,
  active?: InferInput,
): void {
  for (const [name, t] of [
    ['X', x],
    ['bias', bias],
  ] as const) {
    if (t && t.dtype !== 'float32') ctx.fail(`${name} must be float32, got ${t.dtype}`);
  }
  if (!(WEIGHT_DTYPES as readonly string[]).includes(w.dtype))
    ctx.fail(`W must be float32, float16 or bfloat16, got ${w.dtype}`);
  if (active && active.dtype !== 'uint8' && active.dtype !== 'bool')
    ctx.fail(`active must be uint8 or bool, got ${active.dtype}`);
  if (x.shape && x.shape.length < 2) ctx.fail(`X needs rank ≥ 2, got rank ${x.shape.length}`);
  if (!w.shape) return;
  if (w.shape.length !== 2) ctx.fail(`W must be 2-D, got rank ${w.shape.length}`);
  const [d, v] = weightDims(w.shape, transposed);
  if (x.shape && differ(x.shape[x.shape.length - 1], d))
    ctx.fail(
      `X's last dim ${x.shape[x.shape.length - 1]} differs from W's D = ${d} (transposed=${Number(transposed)})`,
    );
  if (bias?.shape && (bias.shape.length !== 1 || differ(bias.shape[0], v)))
    ctx.fail(`bias must be [${v}], got [${bias.shape.join(',')}]`);
  if (typeof v === 'number' && k > v) ctx.fail(`k = ${k} exceeds the vocabulary size ${v}`);
  if (active?.shape && (active.shape.length !== 1 || differ(active.shape[0], v)))
    ctx.fail(`active must be [${v}], got [${active.shape.join(',')}]`);
}

/** The k best (value desc, lower id first on ties) of one row of log-probs, over the active ids when given. */
function topOfRow(lp: Float64Array, k: number, active?: ArrayLike<number>): number[] {
  const best: number[] = [];
  const before = (i: number, j: number) => lp[i]! > lp[j]! || (lp[i] === lp[j] && i < j);
  for (let i = 0; i < lp.length; i++) {
    if (active && !active[i]) continue;
    if (best.length === k && !before(i, best[k - 1]!)) continue;
    if (best.length === k) best.pop();
    let p = best.length;
    while (p > 0 && before(i, best[p - 1]!)) p--;
    best.splice(p, 0, i);
  }
  return best;
}

/**
 * The k best log-softmax entries of `rows` rows of logits over a vocabulary of v (over the active ids when given), in
 * float64: `fill(r, logits)` adds row r's products into zeroed logits, then bias is added. Fewer than k active ids
 * leave -inf and index 0 in the remaining slots. `lse` is each row's normalizer (a value is its logit − lse).
 */
export function topkOfLogits(
  rows: number,
  v: number,
  k: number,
  bias: ArrayLike<number> | undefined,
  on: Uint8Array | undefined,
  fill: (r: number, logits: Float64Array) => void,
): { values: Float64Array; indices: Float64Array; lse: Float64Array } {
  const values = new Float64Array(rows * k),
    indices = new Float64Array(rows * k),
    lses = new Float64Array(rows);
  const logits = new Float64Array(v);
  for (let r = 0; r < rows; r++) {
    logits.fill(0);
    fill(r, logits);
    let max = -Infinity;
    for (let j = 0; j < v; j++) {
      if (bias) logits[j] += bias[j]!;
      if (on && !on[j]) continue;
      if (logits[j]! > max || Number.isNaN(logits[j]!)) max = logits[j]!;
    }
    let sum = 0;
    for (let j = 0; j < v; j++) if (!on || on[j]) sum += Math.exp(logits[j]! - max);
    const lse = max + Math.log(sum);
    lses[r] = lse;
    for (let j = 0; j < v; j++) logits[j] = logits[j]! - lse;
    const top = topOfRow(logits, k, on);
    for (let t = 0; t < k; t++) {
      const j = top[t];
      values[r * k + t] = j === undefined ? -Infinity : logits[j]!;
      indices[r * k + t] = j ?? 0;
    }
  }
  return { values, indices, lse: lses };
}

/**
 * Inputs X [..., D], W [D, V] (transposed=1: [V, D]), bias? [V], active? [V] (uint8/bool; 1 = computed); attrs k,
 * transposed. Outputs values [..., k] float32 (log-softmax of the logits, best first) and indices [..., k] int64.
 * With `active`, the normalizer and the top-k run over the active columns only; when fewer than k are active, the
 * remaining slots hold -inf and index 0. The reference computes in float64.
 */
const PROJECT_TOPK: OpHandler = {
  op: 'ProjectTopK',
  domain: 'planc',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const w = need(ctx, inputs, 1);
    const { k, transposed } = attrs(ctx);
    checkInputs(ctx, x, w, inputs[2], k, transposed, inputs[3]);
    if (!x.shape) return [{ dtype: 'float32' }, { dtype: 'int64' }];
    const shape = [...x.shape.slice(0, -1), k];
    return [
      { dtype: 'float32', shape },
      { dtype: 'int64', shape: [...shape] },
    ];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const w = need(ctx, inputs, 1);
    const bias = inputs[2];
    const act = inputs[3];
    const { k, transposed } = attrs(ctx);
    checkInputs(
      ctx,
      { dtype: x.dtype, shape: [...x.dims] },
      { dtype: w.dtype, shape: [...w.dims] },
      bias && { dtype: bias.dtype, shape: [...bias.dims] },
      k,
      transposed,
      act && { dtype: act.dtype, shape: [...act.dims] },
    );
    const on = act ? Uint8Array.from(act.nums as ArrayLike<number>, (b) => (Number(b) ? 1 : 0)) : undefined;
    const [d, v] = weightDims(w.dims, transposed) as [number, number];
    const [xh] = halfOperands(x, w);
    const xv = xh.nums,
      wv = w.nums;
    const { values, indices } = topkOfLogits(x.size / d, v, k, bias?.nums, on, (r, logits) => {
      for (let p = 0; p < d; p++) {
        const a = xv[r * d + p]!;
        if (transposed) for (let j = 0; j < v; j++) logits[j] += a * wv[j * d + p]!;
        else for (let j = 0, o = p * v; j < v; j++) logits[j] += a * wv[o + j]!;
      }
    });
    const dims = [...x.dims.slice(0, -1), k];
    return [Tensor.fromNumbers('float32', dims, values), new Tensor('int64', dims, indices)];
  },
};

export const PLANC_PROJECT_TOPK_OPS: OpHandler[] = [PROJECT_TOPK];
