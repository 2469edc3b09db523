// AVX-512 float32 GEMM: op(A) packed in row panels, op(B) in 32-column panels per block, a 14x32 zmm micro-kernel.
#include "gemm_avx512.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../threadpool.h"
#include "isa.h"

// PLANC_DISABLE_AVX512_GEMM (a compile definition) leaves the kernels out, e.g. to compare against BLAS.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(PLANC_DISABLE_AVX512_GEMM)
#define PLANC_AVX512_GEMM 1
#include <immintrin.h>
// GCC 12 warns that the unpack/shuffle intrinsics read _mm512_undefined_ps() (a false positive, GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace planc {

#ifdef PLANC_AVX512_GEMM
namespace {

// Every function that touches zmm registers is compiled for AVX-512 alone; the rest of the addon stays portable.
#define PLANC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))

constexpr int kMR = 14;                          // most rows of an A panel (2 x 14 zmm accumulators)
constexpr int64_t kNR = 32;                      // columns of a B panel: two zmm
constexpr int64_t kKC = 512;                     // K block: a B block (KC x NC, 512 KiB) stays in L2
constexpr int64_t kNC = 256;                     // widest N block
constexpr int64_t kPrefRows = 4;                 // rows ahead that packing B stored [K, N] prefetches
constexpr int64_t kMaxAPack = int64_t(1) << 21;  // floats of packed A per chunk of rows (8 MiB)
// floats ahead that the micro-kernel asks for when B was packed beforehand (GemmCall::bpacked): 64 k steps, 8 KiB. Such
// a B comes from memory, not from the L2 block packing just wrote; the stream crosses 4 KiB pages, where the
// hardware prefetchers stop (in translations, micro-kernels on a pre-packed B ran 1.1x slower than packing B each
// call without it)
constexpr int64_t kPackedAhead = 64 * kNR;

// The low n lanes (n clamped to 0..16).
inline __mmask16 lanes(int64_t n) {
  if (n <= 0) return 0;
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// A thread's reusable float buffer of at least n floats, 64-byte aligned.
float* scratch(std::vector<float>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n + 16)) v.resize(static_cast<size_t>(n + 16));
  uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<float*>((p + 63) & ~uintptr_t(63));
}

// Transposes the 16x16 block r[row] in place: r[j] ends up holding the old column j. Each step only reads the
// registers it overwrites, so the 16 rows and a few temporaries fit in the 32 zmm registers.
PLANC_AVX512 inline void transpose16(__m512 r[16]) {
  for (int i = 0; i < 8; i++) {
    const __m512 lo = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]), hi = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    r[2 * i] = lo;
    r[2 * i + 1] = hi;
  }
  for (int i = 0; i < 4; i++) {
    const __m512 a = r[4 * i], b = r[4 * i + 1], c = r[4 * i + 2], d = r[4 * i + 3];
    r[4 * i + 0] = _mm512_shuffle_ps(a, c, _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(a, c, _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(b, d, _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(b, d, _MM_SHUFFLE(3, 2, 3, 2));
  }
  // r[4i + c] now holds, in its 128-bit lane L, rows 4i..4i+3 of column 4L + c.
  for (int c = 0; c < 4; c++) {
    const __m512 x0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), x1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
    const __m512 x2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), x3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(x0, x2, 0x88);
    r[c + 8] = _mm512_shuffle_f32x4(x0, x2, 0xDD);
    r[c + 4] = _mm512_shuffle_f32x4(x1, x3, 0x88);
    r[c + 12] = _mm512_shuffle_f32x4(x1, x3, 0xDD);
  }
}

// ---------- packing ----------

// A panel of r rows from A stored [M, K] (a at row i0): dst[k * r + i] = a[i * lda + k] for all K.
PLANC_AVX512 void pack_a_rows(const float* a, int64_t lda, int64_t k, int r, float* dst) {
  const __mmask16 mr = lanes(r);
  for (int64_t k0 = 0; k0 < k; k0 += 16) {
    const int64_t kt = std::min<int64_t>(16, k - k0);
    const __mmask16 mk = lanes(kt);
    __m512 v[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) v[i] = i < r ? _mm512_maskz_loadu_ps(mk, a + i * lda + k0) : _mm512_setzero_ps();
    transpose16(v);
#pragma GCC unroll 16
    for (int t = 0; t < 16; t++)  // constant indices keep v in registers
      if (t < kt) _mm512_mask_storeu_ps(dst + (k0 + t) * r, mr, v[t]);
  }
}

// A panel of r rows from A stored [K, M] (a at column i0): dst[k * r + i] = a[k * lda + i] for all K.
PLANC_AVX512 void pack_a_cols(const float* a, int64_t lda, int64_t k, int r, float* dst) {
  const __mmask16 mr = lanes(r);
  for (int64_t p = 0; p < k; p++) _mm512_mask_storeu_ps(dst + p * r, mr, _mm512_maskz_loadu_ps(mr, a + p * lda));
}

// 32-column B panels from B stored [K, N] (b at [p0, j0]), nc columns: panel t gets dst[t * kc * 32 + k * 32 + j] =
// b[k * ldb + 32 t + j], zero past nc. Row by row, so that B is read sequentially.
PLANC_AVX512 void pack_b_rows(const float* b, int64_t ldb, int64_t kc, int64_t nc, float* dst) {
  const int64_t full = nc / kNR, rest = nc % kNR;
  const __mmask16 m0 = lanes(rest), m1 = lanes(rest - 16);
  for (int64_t p = 0; p < kc; p++) {
    const float* row = b + p * ldb;
    const float* ahead = row + std::min<int64_t>(kPrefRows, kc - 1 - p) * ldb;  // rows are far apart in memory
    float* d = dst + p * kNR;
    for (int64_t t = 0; t < full; t++) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + t * kNR), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(ahead + t * kNR + 16), _MM_HINT_T0);
      _mm512_store_ps(d + t * kc * kNR, _mm512_loadu_ps(row + t * kNR));
      _mm512_store_ps(d + t * kc * kNR + 16, _mm512_loadu_ps(row + t * kNR + 16));
    }
    if (rest) {
      _mm512_store_ps(d + full * kc * kNR, _mm512_maskz_loadu_ps(m0, row + full * kNR));
      _mm512_store_ps(d + full * kc * kNR + 16, _mm512_maskz_loadu_ps(m1, row + full * kNR + 16));
    }
  }
}

// A 32-column B panel from B stored [N, K] (b at [j0, p0]): dst[k * 32 + j] = b[j * ldb + k], zero past cols.
PLANC_AVX512 void pack_b_cols(const float* b, int64_t ldb, int64_t kc, int64_t cols, float* dst) {
  for (int h = 0; h < 2; h++) {
    const int64_t ch = std::min<int64_t>(16, cols - 16 * h);
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
      const int64_t kt = std::min<int64_t>(16, kc - k0);
      const __mmask16 mk = lanes(kt);
      __m512 v[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; j++) {
        const float* src = b + (16 * h + j) * ldb + k0;
        if (j < ch && k0 + 64 < kc) _mm_prefetch(reinterpret_cast<const char*>(src + 64), _MM_HINT_T0);
        v[j] = j < ch ? _mm512_maskz_loadu_ps(mk, src) : _mm512_setzero_ps();
      }
      transpose16(v);
#pragma GCC unroll 16
      for (int t = 0; t < 16; t++)  // constant indices keep v in registers
        if (t < kt) _mm512_store_ps(dst + (k0 + t) * kNR + 16 * h, v[t]);
    }
  }
}

// ---------- micro-kernel ----------

// How a micro-kernel stores its tile: row stride, valid columns (1..32), alpha, and whether it adds to C; and how far
// ahead in B it prefetches (floats; 0: not at all).
struct Store {
  int64_t ldc, cols;
  float alpha;
  bool add;
  int64_t ahead;
};

// C[R rows, cols] (= or +=) alpha * Apanel (kc x R) x Bpanel (kc x 32, W of its 16-column halves used): R x W zmm
// accumulators, one B load per half and one A broadcast per row each k step. Taking the store parameters by
// reference keeps them in memory during the loop, where 14 x 32 needs all 32 zmm registers.
template <int R, int W>
PLANC_AVX512 void micro(int64_t kc, const float* a, const float* b, float* c, const Store& st) {
  __m512 acc[R][W];
#pragma GCC unroll 16
  for (int i = 0; i < R; i++)
#pragma GCC unroll 2
    for (int w = 0; w < W; w++) acc[i][w] = _mm512_setzero_ps();
  for (int i = 0; i < R; i++) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * st.ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * st.ldc + st.cols - 1), _MM_HINT_T0);
  }
  const int64_t ahead = st.ahead;
  for (int64_t p = 0; p < kc; p++) {
    __m512 bv[W];
#pragma GCC unroll 2
    for (int w = 0; w < W; w++) bv[w] = _mm512_load_ps(b + 16 * w);
    if (ahead) {
      _mm_prefetch(reinterpret_cast<const char*>(b + ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + ahead + 16), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
      const __m512 av = _mm512_set1_ps(a[i]);
#pragma GCC unroll 2
      for (int w = 0; w < W; w++) acc[i][w] = _mm512_fmadd_ps(av, bv[w], acc[i][w]);
    }
    a += R;
    b += kNR;
  }
  const __m512 va = _mm512_set1_ps(st.alpha);
  const __mmask16 mask[2] = {lanes(st.cols), lanes(st.cols - 16)};
  const bool add = st.add;
#pragma GCC unroll 16
  for (int i = 0; i < R; i++) {
    float* ci = c + i * st.ldc;
#pragma GCC unroll 2
    for (int w = 0; w < W; w++) {
      __m512 v = _mm512_mul_ps(va, acc[i][w]);
      if (add) v = _mm512_fmadd_ps(va, acc[i][w], _mm512_maskz_loadu_ps(mask[w], ci + 16 * w));
      _mm512_mask_storeu_ps(ci + 16 * w, mask[w], v);
    }
  }
}

using MicroFn = void (*)(int64_t, const float*, const float*, float*, const Store&);

#define PLANC_MICRO_ROW(r) {micro<r, 1>, micro<r, 2>}
// kMicro[R][W - 1]: the micro-kernel for R rows and W 16-column halves.
const MicroFn kMicro[kMR + 1][2] = {
    {nullptr, nullptr},  PLANC_MICRO_ROW(1),  PLANC_MICRO_ROW(2),  PLANC_MICRO_ROW(3),  PLANC_MICRO_ROW(4),
    PLANC_MICRO_ROW(5),  PLANC_MICRO_ROW(6),  PLANC_MICRO_ROW(7),  PLANC_MICRO_ROW(8),  PLANC_MICRO_ROW(9),
    PLANC_MICRO_ROW(10), PLANC_MICRO_ROW(11), PLANC_MICRO_ROW(12), PLANC_MICRO_ROW(13), PLANC_MICRO_ROW(14),
};
#undef PLANC_MICRO_ROW

// ---------- driver ----------

// One chunk of rows of the product and how it is cut: A panels of nearly equal rows, K blocks, N blocks.
struct Plan {
  const GemmCall* g;
  int64_t m0, rows;       // the chunk: rows [m0, m0 + rows) of C
  int64_t panels;         // A panels in the chunk; panel q covers chunk rows [q * rows / panels, (q+1) * rows / panels)
  int64_t kc;             // K block
  int64_t nc, n_blocks;   // N block (a multiple of 32) and their count
  int64_t m_splits;       // panel ranges per N block (more tasks when N has too few blocks)
  float* apack;           // packed op(A) of the chunk: panel q at panel_start(q) * K
  int64_t panel_start(int64_t q) const { return q * rows / panels; }
};

// Packs A panels [q0, q1) of the chunk (all of K).
void pack_a_range(const Plan& pl, int64_t q0, int64_t q1) {
  const GemmCall& g = *pl.g;
  for (int64_t q = q0; q < q1; q++) {
    const int64_t s = pl.panel_start(q), r = pl.panel_start(q + 1) - s, i0 = pl.m0 + s;
    float* dst = pl.apack + s * g.k;
    if (g.ta) pack_a_cols(g.a + i0, g.lda, g.k, static_cast<int>(r), dst);
    else pack_a_rows(g.a + i0 * g.lda, g.lda, g.k, static_cast<int>(r), dst);
  }
}

// Packs op(B)[p0:p0+kc, j0:j0+nc] into 32-column panels (panel t at t * kc * 32).
void pack_b_block(const GemmCall& g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  if (!g.tb) return pack_b_rows(g.b + p0 * g.ldb + j0, g.ldb, kc, nc, dst);
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int64_t cols = std::min(kNR, nc - jr);
    float* d = dst + (jr / kNR) * kc * kNR;
    pack_b_cols(g.b + (j0 + jr) * g.ldb + p0, g.ldb, kc, cols, d);
  }
}

// One task: N block jb times A panels [q0, q1), over all of K.
void run_task(const Plan& pl, int64_t jb, int64_t q0, int64_t q1) {
  static thread_local std::vector<float> bstore;
  const GemmCall& g = *pl.g;
  const int64_t j0 = jb * pl.nc, nc = std::min(pl.nc, g.n - j0);
  float* bpack = g.bpacked ? nullptr : scratch(bstore, ((nc + kNR - 1) / kNR) * kNR * pl.kc);
  for (int64_t p0 = 0; p0 < g.k; p0 += pl.kc) {
    const int64_t kc = std::min(pl.kc, g.k - p0);
    const bool add = g.accumulate || p0 > 0;
    // a pre-packed B: its panels hold all of K (panel stride K x 32), rows p0.. of panel j0 / 32 onwards
    const float* bp = g.bpacked ? g.bpacked + (j0 / kNR) * g.k * kNR + p0 * kNR : bpack;
    const int64_t panel_stride = g.bpacked ? g.k * kNR : kc * kNR;
    if (!g.bpacked) pack_b_block(g, p0, kc, j0, nc, bpack);
    for (int64_t q = q0; q < q1; q++) {
      const int64_t s = pl.panel_start(q), r = pl.panel_start(q + 1) - s;
      const float* ap = pl.apack + s * g.k + p0 * r;
      float* crow = g.c + (pl.m0 + s) * g.ldc + j0;
      for (int64_t jr = 0; jr < nc; jr += kNR) {
        const Store st{g.ldc, std::min(kNR, nc - jr), g.alpha, add, g.bpacked ? kPackedAhead : 0};
        kMicro[r][st.cols > 16 ? 1 : 0](kc, ap, bp + (jr / kNR) * panel_stride, crow + jr, st);
      }
    }
  }
}

// The product for rows [m0, m0 + rows): pack op(A) (in parallel), then the N blocks (in parallel).
void run_chunk(const GemmCall& g, int64_t m0, int64_t rows, ThreadPool* pool) {
  static thread_local std::vector<float> astore;
  const int64_t threads = pool ? pool->threads() : 1;
  Plan pl;
  pl.g = &g;
  pl.m0 = m0;
  pl.rows = rows;
  pl.panels = (rows + kMR - 1) / kMR;
  const int64_t k_blocks = (g.k + kKC - 1) / kKC;
  pl.kc = (g.k + k_blocks - 1) / k_blocks;
  // N blocks of at most kNC columns, their count a multiple of the thread count.
  const int64_t per = threads * ((g.n + threads * kNC - 1) / (threads * kNC));
  pl.nc = std::max(kNR, ((g.n + per - 1) / per + kNR - 1) / kNR * kNR);
  pl.n_blocks = (g.n + pl.nc - 1) / pl.nc;
  pl.m_splits = std::min(pl.panels, std::max<int64_t>(1, (2 * threads + pl.n_blocks - 1) / pl.n_blocks));
  if (pl.n_blocks >= threads) pl.m_splits = 1;
  pl.apack = scratch(astore, rows * g.k);
  const double flops = 2.0 * rows * g.n * g.k;
  const bool parallel = pool && threads > 1 && flops >= 2e6;

  const int64_t a_chunk = std::max<int64_t>(1, 32768 / (kMR * g.k));
  if (parallel) pool->parallel_for(pl.panels, a_chunk, [&](int64_t q0, int64_t q1) { pack_a_range(pl, q0, q1); });
  else pack_a_range(pl, 0, pl.panels);

  auto tasks = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
      const int64_t jb = t / pl.m_splits, ms = t % pl.m_splits;
      run_task(pl, jb, ms * pl.panels / pl.m_splits, (ms + 1) * pl.panels / pl.m_splits);
    }
  };
  const int64_t n_tasks = pl.n_blocks * pl.m_splits;
  if (parallel) pool->parallel_for(n_tasks, 1, tasks);
  else tasks(0, n_tasks);
}

}  // namespace

const char* avx512_gemm_unavailable() {
  using F = CpuFeature;
  static const char* const why = cpu_unavailable({F::kAvx512f, F::kAvx512bw, F::kAvx512vl, F::kAvx512dq, F::kFma},
                                                 "this CPU lacks AVX-512 F/BW/VL/DQ with FMA");
  return why;
}

bool avx512_gemm_available() {
  static const bool ok = avx512_gemm_unavailable() == nullptr;
  return ok;
}

int64_t avx512_packed_b_floats(int64_t k, int64_t n) { return (n + kNR - 1) / kNR * kNR * k; }

void avx512_pack_b(const float* b, int64_t ldb, bool tb, int64_t k, int64_t n, float* dst) {
  if (k <= 0 || n <= 0) return;
  GemmCall g{};
  g.b = b;
  g.ldb = ldb;
  g.tb = tb;
  pack_b_block(g, 0, k, 0, n, dst);  // one K block of all of N: panel t at t * k * 32
}

void avx512_gemm(const GemmCall& g, ThreadPool* pool) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return;
  const int64_t chunk = std::max<int64_t>(kMR * 16, kMaxAPack / g.k);
  for (int64_t m0 = 0; m0 < g.m; m0 += chunk) run_chunk(g, m0, std::min(chunk, g.m - m0), pool);
}

#else  // no AVX-512 kernels in this build

const char* avx512_gemm_unavailable() { return "this build has no AVX-512 GEMM kernels"; }
bool avx512_gemm_available() { return false; }
int64_t avx512_packed_b_floats(int64_t, int64_t) { return 0; }
void avx512_pack_b(const float*, int64_t, bool, int64_t, int64_t, float*) {}
void avx512_gemm(const GemmCall&, ThreadPool*) {}

#endif

}  // namespace planc
