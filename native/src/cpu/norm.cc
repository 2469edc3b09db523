// Layer and RMS normalization of float32 over the dims from an axis on, scale and bias broadcast; threaded over rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"

#include "isa.h"  // PLANC_HOT_BODY / PLANC_HOT_DISPATCH: the hot loops' copies, within PLANC_ISA's cap

namespace planc {
namespace {

// ---------- row loops ----------

// Sum of x in double (eight lanes), so the mean stays exact enough when |mean| >> the spread.
PLANC_HOT_BODY double sum_run_body(const float* x, int64_t n) {
  double lanes[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; l++) lanes[l] += static_cast<double>(x[i + l]);
  double s = 0;
  for (; i < n; i++) s += x[i];
  for (int l = 0; l < 8; l++) s += lanes[l];
  return s;
}
PLANC_HOT_DISPATCH(double, sum_run, (const float* x, int64_t n), (x, n))

// Sum of ((x - hi) - lo)^2 in double: hi + lo is the mean split into two floats, and x - hi is exact near the mean.
PLANC_HOT_BODY double sum_sq_run_body(const float* x, int64_t n, float hi, float lo) {
  double lanes[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; l++) {
      const float d = (x[i + l] - hi) - lo;
      lanes[l] += static_cast<double>(d * d);
    }
  double s = 0;
  for (; i < n; i++) {
    const float d = (x[i] - hi) - lo;
    s += static_cast<double>(d * d);
  }
  for (int l = 0; l < 8; l++) s += lanes[l];
  return s;
}
PLANC_HOT_DISPATCH(double, sum_sq_run, (const float* x, int64_t n, float hi, float lo), (x, n, hi, lo))

// y = ((x - hi) - lo) * inv * scale + bias (bias may be null).
PLANC_HOT_BODY void affine_run_body(const float* x, float* y, int64_t n, float hi, float lo, float inv,
                                    const float* scale, const float* bias) {
  if (bias) {
    for (int64_t i = 0; i < n; i++) y[i] = ((x[i] - hi) - lo) * inv * scale[i] + bias[i];
  } else {
    for (int64_t i = 0; i < n; i++) y[i] = ((x[i] - hi) - lo) * inv * scale[i];
  }
}
PLANC_HOT_DISPATCH(void, affine_run, (const float* x, float* y, int64_t n, float hi, float lo, float inv, const float* scale, const float* bias), (x, y, n, hi, lo, inv, scale, bias))

// ---------- parameters ----------

// A scale or bias input seen per row of the normalized dims: `shared` when one row of values serves every row
// (then `row` points at them, contiguous), else each row's values are gathered by broadcast strides.
struct Param {
  const float* data = nullptr;
  bool present = false;
  bool shared = true;
  const float* row = nullptr;
  std::vector<float> expanded;               // the shared row when the input itself is not one contiguous row
  int64_t stride[kMaxRank] = {0};            // per X dim: element stride in the input (0 = broadcast)
};

// Checks that p broadcasts to X's dims and prepares its per-row view; returns an error or nullptr.
const char* prepare_param(const char* kernel, const char* what, const TensorView& p, const TensorView& x, int axis,
                          int64_t cols, Param* out) {
  out->present = true;
  out->data = p.as<float>();
  if (p.dtype != kFloat32) return kernel_error("%s: %s must be float32, got dtype %d", kernel, what, p.dtype);
  if (p.rank > x.rank) return kernel_error("%s: %s has rank %d, above X's rank %d", kernel, what, p.rank, x.rank);
  const int off = x.rank - p.rank;
  int64_t st = 1;
  for (int d = x.rank - 1; d >= 0; d--) {
    const int64_t pd = d >= off ? p.dims[d - off] : 1;
    if (pd != 1 && pd != x.dims[d])
      return kernel_error("%s: %s dim %d is %lld, does not broadcast to X's %lld", kernel, what, d - off,
                          (long long)pd, (long long)x.dims[d]);
    out->stride[d] = pd == 1 ? 0 : st;
    st *= pd;
    if (d < axis && pd != 1) out->shared = false;
  }
  if (!out->shared) return nullptr;
  if (p.numel == cols) {  // exactly the normalized dims (leading 1s allowed): use it in place
    out->row = out->data;
    return nullptr;
  }
  out->expanded.resize(static_cast<size_t>(cols));
  int64_t idx[kMaxRank] = {0};
  for (int64_t j = 0; j < cols; j++) {
    int64_t src = 0;
    for (int d = axis; d < x.rank; d++) src += idx[d] * out->stride[d];
    out->expanded[j] = out->data[src];
    for (int d = x.rank - 1; d >= axis; d--) {
      if (++idx[d] < x.dims[d]) break;
      idx[d] = 0;
    }
  }
  out->row = out->expanded.data();
  return nullptr;
}

// The values of a non-shared parameter for row r (X's dims before axis, row-major), written to dst[cols].
void gather_param_row(const Param& p, const TensorView& x, int axis, int64_t r, int64_t cols, float* dst) {
  int64_t base = 0;
  for (int d = axis - 1; d >= 0; d--) {
    base += (r % x.dims[d]) * p.stride[d];
    r /= x.dims[d];
  }
  int64_t idx[kMaxRank] = {0};
  for (int64_t j = 0; j < cols; j++) {
    int64_t src = base;
    for (int d = axis; d < x.rank; d++) src += idx[d] * p.stride[d];
    dst[j] = p.data[src];
    for (int d = x.rank - 1; d >= axis; d--) {
      if (++idx[d] < x.dims[d]) break;
      idx[d] = 0;
    }
  }
}

// The parameter's values for row r: the shared row, or gathered into buf.
const float* param_row(const Param& p, const TensorView& x, int axis, int64_t r, std::vector<float>& buf, int64_t cols) {
  if (!p.present) return nullptr;
  if (p.shared) return p.row;
  buf.resize(static_cast<size_t>(cols));
  gather_param_row(p, x, axis, r, cols, buf.data());
  return buf.data();
}

// ---------- kernels ----------

// Common checks: float32 X and Y of the same dims, axis in range; sets axis (normalized), rows and cols.
const char* check_norm(const char* kernel, const KernelArgs& args, int* axis, int64_t* rows, int64_t* cols) {
  const TensorView &x = args.in[0], &y = args.out[0];
  if (!x.data || !args.in[1].data) return kernel_error("%s: missing input", kernel);
  if (x.dtype != kFloat32 || y.dtype != kFloat32)
    return kernel_error("%s: float32 only, got X %d, Y %d", kernel, x.dtype, y.dtype);
  if (y.rank != x.rank) return kernel_error("%s: Y rank %d differs from X rank %d", kernel, y.rank, x.rank);
  for (int d = 0; d < x.rank; d++)
    if (y.dims[d] != x.dims[d])
      return kernel_error("%s: Y dim %d is %lld, X has %lld", kernel, d, (long long)y.dims[d], (long long)x.dims[d]);
  static_assert(layer_norm_args::kAxis == rms_norm_args::kAxis, "layer_norm and rms_norm read one axis position");
  const int64_t given = args.iargs[layer_norm_args::kAxis];
  int64_t a = given;
  if (a < 0) a += x.rank;
  if (a < 0 || a >= x.rank)
    return kernel_error("%s: axis %lld is out of range for rank %d", kernel, (long long)given, x.rank);
  *axis = static_cast<int>(a);
  *rows = 1;
  *cols = 1;
  for (int d = 0; d < x.rank; d++) (d < a ? *rows : *cols) *= x.dims[d];
  return nullptr;
}

// Rows per task: enough work per task that small inputs run inline.
int64_t min_rows(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)); }

const char* layer_norm(const KernelArgs& args) {
  if (const char* err = check_arity("layer_norm", args, layer_norm_args::kArity)) return err;
  int axis = 0;
  int64_t rows, cols;
  if (const char* err = check_norm("layer_norm", args, &axis, &rows, &cols)) return err;
  const TensorView& x = args.in[0];
  Param scale, bias;
  if (const char* err = prepare_param("layer_norm", "scale", args.in[1], x, axis, cols, &scale)) return err;
  if (args.n_in == 3 && args.in[2].data) {
    if (const char* err = prepare_param("layer_norm", "bias", args.in[2], x, axis, cols, &bias)) return err;
  }
  // Optional outputs 1 and 2: each row's mean and 1 / sqrt(variance + epsilon) (ONNX's Mean and InvStdDev).
  float* stats[2] = {nullptr, nullptr};
  for (int k = 1; k < args.n_out; k++) {
    const TensorView& st = args.out[k];
    if (st.dtype != kFloat32 || st.numel != rows)
      return kernel_error("layer_norm: output %d must be float32 with %lld elements (one per row), got dtype %d with %lld",
                          k, (long long)rows, st.dtype, (long long)st.numel);
    stats[k - 1] = st.as<float>();
  }
  if (x.numel == 0) return nullptr;
  const double eps = args.fargs[layer_norm_args::kEpsilon];
  const float* xp = x.as<float>();
  float* yp = args.out[0].as<float>();
  auto run = [&](int64_t r0, int64_t r1) {
    static thread_local std::vector<float> sbuf, bbuf;
    for (int64_t r = r0; r < r1; r++) {
      const float* xr = xp + r * cols;
      const double mean = sum_run(xr, cols) / static_cast<double>(cols);
      const float hi = static_cast<float>(mean), lo = static_cast<float>(mean - hi);
      const double var = sum_sq_run(xr, cols, hi, lo) / static_cast<double>(cols);
      const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
      affine_run(xr, yp + r * cols, cols, hi, lo, inv, param_row(scale, x, axis, r, sbuf, cols),
                 param_row(bias, x, axis, r, bbuf, cols));
      if (stats[0]) stats[0][r] = hi;
      if (stats[1]) stats[1][r] = inv;
    }
  };
  if (args.pool) args.pool->parallel_for(rows, min_rows(cols), run);
  else run(0, rows);
  return nullptr;
}

// y = x * inv * scale.
PLANC_HOT_BODY void rms_scale_run_body(const float* x, float* y, int64_t n, float inv, const float* scale) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * scale[i];
}
PLANC_HOT_DISPATCH(void, rms_scale_run, (const float* x, float* y, int64_t n, float inv, const float* scale), (x, y, n, inv, scale))

const char* rms_norm(const KernelArgs& args) {
  if (const char* err = check_arity("rms_norm", args, rms_norm_args::kArity)) return err;
  int axis = 0;
  int64_t rows, cols;
  if (const char* err = check_norm("rms_norm", args, &axis, &rows, &cols)) return err;
  const TensorView& x = args.in[0];
  Param scale;
  if (const char* err = prepare_param("rms_norm", "scale", args.in[1], x, axis, cols, &scale)) return err;
  if (x.numel == 0) return nullptr;
  const double eps = args.fargs[rms_norm_args::kEpsilon];
  const float* xp = x.as<float>();
  float* yp = args.out[0].as<float>();
  auto run = [&](int64_t r0, int64_t r1) {
    static thread_local std::vector<float> sbuf;
    for (int64_t r = r0; r < r1; r++) {
      const float* xr = xp + r * cols;
      // float32 steps after the mean, as ONNX's function body (and the decomposed exports) compute them: models
      // whose attention logits are large (T5) turn a one-ulp difference here into visible output differences.
      const float ms = static_cast<float>(sum_sq_run(xr, cols, 0.0f, 0.0f) / static_cast<double>(cols));
      const float inv = 1.0f / std::sqrt(ms + static_cast<float>(eps));
      rms_scale_run(xr, yp + r * cols, cols, inv, param_row(scale, x, axis, r, sbuf, cols));
    }
  };
  if (args.pool) args.pool->parallel_for(rows, min_rows(cols), run);
  else run(0, rows);
  return nullptr;
}

const KernelDef kDefs[] = {
    {"layer_norm", layer_norm},
    {"rms_norm", rms_norm},
};

}  // namespace

KernelList norm_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
