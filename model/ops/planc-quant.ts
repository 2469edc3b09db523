// planc.QMatMul, QProjectTopK, QGather (passes/quantize.ts) and QuantizeRows (passes/share-quantized-rows.ts), with the
// native kernels' exact semantics (compiler/kernel-schema.ts qmatmul, qproject_topk; compiler/quant/pack.ts references).
import { ACTIVATIONS, QUANT_INPUTS } from '../../compiler/kernel-enums.ts';
import {
  fineAt,
  fineLogit,
  qlogitsRef,
  qmatmulRef,
  quantizedRowLength,
  quantizeRowsRef,
  RESCORED,
  RESIDUAL_STEPS,
} from '../../compiler/quant/pack.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { applyOnnx, FUSED_ACTIVATIONS } from './planc-fused.ts';
import { topkOfLogits } from './planc-project-topk.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

type QuantInput = (typeof QUANT_INPUTS)[number];

function quantInput(ctx: OpContext): QuantInput {
  const v = ctx.string('input', 'int8');
  if (!(QUANT_INPUTS as readonly string[]).includes(v))
    ctx.fail(`input must be one of ${QUANT_INPUTS.join(', ')}, got '${v}'`);
  return v as QuantInput;
}

function checkDtype(ctx: OpContext, name: string, t: InferInput | undefined, dtypes: readonly string[]): void {
  if (t && !dtypes.includes(t.dtype)) ctx.fail(`${name} must be ${dtypes.join(' or ')}, got ${t.dtype}`);
}

/** The int dtype of the weights for an input mode. */
const weightDtype = (input: QuantInput) => (input === 'int16' ? 'int16' : 'int8');

/** The dtype of A rows quantized by planc.QuantizeRows for an input mode (int8: uint8 q + 128). */
const rowsDtype = (input: QuantInput) => (input === 'int16' ? 'int16' : input === 'int8' ? 'uint8' : undefined);

/**
 * Y = act(dequant(quant(A) × Wq) + bias) + residual. Inputs A [..., K] float32, Wq (packed, compiler/quant/pack.ts),
 * w_scale [N], w_sum [N] (int8 inputs), bias? [N], residual? (Y's dims), a_scale? (A's leading dims: A is then
 * planc.QuantizeRows' q [..., kp]); attrs activation, input, n, k.
 */
const QMATMUL: OpHandler = {
  op: 'QMatMul',
  domain: 'planc',
  infer(ctx, inputs) {
    const a = need(ctx, inputs, 0);
    const input = quantInput(ctx);
    const quantized = !!inputs[6];
    const rows = rowsDtype(input);
    if (quantized && !rows) ctx.fail(`a_scale needs int8 or int16 input, got ${input}`);
    checkDtype(ctx, 'A', a, [quantized ? rows! : 'float32']);
    checkDtype(ctx, 'a_scale', inputs[6], ['float32']);
    checkDtype(ctx, 'Wq', inputs[1], [weightDtype(input)]);
    checkDtype(ctx, 'w_scale', inputs[2], ['float32']);
    checkDtype(ctx, 'w_sum', inputs[3], ['int32']);
    if (input === 'int8' && !inputs[3]) ctx.fail('int8 inputs need w_sum');
    const act = ctx.string('activation', 'none');
    if (!(ACTIVATIONS as readonly string[]).includes(act)) ctx.fail(`unknown activation '${act}'`);
    const k = ctx.int('k'),
      n = ctx.int('n');
    if (!a.shape) return [{ dtype: 'float32' }];
    const last = a.shape[a.shape.length - 1];
    const kp = quantized ? quantizedRowLength(k, input as 'int8' | 'int16') : k;
    if (typeof last === 'number' && last !== kp)
      ctx.fail(`A's last dim ${last} differs from ${quantized ? 'kp' : 'k'} = ${kp}`);
    return [{ dtype: 'float32', shape: [...a.shape.slice(0, -1), n] }];
  },
  eval(ctx, inputs) {
    const a = need(ctx, inputs, 0),
      wq = need(ctx, inputs, 1),
      scale = need(ctx, inputs, 2);
    const k = ctx.int('k'),
      n = ctx.int('n'),
      input = quantInput(ctx);
    const aScale = inputs[6];
    const m = aScale ? aScale.size : a.size / k;
    const y = qmatmulRef({
      a: aScale ? new Float32Array(0) : (a.nums as Float32Array),
      m,
      k,
      n,
      input,
      w: wq.nums as Int8Array | Int16Array,
      scale: scale.nums as Float32Array,
      bias: inputs[4]?.nums as Float32Array | undefined,
      rows: aScale ? { q: a.nums as Uint8Array | Int16Array, scale: aScale.nums as Float32Array } : undefined,
    });
    let out = Tensor.fromNumbers('float32', [...a.dims.slice(0, -1), n], y);
    const act = FUSED_ACTIVATIONS[ctx.string('activation', 'none')]!;
    out = act(out, (op, attrs, ins) => applyOnnx(ctx, op, attrs, ins));
    const res = inputs[5];
    if (res) {
      const o = out.nums as Float32Array,
        r = res.nums;
      for (let i = 0; i < o.length; i++) o[i] = Math.fround(o[i]! + r[i]!);
    }
    return [out];
  },
};

/**
 * qproject_topk with a residual plane: per row the max(k, 8) best ids by the int8 logits, their logits replaced by
 * the fine ones (pack.ts fineLogit), the normalizer corrected by the difference, then the k best of those.
 */
function rescoredTopk(o: {
  x: Float32Array;
  rows: number;
  d: number;
  v: number;
  k: number;
  logits: Float32Array;
  bias?: ArrayLike<number>;
  on?: Uint8Array;
  w: Int8Array;
  res: ArrayLike<number>;
  scale: Float32Array;
}): { values: Float64Array; indices: Float64Array } {
  const { rows, d, v, k } = o,
    dp = o.w.length / v,
    kc = Math.min(v, Math.max(k, RESCORED));
  const best = topkOfLogits(rows, v, kc, o.bias, o.on, (r, out) => {
    for (let j = 0; j < v; j++) out[j] = o.logits[r * v + j]!;
  });
  const values = new Float64Array(rows * k),
    indices = new Float64Array(rows * k);
  for (let r = 0; r < rows; r++) {
    const lse = best.lse[r]!;
    const cands = Array.from({ length: kc }, (_, t) => ({
      j: best.indices[r * kc + t]!,
      lp: best.values[r * kc + t]!,
    }));
    let mass = 1;
    if (Number.isFinite(lse)) {
      for (const c of cands) {
        if (c.lp === -Infinity) continue; // a slot no active id filled
        const l = fineLogit(o.x.subarray(r * d, (r + 1) * d), d, o.w, o.res, dp, o.scale, c.j, o.bias);
        mass += Math.exp(l - lse) - Math.exp(c.lp);
        c.lp = l - lse;
      }
      cands.sort((a, b) => b.lp - a.lp || a.j - b.j);
    }
    const shift = mass > 0 ? Math.log(mass) : 0;
    for (let t = 0; t < k; t++) {
      values[r * k + t] = cands[t]!.lp - shift;
      indices[r * k + t] = cands[t]!.j;
    }
  }
  return { values, indices };
}

/**
 * The k best log-softmax entries of dequant(quant(X) · Wqᵀ) + bias per row. Inputs X [..., D], Wq int8 [V, Dp],
 * w_scale [V], w_sum [V], bias? [V], active? [V], w_res? [V, Dp / 2] (rescoring, compiler/kernel-schema.ts);
 * attrs k, input, d.
 */
const QPROJECT_TOPK: OpHandler = {
  op: 'QProjectTopK',
  domain: 'planc',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const input = quantInput(ctx);
    if (input === 'int16') ctx.fail('input int16 has no kernel here (int8 or float32)');
    checkDtype(ctx, 'X', x, ['float32']);
    checkDtype(ctx, 'Wq', inputs[1], ['int8']);
    checkDtype(ctx, 'active', inputs[5], ['uint8', 'bool']);
    checkDtype(ctx, 'w_res', inputs[6], ['uint8']);
    const k = ctx.int('k');
    if (!x.shape) return [{ dtype: 'float32' }, { dtype: 'int64' }];
    const shape = [...x.shape.slice(0, -1), k];
    return [
      { dtype: 'float32', shape },
      { dtype: 'int64', shape: [...shape] },
    ];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0),
      wq = need(ctx, inputs, 1),
      scale = need(ctx, inputs, 2);
    const d = ctx.int('d'),
      k = ctx.int('k'),
      v = wq.dims[0]!;
    const rows = x.size / d;
    const logits = qlogitsRef({
      x: x.nums as Float32Array,
      rows,
      d,
      v,
      input: quantInput(ctx),
      w: wq.nums as Int8Array,
      scale: scale.nums as Float32Array,
    });
    const act = inputs[5];
    const on = act ? Uint8Array.from(act.nums as ArrayLike<number>, (b) => (Number(b) ? 1 : 0)) : undefined;
    const res = inputs[6];
    const { values, indices } = res
      ? rescoredTopk({
          x: x.nums as Float32Array,
          rows,
          d,
          v,
          k,
          logits,
          bias: inputs[4]?.nums,
          on,
          w: wq.nums as Int8Array,
          res: res.nums,
          scale: scale.nums as Float32Array,
        })
      : topkOfLogits(rows, v, k, inputs[4]?.nums, on, (r, out) => {
          for (let j = 0; j < v; j++) out[j] = logits[r * v + j]!;
        });
    const dims = [...x.dims.slice(0, -1), k];
    return [Tensor.fromNumbers('float32', dims, values), new Tensor('int64', dims, indices)];
  },
};

/**
 * Y = rows of an int8 table dequantized: Y[..., :] = scale[ids] · Wq[ids, :d]; with the residual plane, 12-bit rows
 * (15 · Wq + r) · (scale / 15). Inputs Wq int8 [V, Dp], scale [V], ids, residual? [V, Dp / 2]; attr d.
 */
const QGATHER: OpHandler = {
  op: 'QGather',
  domain: 'planc',
  infer(ctx, inputs) {
    checkDtype(ctx, 'Wq', inputs[0], ['int8']);
    checkDtype(ctx, 'scale', inputs[1], ['float32']);
    const ids = need(ctx, inputs, 2);
    checkDtype(ctx, 'indices', ids, ['int64', 'int32']);
    checkDtype(ctx, 'residual', inputs[3], ['uint8']);
    return [{ dtype: 'float32', shape: ids.shape && [...ids.shape, ctx.int('d')] }];
  },
  eval(ctx, inputs) {
    const w = need(ctx, inputs, 0),
      scale = need(ctx, inputs, 1).nums,
      ids = need(ctx, inputs, 2);
    const [v, dp] = w.dims as [number, number];
    const d = ctx.int('d'),
      q = w.nums,
      res = inputs[3]?.nums;
    const out = new Float32Array(ids.size * d);
    ids.nums.forEach((x, k) => {
      const i = Number(x) < 0 ? Number(x) + v : Number(x);
      if (i < 0 || i >= v) ctx.fail(`index ${x} is out of range for ${v} rows`);
      if (res) {
        const f = Math.fround(scale[i]! / RESIDUAL_STEPS);
        for (let c = 0; c < d; c++) out[k * d + c] = Math.fround(fineAt(q, res, dp, i, c) * f);
      } else {
        for (let c = 0; c < d; c++) out[k * d + c] = Math.fround(q[i * dp + c]! * scale[i]!);
      }
    });
    return [Tensor.fromNumbers('float32', [...ids.dims, d], out)];
  },
};

/**
 * The rows of a QMatMul's A quantized once for every QMatMul that reads them (passes/share-quantized-rows.ts). Input
 * X [..., K] float32; outputs q [..., kp] (int8: uint8 q + 128, int16: int16) and scale [...] float32; attrs input
 * (int8 | int16), k. The values QMatMul computes from X itself (compiler/quant/pack.ts quantizeRowsRef).
 */
const QUANTIZE_ROWS: OpHandler = {
  op: 'QuantizeRows',
  domain: 'planc',
  infer(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    checkDtype(ctx, 'X', x, ['float32']);
    const input = quantInput(ctx);
    if (input === 'float32') ctx.fail('input must be int8 or int16');
    const k = ctx.int('k'),
      kp = quantizedRowLength(k, input as 'int8' | 'int16');
    const dtype = rowsDtype(input)!;
    if (!x.shape) return [{ dtype }, { dtype: 'float32' }];
    const last = x.shape[x.shape.length - 1];
    if (typeof last === 'number' && last !== k) ctx.fail(`X's last dim ${last} differs from k = ${k}`);
    const lead = x.shape.slice(0, -1);
    return [
      { dtype, shape: [...lead, kp] },
      { dtype: 'float32', shape: lead },
    ];
  },
  eval(ctx, inputs) {
    const x = need(ctx, inputs, 0);
    const input = quantInput(ctx) as 'int8' | 'int16',
      k = ctx.int('k');
    const lead = x.dims.slice(0, -1),
      m = lead.reduce((a, b) => a * b, 1);
    const rows = quantizeRowsRef(x.nums as Float32Array, m, k, input);
    return [
      Tensor.fromNumbers(rowsDtype(input)!, [...lead, quantizedRowLength(k, input)], rows.q),
      Tensor.fromNumbers('float32', lead, rows.scale),
    ];
  },
};

export const PLANC_QUANT_OPS: OpHandler[] = [QMATMUL, QPROJECT_TOPK, QGATHER, QUANTIZE_ROWS];
