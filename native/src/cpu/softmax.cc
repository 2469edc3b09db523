// Softmax and log-softmax of float32 along one axis: max-subtracted, max and sum in one blocked pass, threaded over rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"
#include "vec_math.h"

namespace planc {
namespace {

// y[i] = e^(x[i] - m); returns the sum.
PLANC_HOT_BODY float exp_store_sum_body(const float* x, int64_t n, float m, float* y) {
  float s = 0;
  int64_t i = 0;
#ifdef PLANC_VEC8
  v8f s0 = {}, s1 = {};
  for (; i + 16 <= n; i += 16) {
    const v8f e0 = exp8(load8(x + i) - m), e1 = exp8(load8(x + i + 8) - m);
    store8(y + i, e0);
    store8(y + i + 8, e1);
    s0 += e0;
    s1 += e1;
  }
  s = sum8(s0 + s1);
#endif
  for (; i < n; i++) {
    y[i] = exp_approx(x[i] - m);
    s += y[i];
  }
  return s;
}
PLANC_HOT_DISPATCH(float, exp_store_sum, (const float* x, int64_t n, float m, float* y), (x, n, m, y))

// y = (x - m) - c: x - m first, which is exact near the max, so log-softmax keeps float precision at large x.
PLANC_HOT_BODY void shift_run_body(const float* x, float* y, int64_t n, float m, float c) {
  for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) - c;
}
PLANC_HOT_DISPATCH(void, shift_run, (const float* x, float* y, int64_t n, float m, float c), (x, y, n, m, c))

// Elements per block of the one-pass max+sum scan: each block is rescaled once when the running max grows.
constexpr int64_t kBlock = 1024;

// Softmax (or log-softmax) of one contiguous row. Pass 1 keeps a running max m and sum s of e^(x - m), block by
// block (for softmax it also stores e^(x - m_block)); pass 2 rescales each block (or writes x - m - log s).
void softmax_row(const float* x, float* y, int64_t n, bool log, std::vector<float>& marks) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  marks.resize(static_cast<size_t>(blocks));
  float m = -kInf;
  double s = 0;
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t off = b * kBlock, len = std::min(kBlock, n - off);
    const float bm = nan_max(x + off, len);
    if (bm != bm) {  // a NaN makes the whole row NaN, as in the reference
      std::fill(y, y + n, kNaN);
      return;
    }
    if (bm > m) {
      s *= std::exp(static_cast<double>(m) - bm);
      m = bm;
    }
    marks[b] = m;
    if (m == -kInf) continue;  // all -inf so far: contributes nothing
    s += log ? exp_sum(x + off, len, m) : exp_store_sum(x + off, len, m, y + off);
  }
  if (log) {
    // m = -inf (every element -inf) gives NaN, as in the reference; so does m = +inf (x - m or s is NaN then).
    shift_run(x, y, n, m, m == -kInf ? kNaN : static_cast<float>(std::log(s)));
    return;
  }
  for (int64_t b = 0; b < blocks; b++) {
    const int64_t off = b * kBlock, len = std::min(kBlock, n - off);
    if (marks[b] == -kInf) {
      std::fill(y + off, y + off + len, m == -kInf ? kNaN : 0.0f);
      continue;
    }
    scale_run(y + off, len, static_cast<float>(std::exp(static_cast<double>(marks[b]) - m) / s));
  }
}

// mx[q] = NaN-propagating max(mx[q], x[q]).
PLANC_HOT_BODY void max_into_body(float* mx, const float* x, int64_t w) {
  int64_t q = 0;
#ifdef PLANC_VEC8
  for (; q + 8 <= w; q += 8) store8(mx + q, nan_max8(load8(mx + q), load8(x + q)));
#endif
  for (; q < w; q++) mx[q] = (x[q] > mx[q] || x[q] != x[q]) ? x[q] : mx[q];
}
PLANC_HOT_DISPATCH(void, max_into, (float* mx, const float* x, int64_t w), (mx, x, w))

// e = e^(x[q] - mx[q]); sum[q] += e; y[q] = e unless y is null.
PLANC_HOT_BODY void exp_into_body(const float* x, const float* mx, float* y, float* sum, int64_t w) {
  int64_t q = 0;
#ifdef PLANC_VEC8
  for (; q + 8 <= w; q += 8) {
    const v8f e = exp8(load8(x + q) - load8(mx + q));
    if (y) store8(y + q, e);
    store8(sum + q, load8(sum + q) + e);
  }
#endif
  for (; q < w; q++) {
    const float e = exp_approx(x[q] - mx[q]);
    if (y) y[q] = e;
    sum[q] += e;
  }
}
PLANC_HOT_DISPATCH(void, exp_into, (const float* x, const float* mx, float* y, float* sum, int64_t w), (x, mx, y, sum, w))

// y[q] = (x[q] - m[q]) - c[q].
PLANC_HOT_BODY void sub_into_body(const float* x, const float* m, const float* c, float* y, int64_t w) {
  for (int64_t q = 0; q < w; q++) y[q] = (x[q] - m[q]) - c[q];
}
PLANC_HOT_DISPATCH(void, sub_into, (const float* x, const float* m, const float* c, float* y, int64_t w), (x, m, c, y, w))

PLANC_HOT_BODY void mul_into_body(float* y, const float* f, int64_t w) {
  for (int64_t q = 0; q < w; q++) y[q] *= f[q];
}
PLANC_HOT_DISPATCH(void, mul_into, (float* y, const float* f, int64_t w), (y, f, w))

// Softmax along a strided axis: x is [len, inner] (row stride `inner`); columns q0..q1 are done together.
void softmax_columns(const float* x, float* y, int64_t len, int64_t inner, int64_t q0, int64_t q1, bool log,
                     float* mx, float* sum) {
  const int64_t w = q1 - q0;
  std::fill(mx, mx + w, -kInf);
  std::fill(sum, sum + w, 0.0f);
  for (int64_t i = 0; i < len; i++) max_into(mx, x + i * inner + q0, w);
  for (int64_t i = 0; i < len; i++) exp_into(x + i * inner + q0, mx, log ? nullptr : y + i * inner + q0, sum, w);
  if (log) {
    for (int64_t q = 0; q < w; q++) sum[q] = std::log(sum[q]);
    for (int64_t i = 0; i < len; i++) sub_into(x + i * inner + q0, mx, sum, y + i * inner + q0, w);
    return;
  }
  for (int64_t q = 0; q < w; q++) sum[q] = 1.0f / sum[q];
  for (int64_t i = 0; i < len; i++) mul_into(y + i * inner + q0, sum, w);
}

// Columns per task on the strided path.
constexpr int64_t kColumns = 256;

const char* softmax(const KernelArgs& args) {
  if (const char* err = check_arity("softmax", args, softmax_args::kArity)) return err;
  const TensorView &x = args.in[0], &y = args.out[0];
  if (!x.data) return "softmax: missing input";
  if (x.dtype != kFloat32 || y.dtype != kFloat32)
    return kernel_error("softmax: float32 only, got X %d, Y %d", x.dtype, y.dtype);
  if (y.rank != x.rank) return kernel_error("softmax: Y rank %d differs from X rank %d", y.rank, x.rank);
  for (int d = 0; d < x.rank; d++)
    if (y.dims[d] != x.dims[d])
      return kernel_error("softmax: Y dim %d is %lld, X has %lld", d, (long long)y.dims[d], (long long)x.dims[d]);
  const int64_t given = args.iargs[softmax_args::kAxis];
  int64_t axis = given;
  const bool log = args.iargs[softmax_args::kLog] != 0;
  if (x.rank == 0) {
    if (axis != 0 && axis != -1) return kernel_error("softmax: axis %lld is out of range for rank 0", (long long)axis);
  } else {
    if (axis < 0) axis += x.rank;
    if (axis < 0 || axis >= x.rank)
      return kernel_error("softmax: axis %lld is out of range for rank %d", (long long)given, x.rank);
  }
  int64_t outer = 1, len = 1, inner = 1;
  for (int d = 0; d < x.rank; d++) {
    if (d < axis) outer *= x.dims[d];
    else if (d == axis) len = x.dims[d];
    else inner *= x.dims[d];
  }
  if (x.numel == 0) return nullptr;
  const float* xp = x.as<float>();
  float* yp = y.as<float>();
  if (inner == 1) {
    auto rows = [&](int64_t r0, int64_t r1) {
      static thread_local std::vector<float> marks;
      for (int64_t r = r0; r < r1; r++) softmax_row(xp + r * len, yp + r * len, len, log, marks);
    };
    const int64_t min_rows = std::max<int64_t>(1, 8192 / len);
    if (args.pool) args.pool->parallel_for(outer, min_rows, rows);
    else rows(0, outer);
    return nullptr;
  }
  const int64_t col_tasks = (inner + kColumns - 1) / kColumns;
  auto tasks = [&](int64_t t0, int64_t t1) {
    static thread_local std::vector<float> buf;
    buf.resize(2 * kColumns);
    for (int64_t t = t0; t < t1; t++) {
      const int64_t o = t / col_tasks, q0 = (t % col_tasks) * kColumns, q1 = std::min(inner, q0 + kColumns);
      softmax_columns(xp + o * len * inner, yp + o * len * inner, len, inner, q0, q1, log, buf.data(),
                      buf.data() + kColumns);
    }
  };
  const int64_t per_task = len * std::min(inner, kColumns);
  const int64_t min_tasks = std::max<int64_t>(1, 8192 / per_task);
  if (args.pool) args.pool->parallel_for(outer * col_tasks, min_tasks, tasks);
  else tasks(0, outer * col_tasks);
  return nullptr;
}

const KernelDef kDefs[] = {
    {"softmax", softmax},
};

}  // namespace

KernelList softmax_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
