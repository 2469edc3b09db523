// planc.Attention (scaled dot-product attention over [B,H,C,D] keys/values) and planc.CacheWrite (append to a KV cache).
import { MASK_KINDS } from '../../compiler/kernel-enums.ts';
import { dimEq, dimStr, type Dim } from '../../compiler/symbolic.ts';
import { Tensor } from '../../compiler/tensor.ts';
import type { InferInput, OpContext, OpHandler } from './types.ts';
import { need } from './util.ts';

/** mask_kind values: how planc.Attention applies its mask input (codes from compiler/kernel-enums.ts). */
export const MASK_KIND = {
  NONE: MASK_KINDS.indexOf('none'),
  ADD: MASK_KINDS.indexOf('add'),
  BOOL_KEEP: MASK_KINDS.indexOf('bool_keep'),
  BOOL_DROP: MASK_KINDS.indexOf('bool_drop'),
} as const;

/** [B, H, Sq, D] of the query: from [B,H,Sq,D] (q_layout 0) or [B, Sq, H*D] (q_layout 1). */
function queryDims(ctx: OpContext, q: Dim[], heads: number, layout: number): Dim[] {
  if (layout === 0) {
    if (q.length !== 4) ctx.fail(`q_layout 0 wants Q of rank 4 [B,H,Sq,D], got rank ${q.length}`);
    return q;
  }
  if (q.length !== 3) ctx.fail(`q_layout 1 wants Q of rank 3 [B,Sq,H*D], got rank ${q.length}`);
  const hd = q[2]!;
  if (typeof hd !== 'number' || hd % heads !== 0)
    ctx.fail(`Q's last dim ${String(hd)} is not a multiple of num_heads ${heads}`);
  return [q[0]!, heads, q[1]!, (hd as number) / heads];
}

/** Fails unless K/V are [B, H, C, D] agreeing with the query. */
function checkKV(ctx: OpContext, what: string, kv: Dim[] | undefined, qd: Dim[]): void {
  if (!kv) return;
  if (kv.length !== 4) ctx.fail(`${what} must be rank 4 [B,H,C,D], got rank ${kv.length}`);
  for (const a of [0, 1, 3]) {
    if (!dimEq(kv[a]!, qd[a]!)) ctx.fail(`${what} dim ${a} does not match the query's`);
  }
}

const ATTENTION: OpHandler = {
  op: 'Attention',
  domain: 'planc',
  infer(ctx, inputs) {
    const q = need(ctx, inputs, 0);
    const k = need(ctx, inputs, 1);
    const v = need(ctx, inputs, 2);
    if (q.dtype !== 'float32' || k.dtype !== 'float32' || v.dtype !== 'float32') ctx.fail('Q, K, V must be float32');
    const kind = ctx.int('mask_kind', 0);
    if (kind < 0 || kind > 3) ctx.fail(`mask_kind ${kind} is not 0..3`);
    if ((kind === 0) !== !inputs[3])
      ctx.fail(`mask_kind ${kind} ${kind === 0 ? 'takes no mask' : 'needs a mask input'}`);
    if (inputs[4] && inputs[4].dtype !== 'int64') ctx.fail('kv_len must be an int64 scalar');
    const past = inputs[5];
    if (past && past.dtype !== 'int64') ctx.fail('past_lens must be int64 [B]');
    if (!q.shape) return [{ dtype: 'float32' }];
    const qd = queryDims(ctx, q.shape, ctx.int('num_heads'), ctx.int('q_layout', 0));
    checkKV(ctx, 'K', k.shape, qd);
    checkKV(ctx, 'V', v.shape, qd);
    checkPastLens(ctx, past?.shape, qd[0]!);
    return [{ dtype: 'float32', shape: [...q.shape] }];
  },
  eval(ctx, inputs) {
    const [q, k, v, mask, kvLen, pastLens] = inputs;
    const heads = ctx.int('num_heads');
    const layout = ctx.int('q_layout', 0);
    const [B, H, Sq, D] = queryDims(ctx, need(ctx, inputs, 0).dims as number[], heads, layout) as number[] as [
      number,
      number,
      number,
      number,
    ];
    const C = k!.dims[2]!;
    const L = kvLen ? kvLen.nums[0]! : C;
    if (!(L >= 1 && L <= C)) ctx.fail(`kv_len ${L} is outside [1, ${C}]`);
    const kind = ctx.int('mask_kind', 0);
    const causal = ctx.int('is_causal', 0) === 1;
    const scale = ctx.float('scale', 1);
    const md = mask ? padTo4(mask.dims) : [1, 1, 1, 1];
    if (mask && md[3] !== 1 && md[3] !== L) ctx.fail(`mask's last dim ${md[3]} is neither 1 nor kv_len ${L}`);
    // Keys batch row b attends: past_lens[b] + Sq (each in 1..kv_len), or kv_len for every row.
    const past =
      pastLens && pastRows(ctx, pastLens, B, 'past_lens[b] + Sq', (p) => p + Sq >= 1 && p + Sq <= L, `1..kv_len ${L}`);
    const lenOf = (b: number) => (past ? past[b]! + Sq : L);
    const qAt = (b: number, h: number, i: number, d: number) =>
      layout === 0 ? ((b * H + h) * Sq + i) * D + d : (b * Sq + i) * H * D + h * D + d;
    const kvAt = (b: number, h: number, j: number) => ((b * H + h) * C + j) * D;
    const qn = q!.nums,
      kn = k!.nums,
      vn = v!.nums,
      mn = mask?.nums;
    const y = new Float32Array(q!.size);
    const s = new Float64Array(L);
    for (let b = 0; b < B; b++)
      for (let h = 0; h < H; h++)
        for (let i = 0; i < Sq; i++) {
          const Lb = lenOf(b);
          let max = -Infinity;
          for (let j = 0; j < Lb; j++) {
            let dot = 0;
            const kb = kvAt(b, h, j);
            for (let d = 0; d < D; d++) dot += qn[qAt(b, h, i, d)]! * kn[kb + d]!;
            let x = dot * scale;
            if (mn) {
              const m =
                mn[
                  (((md[0] === 1 ? 0 : b) * md[1]! + (md[1] === 1 ? 0 : h)) * md[2]! + (md[2] === 1 ? 0 : i)) * md[3]! +
                    (md[3] === 1 ? 0 : j)
                ]!;
              if (kind === MASK_KIND.ADD) x += m;
              else if ((kind === MASK_KIND.BOOL_KEEP) === (m === 0)) x = -Infinity;
            }
            if (causal && j > Lb - Sq + i) x = -Infinity;
            s[j] = x;
            if (x > max) max = x;
          }
          let sum = 0;
          for (let j = 0; j < Lb; j++) {
            s[j] = max === -Infinity ? 0 : Math.exp(s[j]! - max);
            sum += s[j]!;
          }
          if (sum === 0) sum = 1; // a fully masked row gives zeros, as ONNX Attention does
          for (let d = 0; d < D; d++) {
            let acc = 0;
            for (let j = 0; j < Lb; j++) acc += s[j]! * vn[kvAt(b, h, j) + d]!;
            y[qAt(b, h, i, d)] = acc / sum;
          }
        }
    return [new Tensor('float32', q!.dims, y)];
  },
};

/** Fails unless a past_lens input is [B] (an unknown shape passes). */
function checkPastLens(ctx: OpContext, shape: Dim[] | undefined, batch: Dim): void {
  if (!shape) return;
  if (shape.length !== 1 || !dimEq(shape[0]!, batch))
    ctx.fail(`past_lens must be [B] = [${dimStr(batch)}], got [${shape.map(dimStr).join(', ')}]`);
}

/** The values of a past_lens input: int64 [B], every one passing `ok` (what and range name the bound in the message). */
function pastRows(
  ctx: OpContext,
  t: Tensor,
  batch: number,
  what: string,
  ok: (p: number) => boolean,
  range: string,
): number[] {
  if (t.dtype !== 'int64') ctx.fail(`past_lens must be int64, got ${t.dtype}`);
  if (t.dims.length !== 1 || t.dims[0] !== batch)
    ctx.fail(`past_lens must be [${batch}] (B), got [${t.dims.join(', ')}]`);
  const rows = Array.from(t.nums, Number);
  rows.forEach((p, b) => {
    if (!(p >= 0) || !ok(p)) ctx.fail(`past_lens[${b}] = ${p}: ${what} must be in ${range}`);
  });
  return rows;
}

function padTo4(dims: readonly number[]): number[] {
  return [...new Array<number>(Math.max(0, 4 - dims.length)).fill(1), ...dims];
}

/** [B, H, Sn, D] of a cache write's new rows: [B,H,Sn,D] (new_layout 0) or [B,Sn,H*D] (new_layout 1). */
function newRowDims(ctx: OpContext, n: Dim[], heads: number, layout: number): Dim[] {
  if (layout === 0) {
    if (n.length !== 4) ctx.fail(`new_layout 0 wants rank 4 [B,H,Sn,D], got rank ${n.length}`);
    return n;
  }
  if (n.length !== 3) ctx.fail(`new_layout 1 wants rank 3 [B,Sn,H*D], got rank ${n.length}`);
  const hd = n[2]!;
  if (typeof hd !== 'number' || hd % heads !== 0)
    ctx.fail(`new rows' last dim ${String(hd)} is not a multiple of num_heads ${heads}`);
  return [n[0]!, heads, n[1]!, (hd as number) / heads];
}

const CACHE_WRITE: OpHandler = {
  op: 'CacheWrite',
  domain: 'planc',
  infer(ctx, inputs) {
    const cache = need(ctx, inputs, 0);
    const rows = need(ctx, inputs, 1);
    const pos: InferInput = need(ctx, inputs, 2);
    if (cache.dtype !== 'float32' || rows.dtype !== 'float32') ctx.fail('cache and rows must be float32');
    if (pos.dtype !== 'int64') ctx.fail('pos must be an int64 scalar');
    const past = inputs[3];
    if (past && past.dtype !== 'int64') ctx.fail('past_lens must be int64 [B]');
    if (cache.shape && rows.shape) {
      if (cache.shape.length !== 4) ctx.fail(`cache must be rank 4 [B,H,C,D], got rank ${cache.shape.length}`);
      const nd = newRowDims(ctx, rows.shape, ctx.int('num_heads', Number(cache.shape[1])), ctx.int('new_layout', 0));
      for (const a of [0, 1, 3])
        if (!dimEq(nd[a]!, cache.shape[a]!)) ctx.fail(`new rows' dim ${a} differs from the cache's`);
    }
    if (cache.shape) checkPastLens(ctx, past?.shape, cache.shape[0]!);
    return [{ dtype: 'float32', shape: cache.shape && [...cache.shape] }];
  },
  eval(ctx, inputs) {
    const cache = need(ctx, inputs, 0);
    const rows = need(ctx, inputs, 1);
    const pos = need(ctx, inputs, 2).nums[0]!;
    const [B, H, C, D] = cache.dims as [number, number, number, number];
    const layout = ctx.int('new_layout', 0);
    const Sn = layout === 0 ? rows.dims[2]! : rows.dims[1]!;
    // past_lens: batch row b's rows go to past_lens[b].. (pos unused), each within the capacity.
    const past =
      inputs[3] &&
      pastRows(
        ctx,
        inputs[3],
        B,
        'its first row written',
        (p) => p + Sn <= C,
        `0..${C - Sn} (capacity ${C}, ${Sn} rows)`,
      );
    if (!past && !(pos >= 0 && pos + Sn <= C))
      ctx.fail(`writing ${Sn} rows at ${pos} overflows the cache capacity ${C}`);
    const out = new Float32Array(cache.nums);
    const src = rows.nums;
    for (let b = 0; b < B; b++)
      for (let h = 0; h < H; h++)
        for (let t = 0; t < Sn; t++)
          for (let d = 0; d < D; d++) {
            const from = layout === 0 ? ((b * H + h) * Sn + t) * D + d : (b * Sn + t) * H * D + h * D + d;
            out[((b * H + h) * C + (past ? past[b]! : pos) + t) * D + d] = src[from]!;
          }
    return [new Tensor('float32', cache.dims, out)];
  },
};

export const PLANC_ATTENTION_OPS: OpHandler[] = [ATTENTION, CACHE_WRITE];
