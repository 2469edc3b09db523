// Conversion and fill kernels: cast between all supported dtypes (float16 and bfloat16 rounded to nearest even, half.h),
// copy, fill, range.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

#include "../kernel.h"
#include "../threadpool.h"
#include "half.h"

namespace planc {
namespace {

// The schema's counts (arity), then every input and the output well formed.
const char* check_counts(const char* name, const KernelArgs& a, const KernelArity& arity) {
  if (const char* err = check_arity(name, a, arity)) return err;
  for (int i = 0; i < a.n_in; i++) {
    if (!view_ok(a.in[i])) return kernel_error("%s: input %d is missing or malformed", name, i);
  }
  if (!view_ok(a.out[0])) return kernel_error("%s: output is malformed", name);
  return nullptr;
}

// ---- float16 and bfloat16 elements (conversions in half.h) ----

struct Half {
  uint16_t bits;
};

struct BFloat16 {
  uint16_t bits;
};

// ---- element conversions as ONNX Cast (and the reference) do them ----

template <class T> constexpr bool is_half() { return std::is_same<T, Half>::value || std::is_same<T, BFloat16>::value; }
template <class T> constexpr bool is_float_like() { return std::is_floating_point<T>::value || is_half<T>(); }

template <class S> double to_double(S v) {
  if constexpr (std::is_same<S, Half>::value) return static_cast<double>(half_to_float(v.bits));
  else if constexpr (std::is_same<S, BFloat16>::value) return static_cast<double>(bf16_to_float(v.bits));
  else return static_cast<double>(v);
}

// A float value into D: NaN → 0 and ±inf → 0 for narrow ints (int64 saturates), truncation, wrap modulo 2^bits.
template <class D> D from_double(double v) {
  if constexpr (std::is_same<D, Half>::value) {
    return Half{half_from_double(v)};
  } else if constexpr (std::is_same<D, BFloat16>::value) {
    return BFloat16{bf16_from_double(v)};
  } else if constexpr (std::is_same<D, bool>::value) {
    return v != 0;  // NaN is true
  } else if constexpr (std::is_floating_point<D>::value) {
    return static_cast<D>(v);
  } else if constexpr (sizeof(D) == 8) {
    if (v != v) return 0;
    if (v >= 9223372036854775808.0) return INT64_MAX;
    if (v < -9223372036854775808.0) return INT64_MIN;
    return static_cast<D>(v);
  } else {
    if (!std::isfinite(v)) return 0;
    double t = std::trunc(v);
    if (std::fabs(t) >= 9223372036854775808.0) t = std::fmod(t, 4294967296.0);
    using U = typename std::make_unsigned<D>::type;
    return static_cast<D>(static_cast<U>(static_cast<uint64_t>(static_cast<int64_t>(t))));
  }
}

// An integer value into D: ints wrap modulo 2^bits, floats round to nearest.
template <class D> D from_int(int64_t v) {
  if constexpr (std::is_same<D, Half>::value) return Half{half_from_double(static_cast<double>(v))};
  else if constexpr (std::is_same<D, BFloat16>::value) return BFloat16{bf16_from_double(static_cast<double>(v))};
  else if constexpr (std::is_same<D, bool>::value) return v != 0;
  else if constexpr (std::is_floating_point<D>::value) return static_cast<D>(v);
  else return static_cast<D>(static_cast<typename std::make_unsigned<D>::type>(static_cast<uint64_t>(v)));
}

template <class S, class D> D convert(S v) {
  if constexpr (std::is_same<S, D>::value) return v;
  // float32 to and from the halves without the double (the same values: float32 → double is exact)
  else if constexpr (std::is_same<S, float>::value && std::is_same<D, Half>::value) return Half{half_from_float(v)};
  else if constexpr (std::is_same<S, float>::value && std::is_same<D, BFloat16>::value) return BFloat16{bf16_from_float(v)};
  else if constexpr (std::is_same<S, Half>::value && std::is_same<D, float>::value) return half_to_float(v.bits);
  else if constexpr (std::is_same<S, BFloat16>::value && std::is_same<D, float>::value) return bf16_to_float(v.bits);
  else if constexpr (is_float_like<S>()) return from_double<D>(to_double(v));
  else return from_int<D>(static_cast<int64_t>(v));
}

template <class S, class D>
void cast_typed(const KernelArgs& args) {
  const S* x = args.in[0].as<const S>();
  D* y = args.out[0].as<D>();
  run_parallel(args, args.in[0].numel, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) y[i] = convert<S, D>(x[i]);
  });
}

// Calls f with a null pointer of the C++ type of dtype d; false when d is unsupported.
template <class F> bool with_type(int32_t d, F&& f) {
  switch (d) {
    case kFloat32: f(static_cast<float*>(nullptr)); return true;
    case kFloat64: f(static_cast<double*>(nullptr)); return true;
    case kInt32: f(static_cast<int32_t*>(nullptr)); return true;
    case kInt64: f(static_cast<int64_t*>(nullptr)); return true;
    case kInt8: f(static_cast<int8_t*>(nullptr)); return true;
    case kUint8: f(static_cast<uint8_t*>(nullptr)); return true;
    case kBool: f(static_cast<bool*>(nullptr)); return true;
    case kFloat16: f(static_cast<Half*>(nullptr)); return true;
    case kBFloat16: f(static_cast<BFloat16*>(nullptr)); return true;
    default: return false;
  }
}

// bool tensors hold one byte each: read them as bytes ("byte != 0" is true), write them as bool (0 or 1).
template <class S> using Read = typename std::conditional<std::is_same<S, bool>::value, uint8_t, S>::type;

const char* cast_kernel(const KernelArgs& args) {
  if (const char* err = check_counts("cast", args, cast_args::kArity)) return err;
  if (!same_dims(args.in[0], args.out[0])) {
    return kernel_error("cast: output dims %s differ from input dims %s", dims_str(args.out[0]).c_str(),
                        dims_str(args.in[0]).c_str());
  }
  auto none = [](auto*) {};
  if (!with_type(args.in[0].dtype, none)) return kernel_error("cast: unsupported input dtype %s", dtype_name(args.in[0].dtype));
  if (!with_type(args.out[0].dtype, none)) return kernel_error("cast: unsupported output dtype %s", dtype_name(args.out[0].dtype));
  with_type(args.in[0].dtype, [&](auto* s) {
    using S = Read<std::remove_pointer_t<decltype(s)>>;
    with_type(args.out[0].dtype, [&](auto* d) { cast_typed<S, std::remove_pointer_t<decltype(d)>>(args); });
  });
  return nullptr;
}

const char* copy_kernel(const KernelArgs& args) {
  if (const char* err = check_counts("copy", args, copy_args::kArity)) return err;
  size_t n = args.in[0].bytes();
  if (args.out[0].bytes() != n) {
    return kernel_error("copy: output holds %zu bytes (%s %s), input %zu bytes (%s %s)", args.out[0].bytes(),
                        dtype_name(args.out[0].dtype), dims_str(args.out[0]).c_str(), n, dtype_name(args.in[0].dtype),
                        dims_str(args.in[0]).c_str());
  }
  const char* x = static_cast<const char*>(args.in[0].data);
  char* y = static_cast<char*>(args.out[0].data);
  if (x == y || n == 0) return nullptr;
  run_parallel(args, static_cast<int64_t>(n), 1 << 20, [&](int64_t b, int64_t e) { std::memmove(y + b, x + b, e - b); });
  return nullptr;
}

template <class D>
void fill_typed(const KernelArgs& args, double value) {
  const D v = from_double<D>(value);
  D* y = args.out[0].as<D>();
  run_parallel(args, args.out[0].numel, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) y[i] = v;
  });
}

const char* fill_kernel(const KernelArgs& args) {
  if (const char* err = check_counts("fill", args, fill_args::kArity)) return err;
  double value = args.fargs[fill_args::kValue];
  bool ok = with_type(args.out[0].dtype, [&](auto* d) {
    using D = std::remove_pointer_t<decltype(d)>;
    fill_typed<D>(args, value);
  });
  if (!ok) return kernel_error("fill: unsupported dtype %s", dtype_name(args.out[0].dtype));
  return nullptr;
}

// Y[i] = start + i·delta, computed in double and converted as cast does.
template <class D>
void range_typed(const KernelArgs& args, double start, double delta) {
  D* y = args.out[0].as<D>();
  run_parallel(args, args.out[0].numel, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) y[i] = from_double<D>(start + static_cast<double>(i) * delta);
  });
}

const char* range_kernel(const KernelArgs& args) {
  // start and delta: two float arguments, or two int arguments (integer ranges whose start is a runtime dimension)
  using namespace range_args;
  if (const char* err = check_counts("range", args, kArity)) return err;
  const bool ints = args.n_iargs == kIargCount && args.n_fargs == 0;
  if (!ints && (args.n_iargs != 0 || args.n_fargs != kFargCount)) {
    return kernel_error("range: needs start and delta as %d iargs or as %d fargs, got %d and %d", kIargCount, kFargCount,
                        args.n_iargs, args.n_fargs);
  }
  if (args.out[0].rank != 1) return kernel_error("range: output must have rank 1, got dims %s", dims_str(args.out[0]).c_str());
  double start = ints ? static_cast<double>(args.iargs[kStartInt]) : args.fargs[kStart];
  double delta = ints ? static_cast<double>(args.iargs[kDeltaInt]) : args.fargs[kDelta];
  switch (args.out[0].dtype) {
    case kFloat32: range_typed<float>(args, start, delta); return nullptr;
    case kFloat64: range_typed<double>(args, start, delta); return nullptr;
    case kInt32: range_typed<int32_t>(args, start, delta); return nullptr;
    case kInt64: range_typed<int64_t>(args, start, delta); return nullptr;
    case kInt8: range_typed<int8_t>(args, start, delta); return nullptr;
    case kUint8: range_typed<uint8_t>(args, start, delta); return nullptr;
    case kFloat16: range_typed<Half>(args, start, delta); return nullptr;
    case kBFloat16: range_typed<BFloat16>(args, start, delta); return nullptr;
    default: return kernel_error("range: unsupported dtype %s", dtype_name(args.out[0].dtype));
  }
}

// Y[i] = iargs[i]: integers computed from shapes on the host side (symbolic dims), materialized as a tensor.
const char* values_kernel(const KernelArgs& args) {
  if (const char* err = check_arity("values", args, values_args::kArity)) return err;
  const TensorView& y = args.out[0];
  if (y.numel != args.n_iargs) return kernel_error("values: output has %lld elements but %d values were given", static_cast<long long>(y.numel), args.n_iargs);
  switch (y.dtype) {
    case kInt64: for (int i = 0; i < args.n_iargs; i++) y.as<int64_t>()[i] = args.iargs[i]; return nullptr;
    case kInt32: for (int i = 0; i < args.n_iargs; i++) y.as<int32_t>()[i] = static_cast<int32_t>(args.iargs[i]); return nullptr;
    case kFloat32: for (int i = 0; i < args.n_iargs; i++) y.as<float>()[i] = static_cast<float>(args.iargs[i]); return nullptr;
    case kFloat64: for (int i = 0; i < args.n_iargs; i++) y.as<double>()[i] = static_cast<double>(args.iargs[i]); return nullptr;
    default: return kernel_error("values: unsupported dtype %s", dtype_name(y.dtype));
  }
}

const KernelDef kDefs[] = {
    {"cast", cast_kernel},
    {"values", values_kernel},
    {"copy", copy_kernel},
    {"fill", fill_kernel},
    {"range", range_kernel},
};

}  // namespace

KernelList cast_kernels() { return KernelList{kDefs, sizeof(kDefs) / sizeof(kDefs[0])}; }

}  // namespace planc
