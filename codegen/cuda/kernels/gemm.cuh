// planc CUDA kernel templates, part 3: matmul / fused_matmul on tensor cores (WMMA TF32, optionally 3xTF32 for
// fp32 accuracy) with the fused epilogue, and a GEMV-shaped path for M <= 16 that streams the weights.
namespace planc {

// The end of a 64 x 64 tile of 4 warps (2 x 2, each 32 x 32 as 2 x 2 accumulators): accumulators through shared
// memory Cs (BM x LDC floats), then bias, activation and residual on coalesced rows.
template <int BM, int BN, int LDC, int ACT, bool BIAS, bool RES, class Acc>
__device__ void tile_epilogue(const KArgs& a, float* Cs, Acc (&acc)[2][2], int64_t m0, int64_t n0, int64_t M, int64_t N,
                              int64_t offY, float* Y) {
  using namespace nvcuda;
  const int tid = threadIdx.x, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
  __syncthreads();  // every warp is done with the operand tiles Cs overlays
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++)
      wmma::store_matrix_sync(Cs + (wm * 32 + i * 16) * LDC + wn * 32 + j * 16, acc[i][j], LDC, wmma::mem_row_major);
  __syncthreads();
  const float* bias = BIAS ? (const float*)a.in[2].data : nullptr;
  const float* res = RES ? (const float*)a.in[3].data : nullptr;
  for (int idx = tid; idx < BM * BN; idx += 128) {
    const int r = idx / BN, c = idx % BN;
    const int64_t m = m0 + r, n = n0 + c;
    if (m >= M || n >= N) continue;
    float v = Cs[r * LDC + c];
    if (BIAS) v += __ldg(bias + n);
    v = activate<ACT>(v);
    const int64_t o = offY + m * N + n;
    if (RES) v += res[o];
    Y[o] = v;
  }
}

// Y = act(A x B + bias) + residual over a BM x BN tile per block of 128 threads (4 warps, 2 x 2, each 32 x 32).
// A [..., M, K] row-major, B [..., K, N] row-major (BATCHED: batch dims broadcast to Y's; else B is 2-D and A's
// leading dims are rows). VEC: K and N are multiples of 4 (16-byte loads). PASSES 3: a = hi + lo split (3xTF32).
template <int BM, int BN, int BK, int PASSES, bool VEC, int ACT, bool BIAS, bool RES, int R, bool BATCHED>
__device__ void gemm_tc(const KArgs& a) {
  using namespace nvcuda;
  static_assert(BM == 64 && BN == 64, "the warp layout assumes 64 x 64 tiles");
  constexpr int LDA = BK + 4, LDB = BN + 4, LDC = BN + 4;
  constexpr int SMEM_AB = BM * LDA + BK * LDB, SMEM_C = BM * LDC;
  __shared__ __align__(128) float smem[SMEM_AB > SMEM_C ? SMEM_AB : SMEM_C];
  float* As = smem;
  float* Bs = smem + BM * LDA;

  const Tensor &ta = a.in[0], &tb = a.in[1], &ty = a.out[0];
  const int64_t K = ta.dims[ta.rank - 1];
  const int64_t N = ty.dims[R - 1];
  const int64_t M = BATCHED ? ty.dims[R - 2] : ty.numel / N;
  const float* A = (const float*)ta.data;
  const float* B = (const float*)tb.data;
  float* Y = (float*)ty.data;
  int64_t offY = 0;
  if (BATCHED) {
    // Batch index z over Y's leading R-2 dims; A and B broadcast over them (right-aligned).
    int64_t z = blockIdx.z, offA = 0, offB = 0, sa = M * K, sb = K * N;
    offY = z * M * N;
#pragma unroll
    for (int ax = R - 3; ax >= 0; --ax) {
      const int64_t d = ty.dims[ax], c = z % d;
      z /= d;
      const int axa = ax - (R - ta.rank), axb = ax - (R - tb.rank);
      if (axa >= 0) { if (ta.dims[axa] != 1) offA += c * sa; sa *= ta.dims[axa]; }
      if (axb >= 0) { if (tb.dims[axb] != 1) offB += c * sb; sb *= tb.dims[axb]; }
    }
    A += offA;
    B += offB;
  }
  const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int wm = warp >> 1, wn = warp & 1;

  // Per thread: (BM*BK + BK*BN) / 128 elements per k-tile, held in registers while the previous tile computes.
  // Thread tid loads A rows ar + v*ARS at columns ac..ac+AW-1 and B rows br + v*BRS at columns bc..bc+BW-1.
  constexpr int AW = VEC ? 4 : 1, BW = VEC ? 4 : 1;        // elements per load
  constexpr int AV = BM * BK / 128 / AW, BV = BK * BN / 128 / BW;  // loads per thread
  constexpr int ARS = 128 * AW / BK, BRS = 128 * BW / BN;  // row step between a thread's loads
  const int ar = tid / (BK / AW), ac = (tid % (BK / AW)) * AW;
  const int br = tid / (BN / BW), bc = (tid % (BN / BW)) * BW;
  float ra[AV * AW], rb[BV * BW];
  auto load = [&](int64_t k0) {
    const bool ka = k0 + ac < K, nb = n0 + bc < N;
    const float* pa = A + (m0 + ar) * K + k0 + ac;
    const float* pb = B + (k0 + br) * N + n0 + bc;
#pragma unroll
    for (int v = 0; v < AV; v++) {
      const bool ok = ka && m0 + ar + v * ARS < M;
      if (VEC) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (ok) x = *(const float4*)(pa + (int64_t)v * ARS * K);
        ra[v * 4] = x.x; ra[v * 4 + 1] = x.y; ra[v * 4 + 2] = x.z; ra[v * 4 + 3] = x.w;
      } else {
        ra[v] = ok ? pa[(int64_t)v * ARS * K] : 0.f;
      }
    }
#pragma unroll
    for (int v = 0; v < BV; v++) {
      const bool ok = nb && k0 + br + v * BRS < K;
      if (VEC) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (ok) x = __ldg((const float4*)(pb + (int64_t)v * BRS * N));
        rb[v * 4] = x.x; rb[v * 4 + 1] = x.y; rb[v * 4 + 2] = x.z; rb[v * 4 + 3] = x.w;
      } else {
        rb[v] = ok ? __ldg(pb + (int64_t)v * BRS * N) : 0.f;
      }
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int v = 0; v < AV; v++) {
      float* d = As + (ar + v * ARS) * LDA + ac;
      if (VEC) *(float4*)d = make_float4(ra[v * 4], ra[v * 4 + 1], ra[v * 4 + 2], ra[v * 4 + 3]);
      else *d = ra[v];
    }
#pragma unroll
    for (int v = 0; v < BV; v++) {
      float* d = Bs + (br + v * BRS) * LDB + bc;
      if (VEC) *(float4*)d = make_float4(rb[v * 4], rb[v * 4 + 1], rb[v * 4 + 2], rb[v * 4 + 3]);
      else *d = rb[v];
    }
  };

  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);

  const int64_t ktiles = (K + BK - 1) / BK;
  load(0);
  for (int64_t kt = 0; kt < ktiles; kt++) {
    store();
    __syncthreads();
    if (kt + 1 < ktiles) load((kt + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> ahi[2], alo[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> bhi[2], blo[2];
#pragma unroll
      for (int i = 0; i < 2; i++) {
        wmma::load_matrix_sync(ahi[i], As + (wm * 32 + i * 16) * LDA + kk, LDA);
#pragma unroll
        for (int t = 0; t < ahi[i].num_elements; t++) {
          const float x = ahi[i].x[t], hi = wmma::__float_to_tf32(x);
          ahi[i].x[t] = hi;
          if (PASSES == 3) alo[i].x[t] = wmma::__float_to_tf32(x - hi);
        }
      }
#pragma unroll
      for (int j = 0; j < 2; j++) {
        wmma::load_matrix_sync(bhi[j], Bs + kk * LDB + wn * 32 + j * 16, LDB);
#pragma unroll
        for (int t = 0; t < bhi[j].num_elements; t++) {
          const float x = bhi[j].x[t], hi = wmma::__float_to_tf32(x);
          bhi[j].x[t] = hi;
          if (PASSES == 3) blo[j].x[t] = wmma::__float_to_tf32(x - hi);
        }
      }
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
          if (PASSES == 3) {
            wmma::mma_sync(acc[i][j], alo[i], bhi[j], acc[i][j]);
            wmma::mma_sync(acc[i][j], ahi[i], blo[j], acc[i][j]);
          }
          wmma::mma_sync(acc[i][j], ahi[i], bhi[j], acc[i][j]);
        }
    }
    __syncthreads();
  }

  tile_epilogue<BM, BN, LDC, ACT, BIAS, RES>(a, smem, acc, m0, n0, M, N, offY, Y);
}

// Y = act(A x W + bias) + residual on tensor cores in float16 / bfloat16 (TW) with float32 accumulation
// (--quantize fp16|bf16): A [..., K] float32 rows rounded to TW as they are staged, W [K, N] TW. A 64 x 64 tile per
// block of 128 threads (4 warps, 2 x 2, each 32 x 32 as 2 x 2 m16n16k16 accumulators), K in steps of 32, the next
// step's operands loaded into registers while this one computes. VEC: K a multiple of 4 and N of 8 (16-byte loads).
template <class TW, bool VEC, int ACT, bool BIAS, bool RES>
__device__ void gemm_tc16(const KArgs& a) {
  using namespace nvcuda;
  constexpr int BM = 64, BN = 64, BK = 32;
  constexpr int LDA = BK + 8, LDB = BN + 8, LDC = BN + 4;  // pads keep fragment rows 32-byte aligned
  constexpr int SMEM_AB = (BM * LDA + BK * LDB) * (int)sizeof(TW), SMEM_C = BM * LDC * 4;
  __shared__ __align__(128) float smem[(SMEM_AB > SMEM_C ? SMEM_AB : SMEM_C) / 4];
  TW* As = (TW*)smem;
  TW* Bs = As + BM * LDA;

  const Tensor &ta = a.in[0], &tb = a.in[1], &ty = a.out[0];
  const int64_t K = ta.dims[ta.rank - 1];
  const int64_t N = tb.dims[1];
  const int64_t M = ty.numel / N;
  const float* A = (const float*)ta.data;
  const TW* B = (const TW*)tb.data;
  float* Y = (float*)ty.data;
  const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int wm = warp >> 1, wn = warp & 1;

  // Thread tid loads A rows ar + v*ARS at columns ac..ac+AW-1 and W rows br + v*BRS at columns bc..bc+BW-1.
  constexpr int AW = VEC ? 4 : 1, BW = VEC ? 8 : 1;
  constexpr int AV = BM * BK / 128 / AW, BV = BK * BN / 128 / BW;
  constexpr int ARS = 128 * AW / BK, BRS = 128 * BW / BN;
  const int ar = tid / (BK / AW), ac = (tid % (BK / AW)) * AW;
  const int br = tid / (BN / BW), bc = (tid % (BN / BW)) * BW;
  float ra[AV * AW];
  int4 rbv[VEC ? BV : 1];  // 8 weights per 16-byte load
  TW rbs[VEC ? 1 : BV];
  auto load = [&](int64_t k0) {
    const float* pa = A + (m0 + ar) * K + k0 + ac;
#pragma unroll
    for (int v = 0; v < AV; v++) {
      const int64_t m = m0 + ar + v * ARS;
      if (VEC) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (m < M && k0 + ac < K) x = *(const float4*)(pa + (int64_t)v * ARS * K);
        ra[v * 4] = x.x; ra[v * 4 + 1] = x.y; ra[v * 4 + 2] = x.z; ra[v * 4 + 3] = x.w;
      } else {
        ra[v] = m < M && k0 + ac < K ? pa[(int64_t)v * ARS * K] : 0.f;
      }
    }
    const TW* pb = B + (k0 + br) * N + n0 + bc;
#pragma unroll
    for (int v = 0; v < BV; v++) {
      const bool ok = k0 + br + v * BRS < K && n0 + bc < N;
      if (VEC) rbv[v] = ok ? __ldg((const int4*)(pb + (int64_t)v * BRS * N)) : make_int4(0, 0, 0, 0);
      else rbs[v] = ok ? pb[(int64_t)v * BRS * N] : TW(0.f);
    }
  };
  auto store = [&]() {
#pragma unroll
    for (int v = 0; v < AV; v++)
#pragma unroll
      for (int e = 0; e < AW; e++) As[(ar + v * ARS) * LDA + ac + e] = Conv<TW, float>::f(ra[v * AW + e]);
#pragma unroll
    for (int v = 0; v < BV; v++) {
      TW* d = Bs + (br + v * BRS) * LDB + bc;
      if (VEC) *(int4*)d = rbv[v];
      else *d = rbs[v];
    }
  };

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);

  const int64_t ktiles = (K + BK - 1) / BK;
  load(0);
  for (int64_t kt = 0; kt < ktiles; kt++) {
    store();
    __syncthreads();
    if (kt + 1 < ktiles) load((kt + 1) * BK);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, TW, wmma::row_major> af[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, TW, wmma::row_major> bf[2];
#pragma unroll
      for (int i = 0; i < 2; i++) wmma::load_matrix_sync(af[i], As + (wm * 32 + i * 16) * LDA + kk, LDA);
#pragma unroll
      for (int j = 0; j < 2; j++) wmma::load_matrix_sync(bf[j], Bs + kk * LDB + wn * 32 + j * 16, LDB);
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
    }
    __syncthreads();
  }
  tile_epilogue<BM, BN, LDC, ACT, BIAS, RES>(a, smem, acc, m0, n0, M, N, 0, Y);
}

// Decode-shaped product (M <= 16 rows, B a 2-D weight [K, N]): each block owns 64 columns and a KS-th of K, its 8 warps
// split that further, every lane streams two adjacent columns of B once (coalesced 256-byte rows) and keeps 16 x 2
// accumulators. KS > 1 (few column blocks): blocks write partial sums to the scratch and the last block of a column
// tile (ticket counter, reset after use) adds them up and applies the epilogue. TW: B's element type (float16 /
// bfloat16: A's values rounded to it first, WType).
template <int ACT, bool BIAS, bool RES, bool VEC2, int KS, class TW = float>
__device__ void gemv(const KArgs& a) {
  constexpr int MAXM = 16, COLS = 64, WARPS = 8;
  __shared__ float red[WARPS][MAXM][COLS];
  __shared__ bool last;
  const Tensor &ta = a.in[0], &tb = a.in[1], &ty = a.out[0];
  const int64_t K = ta.dims[ta.rank - 1];
  const int64_t N = ty.dims[ty.rank - 1];
  const int64_t M = ty.numel / N;
  if (M > MAXM) {  // the launcher picks this variant only for M <= 16
    if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0) fail(a, kErrShape);
    return;
  }
  const float* A = (const float*)ta.data;
  const TW* B = (const TW*)tb.data;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n = (int64_t)blockIdx.x * COLS + lane * 2;
  const int64_t kspan = (K + KS - 1) / KS, kb0 = (int64_t)blockIdx.y * kspan, kb1 = min(K, kb0 + kspan);
  const int64_t kchunk = (kb1 - kb0 + WARPS - 1) / WARPS;
  const int64_t k0 = kb0 + warp * kchunk, k1 = min(kb1, k0 + kchunk);
  float acc[MAXM][2];
#pragma unroll
  for (int m = 0; m < MAXM; m++) acc[m][0] = acc[m][1] = 0.f;
#pragma unroll 4
  for (int64_t k = k0; k < k1; k++) {
    float w0 = 0.f, w1 = 0.f;
    if (VEC2 && std::is_same<TW, float>::value) {
      if (n < N) { const float2 w = __ldg((const float2*)(B + k * N + n)); w0 = w.x; w1 = w.y; }
    } else {
      if (n < N) w0 = WType<TW>::load(B + k * N + n);
      if (n + 1 < N) w1 = WType<TW>::load(B + k * N + n + 1);
    }
#pragma unroll
    for (int m = 0; m < MAXM; m++) {
      if (m < M) {
        const float x = WType<TW>::round(__ldg(A + m * K + k));
        acc[m][0] = fmaf(x, w0, acc[m][0]);
        acc[m][1] = fmaf(x, w1, acc[m][1]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < MAXM; m++) {
    red[warp][m][lane * 2] = acc[m][0];
    red[warp][m][lane * 2 + 1] = acc[m][1];
  }
  __syncthreads();
  // This block's sums over its warps, in red[0].
  for (int idx = threadIdx.x; idx < M * COLS; idx += blockDim.x) {
    const int m = idx / COLS, c = idx % COLS;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; w++) v += red[w][m][c];
    red[0][m][c] = v;
  }
  __syncthreads();
  if (KS > 1) {
    float* parts = (float*)((char*)a.scratch + kScratchData) + (int64_t)blockIdx.x * KS * MAXM * COLS;
    for (int idx = threadIdx.x; idx < M * COLS; idx += blockDim.x) parts[blockIdx.y * MAXM * COLS + idx] = red[0][idx / COLS][idx % COLS];
    __threadfence();
    __syncthreads();
    unsigned* counters = (unsigned*)a.scratch;
    if (threadIdx.x == 0) last = atomicAdd(counters + blockIdx.x, 1u) == (unsigned)(KS - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int idx = threadIdx.x; idx < M * COLS; idx += blockDim.x) {
      float v = 0.f;
      for (int s = 0; s < KS; s++) v += __ldcg(parts + s * MAXM * COLS + idx);
      red[0][idx / COLS][idx % COLS] = v;
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;  // ready for the next call
    __syncthreads();
  }
  const float* bias = BIAS ? (const float*)a.in[2].data : nullptr;
  const float* res = RES ? (const float*)a.in[3].data : nullptr;
  float* Y = (float*)ty.data;
  for (int idx = threadIdx.x; idx < M * COLS; idx += blockDim.x) {
    const int m = idx / COLS, c = idx % COLS;
    const int64_t col = (int64_t)blockIdx.x * COLS + c;
    if (col >= N) continue;
    float v = red[0][m][c];
    if (BIAS) v += __ldg(bias + col);
    v = activate<ACT>(v);
    const int64_t o = m * N + col;
    if (RES) v += res[o];
    Y[o] = v;
  }
}

}  // namespace planc
