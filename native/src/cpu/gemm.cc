// Float32 matmul (numpy batch broadcasting) and gemm: GEMV, a built-in GEMM, OpenBLAS or AVX-512 kernels, one per call's
// variant (auto: chosen per product at run time). matmul's and fused_matmul's weight may be float16 / bfloat16 (2-D):
// A rounded to its dtype and both widened to float32 (half.h), then the same float32 paths.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"
#include "activation.h"
#include "gemm_avx512.h"
#include "half.h"
#include "vec_math.h"

#ifdef PLANC_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace planc {
namespace {

// ---------- operands ----------

// A row-major matrix operand: op(X)[i][j] = trans ? p[j * ld + i] : p[i * ld + j].
struct Operand {
  const float* p;
  int64_t ld;
  bool trans;
  float at(int64_t i, int64_t j) const { return trans ? p[j * ld + i] : p[i * ld + j]; }
};

// One product C[M,N] (row stride ldc) = alpha * op(A) op(B) (+ C when accumulate).
struct Product {
  int64_t m, n, k;
  float alpha;
  Operand a, b;
  float* c;
  int64_t ldc;
  bool accumulate;
};

// Writes the finished value of one output element from its accumulated dot product.
inline void store(float* c, float acc, float alpha, bool accumulate) {
  *c = accumulate ? *c + alpha * acc : alpha * acc;
}

// Sets C to 0 (or leaves it) when K is 0: the product is empty.
void empty_product(const Product& p) {
  if (p.accumulate) return;
  for (int64_t i = 0; i < p.m; i++) std::fill(p.c + i * p.ldc, p.c + i * p.ldc + p.n, 0.0f);
}

// ---------- GEMV path: the weight streamed once (auto takes it for M <= gemm_auto::kGemvMaxM) ----------

// op(A) as a contiguous [M, K] buffer (A is small on this path).
void copy_small_a(const Product& p, float* dst) {
  for (int64_t i = 0; i < p.m; i++)
    for (int64_t k = 0; k < p.k; k++) dst[i * p.k + k] = p.a.at(i, k);
}

// Columns per block on the GEMV path for M rows: the [M, block] accumulator stays about 16 KiB.
int64_t gemv_block(int64_t m, int64_t n) {
  int64_t nb = std::max<int64_t>(64, 4096 / m);
  return std::min(nb, n);
}

// o0..o3[j] += a[4 rows][p..p+3] x w0..w3[j]: four output rows share each load of four rows of B.
PLANC_HOT_BODY void gemv_4x4_body(const float* a, int64_t k, int64_t p, const float* w0, int64_t ldb, int64_t nb, float* o) {
  const float* w1 = w0 + ldb;
  const float* w2 = w1 + ldb;
  const float* w3 = w2 + ldb;
  const float* r = a + p;
  const float a00 = r[0], a01 = r[1], a02 = r[2], a03 = r[3];
  r += k;
  const float a10 = r[0], a11 = r[1], a12 = r[2], a13 = r[3];
  r += k;
  const float a20 = r[0], a21 = r[1], a22 = r[2], a23 = r[3];
  r += k;
  const float a30 = r[0], a31 = r[1], a32 = r[2], a33 = r[3];
  float* o0 = o;
  float* o1 = o0 + nb;
  float* o2 = o1 + nb;
  float* o3 = o2 + nb;
  int64_t j = 0;
#ifdef PLANC_VEC8
  for (; j + 8 <= nb; j += 8) {
    v8f x0, x1, x2, x3, y0, y1, y2, y3;
    std::memcpy(&x0, w0 + j, sizeof x0);
    std::memcpy(&x1, w1 + j, sizeof x1);
    std::memcpy(&x2, w2 + j, sizeof x2);
    std::memcpy(&x3, w3 + j, sizeof x3);
    std::memcpy(&y0, o0 + j, sizeof y0);
    std::memcpy(&y1, o1 + j, sizeof y1);
    std::memcpy(&y2, o2 + j, sizeof y2);
    std::memcpy(&y3, o3 + j, sizeof y3);
    y0 += a00 * x0;
    y0 += a01 * x1;
    y0 += a02 * x2;
    y0 += a03 * x3;
    y1 += a10 * x0;
    y1 += a11 * x1;
    y1 += a12 * x2;
    y1 += a13 * x3;
    y2 += a20 * x0;
    y2 += a21 * x1;
    y2 += a22 * x2;
    y2 += a23 * x3;
    y3 += a30 * x0;
    y3 += a31 * x1;
    y3 += a32 * x2;
    y3 += a33 * x3;
    std::memcpy(o0 + j, &y0, sizeof y0);
    std::memcpy(o1 + j, &y1, sizeof y1);
    std::memcpy(o2 + j, &y2, sizeof y2);
    std::memcpy(o3 + j, &y3, sizeof y3);
  }
#endif
  for (; j < nb; j++) {
    const float x0 = w0[j], x1 = w1[j], x2 = w2[j], x3 = w3[j];
    o0[j] += a00 * x0 + a01 * x1 + a02 * x2 + a03 * x3;
    o1[j] += a10 * x0 + a11 * x1 + a12 * x2 + a13 * x3;
    o2[j] += a20 * x0 + a21 * x1 + a22 * x2 + a23 * x3;
    o3[j] += a30 * x0 + a31 * x1 + a32 * x2 + a33 * x3;
  }
}
PLANC_HOT_DISPATCH(void, gemv_4x4, (const float* a, int64_t k, int64_t p, const float* w0, int64_t ldb, int64_t nb, float* o), (a, k, p, w0, ldb, nb, o))

// o[j] += a[p..p+3] x w0..w3[j] for one output row.
PLANC_HOT_BODY void gemv_1x4_body(const float* a, int64_t p, const float* w0, int64_t ldb, int64_t nb, float* o) {
  const float* w1 = w0 + ldb;
  const float* w2 = w1 + ldb;
  const float* w3 = w2 + ldb;
  const float a0 = a[p], a1 = a[p + 1], a2 = a[p + 2], a3 = a[p + 3];
  int64_t j = 0;
#ifdef PLANC_VEC8
  for (; j + 8 <= nb; j += 8) {
    v8f x0, x1, x2, x3, y;
    std::memcpy(&x0, w0 + j, sizeof x0);
    std::memcpy(&x1, w1 + j, sizeof x1);
    std::memcpy(&x2, w2 + j, sizeof x2);
    std::memcpy(&x3, w3 + j, sizeof x3);
    std::memcpy(&y, o + j, sizeof y);
    y += a0 * x0;
    y += a1 * x1;
    y += a2 * x2;
    y += a3 * x3;
    std::memcpy(o + j, &y, sizeof y);
  }
#endif
  for (; j < nb; j++) o[j] += a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j];
}
PLANC_HOT_DISPATCH(void, gemv_1x4, (const float* a, int64_t p, const float* w0, int64_t ldb, int64_t nb, float* o), (a, p, w0, ldb, nb, o))

// acc[M, nb] = A[M, k0:k1] x B[k0:k1, j0:j0+nb] for row-major A (row stride lda) and B (ldb; b points at column j0),
// four rows of B per step.
void gemv_nn_rows(const float* a, int64_t lda, int64_t m, int64_t k0, int64_t k1, const float* b, int64_t ldb, int64_t nb, float* acc) {
  std::fill(acc, acc + m * nb, 0.0f);
  int64_t p = k0;
  for (; p + 4 <= k1; p += 4) {
    const float* w0 = b + p * ldb;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) gemv_4x4(a + i * lda, lda, p, w0, ldb, nb, acc + i * nb);
    for (; i < m; i++) gemv_1x4(a + i * lda, p, w0, ldb, nb, acc + i * nb);
  }
  for (; p < k1; p++)
    for (int64_t i = 0; i < m; i++) add_scaled(acc + i * nb, a[i * lda + p], b + p * ldb, nb);
}

void gemv_nn_block(const float* a, int64_t m, int64_t k, const float* b, int64_t ldb, int64_t nb, float* acc) {
  gemv_nn_rows(a, k, m, 0, k, b, ldb, nb, acc);
}

// C = A x B for small M when B has too few column blocks to keep every thread busy (e.g. [512, 512] or [2048, 512]
// decoder weights): each thread streams a contiguous run of B's rows into its own partial sum, then the parts add up.
void gemv_split_k(const float* a, const Product& p, ThreadPool* pool) {
  const int64_t parts = pool->threads();
  static std::vector<float> partial;
  partial.resize(static_cast<size_t>(parts * p.m * p.n));
  pool->parallel_for(parts, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
      const int64_t k0 = p.k * t / parts, k1 = p.k * (t + 1) / parts;
      gemv_nn_rows(a, p.k, p.m, k0, k1, p.b.p, p.b.ld, p.n, partial.data() + t * p.m * p.n);
    }
  });
  for (int64_t i = 0; i < p.m; i++) {
    for (int64_t j = 0; j < p.n; j++) {
      float s = 0;
      for (int64_t t = 0; t < parts; t++) s += partial[static_cast<size_t>((t * p.m + i) * p.n + j)];
      store(p.c + i * p.ldc + j, s, p.alpha, p.accumulate);
    }
  }
}

// C = A op(B), split over column blocks; B is read once. Correct at any M; fast for small M (copies of A are M x K).
void gemv(const Product& p, ThreadPool* pool) {
  static thread_local std::vector<float> abuf;
  const float* a = p.a.p;
  if (p.a.trans || p.a.ld != p.k) {
    abuf.resize(static_cast<size_t>(p.m * p.k));
    copy_small_a(p, abuf.data());
    a = abuf.data();
  }
  if (p.b.trans) {
    // B stored [N, K]: each output is a dot product of two contiguous rows.
    auto rows = [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; j++) {
        const float* w = p.b.p + j * p.b.ld;
        for (int64_t i = 0; i < p.m; i++) store(p.c + i * p.ldc + j, dot(a + i * p.k, w, p.k), p.alpha, p.accumulate);
      }
    };
    int64_t min_cols = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, p.k * p.m));
    if (pool) pool->parallel_for(p.n, min_cols, rows);
    else rows(0, p.n);
    return;
  }
  const int64_t nb = gemv_block(p.m, p.n);
  const int64_t blocks = (p.n + nb - 1) / nb;
  if (pool && pool->threads() > 1 && blocks < 2 * pool->threads() && p.k >= 64 * pool->threads() &&
      p.m * p.k * p.n >= (1 << 17) && p.m * p.n <= (1 << 16)) {
    return gemv_split_k(a, p, pool);
  }
  auto run = [&](int64_t b0, int64_t b1) {
    static thread_local std::vector<float> acc;
    acc.resize(static_cast<size_t>(p.m * nb));
    for (int64_t blk = b0; blk < b1; blk++) {
      const int64_t j0 = blk * nb, w = std::min(nb, p.n - j0);
      gemv_nn_block(a, p.m, p.k, p.b.p + j0, p.b.ld, w, acc.data());
      for (int64_t i = 0; i < p.m; i++)
        for (int64_t j = 0; j < w; j++) store(p.c + i * p.ldc + j0 + j, acc[i * w + j], p.alpha, p.accumulate);
    }
  };
  const int64_t work = p.m * p.k * nb;
  if (pool && work * 2 >= (1 << 16)) pool->parallel_for(blocks, 1, run);
  else run(0, blocks);
}

// ---------- built-in blocked GEMM ----------

constexpr int64_t kMR = 6, kNR = 16;          // register tile of the micro-kernel
constexpr int64_t kMC = 72, kNC = 256, kKC = 256;  // cache blocks: A [MC, KC] in L2, B panel [KC, NR] in L1

// Packs op(A)[i0:i0+mc, p0:p0+kc] into MR-row panels, k-major inside a panel, zero-padded to MR rows.
void pack_a(const Operand& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float* dst) {
  for (int64_t ir = 0; ir < mc; ir += kMR) {
    const int64_t rows = std::min(kMR, mc - ir);
    for (int64_t p = 0; p < kc; p++) {
      for (int64_t r = 0; r < rows; r++) dst[r] = a.at(i0 + ir + r, p0 + p);
      for (int64_t r = rows; r < kMR; r++) dst[r] = 0.0f;
      dst += kMR;
    }
  }
}

// Packs op(B)[p0:p0+kc, j0:j0+nc] into NR-column panels, k-major inside a panel, zero-padded to NR columns.
void pack_b(const Operand& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
  for (int64_t jr = 0; jr < nc; jr += kNR) {
    const int64_t cols = std::min(kNR, nc - jr);
    for (int64_t p = 0; p < kc; p++) {
      if (!b.trans && cols == kNR) {
        std::memcpy(dst, b.p + (p0 + p) * b.ld + j0 + jr, sizeof(float) * kNR);
      } else {
        for (int64_t c = 0; c < cols; c++) dst[c] = b.at(p0 + p, j0 + jr + c);
        for (int64_t c = cols; c < kNR; c++) dst[c] = 0.0f;
      }
      dst += kNR;
    }
  }
}

// acc[MR][NR] = packed A panel (MR floats per k step) x packed B panel (NR floats per k step) over kc steps.
PLANC_HOT_BODY void micro_kernel_body(int64_t kc, const float* ap, const float* bp, float* acc) {
#ifdef PLANC_VEC8
  static_assert(kMR == 6 && kNR == 16, "the vector micro-kernel is written for 6x16");
  v8f c[kMR][2] = {};
  for (int64_t p = 0; p < kc; p++) {
    v8f b0, b1;
    std::memcpy(&b0, bp + p * kNR, sizeof b0);
    std::memcpy(&b1, bp + p * kNR + 8, sizeof b1);
    const float* a = ap + p * kMR;
    for (int i = 0; i < kMR; i++) {
      c[i][0] += a[i] * b0;
      c[i][1] += a[i] * b1;
    }
  }
  std::memcpy(acc, c, sizeof c);
#else
  float t[kMR][kNR] = {};
  for (int64_t p = 0; p < kc; p++) {
    const float* b = bp + p * kNR;
    const float* a = ap + p * kMR;
    for (int i = 0; i < kMR; i++)
      for (int j = 0; j < kNR; j++) t[i][j] += a[i] * b[j];
  }
  std::memcpy(acc, t, sizeof t);
#endif
}
PLANC_HOT_DISPATCH(void, micro_kernel, (int64_t kc, const float* ap, const float* bp, float* acc), (kc, ap, bp, acc))

// One [mc, nc] tile of C at (i0, j0), over all of K in KC steps.
void gemm_tile(const Product& p, int64_t i0, int64_t mc, int64_t j0, int64_t nc) {
  static thread_local std::vector<float> apack, bpack;
  apack.resize(static_cast<size_t>(((kMC + kMR - 1) / kMR) * kMR * kKC));
  bpack.resize(static_cast<size_t>(((kNC + kNR - 1) / kNR) * kNR * kKC));
  float acc[kMR * kNR];
  for (int64_t p0 = 0; p0 < p.k; p0 += kKC) {
    const int64_t kc = std::min(kKC, p.k - p0);
    const bool accumulate = p.accumulate || p0 > 0;
    pack_a(p.a, i0, mc, p0, kc, apack.data());
    pack_b(p.b, p0, kc, j0, nc, bpack.data());
    for (int64_t jr = 0; jr < nc; jr += kNR) {
      const int64_t cols = std::min(kNR, nc - jr);
      for (int64_t ir = 0; ir < mc; ir += kMR) {
        const int64_t rows = std::min(kMR, mc - ir);
        micro_kernel(kc, apack.data() + ir * kc, bpack.data() + jr * kc, acc);
        for (int64_t r = 0; r < rows; r++) {
          float* c = p.c + (i0 + ir + r) * p.ldc + j0 + jr;
          const float* s = acc + r * kNR;
          if (accumulate) for (int64_t j = 0; j < cols; j++) c[j] += p.alpha * s[j];
          else for (int64_t j = 0; j < cols; j++) c[j] = p.alpha * s[j];
        }
      }
    }
  }
}

// C = alpha op(A) op(B) (+ C) with the built-in kernel, multi-threaded over [MC, NC] tiles of C.
void blocked_gemm(const Product& p, ThreadPool* pool) {
  const int64_t mt = (p.m + kMC - 1) / kMC, nt = (p.n + kNC - 1) / kNC;
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
      const int64_t i0 = (t / nt) * kMC, j0 = (t % nt) * kNC;
      gemm_tile(p, i0, std::min(kMC, p.m - i0), j0, std::min(kNC, p.n - j0));
    }
  };
  const double flops = 2.0 * p.m * p.n * p.k;
  if (pool && flops >= 4e6) pool->parallel_for(mt * nt, 1, run);
  else run(0, mt * nt);
}

// ---------- dispatch ----------

#ifdef PLANC_HAVE_OPENBLAS
// One cblas_sgemm call for the product p.
void blas_call(const Product& p) {
  cblas_sgemm(CblasRowMajor, p.a.trans ? CblasTrans : CblasNoTrans, p.b.trans ? CblasTrans : CblasNoTrans,
              static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), p.alpha, p.a.p,
              static_cast<int>(p.a.ld), p.b.p, static_cast<int>(p.b.ld), p.accumulate ? 1.0f : 0.0f, p.c,
              static_cast<int>(p.ldc));
}

// Keeps OpenBLAS at one thread of its own; called by the kernels on the calling thread, before any parallel work.
void blas_single_thread() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

// Rows [i0, i1) and columns [j0, j1) of a product, as a product of its own.
Product sub_product(const Product& p, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  Product q = p;
  q.m = i1 - i0;
  q.n = j1 - j0;
  q.a.p = p.a.trans ? p.a.p + i0 : p.a.p + i0 * p.a.ld;
  q.b.p = p.b.trans ? p.b.p + j0 * p.b.ld : p.b.p + j0;
  q.c = p.c + i0 * p.ldc + j0;
  return q;
}

// OpenBLAS, single-threaded inside the pool's tasks (the product split into one slab of rows or columns per
// thread): OpenBLAS's own threads would spin between calls and fight the pool's threads for the cores. The kernels
// make sure of one BLAS thread (blas_single_thread) before any BLAS call.
void blas_gemm(const Product& p, ThreadPool* pool) {
  const int64_t threads = pool ? pool->threads() : 1;
  const double flops = 2.0 * p.m * p.n * p.k;
  if (threads == 1 || flops < 4e6) return blas_call(p);
  const bool by_rows = p.m >= p.n;
  const int64_t len = by_rows ? p.m : p.n, align = by_rows ? 8 : 64;
  const int64_t slab = std::max(align, ((len + threads - 1) / threads + align - 1) / align * align);
  const int64_t parts = (len + slab - 1) / slab;
  pool->parallel_for(parts, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; s++) {
      const int64_t b = s * slab, e = std::min(len, b + slab);
      blas_call(by_rows ? sub_product(p, b, e, 0, p.n) : sub_product(p, 0, p.m, b, e));
    }
  });
}
#endif

// ---------- variants ----------

// The paths by variant code: matmul, gemm and fused_matmul share one list (compiler/kernel-schema.ts GEMM_VARIANTS).
constexpr int64_t kAuto = matmul_args::kVariantAuto, kGemv = matmul_args::kVariantGemv,
                  kBlocked = matmul_args::kVariantBlocked, kBlas = matmul_args::kVariantBlas,
                  kAvx512 = matmul_args::kVariantAvx512;

constexpr bool same_names(const char* const* a, const char* const* b, int n) {
  for (int i = 0; i < n; i++) {
    const char *x = a[i], *y = b[i];
    while (*x != 0 && *x == *y) x++, y++;
    if (*x != *y) return false;
  }
  return true;
}
static_assert(gemm_args::kVariantCount == matmul_args::kVariantCount &&
                  fused_matmul_args::kVariantCount == matmul_args::kVariantCount &&
                  same_names(gemm_args::kVariantNames, matmul_args::kVariantNames, matmul_args::kVariantCount) &&
                  same_names(fused_matmul_args::kVariantNames, matmul_args::kVariantNames, matmul_args::kVariantCount),
              "matmul, gemm and fused_matmul must share their variant list (GEMM_VARIANTS)");

// Why this machine cannot run a path (nullptr: it can). The three kernels' KernelDef.variant_unavailable.
const char* gemm_variant_unavailable(int64_t code) {
#ifndef PLANC_HAVE_OPENBLAS
  if (code == kBlas) return "this native build has no OpenBLAS (install libopenblas-dev, then npm run build:native)";
#endif
  if (code == kAvx512) return avx512_gemm_unavailable();
  return nullptr;
}

// A call's variant checked: a code of the list that this machine runs (program_new checks it too; direct callers may not).
const char* check_variant(const char* name, int64_t code) {
  if (code < 0 || code >= matmul_args::kVariantCount)
    return kernel_error("%s: unknown variant code %lld (0..%d)", name, static_cast<long long>(code), matmul_args::kVariantCount - 1);
  if (const char* why = gemm_variant_unavailable(code))
    return kernel_error("%s: variant %s cannot run here: %s", name, matmul_args::kVariantNames[code], why);
  return nullptr;
}

// Whether the hand-written GEMV path wins for this shape: on every machine up to M 2 (gemm_auto::kGemvEverywhereMaxM,
// which select-variants relies on to fix the variant of such calls), never above M 16; between, by what the machine
// has and B's layout. The measurements behind each bound: bench/results/gemm-rules.jsonl.
bool prefer_gemv(const Product& p) {
  if (p.m > gemm_auto::kGemvMaxM) return false;
  if (p.m <= gemm_auto::kGemvEverywhereMaxM) return true;  // M 1-2: every machine, either layout of B
  if (avx512_gemm_available()) return !p.b.trans && p.m <= 4 && p.k * p.n < (int64_t(1) << 22);
#ifdef PLANC_HAVE_OPENBLAS
  return !p.b.trans && p.m <= 8;
#else
  return !p.b.trans || p.m <= 4;
#endif
}

// The product on the AVX-512 kernels of gemm_avx512.cc.
void avx512_product(const Product& p, ThreadPool* pool) {
  avx512_gemm(GemmCall{p.m, p.n, p.k, p.alpha, p.a.p, p.a.ld, p.a.trans, p.b.p, p.b.ld, p.b.trans, p.c, p.ldc,
                       p.accumulate},
              pool);
}

// The auto rule (variant auto): GEMV for small M (prefer_gemv), else the AVX-512 kernels where the CPU has them (they
// beat OpenBLAS with its AVX2 kernels 1.4-1.9x, and OpenBLAS's own AVX-512 kernels too), else OpenBLAS, else the
// built-in blocked GEMM.
int64_t auto_path(const Product& p) {
  if (prefer_gemv(p)) return kGemv;
  if (avx512_gemm_available()) return kAvx512;
#ifdef PLANC_HAVE_OPENBLAS
  return kBlas;
#else
  return kBlocked;
#endif
}

// C = alpha op(A) op(B) (+ C) on the path of `variant` (checked by check_variant: one this machine runs). pool may be
// null.
void sgemm(const Product& p, ThreadPool* pool, int64_t variant) {
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0) return empty_product(p);
  switch (variant == kAuto ? auto_path(p) : variant) {
    case kGemv: return gemv(p, pool);
    case kAvx512: return avx512_product(p, pool);
#ifdef PLANC_HAVE_OPENBLAS
    case kBlas: return blas_gemm(p, pool);
#endif
    default: return blocked_gemm(p, pool);
  }
}

// ---------- matmul ----------

constexpr int64_t kMaxBlasDim = 2147483647;

// Checks that every dim of a product fits the BLAS int arguments.
const char* check_blas_dims(const char* name, int64_t m, int64_t n, int64_t k) {
  if (m > kMaxBlasDim || n > kMaxBlasDim || k > kMaxBlasDim)
    return kernel_error("%s: dims M=%lld N=%lld K=%lld exceed 2^31-1", name, (long long)m, (long long)n, (long long)k);
  return nullptr;
}

// Batch layout of a matmul: output batch dims and each operand's batch stride per output batch dim (0 = broadcast).
struct Batch {
  int rank = 0;
  int64_t dims[kMaxRank] = {0};
  int64_t a_stride[kMaxRank] = {0};
  int64_t b_stride[kMaxRank] = {0};
  int64_t count = 1;
};

// Checks that A's and B's batch dims broadcast to Y's and records the strides; returns an error or nullptr.
const char* matmul_batch(const TensorView& a, const TensorView& b, const TensorView& y, int64_t m, int64_t n, int64_t k,
                         Batch* out) {
  out->rank = y.rank - 2;
  int64_t as = m * k, bs = k * n;
  for (int d = out->rank - 1; d >= 0; d--) {
    const int ai = a.rank - 2 - (out->rank - d), bi = b.rank - 2 - (out->rank - d);
    const int64_t ad = ai >= 0 ? a.dims[ai] : 1, bd = bi >= 0 ? b.dims[bi] : 1, yd = y.dims[d];
    const int64_t want = ad == 1 ? bd : ad;
    if ((ad != 1 && bd != 1 && ad != bd) || yd != want)
      return kernel_error("matmul: batch dim %d: A has %lld, B has %lld, Y has %lld", d, (long long)ad, (long long)bd,
                          (long long)yd);
    out->dims[d] = yd;
    out->a_stride[d] = ad == 1 ? 0 : as;
    out->b_stride[d] = bd == 1 ? 0 : bs;
    as *= ad;
    bs *= bd;
    out->count *= yd;
  }
  return nullptr;
}

// Offsets of output batch t in A and B.
void batch_offsets(const Batch& bt, int64_t t, int64_t* ao, int64_t* bo) {
  *ao = 0;
  *bo = 0;
  for (int d = bt.rank - 1; d >= 0; d--) {
    const int64_t c = t % bt.dims[d];
    t /= bt.dims[d];
    *ao += c * bt.a_stride[d];
    *bo += c * bt.b_stride[d];
  }
}

// True when B is one shared matrix and A is not broadcast: the batch folds into the rows of one GEMM.
bool batch_folds(const Batch& bt) {
  for (int d = 0; d < bt.rank; d++) {
    if (bt.b_stride[d] != 0) return false;
    if (bt.a_stride[d] == 0 && bt.dims[d] != 1) return false;
  }
  return true;
}

const char* check_matmul(const KernelArgs& args) {
  if (const char* err = check_arity("matmul", args, matmul_args::kArity)) return err;
  if (const char* err = check_variant("matmul", args.variant)) return err;
  const TensorView &a = args.in[0], &b = args.in[1], &y = args.out[0];
  if (!a.data || !b.data) return "matmul: missing input";
  if (a.dtype != kFloat32 || (b.dtype != kFloat32 && !is_half_dtype(b.dtype)) || y.dtype != kFloat32)
    return kernel_error("matmul: float32 only (B may also be float16 or bfloat16), got A %s, B %s, Y %s",
                        dtype_name(a.dtype), dtype_name(b.dtype), dtype_name(y.dtype));
  if (a.rank < 2 || b.rank < 2) return kernel_error("matmul: A and B need rank >= 2, got %d and %d", a.rank, b.rank);
  if (b.dtype != kFloat32 && b.rank != 2)
    return kernel_error("matmul: a %s B must be 2-D (a weight), got B %s", dtype_name(b.dtype), dims_str(b).c_str());
  if (y.rank != std::max(a.rank, b.rank)) return kernel_error("matmul: Y rank %d, expected %d", y.rank, std::max(a.rank, b.rank));
  const int64_t m = a.dims[a.rank - 2], k = a.dims[a.rank - 1], kb = b.dims[b.rank - 2], n = b.dims[b.rank - 1];
  if (k != kb) return kernel_error("matmul: inner dims differ: A [..., %lld, %lld] x B [..., %lld, %lld]", (long long)m,
                                   (long long)k, (long long)kb, (long long)n);
  if (y.dims[y.rank - 2] != m || y.dims[y.rank - 1] != n)
    return kernel_error("matmul: Y is [..., %lld, %lld], expected [..., %lld, %lld]", (long long)y.dims[y.rank - 2],
                        (long long)y.dims[y.rank - 1], (long long)m, (long long)n);
  return nullptr;
}

// Floats per widened slab of a half B: 1 MiB for few rows (the slab is read back from cache by the GEMV path;
// bench/results/gemm-rules.jsonl), 8 MiB for more (wide slabs for the GEMM kernels, the widening amortized over the
// rows). Either way a vocabulary-sized weight is not held widened whole.
constexpr int64_t kHalfSlabFloatsFewRows = int64_t(1) << 18, kHalfSlabFloats = int64_t(1) << 21;

// Y [rows, N] = A [rows, K] x B [K, N] for a float16 / bfloat16 B (kernel-schema.ts F32_OR_HALF): A's values rounded to
// B's dtype once, B widened to float32 slab by slab (columns [j0, j0 + w)), each slab one float32 product on the call's
// variant. Products of the rounded values are exact in float32; the sums are the float32 paths' own.
void half_matmul(const KernelArgs& args, int64_t rows, int64_t n, int64_t k) {
  const TensorView &a = args.in[0], &b = args.in[1], &y = args.out[0];
  static thread_local std::vector<float> ar, bw;  // the calling thread's: A rounded, a slab of B widened
  const int32_t dt = b.dtype;
  ar.resize(static_cast<size_t>(rows * k));
  const float* ap = a.as<float>();
  float* arp = ar.data();
  run_parallel(args, rows * k, 1 << 15, [&](int64_t i0, int64_t i1) { round_run(dt, ap + i0, i1 - i0, arp + i0); });
  const int64_t cap = rows <= gemm_auto::kGemvMaxM ? kHalfSlabFloatsFewRows : kHalfSlabFloats;
  int64_t slab = n;
  if (k * n > cap) slab = std::min(n, std::max<int64_t>(64, cap / k / 64 * 64));
  bw.resize(static_cast<size_t>(k * slab));
  const uint16_t* bp = b.as<uint16_t>();
  float* bwp = bw.data();
  float* yp = y.as<float>();
  for (int64_t j0 = 0; j0 < n; j0 += slab) {
    const int64_t w = std::min(slab, n - j0);
    run_parallel(args, k, std::max<int64_t>(1, (1 << 14) / w), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; p++) widen_run(dt, bp + p * n + j0, w, bwp + p * w);
    });
    sgemm(Product{rows, w, k, 1.0f, {arp, k, false}, {bwp, w, false}, yp + j0, n, false}, args.pool, args.variant);
  }
}

const char* matmul(const KernelArgs& args) {
  if (const char* err = check_matmul(args)) return err;
#ifdef PLANC_HAVE_OPENBLAS
  blas_single_thread();
#endif
  const TensorView &a = args.in[0], &b = args.in[1], &y = args.out[0];
  const int64_t m = a.dims[a.rank - 2], k = a.dims[a.rank - 1], n = b.dims[b.rank - 1];
  Batch bt;
  if (const char* err = matmul_batch(a, b, y, m, n, k, &bt)) return err;
  if (bt.count == 0) return nullptr;
  if (b.dtype != kFloat32) {  // a 2-D half B (check_matmul): the batch folds into the rows
    if (const char* err = check_blas_dims("matmul", m * bt.count, n, k)) return err;
    half_matmul(args, m * bt.count, n, k);
    return nullptr;
  }
  const float* ap = a.as<float>();
  const float* bp = b.as<float>();
  float* yp = y.as<float>();
  if (batch_folds(bt)) {
    if (const char* err = check_blas_dims("matmul", m * bt.count, n, k)) return err;
    sgemm(Product{m * bt.count, n, k, 1.0f, {ap, k, false}, {bp, n, false}, yp, n, false}, args.pool, args.variant);
    return nullptr;
  }
  if (const char* err = check_blas_dims("matmul", m, n, k)) return err;
  auto one = [&](int64_t t, ThreadPool* pool) {
    int64_t ao, bo;
    batch_offsets(bt, t, &ao, &bo);
    sgemm(Product{m, n, k, 1.0f, {ap + ao, k, false}, {bp + bo, n, false}, yp + t * m * n, n, false}, pool, args.variant);
  };
  const double flops = 2.0 * m * n * k;
  if (args.pool && args.pool->threads() > 1 && bt.count >= 2 && flops < 8e6) {
    // Many small products (attention heads): one product per task, each on one thread.
    auto run = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; t++) one(t, nullptr);
    };
    const int64_t min_batches = std::max<int64_t>(1, static_cast<int64_t>(2e5 / std::max(1.0, flops)));
    args.pool->parallel_for(bt.count, min_batches, run);
    return nullptr;
  }
  for (int64_t t = 0; t < bt.count; t++) one(t, args.pool);
  return nullptr;
}

// ---------- gemm ----------

// Fills Y [M, N] with beta * C broadcast (C of rank <= 2); checks C's dims first.
const char* fill_gemm_c(const TensorView& c, float beta, float* y, int64_t m, int64_t n) {
  if (c.dtype != kFloat32) return kernel_error("gemm: C must be float32, got dtype %d", c.dtype);
  if (c.rank > 2) return kernel_error("gemm: C must have rank <= 2, got %d", c.rank);
  const int64_t cm = c.rank == 2 ? c.dims[0] : 1;
  const int64_t cn = c.rank >= 1 ? c.dims[c.rank - 1] : 1;
  if ((cm != 1 && cm != m) || (cn != 1 && cn != n))
    return kernel_error("gemm: C [%lld, %lld] does not broadcast to [%lld, %lld]", (long long)cm, (long long)cn,
                        (long long)m, (long long)n);
  const float* cp = c.as<float>();
  for (int64_t i = 0; i < m; i++) {
    const float* row = cp + (cm == 1 ? 0 : i * cn);
    float* out = y + i * n;
    if (cn == 1) std::fill(out, out + n, beta * row[0]);
    else for (int64_t j = 0; j < n; j++) out[j] = beta * row[j];
  }
  return nullptr;
}

const char* gemm(const KernelArgs& args) {
  using namespace gemm_args;
  if (const char* err = check_arity("gemm", args, kArity)) return err;
  if (const char* err = check_variant("gemm", args.variant)) return err;
  const TensorView &a = args.in[0], &b = args.in[1], &y = args.out[0];
  if (!a.data || !b.data) return "gemm: missing input";
  if (a.dtype != kFloat32 || b.dtype != kFloat32 || y.dtype != kFloat32)
    return kernel_error("gemm: float32 only, got A %d, B %d, Y %d", a.dtype, b.dtype, y.dtype);
  if (a.rank != 2 || b.rank != 2 || y.rank != 2)
    return kernel_error("gemm: A, B and Y must be 2-D, got ranks %d, %d, %d", a.rank, b.rank, y.rank);
  const bool ta = args.iargs[kTransA] != 0, tb = args.iargs[kTransB] != 0;
  const int64_t m = ta ? a.dims[1] : a.dims[0], k = ta ? a.dims[0] : a.dims[1];
  const int64_t kb = tb ? b.dims[1] : b.dims[0], n = tb ? b.dims[0] : b.dims[1];
  if (k != kb) return kernel_error("gemm: inner dims differ: %lld vs %lld", (long long)k, (long long)kb);
  if (y.dims[0] != m || y.dims[1] != n)
    return kernel_error("gemm: Y is [%lld, %lld], expected [%lld, %lld]", (long long)y.dims[0], (long long)y.dims[1],
                        (long long)m, (long long)n);
  if (const char* err = check_blas_dims("gemm", m, n, k)) return err;
#ifdef PLANC_HAVE_OPENBLAS
  blas_single_thread();
#endif
  const float alpha = static_cast<float>(args.fargs[kAlpha]), beta = static_cast<float>(args.fargs[kBeta]);
  const bool has_c = args.n_in == 3 && args.in[2].data != nullptr && beta != 0.0f;
  float* yp = y.as<float>();
  if (has_c) {
    if (const char* err = fill_gemm_c(args.in[2], beta, yp, m, n)) return err;
  }
  sgemm(Product{m, n, k, alpha, {a.as<float>(), a.dims[1], ta}, {b.as<float>(), b.dims[1], tb}, yp, n, has_c}, args.pool,
        args.variant);
  return nullptr;
}

// ---------- fused_matmul ----------

// One epilogue pass over rows of Y, specialized so the inner loop has no branches (none/relu vectorize; the
// double-precision GELU/SiLU do not, but they are rare).
template <int Act, bool HasBias, bool HasRes>
void epilogue_rows(float* y, const float* b, const float* r, int64_t n, int64_t rows) {
  for (int64_t i = 0; i < rows; i++) {
    float* row = y + i * n;
    const float* rrow = HasRes ? r + i * n : nullptr;
    for (int64_t j = 0; j < n; j++) {
      float v = row[j];
      if constexpr (HasBias) v += b[j];
      if constexpr (Act == kActRelu) v = v > 0.0f ? v : 0.0f;
      else if constexpr (Act != kActNone) v = activate(v, Act);
      if constexpr (HasRes) v += rrow[j];
      row[j] = v;
    }
  }
}

using Epilogue = void (*)(float*, const float*, const float*, int64_t, int64_t);

template <int Act>
Epilogue epilogue_with(bool bias, bool res) {
  if (bias) return res ? epilogue_rows<Act, true, true> : epilogue_rows<Act, true, false>;
  return res ? epilogue_rows<Act, false, true> : epilogue_rows<Act, false, false>;
}

Epilogue epilogue_for(int64_t act, bool bias, bool res) {
  switch (act) {
    case kActRelu: return epilogue_with<kActRelu>(bias, res);
    case kActGelu: return epilogue_with<kActGelu>(bias, res);
    case kActGeluTanh: return epilogue_with<kActGeluTanh>(bias, res);
    case kActSilu: return epilogue_with<kActSilu>(bias, res);
    default: return epilogue_with<kActNone>(bias, res);
  }
}

// Y = act(A x W + bias) + residual: the matmul, then one pass over Y while it is still in cache.
// Inputs: A, W, bias? ([N]), residual? (Y's dims); iargs: activation (Activation, generated/kernel_enums.h).
const char* fused_matmul(const KernelArgs& args) {
  if (const char* err = check_arity("fused_matmul", args, fused_matmul_args::kArity)) return err;
  if (const char* err = check_variant("fused_matmul", args.variant)) return err;
  const int64_t act = args.iargs[fused_matmul_args::kActivation];
  if (act < 0 || act >= kActCount) return kernel_error("fused_matmul: unknown activation %lld", static_cast<long long>(act));
  KernelArgs mm = args;  // A, W as a matmul (with the call's variant)
  mm.n_in = 2;
  mm.n_iargs = 0;
  if (const char* err = matmul(mm)) return err;
  const TensorView &y = args.out[0], &bias = args.in[2], &res = args.in[3];
  const int64_t n = y.dims[y.rank - 1];
  if (n == 0 || y.numel == 0) return nullptr;
  const int64_t rows = y.numel / n;
  if (bias.data && (bias.dtype != kFloat32 || bias.numel != n))
    return kernel_error("fused_matmul: bias must be float32 with %lld elements, got dtype %d with %lld", static_cast<long long>(n), bias.dtype, static_cast<long long>(bias.numel));
  if (res.data) {
    bool same = res.dtype == kFloat32 && res.rank == y.rank;
    for (int i = 0; same && i < y.rank; i++) same = res.dims[i] == y.dims[i];
    if (!same) return "fused_matmul: residual must be float32 with the output's dims";
  }
  const float* b = bias.data ? bias.as<float>() : nullptr;
  const float* r = res.data ? res.as<float>() : nullptr;
  float* yp = y.as<float>();
  const Epilogue pass = epilogue_for(act, b != nullptr, r != nullptr);
  auto run = [&](int64_t i0, int64_t i1) { pass(yp + i0 * n, b, r ? r + i0 * n : nullptr, n, i1 - i0); };
  const int64_t min_rows = std::max<int64_t>(1, (1 << 14) / n);
  if (args.pool) args.pool->parallel_for(rows, min_rows, run);
  else run(0, rows);
  return nullptr;
}

const KernelDef kDefs[] = {
    {"matmul", matmul, gemm_variant_unavailable},
    {"gemm", gemm, gemm_variant_unavailable},
    {"fused_matmul", fused_matmul, gemm_variant_unavailable},
};

}  // namespace

KernelList gemm_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
