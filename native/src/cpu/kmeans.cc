// k-means assignment step: each row's nearest centroid by argmin ‖C‖² − 2 x·C, in row blocks on the project's GEMM.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"

namespace planc {

KernelList gemm_kernels();

namespace {

// Scores kept per block: rows × r floats of x·Cᵀ, at most about 16 MB, so the GEMM sees tall panels (M ≥ 64).
constexpr int64_t kBlockFloats = int64_t(1) << 22;
constexpr int64_t kMinBlockRows = 64;
// Up to this many centroids the scores are computed transposed, C · xᵀ: a GEMV over the rows (M = r), which the GEMM
// runs as parallel dot products; x · Cᵀ with N ≤ 4 is a poor GEMM shape (k-means++ seeding calls with r = 1).
constexpr int64_t kTransposedMaxR = 4;

// The "gemm" kernel of cpu/gemm.cc (Y = alpha op(A) op(B)): OpenBLAS, the AVX-512 kernels or the built-in GEMM.
KernelFn gemm_kernel() {
  static const KernelFn fn = [] {
    KernelList list = gemm_kernels();
    for (size_t i = 0; i < list.count; i++)
      if (std::strcmp(list.defs[i].name, "gemm") == 0) return list.defs[i].fn;
    return static_cast<KernelFn>(nullptr);
  }();
  return fn;
}

// A row-major 2-D float32 view (the GEMM only reads its inputs, so the const is cast away).
TensorView matrix(const float* p, int64_t rows, int64_t cols) {
  TensorView t;
  t.data = const_cast<float*>(p);
  t.dtype = kFloat32;
  t.rank = 2;
  t.dims[0] = rows;
  t.dims[1] = cols;
  t.numel = rows * cols;
  return t;
}

// scores[rows, r] = x[rows, d] · c[r, d]ᵀ, or with `transposed` scores[r, rows] = c · xᵀ.
const char* block_scores(const float* x, int64_t rows, int64_t d, const float* c, int64_t r, float* scores,
                         bool transposed, ThreadPool* pool) {
  TensorView in[2] = {matrix(x, rows, d), matrix(c, r, d)};
  if (transposed) std::swap(in[0], in[1]);
  TensorView out[1] = {transposed ? matrix(scores, r, rows) : matrix(scores, rows, r)};
  int64_t iargs[gemm_args::kIargCount] = {};
  iargs[gemm_args::kTransA] = 0;  // A as is
  iargs[gemm_args::kTransB] = 1;  // B transposed
  double fargs[gemm_args::kFargCount] = {};
  fargs[gemm_args::kAlpha] = 1.0;
  fargs[gemm_args::kBeta] = 0.0;
  KernelArgs args;
  args.in = in;
  args.n_in = 2;
  args.out = out;
  args.n_out = 1;
  args.iargs = iargs;
  args.n_iargs = gemm_args::kIargCount;
  args.fargs = fargs;
  args.n_fargs = gemm_args::kFargCount;
  args.pool = pool;
  return gemm_kernel()(args);
}

// Squared norm of one row, accumulated in double.
double row_norm2(const float* v, int64_t d) {
  double s = 0;
  for (int64_t k = 0; k < d; k++) s += static_cast<double>(v[k]) * v[k];
  return s;
}

// The scores of one block: x·C_j of row i at i * row_stride + j * col_stride.
struct Scores {
  const float* p;
  int64_t row_stride, col_stride;
};

// For rows [b, e) of a block: the first centroid with the least ‖C‖² − 2 x·C, and ‖x − C‖² (≥ 0) when asked.
void argmin_rows(int64_t b, int64_t e, Scores sc, int64_t r, const float* cnorm, const float* x, int64_t d,
                 int32_t* out_assign, float* out_dist) {
  for (int64_t i = b; i < e; i++) {
    const float* s = sc.p + i * sc.row_stride;
    float best = std::numeric_limits<float>::infinity();
    int64_t arg = 0;
    for (int64_t j = 0; j < r; j++) {
      const float v = cnorm[j] - 2.0f * s[j * sc.col_stride];
      if (v < best) {
        best = v;
        arg = j;
      }
    }
    out_assign[i] = static_cast<int32_t>(arg);
    if (out_dist) {
      const double dist = row_norm2(x + i * d, d) + static_cast<double>(best);
      out_dist[i] = static_cast<float>(std::max(0.0, dist));
    }
  }
}

// ‖C_j‖² for every centroid (when the caller passes none).
std::vector<float> centroid_norms(const float* c, int64_t r, int64_t d) {
  std::vector<float> out(static_cast<size_t>(r));
  for (int64_t j = 0; j < r; j++) out[j] = static_cast<float>(row_norm2(c + j * d, d));
  return out;
}

}  // namespace

// k-means assignment: out_assign[i] = argmin_j ‖C_j‖² − 2 x_i·C_j (ties: the lowest j) for x [n, d] and c [r, d],
// both row-major float32; out_dist[i] = ‖x_i − C_out_assign[i]‖² clamped at 0 (out_dist may be null). cnorm [r] is
// ‖C_j‖² (null: computed here). pool may be null. Returns nullptr, or an error message (kernel_error's buffer).
const char* kmeans_assign(const float* x, int64_t n, int64_t d, const float* c, int64_t r, const float* cnorm,
                          int32_t* out_assign, float* out_dist, ThreadPool* pool) {
  if (n < 0 || d < 0 || r < 0) return kernel_error("kmeans_assign: negative size n=%lld d=%lld r=%lld", (long long)n,
                                                    (long long)d, (long long)r);
  if (n == 0) return nullptr;
  if (r == 0) return "kmeans_assign: no centroids (r = 0)";
  if (r > std::numeric_limits<int32_t>::max()) return "kmeans_assign: r exceeds int32 assignments";
  if (!out_assign) return "kmeans_assign: null out_assign";
  if (d == 0) {  // empty rows: every centroid is at distance 0, the first one wins
    std::fill(out_assign, out_assign + n, 0);
    if (out_dist) std::fill(out_dist, out_dist + n, 0.0f);
    return nullptr;
  }
  if (!x || !c) return "kmeans_assign: null x or c";
  if (!gemm_kernel()) return "kmeans_assign: the gemm kernel is missing from this build";
  std::vector<float> own_norms;
  if (!cnorm) {
    own_norms = centroid_norms(c, r, d);
    cnorm = own_norms.data();
  }
  // Transposed (small r): blocks of x of about 4 MB, still in cache when the distances read the rows again.
  const bool transposed = r <= kTransposedMaxR;
  const int64_t block = std::min(n, std::max(kMinBlockRows, transposed ? kBlockFloats / 4 / std::max<int64_t>(d, 1) : kBlockFloats / r));
  std::vector<float> scores(static_cast<size_t>(block * r));
  for (int64_t i0 = 0; i0 < n; i0 += block) {
    const int64_t rows = std::min(block, n - i0);
    const float* xb = x + i0 * d;
    if (const char* err = block_scores(xb, rows, d, c, r, scores.data(), transposed, pool)) return err;
    const Scores sc = transposed ? Scores{scores.data(), 1, rows} : Scores{scores.data(), r, 1};
    auto run = [&](int64_t b, int64_t e) {
      argmin_rows(b, e, sc, r, cnorm, xb, d, out_assign + i0, out_dist ? out_dist + i0 : nullptr);
    };
    const int64_t min_rows = std::max<int64_t>(1, (int64_t(1) << 14) / (r + (out_dist ? d : 0)));
    if (pool) pool->parallel_for(rows, min_rows, run);
    else run(0, rows);
  }
  return nullptr;
}

}  // namespace planc
