// qgather: rows of an int8 table (a quantized embedding) dequantized into float32 by their per-row scales (12-bit rows
// with the table's residual plane).
#include <cstring>

#include "../kernel.h"
#include "../threadpool.h"
#include "qgemm.h"

namespace planc {
namespace {

int64_t index_value(const TensorView& ind, int64_t k) {
  return ind.dtype == kInt64 ? ind.as<int64_t>()[k] : static_cast<int64_t>(ind.as<int32_t>()[k]);
}

const char* qgather(const KernelArgs& args) {
  if (const char* err = check_arity("qgather", args, qgather_args::kArity)) return err;
  const TensorView &w = args.in[0], &scale = args.in[1], &ind = args.in[2], &y = args.out[0];
  if (w.dtype != kInt8 || w.rank != 2) return kernel_error("qgather: W must be int8 [V, Dp], got %s %s", dtype_name(w.dtype), dims_str(w).c_str());
  const int64_t v = w.dims[0], dp = w.dims[1], d = args.iargs[qgather_args::kD];
  if (d < 1 || d > dp) return kernel_error("qgather: d = %lld is out of range for W %s", (long long)d, dims_str(w).c_str());
  if (scale.dtype != kFloat32 || scale.rank != 1 || scale.dims[0] != v)
    return kernel_error("qgather: scale must be float32 [%lld], got %s %s", (long long)v, dtype_name(scale.dtype), dims_str(scale).c_str());
  if (ind.dtype != kInt64 && ind.dtype != kInt32) return kernel_error("qgather: indices must be int32 or int64, got %s", dtype_name(ind.dtype));
  if (y.dtype != kFloat32 || y.rank != ind.rank + 1 || y.dims[y.rank - 1] != d)
    return kernel_error("qgather: Y must be float32 of indices' dims + [%lld], got %s %s", (long long)d, dtype_name(y.dtype), dims_str(y).c_str());
  for (int i = 0; i < ind.rank; i++)
    if (y.dims[i] != ind.dims[i]) return kernel_error("qgather: Y %s does not match indices %s", dims_str(y).c_str(), dims_str(ind).c_str());
  const bool fine = args.n_in > 3 && args.in[3].data;
  if (fine && (!view_ok(args.in[3]) || args.in[3].dtype != kUint8 || args.in[3].rank != 2 || args.in[3].dims[0] != v || args.in[3].dims[1] * 2 != dp))
    return kernel_error("qgather: residual must be uint8 [%lld, %lld], got %s %s", (long long)v, (long long)(dp / 2), dtype_name(args.in[3].dtype),
                        dims_str(args.in[3]).c_str());
  const int64_t m = ind.numel;
  for (int64_t k = 0; k < m; k++) {
    const int64_t i = index_value(ind, k);
    if (i < -v || i >= v) return kernel_error("qgather: index %lld at position %lld is out of range for %lld rows", (long long)i, (long long)k, (long long)v);
  }
  if (m == 0) return nullptr;
  const int8_t* q = w.as<int8_t>();
  const float* s = scale.as<float>();
  const uint8_t* res = fine ? args.in[3].as<uint8_t>() : nullptr;
  float* out = y.as<float>();
  run_parallel(args, m, 16, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; k++) {
      int64_t i = index_value(ind, k);
      if (i < 0) i += v;
      const int8_t* row = q + i * dp;
      float* o = out + k * d;
      if (res) {
        // 12-bit rows: (15 · q + r) · (s / 15)
        const uint8_t* rr = res + i * (dp / 2);
        const float f = s[i] / static_cast<float>(qgemm::kResidualSteps);
        for (int64_t c = 0; c < d; c++) o[c] = static_cast<float>(qgemm::kResidualSteps * row[c] + qgemm::residual_at(rr, c)) * f;
        continue;
      }
      const float f = s[i];
      for (int64_t c = 0; c < d; c++) o[c] = static_cast<float>(row[c]) * f;
    }
  });
  return nullptr;
}

const KernelDef kDefs[] = {
    {"qgather", qgather},
};

}  // namespace

KernelList qgather_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
