// Unary elementwise kernels: math functions, activations, rounding, not, and clip with optional scalar bounds.
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

#include "../kernel.h"
#include "../threadpool.h"

namespace planc {
namespace {

// The schema's counts (arity); X and Y present, same dims and dtype.
const char* check_unary(const char* name, const KernelArgs& a, const KernelArity& arity) {
  if (const char* err = check_arity(name, a, arity)) return err;
  if (!view_ok(a.in[0])) return kernel_error("%s: input X is missing or malformed", name);
  if (!view_ok(a.out[0])) return kernel_error("%s: output is malformed", name);
  if (!same_dims(a.in[0], a.out[0])) {
    return kernel_error("%s: output dims %s differ from input dims %s", name, dims_str(a.out[0]).c_str(),
                        dims_str(a.in[0]).c_str());
  }
  if (a.in[0].dtype != a.out[0].dtype) {
    return kernel_error("%s: output dtype %s differs from input dtype %s", name, dtype_name(a.out[0].dtype),
                        dtype_name(a.in[0].dtype));
  }
  return nullptr;
}

// y[i] = op(x[i]) over the whole tensor, in parallel chunks.
template <class T, class Op>
void map(const KernelArgs& args, const Op& op, int64_t chunk) {
  const T* x = args.in[0].as<const T>();
  T* y = args.out[0].as<T>();
  run_parallel(args, args.in[0].numel, chunk, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) y[i] = op(x[i]);
  });
}

constexpr int64_t kCheap = 1 << 15;   // elements per chunk for a few-cycle op
constexpr int64_t kCostly = 1 << 11;  // for libm calls

// Float-only ops (float32 computed through double, as the reference rounds a double result once).
template <class Op>
const char* float_kernel(const KernelArgs& args, const char* name, const KernelArity& arity, const Op& op, int64_t chunk) {
  if (const char* err = check_unary(name, args, arity)) return err;
  switch (args.in[0].dtype) {
    case kFloat32: map<float>(args, op, chunk); return nullptr;
    case kFloat64: map<double>(args, op, chunk); return nullptr;
    default: return kernel_error("%s: unsupported dtype %s", name, dtype_name(args.in[0].dtype));
  }
}

// Ops defined for floats and signed ints.
template <class Op>
const char* numeric_kernel(const KernelArgs& args, const char* name, const KernelArity& arity, const Op& op, int64_t chunk) {
  if (const char* err = check_unary(name, args, arity)) return err;
  switch (args.in[0].dtype) {
    case kFloat32: map<float>(args, op, chunk); return nullptr;
    case kFloat64: map<double>(args, op, chunk); return nullptr;
    case kInt32: map<int32_t>(args, op, chunk); return nullptr;
    case kInt64: map<int64_t>(args, op, chunk); return nullptr;
    case kInt8: map<int8_t>(args, op, chunk); return nullptr;
    default: return kernel_error("%s: unsupported dtype %s", name, dtype_name(args.in[0].dtype));
  }
}

// ---- element functions ----

// A double-precision function applied to T: float32 rounds the double result once.
template <class F> struct ViaDouble {
  F f;
  template <class T> T operator()(T x) const { return static_cast<T>(f(static_cast<double>(x))); }
};
template <class F> ViaDouble<F> via_double(F f) { return ViaDouble<F>{f}; }

template <class T> using Unsigned = typename std::make_unsigned<T>::type;

struct Relu {
  template <class T> T operator()(T x) const { return x > 0 ? x : T(0); }
};
struct Neg {
  template <class T> T operator()(T x) const {
    if constexpr (std::is_integral<T>::value) return static_cast<T>(Unsigned<T>(0) - static_cast<Unsigned<T>>(x));
    else return -x;
  }
};
struct Abs {
  template <class T> T operator()(T x) const {
    if constexpr (std::is_integral<T>::value) return x < 0 ? Neg()(x) : x;
    else return std::fabs(x);
  }
};
struct Sign {
  template <class T> T operator()(T x) const { return x > 0 ? T(1) : x < 0 ? T(-1) : x; }
};
struct Reciprocal {
  template <class T> T operator()(T x) const { return T(1) / x; }
};
struct Sqrt {
  template <class T> T operator()(T x) const { return std::sqrt(x); }
};
struct Floor {
  template <class T> T operator()(T x) const { return std::floor(x); }
};
struct Ceil {
  template <class T> T operator()(T x) const { return std::ceil(x); }
};
// Half to even under the default rounding mode.
struct Round {
  template <class T> T operator()(T x) const { return std::nearbyint(x); }
};

// 1/(1+e^-v) for v ≥ 0, e^v/(1+e^v) below: the reference's formulas, written without a branch on the sign.
double sigmoid(double v) {
  double e = std::exp(-std::fabs(v));
  double d = 1 + e;
  return v >= 0 ? 1 / d : e / d;
}

// v + log1p(e^-v) for v > 0, log1p(e^v) otherwise (same operations as the reference, branch-free).
double softplus(double v) {
  double l = std::log1p(std::exp(-std::fabs(v)));
  return v > 0 ? v + l : l;
}

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

double gelu_erf(double v) { return 0.5 * v * (1 + std::erf(v * kSqrt1_2)); }
double gelu_tanh(double v) { return 0.5 * v * (1 + std::tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))); }

struct LeakyRelu {
  double alpha;
  template <class T> T operator()(T x) const { return x > 0 ? x : static_cast<T>(static_cast<double>(x) * alpha); }
};
struct Elu {
  double alpha;
  template <class T> T operator()(T x) const { return x < 0 ? static_cast<T>(alpha * std::expm1(static_cast<double>(x))) : x; }
};
struct HardSigmoid {
  double alpha, beta;
  template <class T> T operator()(T x) const {
    double v = alpha * static_cast<double>(x) + beta;
    v = v < 1 ? v : 1;
    return static_cast<T>(v > 0 ? v : 0);
  }
};
// min(max(x, lo), hi): hi wins when lo > hi (np.clip); NaN passes through, NaN bounds are ignored.
template <class T> struct Clip {
  T lo, hi;
  bool has_lo, has_hi;
  T operator()(T x) const {
    T a = (has_lo && x < lo) ? lo : x;
    return (has_hi && a > hi) ? hi : a;
  }
};

// ---- kernels ----

// NAME_kernel: float_kernel for kernel NAME with the schema's NAME_args::kArity.
#define FLOAT_KERNEL(name, op, chunk) \
  const char* name##_kernel(const KernelArgs& args) { return float_kernel(args, #name, name##_args::kArity, op, chunk); }

FLOAT_KERNEL(exp, via_double([](double v) { return std::exp(v); }), kCostly)
FLOAT_KERNEL(log, via_double([](double v) { return std::log(v); }), kCostly)
FLOAT_KERNEL(sqrt, Sqrt(), kCheap)
FLOAT_KERNEL(reciprocal, Reciprocal(), kCheap)
FLOAT_KERNEL(tanh, via_double([](double v) { return std::tanh(v); }), kCostly)
FLOAT_KERNEL(sigmoid, via_double(sigmoid), kCostly)
FLOAT_KERNEL(erf, via_double([](double v) { return std::erf(v); }), kCostly)
FLOAT_KERNEL(floor, Floor(), kCheap)
FLOAT_KERNEL(ceil, Ceil(), kCheap)
FLOAT_KERNEL(round, Round(), kCheap)
FLOAT_KERNEL(sin, via_double([](double v) { return std::sin(v); }), kCostly)
FLOAT_KERNEL(cos, via_double([](double v) { return std::cos(v); }), kCostly)
FLOAT_KERNEL(softplus, via_double(softplus), kCostly)

#undef FLOAT_KERNEL

const char* relu_kernel(const KernelArgs& args) { return numeric_kernel(args, "relu", relu_args::kArity, Relu(), kCheap); }
const char* neg_kernel(const KernelArgs& args) { return numeric_kernel(args, "neg", neg_args::kArity, Neg(), kCheap); }
const char* abs_kernel(const KernelArgs& args) { return numeric_kernel(args, "abs", abs_args::kArity, Abs(), kCheap); }
const char* sign_kernel(const KernelArgs& args) { return numeric_kernel(args, "sign", sign_args::kArity, Sign(), kCheap); }

const char* not_kernel(const KernelArgs& args) {
  if (const char* err = check_unary("not", args, not_args::kArity)) return err;
  if (args.in[0].dtype != kBool) return kernel_error("not: input must be bool, got %s", dtype_name(args.in[0].dtype));
  map<uint8_t>(args, [](uint8_t v) { return static_cast<uint8_t>(v == 0); }, kCheap);
  return nullptr;
}

// gelu: iarg approximate (GeluApprox: kGeluNone = exact via erf, kGeluTanh = tanh approximation).
const char* gelu_kernel(const KernelArgs& args) {
  using namespace gelu_args;
  const int64_t approx = args.n_iargs == kIargCount ? args.iargs[kApproximate] : kGeluNone;
  if (approx == kGeluTanh) return float_kernel(args, "gelu", kArity, via_double(gelu_tanh), kCostly);
  if (approx != kGeluNone) return kernel_error("gelu: approx must be 0 (none) or 1 (tanh), got %lld", static_cast<long long>(approx));
  return float_kernel(args, "gelu", kArity, via_double(gelu_erf), kCostly);
}

// The farg values are read only when the count fits (float_kernel then checks it).
const char* leaky_relu_kernel(const KernelArgs& args) {
  using namespace leaky_relu_args;
  double alpha = args.n_fargs == kFargCount ? args.fargs[kAlpha] : 0;
  return float_kernel(args, "leaky_relu", kArity, LeakyRelu{alpha}, kCheap);
}

const char* elu_kernel(const KernelArgs& args) {
  using namespace elu_args;
  double alpha = args.n_fargs == kFargCount ? args.fargs[kAlpha] : 0;
  return float_kernel(args, "elu", kArity, Elu{alpha}, kCostly);
}

const char* hard_sigmoid_kernel(const KernelArgs& args) {
  using namespace hard_sigmoid_args;
  double alpha = args.n_fargs == kFargCount ? args.fargs[kAlpha] : 0;
  double beta = args.n_fargs == kFargCount ? args.fargs[kBeta] : 0;
  return float_kernel(args, "hard_sigmoid", kArity, HardSigmoid{alpha, beta}, kCheap);
}

// A clip bound: absent (omitted input), or a one-element tensor of X's dtype.
template <class T>
const char* clip_bound(const KernelArgs& args, int i, T* v, bool* has) {
  *has = false;
  if (i >= args.n_in || args.in[i].data == nullptr) return nullptr;
  const TensorView& b = args.in[i];
  const char* what = i == 1 ? "min" : "max";
  if (!view_ok(b) || b.numel != 1) return kernel_error("clip: %s must be a scalar, got dims %s", what, dims_str(b).c_str());
  if (b.dtype != args.in[0].dtype) {
    return kernel_error("clip: %s dtype %s differs from X dtype %s", what, dtype_name(b.dtype), dtype_name(args.in[0].dtype));
  }
  *v = b.as<const T>()[0];
  *has = true;
  return nullptr;
}

template <class T>
const char* clip_typed(const KernelArgs& args) {
  Clip<T> op{T(0), T(0), false, false};
  if (const char* err = clip_bound<T>(args, 1, &op.lo, &op.has_lo)) return err;
  if (const char* err = clip_bound<T>(args, 2, &op.hi, &op.has_hi)) return err;
  map<T>(args, op, kCheap);
  return nullptr;
}

const char* clip_kernel(const KernelArgs& args) {
  if (const char* err = check_unary("clip", args, clip_args::kArity)) return err;
  switch (args.in[0].dtype) {
    case kFloat32: return clip_typed<float>(args);
    case kFloat64: return clip_typed<double>(args);
    case kInt32: return clip_typed<int32_t>(args);
    case kInt64: return clip_typed<int64_t>(args);
    case kInt8: return clip_typed<int8_t>(args);
    case kUint8: return clip_typed<uint8_t>(args);
    default: return kernel_error("clip: unsupported dtype %s", dtype_name(args.in[0].dtype));
  }
}

const KernelDef kDefs[] = {
    {"relu", relu_kernel},
    {"neg", neg_kernel},
    {"abs", abs_kernel},
    {"exp", exp_kernel},
    {"log", log_kernel},
    {"sqrt", sqrt_kernel},
    {"reciprocal", reciprocal_kernel},
    {"tanh", tanh_kernel},
    {"sigmoid", sigmoid_kernel},
    {"erf", erf_kernel},
    {"floor", floor_kernel},
    {"ceil", ceil_kernel},
    {"round", round_kernel},
    {"sin", sin_kernel},
    {"cos", cos_kernel},
    {"sign", sign_kernel},
    {"softplus", softplus_kernel},
    {"not", not_kernel},
    {"gelu", gelu_kernel},
    {"leaky_relu", leaky_relu_kernel},
    {"elu", elu_kernel},
    {"hard_sigmoid", hard_sigmoid_kernel},
    {"clip", clip_kernel},
};

}  // namespace

KernelList unary_kernels() { return KernelList{kDefs, sizeof(kDefs) / sizeof(kDefs[0])}; }

}  // namespace planc
