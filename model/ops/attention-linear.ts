// LinearAttention (opset 27): recurrent linear attention with linear/gated/delta/gated_delta state updates.
import { isFloat } from '../../compiler/dtype.ts';
import { dimDiv, dimMul, shapeStr, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

interface LinearAttrs {
  gating: boolean;
  delta: boolean;
  qHeads: number;
  kvHeads: number;
  scale: number;
}

function linearAttrs(ctx: OpContext): LinearAttrs {
  const rule = ctx.string('update_rule', 'gated_delta');
  if (rule !== 'linear' && rule !== 'gated' && rule !== 'delta' && rule !== 'gated_delta')
    ctx.fail(`update_rule must be linear, gated, delta or gated_delta, got '${rule}'`);
  if (!ctx.has('q_num_heads') || !ctx.has('kv_num_heads'))
    ctx.fail('the q_num_heads and kv_num_heads attributes are required');
  const qHeads = ctx.int('q_num_heads'),
    kvHeads = ctx.int('kv_num_heads');
  if (qHeads <= 0 || kvHeads <= 0 || qHeads % kvHeads !== 0)
    ctx.fail(`q_num_heads ${qHeads} must be a positive multiple of kv_num_heads ${kvHeads}`);
  return {
    gating: rule === 'gated' || rule === 'gated_delta',
    delta: rule === 'delta' || rule === 'gated_delta',
    qHeads,
    kvHeads,
    scale: ctx.float('scale', 0),
  };
}

/** decay is required exactly for gated rules, beta for delta rules; erase_gate only with delta rules. */
function checkOptionalInputs(ctx: OpContext, a: LinearAttrs, decay: unknown, beta: unknown, erase: unknown): void {
  if (a.gating !== (decay !== undefined))
    ctx.fail(a.gating ? 'this update_rule needs the decay input' : 'this update_rule takes no decay input');
  if (a.delta !== (beta !== undefined))
    ctx.fail(a.delta ? 'this update_rule needs the beta input' : 'this update_rule takes no beta input');
  if (erase !== undefined && !a.delta) ctx.fail('erase_gate needs a delta update_rule');
}

function inferLinearAttention(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const a = linearAttrs(ctx);
  const q = need(ctx, inputs, 0),
    k = need(ctx, inputs, 1),
    v = need(ctx, inputs, 2),
    past = inputs[3];
  checkOptionalInputs(ctx, a, inputs[4], inputs[5], inputs[6]);
  if (!isFloat(q.dtype)) ctx.fail(`query must be a float tensor, got ${q.dtype}`);
  if (k.dtype !== q.dtype || v.dtype !== q.dtype)
    ctx.fail(`query, key and value must share one dtype, got ${q.dtype}, ${k.dtype}, ${v.dtype}`);
  for (const t of [q, k, v])
    if (t.shape && t.shape.length !== 3)
      ctx.fail(`query, key and value must be [batch, seq, heads*size], got ${shapeStr(t.shape)}`);
  const stateType = past ? past.dtype : q.dtype;
  if (!q.shape || !v.shape) return [{ dtype: q.dtype }, { dtype: stateType }].slice(0, ctx.node.outputs.length);
  const dk: Dim = dimDiv(q.shape[2]!, a.qHeads),
    dv: Dim = dimDiv(v.shape[2]!, a.kvHeads);
  const outs: InferOutput[] = [
    { dtype: q.dtype, shape: [q.shape[0]!, q.shape[1]!, dimMul(a.qHeads, dv)] },
    { dtype: stateType, shape: [q.shape[0]!, a.kvHeads, dk, dv] },
  ];
  return outs.slice(0, ctx.node.outputs.length);
}

/** Geometry of one evaluation. */
interface LinearRun {
  batch: number;
  seq: number;
  dk: number;
  dv: number;
}

function linearGeometry(ctx: EvalContext, a: LinearAttrs, q: Tensor, k: Tensor, v: Tensor): LinearRun {
  if (q.rank !== 3 || k.rank !== 3 || v.rank !== 3)
    ctx.fail(`query, key and value must be 3-D, got [${q.dims}], [${k.dims}], [${v.dims}]`);
  const [batch, seq, qh] = q.dims as [number, number, number];
  if (qh % a.qHeads !== 0) ctx.fail(`query hidden size ${qh} is not divisible by q_num_heads ${a.qHeads}`);
  const dk = qh / a.qHeads;
  if (k.dims[0] !== batch || k.dims[1] !== seq || k.dims[2] !== a.kvHeads * dk)
    ctx.fail(`key must be [${batch},${seq},${a.kvHeads * dk}], got [${k.dims}]`);
  if (v.dims[0] !== batch || v.dims[1] !== seq || v.dims[2]! % a.kvHeads !== 0)
    ctx.fail(`value [${v.dims}] does not match query [${q.dims}] and kv_num_heads ${a.kvHeads}`);
  return { batch, seq, dk, dv: v.dims[2]! / a.kvHeads };
}

/** Checks a [batch, seq, last] side input and returns its last dim. */
function sideLast(ctx: EvalContext, t: Tensor, name: string, r: LinearRun, allowed: number[]): number {
  if (t.rank !== 3 || t.dims[0] !== r.batch || t.dims[1] !== r.seq || !allowed.includes(t.dims[2]!)) {
    ctx.fail(`${name} must be [${r.batch},${r.seq},one of ${allowed.join('/')}], got [${t.dims}]`);
  }
  return t.dims[2]!;
}

function evalLinearAttention(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const a = linearAttrs(ctx);
  const q = need(ctx, inputs, 0),
    k = need(ctx, inputs, 1),
    v = need(ctx, inputs, 2);
  const past = inputs[3],
    decay = inputs[4],
    beta = inputs[5],
    erase = inputs[6];
  checkOptionalInputs(ctx, a, decay, beta, erase);
  const r = linearGeometry(ctx, a, q, k, v);
  const { batch, seq, dk, dv } = r;
  const H = a.kvHeads,
    group = a.qHeads / H;
  const decayLast = decay ? sideLast(ctx, decay, 'decay', r, [H, H * dk]) : 0;
  const betaLast = beta ? sideLast(ctx, beta, 'beta', r, [H, 1]) : 0;
  if (erase) sideLast(ctx, erase, 'erase_gate', r, [H * dk]);
  const stateSize = dk * dv;
  const state = new Float64Array(batch * H * stateSize);
  if (past) {
    if (past.dims.join(',') !== [batch, H, dk, dv].join(','))
      ctx.fail(`past_state must be [${batch},${H},${dk},${dv}], got [${past.dims}]`);
    state.set(past.nums);
  }
  const scale = a.scale === 0 ? 1 / Math.sqrt(dk) : a.scale;
  const out = new Float64Array(batch * seq * a.qHeads * dv);
  const vt = new Float64Array(dv);
  const kx = new Float64Array(dk);
  const qd = q.nums,
    kd = k.nums,
    vd = v.nums;
  for (let t = 0; t < seq; t++) {
    for (let b = 0; b < batch; b++) {
      const row = b * seq + t;
      for (let h = 0; h < H; h++) {
        const s0 = (b * H + h) * stateSize;
        const kOff = row * H * dk + h * dk;
        if (decay) {
          for (let d = 0; d < dk; d++) {
            const g = Math.exp(decay.nums[row * decayLast + (decayLast === H ? h : h * dk + d)]!);
            for (let m = 0; m < dv; m++) state[s0 + d * dv + m] *= g;
          }
        }
        for (let m = 0; m < dv; m++) vt[m] = vd[row * H * dv + h * dv + m]!;
        if (beta) {
          for (let d = 0; d < dk; d++) kx[d] = erase ? erase.nums[kOff + d]! * kd[kOff + d]! : kd[kOff + d]!;
          const bt = beta.nums[row * betaLast + (betaLast === 1 ? 0 : h)]!;
          for (let m = 0; m < dv; m++) {
            let got = 0;
            for (let d = 0; d < dk; d++) got += state[s0 + d * dv + m]! * kx[d]!;
            vt[m] = bt * (vt[m]! - got);
          }
        }
        for (let d = 0; d < dk; d++) {
          const kv = kd[kOff + d]!;
          for (let m = 0; m < dv; m++) state[s0 + d * dv + m] += kv * vt[m]!;
        }
      }
      for (let hq = 0; hq < a.qHeads; hq++) {
        const s0 = (b * H + Math.floor(hq / group)) * stateSize;
        const qOff = row * a.qHeads * dk + hq * dk;
        const oOff = row * a.qHeads * dv + hq * dv;
        for (let m = 0; m < dv; m++) {
          let acc = 0;
          for (let d = 0; d < dk; d++) acc += qd[qOff + d]! * state[s0 + d * dv + m]!;
          out[oOff + m] = scale * acc;
        }
      }
    }
  }
  const outs = [
    Tensor.fromNumbers(q.dtype, [batch, seq, a.qHeads * dv], out),
    Tensor.fromNumbers(past ? past.dtype : q.dtype, [batch, H, dk, dv], state),
  ];
  return outs.slice(0, Math.max(1, ctx.node.outputs.length));
}

export const LINEAR_ATTENTION_OPS: OpHandler[] = [
  { op: 'LinearAttention', since: 27, infer: inferLinearAttention, eval: evalLinearAttention },
];
