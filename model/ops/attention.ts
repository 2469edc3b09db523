// Attention operators: Attention (opset 23/24), RotaryEmbedding (23), FlexAttention (preview) and LinearAttention (attention-linear.ts).
import { isFloat, type DType, type NumArray } from '../../compiler/dtype.ts';
import { dimAdd, dimDiv, dimMod, dimMul, shapeStr, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import { LINEAR_ATTENTION_OPS } from './attention-linear.ts';
import type { EvalContext, InferContext, InferInput, InferOutput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

// ---------------------------------------------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------------------------------------------

/** Attention's attributes, read once per node. */
interface AttentionAttrs {
  scale?: number;
  isCausal: boolean;
  qNumHeads?: number;
  kvNumHeads?: number;
  softcap: number;
  qkMode: number;
}

function attentionAttrs(ctx: OpContext): AttentionAttrs {
  const qkMode = ctx.int('qk_matmul_output_mode', 0);
  if (qkMode < 0 || qkMode > 3) ctx.fail(`qk_matmul_output_mode must be 0..3, got ${qkMode}`);
  const a: AttentionAttrs = {
    scale: ctx.has('scale') ? ctx.float('scale') : undefined,
    isCausal: ctx.int('is_causal', 0) !== 0,
    qNumHeads: ctx.has('q_num_heads') ? ctx.int('q_num_heads') : undefined,
    kvNumHeads: ctx.has('kv_num_heads') ? ctx.int('kv_num_heads') : undefined,
    softcap: ctx.float('softcap', 0),
    qkMode,
  };
  if (a.qNumHeads !== undefined && a.qNumHeads <= 0) ctx.fail(`q_num_heads must be positive, got ${a.qNumHeads}`);
  if (a.kvNumHeads !== undefined && a.kvNumHeads <= 0) ctx.fail(`kv_num_heads must be positive, got ${a.kvNumHeads}`);
  return a;
}

/** The 4-D geometry of Q/K/V: [batch, heads, seq, head_size], whatever the input rank. */
interface AttnDims<D> {
  batch: D;
  qHeads: D;
  kvHeads: D;
  qSeq: D;
  kvSeq: D;
  headSize: D;
  vHeadSize: D;
}

/** Splits 3-D [batch, seq, heads*size] or reads 4-D [batch, heads, seq, size] shapes into the attention geometry. */
function attnDims(
  ctx: OpContext,
  a: AttentionAttrs,
  q: readonly Dim[],
  k: readonly Dim[],
  v: readonly Dim[],
): AttnDims<Dim> {
  if (q.length !== k.length || q.length !== v.length)
    ctx.fail(`Q, K and V must have the same rank, got ${shapeStr([...q])}, ${shapeStr([...k])}, ${shapeStr([...v])}`);
  if (q.length === 3) {
    if (a.qNumHeads === undefined || a.kvNumHeads === undefined)
      ctx.fail('3-D Q/K/V need the q_num_heads and kv_num_heads attributes');
    const qh = a.qNumHeads,
      kvh = a.kvNumHeads;
    checkDivisible(ctx, q[2]!, qh, 'Q hidden size', 'q_num_heads');
    checkDivisible(ctx, k[2]!, kvh, 'K hidden size', 'kv_num_heads');
    checkDivisible(ctx, v[2]!, kvh, 'V hidden size', 'kv_num_heads');
    checkCommon(ctx, q, k, v);
    return {
      batch: q[0]!,
      qHeads: qh,
      kvHeads: kvh,
      qSeq: q[1]!,
      kvSeq: k[1]!,
      headSize: dimDiv(q[2]!, qh),
      vHeadSize: dimDiv(v[2]!, kvh),
    };
  }
  if (q.length === 4) {
    const d: AttnDims<Dim> = {
      batch: q[0]!,
      qHeads: q[1]!,
      kvHeads: k[1]!,
      qSeq: q[2]!,
      kvSeq: k[2]!,
      headSize: q[3]!,
      vHeadSize: v[3]!,
    };
    if (a.qNumHeads !== undefined && typeof d.qHeads === 'number' && d.qHeads !== a.qNumHeads)
      ctx.fail(`Q has ${d.qHeads} heads but q_num_heads is ${a.qNumHeads}`);
    if (a.kvNumHeads !== undefined && typeof d.kvHeads === 'number' && d.kvHeads !== a.kvNumHeads)
      ctx.fail(`K has ${d.kvHeads} heads but kv_num_heads is ${a.kvNumHeads}`);
    if (!sameOrSymbolic(v[1]!, k[1]!))
      ctx.fail(`K and V must have the same number of heads, got ${shapeStr([...k])} and ${shapeStr([...v])}`);
    if (!sameOrSymbolic(k[3]!, q[3]!))
      ctx.fail(`Q and K head sizes differ: ${shapeStr([...q])} and ${shapeStr([...k])}`);
    checkCommon(ctx, q, k, v);
    return d;
  }
  return ctx.fail(`Q, K and V must be 3-D or 4-D, got rank ${q.length}`);
}

function checkCommon(ctx: OpContext, q: readonly Dim[], k: readonly Dim[], v: readonly Dim[]): void {
  if (!sameOrSymbolic(q[0]!, k[0]!) || !sameOrSymbolic(q[0]!, v[0]!))
    ctx.fail(`Q, K and V batch sizes differ: ${shapeStr([...q])}, ${shapeStr([...k])}, ${shapeStr([...v])}`);
  const seqAxis = q.length === 3 ? 1 : 2;
  if (!sameOrSymbolic(k[seqAxis]!, v[seqAxis]!))
    ctx.fail(`K and V sequence lengths differ: ${shapeStr([...k])} and ${shapeStr([...v])}`);
}

function checkDivisible(ctx: OpContext, size: Dim, heads: number, what: string, attr: string): void {
  const r = dimMod(size, heads);
  if (typeof r === 'number' && r !== 0) ctx.fail(`${what} ${String(size)} is not divisible by ${attr}=${heads}`);
}

/** False only when both dims are numbers and differ. */
function sameOrSymbolic(a: Dim, b: Dim): boolean {
  return typeof a !== 'number' || typeof b !== 'number' || a === b;
}

function checkHeadGroups(ctx: OpContext, d: AttnDims<Dim>): void {
  if (typeof d.qHeads === 'number' && typeof d.kvHeads === 'number' && d.qHeads % d.kvHeads !== 0) {
    ctx.fail(`q_num_heads ${d.qHeads} is not a multiple of kv_num_heads ${d.kvHeads}`);
  }
}

function checkFloatTypes(ctx: OpContext, q: DType, k: DType, v: DType): void {
  if (!isFloat(q)) ctx.fail(`Q must be a float tensor, got ${q}`);
  if (k !== q || v !== q) ctx.fail(`Q, K and V must share one dtype, got ${q}, ${k}, ${v}`);
}

function inferAttention(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const a = attentionAttrs(ctx);
  const q = need(ctx, inputs, 0),
    k = need(ctx, inputs, 1),
    v = need(ctx, inputs, 2);
  const mask = inputs[3],
    pastK = inputs[4],
    pastV = inputs[5],
    nonpad = inputs[6];
  checkFloatTypes(ctx, q.dtype, k.dtype, v.dtype);
  if (mask && mask.dtype !== 'bool' && mask.dtype !== q.dtype)
    ctx.fail(`attn_mask must be bool or ${q.dtype}, got ${mask.dtype}`);
  if ((pastK === undefined) !== (pastV === undefined)) ctx.fail('past_key and past_value must be given together');
  if (pastK && (pastK.dtype !== q.dtype || pastV!.dtype !== q.dtype))
    ctx.fail(`past_key/past_value must be ${q.dtype}`);
  if (nonpad && ctx.opset < 24) ctx.fail('nonpad_kv_seqlen needs opset 24');
  if (nonpad && nonpad.dtype !== 'int64') ctx.fail(`nonpad_kv_seqlen must be int64, got ${nonpad.dtype}`);
  const n = ctx.node.outputs.length;
  if (!q.shape || !k.shape || !v.shape) {
    const outs: InferOutput[] = [{ dtype: q.dtype }, { dtype: q.dtype }, { dtype: q.dtype }, { dtype: q.dtype }];
    return outs.slice(0, n);
  }
  const d = attnDims(ctx, a, q.shape, k.shape, v.shape);
  checkHeadGroups(ctx, d);
  let total: Dim = d.kvSeq;
  if (pastK?.shape && pastV?.shape) {
    if (pastK.shape.length !== 4 || pastV.shape.length !== 4) ctx.fail('past_key and past_value must be 4-D');
    if (!sameOrSymbolic(pastK.shape[1]!, d.kvHeads) || !sameOrSymbolic(pastK.shape[3]!, d.headSize))
      ctx.fail(`past_key ${shapeStr(pastK.shape)} does not match K`);
    if (!sameOrSymbolic(pastV.shape[1]!, d.kvHeads) || !sameOrSymbolic(pastV.shape[3]!, d.vHeadSize))
      ctx.fail(`past_value ${shapeStr(pastV.shape)} does not match V`);
    total = dimAdd(pastK.shape[2]!, d.kvSeq);
  }
  if (mask?.shape) checkMaskShape(ctx, mask.shape, d, total);
  const y: Dim[] =
    q.shape.length === 3 ? [d.batch, d.qSeq, dimMul(d.qHeads, d.vHeadSize)] : [d.batch, d.qHeads, d.qSeq, d.vHeadSize];
  const outs: InferOutput[] = [
    { dtype: q.dtype, shape: y },
    { dtype: k.dtype, shape: [d.batch, d.kvHeads, total, d.headSize] },
    { dtype: v.dtype, shape: [d.batch, d.kvHeads, total, d.vHeadSize] },
    { dtype: q.dtype, shape: [d.batch, d.qHeads, d.qSeq, total] },
  ];
  return outs.slice(0, n);
}

/** The mask must broadcast to [batch, q_heads, q_seq, ≤total]. */
function checkMaskShape(ctx: OpContext, m: readonly Dim[], d: AttnDims<Dim>, total: Dim): void {
  if (m.length < 2 || m.length > 4) ctx.fail(`attn_mask must be 2-D to 4-D, got ${shapeStr([...m])}`);
  const target: Dim[] = [d.batch, d.qHeads, d.qSeq];
  for (let i = 0; i < m.length - 1; i++) {
    const md = m[i]!,
      td = target[target.length - (m.length - 1) + i]!;
    if (typeof md === 'number' && typeof td === 'number' && md !== 1 && md !== td)
      ctx.fail(
        `attn_mask ${shapeStr([...m])} does not broadcast to [${String(d.batch)},${String(d.qHeads)},${String(d.qSeq)},${String(total)}]`,
      );
  }
  const last = m[m.length - 1]!;
  if (typeof last === 'number' && typeof total === 'number' && last > total)
    ctx.fail(`attn_mask's last dim ${last} exceeds the total sequence length ${total}`);
}

/** A strided read-only view of a Q/K/V tensor as [batch, heads, seq, size] with unit stride on size. */
interface HeadView {
  data: NumArray;
  sb: number;
  sh: number;
  ss: number;
}

function headView(t: Tensor, heads: number, seq: number, size: number): HeadView {
  if (t.rank === 3) return { data: t.nums, sb: seq * heads * size, sh: size, ss: heads * size };
  return { data: t.nums, sb: heads * seq * size, sh: seq * size, ss: size };
}

/** Concatenates past [B,H,P,D] and the new view along the sequence axis into a 4-D [B,H,P+S,D] tensor. */
function concatCache(
  dtype: DType,
  past: Tensor | undefined,
  cur: HeadView,
  b: number,
  h: number,
  s: number,
  dsz: number,
): Tensor {
  const p = past ? past.dims[2]! : 0;
  const total = p + s;
  const out = Tensor.zeros(dtype, [b, h, total, dsz]);
  const o = out.nums;
  const pd = past?.nums;
  for (let bi = 0; bi < b; bi++) {
    for (let hi = 0; hi < h; hi++) {
      const base = (bi * h + hi) * total * dsz;
      if (pd) {
        const src = (bi * h + hi) * p * dsz;
        for (let i = 0; i < p * dsz; i++) o[base + i] = pd[src + i]!;
      }
      for (let si = 0; si < s; si++) {
        const src = bi * cur.sb + hi * cur.sh + si * cur.ss;
        const dst = base + (p + si) * dsz;
        for (let di = 0; di < dsz; di++) o[dst + di] = cur.data[src + di]!;
      }
    }
  }
  return out;
}

/** Concrete geometry of one evaluation. */
interface AttnRun extends AttnDims<number> {
  past: number;
  total: number;
}

function evalGeometry(
  ctx: EvalContext,
  a: AttentionAttrs,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  pastK?: Tensor,
  pastV?: Tensor,
): AttnRun {
  const d = attnDims(ctx, a, q.dims, k.dims, v.dims) as AttnDims<number>;
  if (d.qHeads % d.kvHeads !== 0) ctx.fail(`q_num_heads ${d.qHeads} is not a multiple of kv_num_heads ${d.kvHeads}`);
  if ((pastK === undefined) !== (pastV === undefined)) ctx.fail('past_key and past_value must be given together');
  let past = 0;
  if (pastK && pastV) {
    const pk = pastK.dims,
      pv = pastV.dims;
    if (pk.length !== 4 || pv.length !== 4) ctx.fail('past_key and past_value must be 4-D');
    if (pk[0] !== d.batch || pk[1] !== d.kvHeads || pk[3] !== d.headSize) ctx.fail(`past_key [${pk}] does not match K`);
    if (pv[0] !== d.batch || pv[1] !== d.kvHeads || pv[3] !== d.vHeadSize || pv[2] !== pk[2])
      ctx.fail(`past_value [${pv}] does not match V or past_key`);
    past = pk[2]!;
  }
  return { ...d, past, total: past + d.kvSeq };
}

/** attn_mask broadcast to [batch, q_heads, q_seq, len]: strides are 0 along broadcast axes; len may be < total. */
interface MaskView {
  data: NumArray;
  isBool: boolean;
  sb: number;
  sh: number;
  si: number;
  len: number;
}

function maskView(ctx: EvalContext, m: Tensor, r: AttnRun): MaskView {
  if (m.rank < 2 || m.rank > 4) ctx.fail(`attn_mask must be 2-D to 4-D, got [${m.dims}]`);
  const dims4 = [1, 1, 1, 1];
  for (let i = 0; i < m.rank; i++) dims4[4 - m.rank + i] = m.dims[i]!;
  const target = [r.batch, r.qHeads, r.qSeq];
  for (let i = 0; i < 3; i++) {
    if (dims4[i] !== 1 && dims4[i] !== target[i])
      ctx.fail(`attn_mask [${m.dims}] does not broadcast to [${target},${r.total}]`);
  }
  const len = dims4[3]!;
  if (len > r.total) ctx.fail(`attn_mask's last dim ${len} exceeds the total sequence length ${r.total}`);
  const si = len,
    sh = dims4[2]! * si,
    sb = dims4[1]! * sh;
  return {
    data: m.nums,
    isBool: m.dtype === 'bool',
    sb: dims4[0] === 1 ? 0 : sb,
    sh: dims4[1] === 1 ? 0 : sh,
    si: dims4[2] === 1 ? 0 : si,
    len,
  };
}

function evalAttention(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const a = attentionAttrs(ctx);
  const q = need(ctx, inputs, 0),
    k = need(ctx, inputs, 1),
    v = need(ctx, inputs, 2);
  const mask = inputs[3],
    pastK = inputs[4],
    pastV = inputs[5],
    nonpad = inputs[6];
  checkFloatTypes(ctx, q.dtype, k.dtype, v.dtype);
  if (mask && mask.dtype !== 'bool' && mask.dtype !== q.dtype)
    ctx.fail(`attn_mask must be bool or ${q.dtype}, got ${mask.dtype}`);
  const r = evalGeometry(ctx, a, q, k, v, pastK, pastV);
  const qv = headView(q, r.qHeads, r.qSeq, r.headSize);
  const presentK = concatCache(
    k.dtype,
    pastK,
    headView(k, r.kvHeads, r.kvSeq, r.headSize),
    r.batch,
    r.kvHeads,
    r.kvSeq,
    r.headSize,
  );
  const presentV = concatCache(
    v.dtype,
    pastV,
    headView(v, r.kvHeads, r.kvSeq, r.vHeadSize),
    r.batch,
    r.kvHeads,
    r.kvSeq,
    r.vHeadSize,
  );
  const mv = mask ? maskView(ctx, mask, r) : undefined;
  const lens = nonpad ? nonpadLengths(ctx, nonpad, r) : undefined;
  const scale = a.scale ?? 1 / Math.sqrt(r.headSize);
  const wantQk = ctx.node.outputs.length > 3 && ctx.node.outputs[3] !== '';
  const y = new Float64Array(r.batch * r.qHeads * r.qSeq * r.vHeadSize);
  const qk = wantQk ? new Float64Array(r.batch * r.qHeads * r.qSeq * r.total) : undefined;
  const scores = new Float64Array(r.total);
  const bias = new Float64Array(r.total);
  const reps = r.qHeads / r.kvHeads;
  const kd = presentK.nums,
    vd = presentV.nums;
  for (let b = 0; b < r.batch; b++) {
    // causal frontier: key j is visible from query row i iff j <= i + offset
    const offset = pastK ? r.past : lens ? lens[b]! - r.qSeq : 0;
    for (let h = 0; h < r.qHeads; h++) {
      const kh = Math.floor(h / reps);
      const kBase = (b * r.kvHeads + kh) * r.total * r.headSize;
      const vBase = (b * r.kvHeads + kh) * r.total * r.vHeadSize;
      for (let i = 0; i < r.qSeq; i++) {
        const qOff = b * qv.sb + h * qv.sh + i * qv.ss;
        rowBias(bias, mv, b, h, i, a.isCausal ? i + offset : Infinity, lens ? lens[b]! : r.total);
        for (let j = 0; j < r.total; j++) {
          let s = 0;
          const kOff = kBase + j * r.headSize;
          for (let e = 0; e < r.headSize; e++) s += qv.data[qOff + e]! * kd[kOff + e]!;
          s *= scale;
          if (a.softcap > 0) s = a.softcap * Math.tanh(s / a.softcap);
          scores[j] = s;
        }
        const row = ((b * r.qHeads + h) * r.qSeq + i) * r.total;
        if (qk && a.qkMode <= 1) qk.set(scores, row);
        for (let j = 0; j < r.total; j++) scores[j] = scores[j]! + bias[j]!;
        if (qk && a.qkMode === 2) qk.set(scores, row);
        softmaxRow(scores);
        if (qk && a.qkMode === 3) qk.set(scores, row);
        const yOff = ((b * r.qHeads + h) * r.qSeq + i) * r.vHeadSize;
        for (let j = 0; j < r.total; j++) {
          const p = scores[j]!;
          if (p === 0) continue;
          const vOff = vBase + j * r.vHeadSize;
          for (let e = 0; e < r.vHeadSize; e++) y[yOff + e] += p * vd[vOff + e]!;
        }
      }
    }
  }
  const outs = [
    q.rank === 3
      ? Tensor.fromNumbers(q.dtype, [r.batch, r.qSeq, r.qHeads * r.vHeadSize], toSeqMajor(y, r))
      : Tensor.fromNumbers(q.dtype, [r.batch, r.qHeads, r.qSeq, r.vHeadSize], y),
    presentK,
    presentV,
    Tensor.fromNumbers(
      q.dtype,
      [r.batch, r.qHeads, r.qSeq, r.total],
      qk ?? new Float64Array(r.batch * r.qHeads * r.qSeq * r.total),
    ),
  ];
  return outs.slice(0, ctx.node.outputs.length);
}

/** Fills one row of the additive bias: attention mask (padded with -inf past its end), causal frontier, key padding. */
function rowBias(
  bias: Float64Array,
  mv: MaskView | undefined,
  b: number,
  h: number,
  i: number,
  lastVisible: number,
  validKeys: number,
): void {
  const n = bias.length;
  for (let j = 0; j < n; j++) bias[j] = j <= lastVisible && j < validKeys ? 0 : -Infinity;
  if (!mv) return;
  const base = b * mv.sb + h * mv.sh + i * mv.si;
  for (let j = 0; j < n; j++) {
    if (j >= mv.len) bias[j] = -Infinity;
    else if (mv.isBool) {
      if (mv.data[base + j] === 0) bias[j] = -Infinity;
    } else bias[j] = bias[j]! + mv.data[base + j]!;
  }
}

/** Softmax in place; a row with no finite maximum (fully masked) becomes all zeros. */
function softmaxRow(x: Float64Array): void {
  let max = -Infinity;
  for (let j = 0; j < x.length; j++) if (x[j]! > max) max = x[j]!;
  if (max === -Infinity) {
    x.fill(0);
    return;
  }
  let sum = 0;
  for (let j = 0; j < x.length; j++) {
    const e = Math.exp(x[j]! - max);
    x[j] = e;
    sum += e;
  }
  for (let j = 0; j < x.length; j++) x[j] = x[j]! / sum;
}

function nonpadLengths(ctx: EvalContext, t: Tensor, r: AttnRun): number[] {
  if (ctx.opset < 24) ctx.fail('nonpad_kv_seqlen needs opset 24');
  if (t.size !== r.batch) ctx.fail(`nonpad_kv_seqlen must have ${r.batch} elements, got ${t.size}`);
  const lens = Array.from(t.nums, Number);
  for (const n of lens) if (n < 0 || n > r.total) ctx.fail(`nonpad_kv_seqlen ${n} is outside [0, ${r.total}]`);
  return lens;
}

/** [B,H,S,Dv] → [B,S,H*Dv]. */
function toSeqMajor(y: Float64Array, r: AttnRun): Float64Array {
  const out = new Float64Array(y.length);
  const dv = r.vHeadSize;
  for (let b = 0; b < r.batch; b++) {
    for (let h = 0; h < r.qHeads; h++) {
      for (let s = 0; s < r.qSeq; s++) {
        const src = ((b * r.qHeads + h) * r.qSeq + s) * dv;
        const dst = ((b * r.qSeq + s) * r.qHeads + h) * dv;
        for (let e = 0; e < dv; e++) out[dst + e] = y[src + e]!;
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// RotaryEmbedding
// ---------------------------------------------------------------------------------------------------------------

interface RotaryAttrs {
  interleaved: boolean;
  rotaryDim: number;
  numHeads: number;
}

function rotaryAttrs(ctx: OpContext): RotaryAttrs {
  return {
    interleaved: ctx.int('interleaved', 0) !== 0,
    rotaryDim: ctx.int('rotary_embedding_dim', 0),
    numHeads: ctx.int('num_heads', 0),
  };
}

function inferRotary(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const a = rotaryAttrs(ctx);
  const x = need(ctx, inputs, 0),
    cos = need(ctx, inputs, 1),
    sin = need(ctx, inputs, 2),
    pos = inputs[3];
  if (!isFloat(x.dtype)) ctx.fail(`input must be a float tensor, got ${x.dtype}`);
  if (cos.dtype !== x.dtype || sin.dtype !== x.dtype)
    ctx.fail(`cos_cache and sin_cache must be ${x.dtype}, got ${cos.dtype} and ${sin.dtype}`);
  if (pos && pos.dtype !== 'int64') ctx.fail(`position_ids must be int64, got ${pos.dtype}`);
  if (x.shape) {
    if (x.shape.length !== 3 && x.shape.length !== 4) ctx.fail(`input must be 3-D or 4-D, got ${shapeStr(x.shape)}`);
    if (x.shape.length === 3) {
      if (a.numHeads <= 0) ctx.fail('3-D input needs the num_heads attribute');
      checkDivisible(ctx, x.shape[2]!, a.numHeads, 'hidden size', 'num_heads');
    }
  }
  const cacheRank = pos ? 2 : 3;
  for (const c of [cos, sin])
    if (c.shape && c.shape.length !== cacheRank)
      ctx.fail(
        `cos_cache/sin_cache must be ${cacheRank}-D ${pos ? 'with' : 'without'} position_ids, got ${shapeStr(c.shape)}`,
      );
  return [{ dtype: x.dtype, shape: x.shape }];
}

function evalRotary(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const a = rotaryAttrs(ctx);
  const x = need(ctx, inputs, 0),
    cos = need(ctx, inputs, 1),
    sin = need(ctx, inputs, 2),
    pos = inputs[3];
  if (x.rank !== 3 && x.rank !== 4) ctx.fail(`input must be 3-D or 4-D, got [${x.dims}]`);
  const batch = x.dims[0]!;
  let heads: number, seq: number, size: number;
  if (x.rank === 4) [, heads, seq, size] = x.dims as [number, number, number, number];
  else {
    if (a.numHeads <= 0) ctx.fail('3-D input needs the num_heads attribute');
    if (x.dims[2]! % a.numHeads !== 0) ctx.fail(`hidden size ${x.dims[2]} is not divisible by num_heads=${a.numHeads}`);
    heads = a.numHeads;
    seq = x.dims[1]!;
    size = x.dims[2]! / heads;
  }
  const rot = a.rotaryDim === 0 ? size : a.rotaryDim;
  if (rot % 2 !== 0 || rot > size)
    ctx.fail(`rotary_embedding_dim ${rot} must be even and at most the head size ${size}`);
  const half = rot / 2;
  const rowOf = cacheRows(ctx, cos, sin, pos, batch, seq, half);
  const view = headView(x, heads, seq, size);
  const xd = x.nums,
    cd = cos.nums,
    sd = sin.nums;
  const out = new Float64Array(x.size);
  out.set(xd);
  for (let b = 0; b < batch; b++) {
    for (let s = 0; s < seq; s++) {
      const c0 = rowOf[b * seq + s]! * half;
      for (let h = 0; h < heads; h++) {
        const base = b * view.sb + h * view.sh + s * view.ss;
        for (let d = 0; d < half; d++) {
          const i1 = a.interleaved ? base + 2 * d : base + d;
          const i2 = a.interleaved ? i1 + 1 : i1 + half;
          const x1 = xd[i1]!,
            x2 = xd[i2]!,
            c = cd[c0 + d]!,
            sn = sd[c0 + d]!;
          out[i1] = c * x1 - sn * x2;
          out[i2] = sn * x1 + c * x2;
        }
      }
    }
  }
  return [Tensor.fromNumbers(x.dtype, x.dims, out)];
}

/** For each (batch, seq) position, the row of the cos/sin caches to use; checks the caches' shapes. */
function cacheRows(
  ctx: EvalContext,
  cos: Tensor,
  sin: Tensor,
  pos: Tensor | undefined,
  batch: number,
  seq: number,
  half: number,
): number[] {
  if (cos.dims.join(',') !== sin.dims.join(','))
    ctx.fail(`cos_cache [${cos.dims}] and sin_cache [${sin.dims}] differ in shape`);
  if (cos.dims[cos.rank - 1] !== half)
    ctx.fail(`cos/sin caches' last dim must be rotary_embedding_dim/2 = ${half}, got [${cos.dims}]`);
  const rows = new Array<number>(batch * seq);
  if (pos) {
    if (cos.rank !== 2) ctx.fail(`with position_ids the caches must be 2-D, got [${cos.dims}]`);
    if (pos.size !== batch * seq || pos.rank !== 2)
      ctx.fail(`position_ids must be [${batch},${seq}], got [${pos.dims}]`);
    const maxPos = cos.dims[0]!;
    for (let i = 0; i < rows.length; i++) {
      const p = pos.nums[i]!;
      if (p < 0 || p >= maxPos) ctx.fail(`position id ${p} is outside the cache of ${maxPos} positions`);
      rows[i] = p;
    }
  } else {
    if (cos.rank !== 3 || cos.dims[0] !== batch || cos.dims[1] !== seq)
      ctx.fail(`without position_ids the caches must be [${batch},${seq},${half}], got [${cos.dims}]`);
    for (let i = 0; i < rows.length; i++) rows[i] = i;
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------------------------
// FlexAttention (ai.onnx.preview): scaled dot-product attention on 4-D inputs with optional score/mask/prob graphs
// ---------------------------------------------------------------------------------------------------------------

function inferFlex(ctx: InferContext, inputs: (InferInput | undefined)[]): InferOutput[] {
  const q = need(ctx, inputs, 0),
    k = need(ctx, inputs, 1),
    v = need(ctx, inputs, 2);
  checkFloatTypes(ctx, q.dtype, k.dtype, v.dtype);
  if (!q.shape || !k.shape || !v.shape) return [{ dtype: q.dtype }];
  if (q.shape.length !== 4 || k.shape.length !== 4 || v.shape.length !== 4)
    ctx.fail(`Q, K and V must be 4-D, got ${shapeStr(q.shape)}, ${shapeStr(k.shape)}, ${shapeStr(v.shape)}`);
  const d = attnDims(ctx, { isCausal: false, softcap: 0, qkMode: 0 }, q.shape, k.shape, v.shape);
  checkHeadGroups(ctx, d);
  return [{ dtype: q.dtype, shape: [d.batch, d.qHeads, d.qSeq, d.vHeadSize] }];
}

function evalFlex(ctx: EvalContext, inputs: (Tensor | undefined)[]): Tensor[] {
  const q = need(ctx, inputs, 0),
    k = need(ctx, inputs, 1),
    v = need(ctx, inputs, 2);
  checkFloatTypes(ctx, q.dtype, k.dtype, v.dtype);
  if (q.rank !== 4) ctx.fail(`Q, K and V must be 4-D, got [${q.dims}]`);
  const r = evalGeometry(ctx, { isCausal: false, softcap: 0, qkMode: 0 }, q, k, v);
  const scale = ctx.has('scale') ? ctx.float('scale') : 1 / Math.sqrt(r.headSize);
  const rows = r.batch * r.qHeads * r.qSeq;
  const dims = [r.batch, r.qHeads, r.qSeq, r.kvSeq];
  let scores = flexScores(q, k, r, scale);
  scores = applyMod(ctx, 'score_mod', scores, q.dtype, dims);
  scores = applyMod(ctx, 'mask_mod', scores, q.dtype, dims);
  const probs = new Float64Array(scores.length);
  for (let row = 0; row < rows; row++) {
    const x = probs.subarray(row * r.kvSeq, (row + 1) * r.kvSeq);
    x.set(scores.subarray(row * r.kvSeq, (row + 1) * r.kvSeq));
    softmaxRow(x);
  }
  return [
    Tensor.fromNumbers(
      q.dtype,
      [r.batch, r.qHeads, r.qSeq, r.vHeadSize],
      flexOutput(applyMod(ctx, 'prob_mod', probs, q.dtype, dims), v, r),
    ),
  ];
}

/** Q·Kᵀ·scale for every (batch, q head, query, key), with each kv head serving a contiguous group of q heads. */
function flexScores(q: Tensor, k: Tensor, r: AttnRun, scale: number): Float64Array {
  const reps = r.qHeads / r.kvHeads;
  const qd = q.nums,
    kd = k.nums;
  const scores = new Float64Array(r.batch * r.qHeads * r.qSeq * r.kvSeq);
  for (let b = 0; b < r.batch; b++) {
    for (let h = 0; h < r.qHeads; h++) {
      const kBase = (b * r.kvHeads + Math.floor(h / reps)) * r.kvSeq * r.headSize;
      for (let i = 0; i < r.qSeq; i++) {
        const row = (b * r.qHeads + h) * r.qSeq + i;
        const qOff = row * r.headSize;
        for (let j = 0; j < r.kvSeq; j++) {
          let s = 0;
          for (let e = 0; e < r.headSize; e++) s += qd[qOff + e]! * kd[kBase + j * r.headSize + e]!;
          scores[row * r.kvSeq + j] = s * scale;
        }
      }
    }
  }
  return scores;
}

/** probs · V per (batch, q head). */
function flexOutput(probs: Float64Array, v: Tensor, r: AttnRun): Float64Array {
  const reps = r.qHeads / r.kvHeads;
  const vd = v.nums;
  const y = new Float64Array(r.batch * r.qHeads * r.qSeq * r.vHeadSize);
  for (let b = 0; b < r.batch; b++) {
    for (let h = 0; h < r.qHeads; h++) {
      const vBase = (b * r.kvHeads + Math.floor(h / reps)) * r.kvSeq * r.vHeadSize;
      for (let i = 0; i < r.qSeq; i++) {
        const row = (b * r.qHeads + h) * r.qSeq + i;
        for (let j = 0; j < r.kvSeq; j++) {
          const p = probs[row * r.kvSeq + j]!;
          for (let e = 0; e < r.vHeadSize; e++) y[row * r.vHeadSize + e] += p * vd[vBase + j * r.vHeadSize + e]!;
        }
      }
    }
  }
  return y;
}

/**
 * Applies one of FlexAttention's graph attributes to the [B, H, L, S] scores or probabilities (as a `dtype`
 * tensor of `dims`). Running a graph on a given input needs subgraph inputs in EvalContext.runSubgraph, which
 * planc's evaluator does not offer yet.
 */
function applyMod(ctx: EvalContext, name: string, x: Float64Array, dtype: DType, dims: number[]): Float64Array {
  if (!ctx.has(name)) return x;
  if (x.length !== dims.reduce((a, c) => a * c, 1))
    ctx.fail(`internal: ${name} input of ${x.length} elements for [${dims}] ${dtype}`);
  const out = ctx.runSubgraph(ctx.graph(name), [Tensor.fromNumbers(dtype, dims, x)])[0];
  if (!out || out.size !== x.length) ctx.fail(`${name} must return one tensor of dims [${dims}]`);
  return Float64Array.from(out.nums);
}

export const ATTENTION_OPS: OpHandler[] = [
  { op: 'Attention', since: 23, infer: inferAttention, eval: evalAttention },
  { op: 'RotaryEmbedding', since: 23, infer: inferRotary, eval: evalRotary },
  ...LINEAR_ATTENTION_OPS,
  { op: 'FlexAttention', domain: 'ai.onnx.preview', infer: inferFlex, eval: evalFlex },
];
