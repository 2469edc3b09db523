// Binary elementwise kernels with numpy broadcasting: arithmetic, comparisons, logic, and where.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "../kernel.h"
#include "../threadpool.h"

namespace planc {
namespace {

// ---- shape checks and the broadcast plan ----

// The schema's counts (arity), then every input and the output well formed.
const char* check_args(const char* name, const KernelArgs& a, const KernelArity& arity) {
  if (const char* err = check_arity(name, a, arity)) return err;
  for (int i = 0; i < a.n_in; i++) {
    if (!view_ok(a.in[i])) return kernel_error("%s: input %d is missing or malformed", name, i);
  }
  if (!view_ok(a.out[0])) return kernel_error("%s: output is malformed", name);
  return nullptr;
}

// Output dims with size-1 dims dropped and adjacent compatible dims merged; per-input element strides (0 = broadcast).
struct Bcast {
  int rank = 0;
  int n_in = 0;
  int64_t dims[kMaxRank] = {0};
  int64_t strides[3][kMaxRank] = {{0}};
};

// Checks that every input broadcasts to y (and that y is exactly their broadcast), then builds the plan.
const char* make_bcast(const char* name, const TensorView* const* ins, int n_in, const TensorView& y, Bcast* b) {
  int r = y.rank;
  int64_t full[3][kMaxRank];  // per input: element stride along each output dim, 0 where it broadcasts
  bool covered[kMaxRank] = {false};
  for (int k = 0; k < n_in; k++) {
    const TensorView& x = *ins[k];
    if (x.rank > r) {
      return kernel_error("%s: input %d dims %s have higher rank than output dims %s", name, k, dims_str(x).c_str(),
                          dims_str(y).c_str());
    }
    int64_t acc = 1;
    for (int j = r - 1; j >= 0; j--) {
      int xi = j - (r - x.rank);
      int64_t d = xi >= 0 ? x.dims[xi] : 1;
      if (d != 1 && d != y.dims[j]) {
        return kernel_error("%s: input %d dims %s do not broadcast to output dims %s", name, k, dims_str(x).c_str(),
                            dims_str(y).c_str());
      }
      covered[j] = covered[j] || d == y.dims[j];
      full[k][j] = d == 1 ? 0 : acc;
      acc *= d;
    }
  }
  for (int j = 0; j < r; j++) {
    if (!covered[j]) {
      return kernel_error("%s: output dims %s are not the broadcast of the inputs' dims", name, dims_str(y).c_str());
    }
  }
  b->n_in = n_in;
  b->rank = 0;
  for (int j = 0; j < r; j++) {
    if (y.dims[j] == 1) continue;
    int m = b->rank;
    bool merge = m > 0;
    for (int k = 0; k < n_in && merge; k++) merge = b->strides[k][m - 1] == full[k][j] * y.dims[j];
    if (merge) {
      b->dims[m - 1] *= y.dims[j];
      for (int k = 0; k < n_in; k++) b->strides[k][m - 1] = full[k][j];
    } else {
      b->dims[m] = y.dims[j];
      for (int k = 0; k < n_in; k++) b->strides[k][m] = full[k][j];
      b->rank++;
    }
  }
  if (b->rank == 0) {
    b->rank = 1;
    b->dims[0] = 1;
    for (int k = 0; k < n_in; k++) b->strides[k][0] = 0;
  }
  return nullptr;
}

// Walks output elements [begin, end) in runs along the innermost plan dim: f(y_off, in_offs, len).
template <class F>
void bcast_range(const Bcast& b, int64_t begin, int64_t end, F&& f) {
  int r = b.rank;
  int64_t inner = b.dims[r - 1];
  int64_t row = begin / inner;
  int64_t col = begin % inner;
  int64_t idx[kMaxRank] = {0};
  int64_t base[3] = {0, 0, 0};
  for (int j = r - 2; j >= 0; j--) {
    idx[j] = row % b.dims[j];
    row /= b.dims[j];
    for (int k = 0; k < b.n_in; k++) base[k] += idx[j] * b.strides[k][j];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t len = inner - col < end - pos ? inner - col : end - pos;
    int64_t off[3];
    for (int k = 0; k < b.n_in; k++) off[k] = base[k] + col * b.strides[k][r - 1];
    f(pos, off, len);
    pos += len;
    col = 0;
    for (int j = r - 2; j >= 0; j--) {
      idx[j]++;
      for (int k = 0; k < b.n_in; k++) base[k] += b.strides[k][j];
      if (idx[j] < b.dims[j]) break;
      for (int k = 0; k < b.n_in; k++) base[k] -= b.strides[k][j] * b.dims[j];
      idx[j] = 0;
    }
  }
}

// ---- binary operations (one functor each; T is the element type) ----

template <class T> using Unsigned = typename std::make_unsigned<T>::type;

template <class T> T wrap_add(T a, T b) { return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b)); }
template <class T> T wrap_sub(T a, T b) { return static_cast<T>(static_cast<Unsigned<T>>(a) - static_cast<Unsigned<T>>(b)); }
template <class T> T wrap_mul(T a, T b) {
  using U = typename std::conditional<(sizeof(T) < sizeof(unsigned)), unsigned, Unsigned<T>>::type;
  return static_cast<T>(static_cast<U>(static_cast<Unsigned<T>>(a)) * static_cast<U>(static_cast<Unsigned<T>>(b)));
}

struct AddOp {
  static constexpr const char* name = "add";
  static constexpr const KernelArity* arity = &add_args::kArity;
  static constexpr int64_t chunk = 1 << 15;
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) return wrap_add(a, b); else return a + b;
  }
};

struct SubOp {
  static constexpr const char* name = "sub";
  static constexpr const KernelArity* arity = &sub_args::kArity;
  static constexpr int64_t chunk = 1 << 15;
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) return wrap_sub(a, b); else return a - b;
  }
};

struct MulOp {
  static constexpr const char* name = "mul";
  static constexpr const KernelArity* arity = &mul_args::kArity;
  static constexpr int64_t chunk = 1 << 15;
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) return wrap_mul(a, b); else return a * b;
  }
};

// Integer division truncates toward zero; x / 0 gives 0; INT_MIN / -1 wraps.
struct DivOp {
  static constexpr const char* name = "div";
  static constexpr const KernelArity* arity = &div_args::kArity;
  static constexpr int64_t chunk = 1 << 14;
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      if (b == 0) return 0;
      if constexpr (std::is_signed<T>::value) {
        if (b == -1) return wrap_sub(T(0), a);
      }
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};

// NaN in either operand propagates (np.maximum).
struct MaxOp {
  static constexpr const char* name = "max";
  static constexpr const KernelArity* arity = &max_args::kArity;
  static constexpr int64_t chunk = 1 << 15;
  template <class T> static T f(T a, T b) { return (a > b || a != a) ? a : b; }
};

struct MinOp {
  static constexpr const char* name = "min";
  static constexpr const KernelArity* arity = &min_args::kArity;
  static constexpr int64_t chunk = 1 << 15;
  template <class T> static T f(T a, T b) { return (a < b || a != a) ? a : b; }
};

// ONNX Mod with fmod=0: integer remainder takes the divisor's sign, x mod 0 = 0; floats: fmod with NaN → 0.
struct ModOp {
  static constexpr const char* name = "mod";
  static constexpr const KernelArity* arity = &mod_args::kArity;
  static constexpr int64_t chunk = 1 << 13;
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      if (b == 0) return 0;
      if constexpr (std::is_signed<T>::value) {
        if (b == -1) return 0;
        T r = static_cast<T>(a % b);
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
        return r;
      } else {
        return static_cast<T>(a % b);
      }
    } else {
      T r = std::fmod(a, b);
      return r != r ? T(0) : r;
    }
  }
};

// Mod with fmod=1: C remainder (sign of the dividend); integer x mod 0 = 0; floats: plain fmod (NaN stays).
struct FModOp {
  static constexpr const char* name = "mod";
  static constexpr const KernelArity* arity = &mod_args::kArity;
  static constexpr int64_t chunk = 1 << 13;
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      if (b == 0) return 0;
      if constexpr (std::is_signed<T>::value) {
        if (b == -1) return 0;
      }
      return static_cast<T>(a % b);
    } else {
      return std::fmod(a, b);
    }
  }
};

// Integer x^e exactly (wrapping) for e ≥ 0; for e < 0 the truncated real power (0 except for bases ±1).
template <class T> T int_pow(T a, int64_t e) {
  if (e < 0) {
    if (a == 1) return 1;
    if constexpr (std::is_signed<T>::value) {
      if (a == -1) return (e & 1) ? T(-1) : T(1);
    }
    return 0;
  }
  T r = 1;
  T p = a;
  while (e > 0) {
    if (e & 1) r = wrap_mul(r, p);
    p = wrap_mul(p, p);
    e >>= 1;
  }
  return r;
}

// A double converted to an integer type as the reference does: non-finite → 0, truncate, wrap (int64 saturates).
template <class T> T int_from_double(double v) {
  if (!std::isfinite(v)) return 0;
  double t = std::trunc(v);
  if constexpr (sizeof(T) == 8) {
    if (t >= 9223372036854775808.0) return INT64_MAX;
    if (t < -9223372036854775808.0) return INT64_MIN;
    return static_cast<T>(t);
  } else {
    if (std::fabs(t) >= 9223372036854775808.0) t = std::fmod(t, 4294967296.0);
    return static_cast<T>(static_cast<Unsigned<T>>(static_cast<uint64_t>(static_cast<int64_t>(t))));
  }
}

// Pow: the base's type is the output's; the exponent may have its own type (ONNX T1/T2).
template <class T, class E> T pow_elem(T a, E b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (b == 2) return a * a;
    return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  } else if constexpr (std::is_integral<E>::value) {
    return int_pow<T>(a, static_cast<int64_t>(b));
  } else {
    return int_from_double<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  }
}

struct EqualOp {
  static constexpr const char* name = "equal";
  static constexpr const KernelArity* arity = &equal_args::kArity;
  template <class T> static bool f(T a, T b) { return a == b; }
};
struct LessOp {
  static constexpr const char* name = "less";
  static constexpr const KernelArity* arity = &less_args::kArity;
  template <class T> static bool f(T a, T b) { return a < b; }
};
struct GreaterOp {
  static constexpr const char* name = "greater";
  static constexpr const KernelArity* arity = &greater_args::kArity;
  template <class T> static bool f(T a, T b) { return a > b; }
};
struct LessEqualOp {
  static constexpr const char* name = "less_equal";
  static constexpr const KernelArity* arity = &less_equal_args::kArity;
  template <class T> static bool f(T a, T b) { return a <= b; }
};
struct GreaterEqualOp {
  static constexpr const char* name = "greater_equal";
  static constexpr const KernelArity* arity = &greater_equal_args::kArity;
  template <class T> static bool f(T a, T b) { return a >= b; }
};
struct AndOp {
  static constexpr const char* name = "and";
  static constexpr const KernelArity* arity = &and_args::kArity;
  template <class T> static bool f(T a, T b) { return (a != 0) & (b != 0); }
};
struct OrOp {
  static constexpr const char* name = "or";
  static constexpr const KernelArity* arity = &or_args::kArity;
  template <class T> static bool f(T a, T b) { return (a != 0) | (b != 0); }
};
struct XorOp {
  static constexpr const char* name = "xor";
  static constexpr const KernelArity* arity = &xor_args::kArity;
  template <class T> static bool f(T a, T b) { return (a != 0) ^ (b != 0); }
};

// ---- inner loops: one run of len outputs; each operand steps by 1 or stays put (stride 0) ----

template <class Op, class T, class Y>
void binary_run(const T* a, int64_t sa, const T* b, int64_t sb, Y* y, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; i++) y[i] = static_cast<Y>(Op::f(a[i], b[i]));
  } else if (sa == 1) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; i++) y[i] = static_cast<Y>(Op::f(a[i], bv));
  } else if (sb == 1) {
    const T av = a[0];
    for (int64_t i = 0; i < n; i++) y[i] = static_cast<Y>(Op::f(av, b[i]));
  } else {
    const Y v = static_cast<Y>(Op::f(a[0], b[0]));
    for (int64_t i = 0; i < n; i++) y[i] = v;
  }
}

template <class Op, class T, class Y>
void binary_typed(const KernelArgs& args, const Bcast& plan, int64_t chunk) {
  const T* a = args.in[0].as<const T>();
  const T* b = args.in[1].as<const T>();
  Y* y = args.out[0].as<Y>();
  int r = plan.rank;
  int64_t sa = plan.strides[0][r - 1];
  int64_t sb = plan.strides[1][r - 1];
  run_parallel(args, args.out[0].numel, chunk, [&](int64_t begin, int64_t end) {
    bcast_range(plan, begin, end, [&](int64_t yo, const int64_t* off, int64_t len) {
      binary_run<Op, T, Y>(a + off[0], sa, b + off[1], sb, y + yo, len);
    });
  });
}

const char* plan_binary(const char* name, const KernelArgs& args, const KernelArity& arity, Bcast* plan) {
  if (const char* err = check_args(name, args, arity)) return err;
  const TensorView* ins[2] = {&args.in[0], &args.in[1]};
  return make_bcast(name, ins, 2, args.out[0], plan);
}

// add sub mul div max min mod: A, B and Y share one numeric dtype.
template <class Op>
const char* arith_kernel(const KernelArgs& args) {
  Bcast plan;
  if (const char* err = plan_binary(Op::name, args, *Op::arity, &plan)) return err;
  int32_t dt = args.in[0].dtype;
  if (args.in[1].dtype != dt || args.out[0].dtype != dt) {
    return kernel_error("%s: dtypes differ: A %s, B %s, Y %s", Op::name, dtype_name(dt), dtype_name(args.in[1].dtype),
                        dtype_name(args.out[0].dtype));
  }
  if (args.out[0].numel == 0) return nullptr;
  switch (dt) {
    case kFloat32: binary_typed<Op, float, float>(args, plan, Op::chunk); return nullptr;
    case kFloat64: binary_typed<Op, double, double>(args, plan, Op::chunk); return nullptr;
    case kInt32: binary_typed<Op, int32_t, int32_t>(args, plan, Op::chunk); return nullptr;
    case kInt64: binary_typed<Op, int64_t, int64_t>(args, plan, Op::chunk); return nullptr;
    case kInt8: binary_typed<Op, int8_t, int8_t>(args, plan, Op::chunk); return nullptr;
    case kUint8: binary_typed<Op, uint8_t, uint8_t>(args, plan, Op::chunk); return nullptr;
    default: return kernel_error("%s: unsupported dtype %s", Op::name, dtype_name(dt));
  }
}

// equal less greater less_equal greater_equal: A, B share a dtype; Y bool.
template <class Op>
const char* compare_kernel(const KernelArgs& args) {
  Bcast plan;
  if (const char* err = plan_binary(Op::name, args, *Op::arity, &plan)) return err;
  int32_t dt = args.in[0].dtype;
  if (args.in[1].dtype != dt) {
    return kernel_error("%s: dtypes differ: A %s, B %s", Op::name, dtype_name(dt), dtype_name(args.in[1].dtype));
  }
  if (args.out[0].dtype != kBool) return kernel_error("%s: output must be bool, got %s", Op::name, dtype_name(args.out[0].dtype));
  if (args.out[0].numel == 0) return nullptr;
  const int64_t chunk = 1 << 15;
  switch (dt) {
    case kFloat32: binary_typed<Op, float, uint8_t>(args, plan, chunk); return nullptr;
    case kFloat64: binary_typed<Op, double, uint8_t>(args, plan, chunk); return nullptr;
    case kInt32: binary_typed<Op, int32_t, uint8_t>(args, plan, chunk); return nullptr;
    case kInt64: binary_typed<Op, int64_t, uint8_t>(args, plan, chunk); return nullptr;
    case kInt8: binary_typed<Op, int8_t, uint8_t>(args, plan, chunk); return nullptr;
    case kUint8: case kBool: binary_typed<Op, uint8_t, uint8_t>(args, plan, chunk); return nullptr;
    default: return kernel_error("%s: unsupported dtype %s", Op::name, dtype_name(dt));
  }
}

// and or xor: bool A, B, Y.
template <class Op>
const char* logic_kernel(const KernelArgs& args) {
  Bcast plan;
  if (const char* err = plan_binary(Op::name, args, *Op::arity, &plan)) return err;
  if (args.in[0].dtype != kBool || args.in[1].dtype != kBool || args.out[0].dtype != kBool) {
    return kernel_error("%s: A, B and Y must be bool, got %s, %s, %s", Op::name, dtype_name(args.in[0].dtype),
                        dtype_name(args.in[1].dtype), dtype_name(args.out[0].dtype));
  }
  if (args.out[0].numel == 0) return nullptr;
  binary_typed<Op, uint8_t, uint8_t>(args, plan, 1 << 15);
  return nullptr;
}

// mod: an optional iarg fmod (0: remainder with the divisor's sign, the default; 1: C fmod).
const char* mod_kernel(const KernelArgs& args) {
  if (const char* err = check_arity("mod", args, mod_args::kArity)) return err;
  const int64_t fmod = args.n_iargs > mod_args::kFmod ? args.iargs[mod_args::kFmod] : 0;
  if (fmod == 1) {
    KernelArgs plain = args;
    plain.n_iargs = 0;
    return arith_kernel<FModOp>(plain);
  }
  if (fmod != 0) return kernel_error("mod: fmod must be 0 or 1, got %lld", static_cast<long long>(fmod));
  return arith_kernel<ModOp>(args);
}

// ---- pow: the exponent may have another numeric dtype ----

template <class T, class E>
void pow_typed(const KernelArgs& args, const Bcast& plan) {
  const T* a = args.in[0].as<const T>();
  const E* b = args.in[1].as<const E>();
  T* y = args.out[0].as<T>();
  int r = plan.rank;
  int64_t sa = plan.strides[0][r - 1];
  int64_t sb = plan.strides[1][r - 1];
  run_parallel(args, args.out[0].numel, 1 << 12, [&](int64_t begin, int64_t end) {
    bcast_range(plan, begin, end, [&](int64_t yo, const int64_t* off, int64_t len) {
      const T* pa = a + off[0];
      const E* pb = b + off[1];
      T* py = y + yo;
      for (int64_t i = 0; i < len; i++) py[i] = pow_elem<T, E>(pa[i * sa], pb[i * sb]);
    });
  });
}

template <class T>
const char* pow_base(const KernelArgs& args, const Bcast& plan) {
  switch (args.in[1].dtype) {
    case kFloat32: pow_typed<T, float>(args, plan); return nullptr;
    case kFloat64: pow_typed<T, double>(args, plan); return nullptr;
    case kInt32: pow_typed<T, int32_t>(args, plan); return nullptr;
    case kInt64: pow_typed<T, int64_t>(args, plan); return nullptr;
    default: return kernel_error("pow: unsupported exponent dtype %s", dtype_name(args.in[1].dtype));
  }
}

const char* pow_kernel(const KernelArgs& args) {
  Bcast plan;
  if (const char* err = plan_binary("pow", args, pow_args::kArity, &plan)) return err;
  int32_t dt = args.in[0].dtype;
  if (args.out[0].dtype != dt) {
    return kernel_error("pow: output dtype %s differs from base dtype %s", dtype_name(args.out[0].dtype), dtype_name(dt));
  }
  if (args.out[0].numel == 0) return nullptr;
  switch (dt) {
    case kFloat32: return pow_base<float>(args, plan);
    case kFloat64: return pow_base<double>(args, plan);
    case kInt32: return pow_base<int32_t>(args, plan);
    case kInt64: return pow_base<int64_t>(args, plan);
    default: return kernel_error("pow: unsupported dtype %s", dtype_name(dt));
  }
}

// ---- where: a byte-level select, any element type ----

template <class T>
void where_typed(const KernelArgs& args, const Bcast& plan) {
  const uint8_t* c = args.in[0].as<const uint8_t>();
  const T* a = args.in[1].as<const T>();
  const T* b = args.in[2].as<const T>();
  T* y = args.out[0].as<T>();
  int r = plan.rank;
  int64_t sc = plan.strides[0][r - 1];
  int64_t sa = plan.strides[1][r - 1];
  int64_t sb = plan.strides[2][r - 1];
  run_parallel(args, args.out[0].numel, 1 << 15, [&](int64_t begin, int64_t end) {
    bcast_range(plan, begin, end, [&](int64_t yo, const int64_t* off, int64_t len) {
      const uint8_t* pc = c + off[0];
      const T* pa = a + off[1];
      const T* pb = b + off[2];
      T* py = y + yo;
      if (sc == 1 && sa == 1 && sb == 1) {
        for (int64_t i = 0; i < len; i++) py[i] = pc[i] ? pa[i] : pb[i];
      } else {
        for (int64_t i = 0; i < len; i++) py[i] = pc[i * sc] ? pa[i * sa] : pb[i * sb];
      }
    });
  });
}

const char* where_kernel(const KernelArgs& args) {
  if (const char* err = check_args("where", args, where_args::kArity)) return err;
  const TensorView* ins[3] = {&args.in[0], &args.in[1], &args.in[2]};
  Bcast plan;
  if (const char* err = make_bcast("where", ins, 3, args.out[0], &plan)) return err;
  if (args.in[0].dtype != kBool) return kernel_error("where: condition must be bool, got %s", dtype_name(args.in[0].dtype));
  int32_t dt = args.in[1].dtype;
  if (args.in[2].dtype != dt || args.out[0].dtype != dt) {
    return kernel_error("where: dtypes differ: A %s, B %s, Y %s", dtype_name(dt), dtype_name(args.in[2].dtype),
                        dtype_name(args.out[0].dtype));
  }
  if (args.out[0].numel == 0) return nullptr;
  switch (dtype_size(dt)) {
    case 1: where_typed<uint8_t>(args, plan); return nullptr;
    case 2: where_typed<uint16_t>(args, plan); return nullptr;
    case 4: where_typed<uint32_t>(args, plan); return nullptr;
    case 8: where_typed<uint64_t>(args, plan); return nullptr;
    default: return kernel_error("where: unsupported dtype %s", dtype_name(dt));
  }
}

const KernelDef kDefs[] = {
    {"add", arith_kernel<AddOp>},
    {"sub", arith_kernel<SubOp>},
    {"mul", arith_kernel<MulOp>},
    {"div", arith_kernel<DivOp>},
    {"pow", pow_kernel},
    {"max", arith_kernel<MaxOp>},
    {"min", arith_kernel<MinOp>},
    {"mod", mod_kernel},
    {"equal", compare_kernel<EqualOp>},
    {"less", compare_kernel<LessOp>},
    {"greater", compare_kernel<GreaterOp>},
    {"less_equal", compare_kernel<LessEqualOp>},
    {"greater_equal", compare_kernel<GreaterEqualOp>},
    {"and", logic_kernel<AndOp>},
    {"or", logic_kernel<OrOp>},
    {"xor", logic_kernel<XorOp>},
    {"where", where_kernel},
};

}  // namespace

KernelList elementwise_kernels() { return KernelList{kDefs, sizeof(kDefs) / sizeof(kDefs[0])}; }

}  // namespace planc
