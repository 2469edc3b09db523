// planc CUDA kernel templates, part 6: attention with the in-place KV cache (a warp per query row, online softmax,
// no score matrix), cache_write, and project_topk (fused bias + online softmax + top-k over vocabulary shards).
namespace planc {

// attention: Q, K, V, mask? -> Y; iargs num_heads H, kv_len L (q_layout, mask_kind, is_causal: QL, MK, CAUSAL); farg scale.
// K, V are [B, H, C, D] (rows >= L ignored). QL 0: Q, Y [B, H, Sq, D]; QL 1: [B, Sq, H*D]. Lane holds D/32 elements
// (element t*32 + lane, so every step reads whole 128-byte rows). MK: 0 none, 1 additive float, 2 bool attend,
// 3 bool masked. A fully masked row gives zeros (ONNX Attention), a NaN or +inf score NaN.
// PAST: input 4 is past_lens, int64 [B] (its dtype checked by the rule): batch row b attends L_b = past_lens[b] + Sq
// keys (causal: j <= past_lens[b] + i), each L_b in 1..L (else kErrKvLen; dims not [B]: kErrShape); L still bounds the
// mask's last dim. A row's loop runs over its own keys only, as it would alone with kv_len L_b.
template <int D, int QL, int MK, bool CAUSAL, bool PAST = false>
__device__ void attention(const KArgs& a) {
  static_assert(D % 32 == 0 && D <= 512, "head dim must be a multiple of 32, at most 512");
  constexpr int PER = D / 32;
  const Tensor &tq = a.in[0], &tk = a.in[1], &tv = a.in[2], &tm = a.in[3], &ty = a.out[0];
  const int64_t H = a.iargs[attention_args::kNumHeads], L = a.iargs[attention_args::kKvLen];
  const int64_t B = tk.dims[0], C = tk.dims[2];
  const int64_t Sq = QL == 0 ? tq.dims[2] : tq.dims[1];
  if (L < 1 || L > C) {
    if (threadIdx.x == 0 && blockIdx.x == 0) fail(a, kErrKvLen);
    return;
  }
  const Tensor& tp = a.in[4];
  if (PAST && (a.n_in < 5 || tp.rank != 1 || tp.dims[0] != B || (B > 0 && !tp.data))) {
    if (threadIdx.x == 0 && blockIdx.x == 0) fail(a, kErrShape);
    return;
  }
  const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (row >= B * H * Sq) return;
  const int64_t i = row % Sq, bh = row / Sq, h = bh % H, b = bh / H;
  int64_t Lb = L;  // keys this batch row attends
  if (PAST) {
    const int64_t p = ((const int64_t*)tp.data)[b];
    if (p < 0 || p > L - Sq) {  // the whole warp leaves (same b); the run fails
      if (lane == 0) fail(a, kErrKvLen);
      return;
    }
    Lb = p + Sq;
  }
  const int64_t qoff = QL == 0 ? row * D : (b * Sq + i) * H * D + h * D;
  const float* q = (const float*)tq.data + qoff;
  const float* Kp = (const float*)tk.data + bh * C * D;
  const float* Vp = (const float*)tv.data + bh * C * D;
  const float scale = (float)a.fargs[attention_args::kScale];
  float qv[PER], acc[PER];
#pragma unroll
  for (int t = 0; t < PER; t++) { qv[t] = q[t * 32 + lane] * scale; acc[t] = 0.f; }
  // Mask strides (rank 4, broadcast dims of size 1).
  const void* mp = MK ? tm.data : nullptr;
  int64_t moff = 0, mstep = 0;
  if (MK) {
    const int64_t mL = tm.dims[3], mS = tm.dims[2], mH = tm.dims[1], mB = tm.dims[0];
    moff = ((mB == 1 ? 0 : b) * mH + (mH == 1 ? 0 : h)) * mS * mL + (mS == 1 ? 0 : i) * mL;
    mstep = mL == 1 ? 0 : 1;
  }
  const int64_t jend = CAUSAL ? min(Lb, Lb - Sq + i + 1) : Lb;
  float mx = -INFINITY, l = 0.f;
  for (int64_t j = 0; j < jend; j++) {
    const float* kr = Kp + j * D;
    float s = 0.f;
#pragma unroll
    for (int t = 0; t < PER; t++) s = fmaf(qv[t], kr[t * 32 + lane], s);
    s = warp_sum(s);
    if (MK == kMaskAdd) s += ((const float*)mp)[moff + j * mstep];
    if (MK == kMaskBoolKeep && !((const uint8_t*)mp)[moff + j * mstep]) s = -INFINITY;
    if (MK == kMaskBoolDrop && ((const uint8_t*)mp)[moff + j * mstep]) s = -INFINITY;
    if (s == -INFINITY) continue;
    const float mnew = fmaxf(mx, s);
    const float c = __expf(mx - mnew), p = __expf(s - mnew);
    l = l * c + p;
    const float* vr = Vp + j * D;
#pragma unroll
    for (int t = 0; t < PER; t++) acc[t] = fmaf(p, vr[t * 32 + lane], acc[t] * c);
    mx = mnew;
  }
  float* y = (float*)ty.data + qoff;
  // A fully masked row (l == 0) gives zeros, as ONNX Attention does; a NaN or +inf score made l NaN, which spreads.
  const float inv = 1.0f / l;
#pragma unroll
  for (int t = 0; t < PER; t++) y[t * 32 + lane] = l == 0.f ? 0.f : acc[t] * inv;
}

// cache_write: Cache [B, H, C, D], New (NL 0: [B, H, Sn, D]; NL 1: [B, Sn, H*D]) -> Y (Cache's dims; usually the
// same buffer). iargs pos, num_heads H (new_layout: NL). Rows pos..pos+Sn-1 get New; when Y is another buffer the other rows are
// copied from Cache (each element written once, so no ordering between threads is needed).
// PAST: input 2 is past_lens, int64 [B]: batch row b's rows go to past_lens[b]..past_lens[b]+Sn-1 (pos unused), each
// within 0..C-Sn (else kErrCache and nothing written for that row; dims not [B]: kErrShape).
template <int NL, bool PAST = false>
__device__ void cache_write(const KArgs& a) {
  const Tensor &tc = a.in[0], &tn = a.in[1], &ty = a.out[0];
  const int64_t pos = a.iargs[cache_write_args::kPos], H = a.iargs[cache_write_args::kNumHeads];
  const int64_t B = tc.dims[0], C = tc.dims[2], D = tc.dims[3];
  const int64_t Sn = NL == 0 ? tn.dims[2] : tn.dims[1];
  const Tensor& tp = a.in[2];
  if (PAST && (a.n_in < 3 || tp.rank != 1 || tp.dims[0] != B || (B > 0 && !tp.data))) {
    if (threadIdx.x == 0 && blockIdx.x == 0) fail(a, kErrShape);
    return;
  }
  const int64_t* past = PAST ? (const int64_t*)tp.data : nullptr;
  // Row b's first position, or -1 when it is outside 0..C-Sn.
  auto first = [&](int64_t b) -> int64_t {
    const int64_t p = PAST ? past[b] : pos;
    return p < 0 || p > C - Sn ? -1 : p;
  };
  if (!PAST && first(0) < 0) {
    if (threadIdx.x == 0 && blockIdx.x == 0) fail(a, kErrCache);
    return;
  }
  if (PAST)
    for (int64_t b = gtid(); b < B; b += gstride())
      if (first(b) < 0) fail(a, kErrCache);
  const float* Cp = (const float*)tc.data;
  const float* Np = (const float*)tn.data;
  float* Y = (float*)ty.data;
  for (int64_t e = gtid(); e < tn.numel; e += gstride()) {
    int64_t b, h, s, d;
    if (NL == 0) {
      d = e % D; s = (e / D) % Sn; h = (e / (D * Sn)) % H; b = e / (D * Sn * H);
    } else {
      d = e % D; h = (e / D) % H; s = (e / (D * H)) % Sn; b = e / (D * H * Sn);
    }
    const int64_t p = first(b);
    if (p < 0) continue;  // failed above
    Y[((b * H + h) * C + p + s) * D + d] = Np[e];
  }
  if (Y != Cp) {
    for (int64_t e = gtid(); e < B * H * C * D; e += gstride()) {
      const int64_t c = (e / D) % C, p = first(e / (H * C * D));
      if (p < 0 || c < p || c >= p + Sn) Y[e] = Cp[e];
    }
  }
}

// ---- project_topk ----

// (value desc, index asc): whether (v1, i1) ranks before (v2, i2).
__device__ __forceinline__ bool better(float v1, int i1, float v2, int i2) { return v1 > v2 || (v1 == v2 && i1 < i2); }

// One row's rescoring (a warp; qproject_topk with its residual plane): the KK candidates' fine logits
// float(Σ_d x[d] · (15 · Wq[v][d] + r[v][d]), in double) · (w_scale[v] / 15) + bias[v], the normalizer corrected by the
// difference to their int8 logits, then the KO best by fine logit (ties: lower id) as log-probs.
template <int D, int KK, int KO>
__device__ void rescore_row(const KArgs& a, int64_t row, int64_t Dp, float lse, float* cv, int* ci, float* ov, int64_t* oi) {
  const int lane = threadIdx.x & 31;
  const float* x = (const float*)a.in[0].data + row * D;
  const int8_t* Wq = (const int8_t*)a.in[1].data;
  const float* wscale = (const float*)a.in[2].data;
  const float* bias = a.in[4].data ? (const float*)a.in[4].data : nullptr;
  const uint8_t* R = (const uint8_t*)a.in[6].data;
  double mass = 1.0;
  const bool finite = isfinite(lse);
  for (int q = 0; q < KK; q++) {
    const int v = ci[q];
    if (v == 0x7fffffff || !finite) continue;  // a padding slot; a NaN or empty row keeps its logits
    double acc = 0.0;
    for (int d = lane; d < D; d += 32) acc += (double)x[d] * (double)(kResidualSteps * Wq[(int64_t)v * Dp + d] + residual_at(R + (int64_t)v * (Dp / 2), d));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    float fine = (float)acc * (wscale[v] / (float)kResidualSteps);
    if (bias) fine += bias[v];
    if (lane == 0) {
      mass += exp((double)fine - lse) - exp((double)cv[q] - lse);
      cv[q] = fine;
    }
    __syncwarp();
  }
  if (lane == 0) {
    const double lse2 = mass > 0 ? (double)lse + log(mass) : (double)lse;
    for (int q = 1; q < KK; q++) {  // insertion sort, best first
      const float v = cv[q];
      const int i = ci[q];
      int p = q;
      while (p > 0 && better(v, i, cv[p - 1], ci[p - 1])) { cv[p] = cv[p - 1]; ci[p] = ci[p - 1]; p--; }
      cv[p] = v;
      ci[p] = i;
    }
    for (int q = 0; q < KO; q++) {
      const bool pad = ci[q] == 0x7fffffff;
      ov[q] = pad ? -INFINITY : (float)((double)cv[q] - lse2);
      oi[q] = pad ? 0 : ci[q];
    }
  }
  __syncwarp();
}

// project_topk: X [rows, D], W [D, V] (TRANS 0) or [V, D] (TRANS 1), bias? [V] -> values [rows, KK] (log-softmax),
// indices [rows, KK] int64. Grid (shards of SHARD vocabulary ids, groups of RB rows). Each block computes the logits
// of its shard in tiles of 256 ids into shared memory; warp r keeps row r's running max, sum of exp and top-KK.
// Partials go to the plan's scratch; the last block of a row group (a ticket counter, reset after use) merges them.
// ACT: input 3 is the active mask (uint8/bool [V]): each block first compacts its shard's nonzero ids (a block-wide
// prefix sum, in order) into shared memory and computes only those columns (W rows / columns gathered by id); the
// normalizer is over the active ids only, and slots beyond the active ids (fewer than KK) get -inf with index 0.
//
// Q (qproject_topk, float32 input): W is int8 rows Wq [V, Dp] (TRANS) with scales w_scale (input 2), w_sum (3), bias (4),
// active (5): logits are float(Σ x · Wq[v]) · w_scale[v] + bias[v]. RESC: with the residual plane (input 6) the KK best
// of the merge are rescored from X with the 12-bit rows (Σ in double) and the normalizer corrected; the KO best of
// them are written (KO = KK without rescoring).
// TW (not Q): W's element type; float16 / bfloat16 (--quantize fp16|bf16): X's values rounded to it as they are staged.
template <int D, int V, int KK, bool TRANS, bool BIAS, bool ACT = false, bool Q = false, int KO = KK, bool RESC = false, class TW = float>
__device__ void project_topk(const KArgs& a) {
  static_assert(!Q || TRANS, "quantized rows are [V, Dp]");
  static_assert(!Q || std::is_same<TW, float>::value, "quantized rows are int8");
  static_assert(KO <= KK && (RESC || KO == KK), "only rescoring keeps more candidates than it writes");
  constexpr int RB = 8, TILE = 256, SHARD = 512, S = (V + SHARD - 1) / SHARD, PART = 2 + 2 * KK;
  static_assert(D % 32 == 0 && D <= 1024, "D must be a multiple of 32, at most 1024");
  static_assert(SHARD == 2 * 256, "the active compaction gives each of 256 threads two ids");
  __shared__ __align__(16) float xs[RB * D];
  __shared__ float lt[RB][TILE];
  __shared__ float topv[RB][KK];
  __shared__ int topi[RB][KK];
  __shared__ float rmax[RB], rsum[RB];
  __shared__ bool last;
  // ACT: the shard's active ids (offsets from the shard's first id, ascending; int: uint16 made ptxas spill) and the per-warp counts of the scan.
  __shared__ int act_ids[ACT ? SHARD : 1];
  __shared__ int act_warp[ACT ? 8 : 1];
  const Tensor &tx = a.in[0], &tw = a.in[1], &tvals = a.out[0], &tidx = a.out[1];
  const int64_t rows = tx.numel / D;
  const int64_t r0 = (int64_t)blockIdx.y * RB;
  const int nr = (int)min((int64_t)RB, rows - r0);
  if (nr <= 0) return;
  const int shard = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float* X = (const float*)tx.data + r0 * D;
  const TW* W = (const TW*)tw.data;
  const int8_t* Wq = (const int8_t*)tw.data;
  const int64_t Dp = Q ? tw.dims[1] : D;
  const float* wscale = Q ? (const float*)a.in[2].data : nullptr;
  const float* bias = BIAS ? (const float*)a.in[Q ? 4 : 2].data : nullptr;
  for (int e = threadIdx.x; e < nr * D; e += blockDim.x) xs[e] = WType<TW>::round(X[e]);
  if (threadIdx.x < RB) { rmax[threadIdx.x] = -INFINITY; rsum[threadIdx.x] = 0.f; }
  for (int e = threadIdx.x; e < RB * KK; e += blockDim.x) { topv[e / KK][e % KK] = -INFINITY; topi[e / KK][e % KK] = 0x7fffffff; }
  const int v_begin = shard * SHARD, v_end = min(V, v_begin + SHARD);
  // nv columns in this shard: ids v_begin + j (all) or v_begin + act_ids[j] (ACT), j < nv.
  int nv = v_end - v_begin;
  if (ACT) {
    // Block-wide compaction in id order: warp w owns the shard's ids 64w .. 64w + 63 (two ballots of 32), its
    // offset is the active count of the warps before it.
    const uint8_t* mask = (const uint8_t*)a.in[Q ? 5 : 3].data;
    const int ja = warp * 64 + lane, jb = ja + 32;
    const bool aa = v_begin + ja < v_end && mask[v_begin + ja] != 0;
    const bool ab = v_begin + jb < v_end && mask[v_begin + jb] != 0;
    const unsigned ba = __ballot_sync(0xffffffffu, aa), bb = __ballot_sync(0xffffffffu, ab);
    const unsigned below = (1u << lane) - 1u;
    if (lane == 0) act_warp[warp] = __popc(ba) + __popc(bb);
    __syncthreads();
    int base = 0, total = 0;
#pragma unroll
    for (int w = 0; w < 8; w++) {
      const int cw = act_warp[w];
      base += w < warp ? cw : 0;
      total += cw;
    }
    if (aa) act_ids[base + __popc(ba & below)] = ja;
    if (ab) act_ids[base + __popc(ba) + __popc(bb & below)] = jb;
    nv = total;
  }
  __syncthreads();
  for (int t0 = 0; t0 < nv; t0 += TILE) {
    // 1. logits of this tile for the block's rows
    if (TRANS) {
      for (int c = warp; c < TILE; c += 8) {
        const bool in = t0 + c < nv;
        const int v = v_begin + (ACT ? (in ? act_ids[t0 + c] : 0) : t0 + c);
        float part[RB];
#pragma unroll
        for (int r = 0; r < RB; r++) part[r] = 0.f;
        if (in) {
          const TW* wr = W + (int64_t)v * D;
          const int8_t* wqr = Wq + (int64_t)v * Dp;
#pragma unroll 4
          for (int d = lane; d < D; d += 32) {
            const float w = Q ? (float)__ldg(wqr + d) : WType<TW>::load(wr + d);
#pragma unroll
            for (int r = 0; r < RB; r++) if (r < nr) part[r] = fmaf(w, xs[r * D + d], part[r]);
          }
        }
#pragma unroll
        for (int r = 0; r < RB; r++) {
          if (r < nr) {
            float s = warp_sum(part[r]);
            if (Q && in) s *= __ldg(wscale + v);
            if (lane == 0) lt[r][c] = in ? s + (BIAS ? __ldg(bias + v) : 0.f) : -INFINITY;
          }
        }
      }
    } else {
      const int c = threadIdx.x;
      const bool in = t0 + c < nv;
      const int v = v_begin + (ACT ? (in ? act_ids[t0 + c] : 0) : t0 + c);
      float acc[RB];
#pragma unroll
      for (int r = 0; r < RB; r++) acc[r] = 0.f;
      if (in) {
#pragma unroll 4
        for (int d = 0; d < D; d++) {
          const float w = WType<TW>::load(W + (int64_t)d * V + v);
#pragma unroll
          for (int r = 0; r < RB; r++) if (r < nr) acc[r] = fmaf(w, xs[r * D + d], acc[r]);
        }
      }
#pragma unroll
      for (int r = 0; r < RB; r++) if (r < nr) lt[r][c] = in ? acc[r] + (BIAS ? __ldg(bias + v) : 0.f) : -INFINITY;
    }
    __syncthreads();
    // 2. warp r folds the tile into row r's running max, sum and top-KK
    if (warp < nr) {
      const int r = warp;
      float tm = -INFINITY;
      for (int c = lane; c < TILE; c += 32) tm = fmaxf(tm, lt[r][c]);
      tm = warp_max(tm);
      const float m_old = rmax[r], m_new = fmaxf(m_old, tm);
      float s = 0.f;
      if (m_new != -INFINITY)
        for (int c = lane; c < TILE; c += 32) s += __expf(lt[r][c] - m_new);
      s = warp_sum(s);
      if (lane == 0) {
        rsum[r] = (m_old == -INFINITY ? 0.f : rsum[r] * __expf(m_old - m_new)) + s;
        rmax[r] = m_new;
      }
      for (int c0 = 0; c0 < TILE; c0 += 32) {
        const float val = lt[r][c0 + lane];
        const int j = t0 + c0 + lane;
        const bool in = j < nv;
        const int idx = v_begin + (ACT ? (in ? act_ids[j] : 0) : j);
        __syncwarp();
        unsigned want = __ballot_sync(0xffffffffu, in && better(val, idx, topv[r][KK - 1], topi[r][KK - 1]));
        while (want) {
          const int src = __ffs(want) - 1;
          want &= want - 1;
          const float cv = __shfl_sync(0xffffffffu, val, src);
          const int ci = __shfl_sync(0xffffffffu, idx, src);
          if (lane == 0 && better(cv, ci, topv[r][KK - 1], topi[r][KK - 1])) {
            int p = KK - 1;
            while (p > 0 && better(cv, ci, topv[r][p - 1], topi[r][p - 1])) {
              topv[r][p] = topv[r][p - 1];
              topi[r][p] = topi[r][p - 1];
              p--;
            }
            topv[r][p] = cv;
            topi[r][p] = ci;
          }
          __syncwarp();
        }
      }
    }
    __syncthreads();
  }
  // 3. this shard's partial per row: max, sum, top-KK values, top-KK ids
  unsigned* counters = (unsigned*)a.scratch;
  float* parts = (float*)((char*)a.scratch + kScratchData);
  if (warp < nr && lane == 0) {
    float* p = parts + ((r0 + warp) * S + shard) * PART;
    p[0] = rmax[warp];
    p[1] = rsum[warp];
    for (int q = 0; q < KK; q++) { p[2 + q] = topv[warp][q]; ((int*)p)[2 + KK + q] = topi[warp][q]; }
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counters + blockIdx.y, 1u) == (unsigned)(S - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  // 4. the last block merges the S partials of each of its rows (warp per row): global max and sum, then KK rounds
  // of picking the best head among the shards' sorted lists (heads kept in the now unused xs).
  if (warp < nr) {
    const int64_t row = r0 + warp;
    const float* pr = parts + row * S * PART;
    float m = -INFINITY;
    for (int s = lane; s < S; s += 32) m = fmaxf(m, __ldcg(pr + s * PART));
    m = warp_max(m);
    float sum = 0.f;
    for (int s = lane; s < S; s += 32) {
      const float ms = __ldcg(pr + s * PART);
      if (ms != -INFINITY) sum += __ldcg(pr + s * PART + 1) * __expf(ms - m);
    }
    sum = warp_sum(sum);
    const float lse = m + logf(sum);
    int* head = (int*)xs + warp * ((S + 31) / 32) * 32;
    for (int s = lane; s < S; s += 32) head[s] = 0;
    __syncwarp();
    float* ov = (float*)tvals.data + row * KO;
    int64_t* oi = (int64_t*)tidx.data + row * KO;
    for (int q = 0; q < KK; q++) {
      float bv = -INFINITY;
      int bi = 0x7fffffff, bs = -1;
      for (int s = lane; s < S; s += 32) {
        const int h = head[s];
        if (h >= KK) continue;
        const float v = __ldcg(pr + s * PART + 2 + h);
        const int ix = __ldcg((const int*)pr + s * PART + 2 + KK + h);
        if (bs < 0 || better(v, ix, bv, bi)) { bv = v; bi = ix; bs = s; }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float ov2 = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi2 = __shfl_xor_sync(0xffffffffu, bi, o), os2 = __shfl_xor_sync(0xffffffffu, bs, o);
        if (os2 >= 0 && (bs < 0 || better(ov2, oi2, bv, bi))) { bv = ov2; bi = oi2; bs = os2; }
      }
      if (lane == 0) {
        // ACT: a slot no active id filled (fewer than KK active) is -inf with index 0.
        const bool pad = ACT && bi == 0x7fffffff;
        if (RESC) {
          topv[warp][q] = pad ? -INFINITY : bv;  // this block's own partial is in the scratch: the lists are free
          topi[warp][q] = pad ? 0x7fffffff : bi;
        } else {
          ov[q] = pad ? -INFINITY : bv - lse;
          oi[q] = pad ? 0 : bi;
        }
        if (bs >= 0) head[bs]++;
      }
      __syncwarp();
    }
    if (RESC) rescore_row<D, KK, KO>(a, row, Dp, lse, topv[warp], topi[warp], ov, oi);
  }
  if (threadIdx.x == 0) counters[blockIdx.y] = 0;  // ready for the next run
}

}  // namespace planc
