// The epilogue activations of fused_matmul (gemm.cc) and qmatmul (qgemm_epilogue.cc): one formula each, computed in
// double and rounded once, so the float and the quantized products activate alike.
#pragma once
#include <cmath>
#include <cstdint>

#include "../kernel.h"

namespace planc {
// Internal linkage, like vec_math.h: each kernel file gets its own copy.
namespace {

inline float activate(float v, int64_t act) {
  const double x = v;
  switch (act) {
    case kActRelu: return v > 0.0f ? v : 0.0f;
    case kActGelu: return static_cast<float>(0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440)));
    case kActGeluTanh: return static_cast<float>(0.5 * x * (1.0 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x))));
    case kActSilu: return static_cast<float>(x / (1.0 + std::exp(-x)));
    default: return v;
  }
}

}  // namespace
}  // namespace planc
