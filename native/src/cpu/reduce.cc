// Reduction kernels over an axes bitmask (float32 accumulated in double), argmax/argmin, and cumsum.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"

namespace planc {
namespace {

// The schema's counts (arity), then every input and output well formed.
const char* check_counts(const char* name, const KernelArgs& a, const KernelArity& arity) {
  if (const char* err = check_arity(name, a, arity)) return err;
  for (int i = 0; i < a.n_in; i++) {
    if (!view_ok(a.in[i])) return kernel_error("%s: input %d is missing or malformed", name, i);
  }
  for (int i = 0; i < a.n_out; i++) {
    if (!view_ok(a.out[i])) return kernel_error("%s: output %d is malformed", name, i);
  }
  return nullptr;
}

constexpr int64_t kWork = 1 << 15;  // elements of work per parallel chunk

// ---- value conversions ----

template <class T> using Unsigned = typename std::make_unsigned<T>::type;

// A double into T as the reference stores it: floats round; ints: non-finite → 0, truncate, wrap (int64 saturates).
template <class T> T from_double(double v) {
  if constexpr (std::is_floating_point<T>::value) {
    return static_cast<T>(v);
  } else {
    if (!std::isfinite(v)) return 0;
    double t = std::trunc(v);
    if constexpr (sizeof(T) == 8) {
      if (t >= 9223372036854775808.0) return std::numeric_limits<T>::max();
      if (t < -9223372036854775808.0) return std::numeric_limits<T>::min();
      return static_cast<T>(t);
    } else {
      if (std::fabs(t) >= 9223372036854775808.0) t = std::fmod(t, 4294967296.0);
      return static_cast<T>(static_cast<Unsigned<T>>(static_cast<uint64_t>(static_cast<int64_t>(t))));
    }
  }
}

// ---- reduction kinds: accumulate in A (double for floats, wrapping int64 for ints) ----

enum Kind { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSumExp };

template <class T> using Acc = typename std::conditional<std::is_floating_point<T>::value, double, int64_t>::type;

template <class A> A acc_add(A a, A b) {
  if constexpr (std::is_integral<A>::value) return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return a + b;
}
template <class A> A acc_mul(A a, A b) {
  if constexpr (std::is_integral<A>::value) return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}

// max and min keep the element type (exact, and vectorizable); the others accumulate in Acc<T>.
template <int K, class T> struct Reducer {
  using A = typename std::conditional<K == kMax || K == kMin, T, Acc<T>>::type;
  static A init() {
    if (K == kProd) return 1;
    if (K == kMax) return std::is_floating_point<T>::value ? -std::numeric_limits<A>::infinity() : std::numeric_limits<T>::lowest();
    if (K == kMin) return std::is_floating_point<T>::value ? std::numeric_limits<A>::infinity() : std::numeric_limits<T>::max();
    return 0;
  }
  static A prep(T v) {
    A a = static_cast<A>(v);
    if (K == kSumSquare || K == kL2) return acc_mul(a, a);
    if (K == kL1) return a < 0 ? acc_mul(a, A(-1)) : a;
    return a;
  }
  // NaN propagates through max and min.
  static A comb(A acc, A p) {
    if (K == kMax) return (p > acc || p != p) ? p : acc;
    if (K == kMin) return (p < acc || p != p) ? p : acc;
    if (K == kProd) return acc_mul(acc, p);
    return acc_add(acc, p);
  }
  static T finish(A acc, int64_t count) {
    if (K == kMean) return from_double<T>(static_cast<double>(acc) / static_cast<double>(count));
    if (K == kL2) return from_double<T>(std::sqrt(static_cast<double>(acc)));
    if constexpr (std::is_floating_point<T>::value) return static_cast<T>(acc);
    else return static_cast<T>(static_cast<Unsigned<T>>(static_cast<uint64_t>(acc)));
  }
  // A contiguous run, with eight independent accumulators (vectorizable, and more accurate than one chain).
  static A run(const T* x, int64_t n) {
    A part[8];
    for (int j = 0; j < 8; j++) part[j] = init();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; j++) part[j] = comb(part[j], prep(x[i + j]));
    }
    A acc = init();
    for (int j = 0; j < 8; j++) acc = comb(acc, part[j]);
    for (; i < n; i++) acc = comb(acc, prep(x[i]));
    return acc;
  }
};

// log Σ exp: per fiber, its max m (NaN-propagating), then m + log Σ exp(x − m); infinite m uses x as is.
double lse_shift(double m) { return (m == INFINITY || m == -INFINITY) ? 0.0 : m; }

template <class T> double lse_max_run(const T* x, int64_t n, double m) {
  for (int64_t i = 0; i < n; i++) {
    double v = static_cast<double>(x[i]);
    if (v > m || v != v) m = v;
  }
  return m;
}

template <class T> double lse_sum_run(const T* x, int64_t n, double shift) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += std::exp(static_cast<double>(x[i]) - shift);
  return s;
}

// ---- the layout of a reduction: X's dims collapsed into kept and reduced groups ----

struct Layout {
  int nk = 0, nr = 0;
  int64_t kdim[kMaxRank], kstride[kMaxRank];  // kept groups, outer to inner, with X element strides
  int64_t rdim[kMaxRank], rstride[kMaxRank];  // reduced groups
  bool inner_reduced = false;                 // X's innermost group is reduced: fibers are contiguous runs
  int64_t n_out = 1, fiber = 1;
};

Layout make_layout(const TensorView& x, uint64_t mask) {
  Layout l;
  int last = -1;  // 0 kept, 1 reduced: the flag of the previous group
  int64_t stride = 1;
  int64_t strides[kMaxRank];
  for (int j = x.rank - 1; j >= 0; j--) {
    strides[j] = stride;
    stride *= x.dims[j];
  }
  for (int j = 0; j < x.rank; j++) {
    if (x.dims[j] == 1) continue;
    int red = (mask >> j) & 1;
    int64_t* dims = red ? l.rdim : l.kdim;
    int64_t* st = red ? l.rstride : l.kstride;
    int& n = red ? l.nr : l.nk;
    if (red == last) {
      dims[n - 1] *= x.dims[j];
      st[n - 1] = strides[j];
    } else {
      dims[n] = x.dims[j];
      st[n] = strides[j];
      n++;
    }
    last = red;
  }
  if (l.nk == 0 && l.nr == 0) {
    l.kdim[0] = 1;
    l.kstride[0] = 1;
    l.nk = 1;
    last = 0;
  }
  l.inner_reduced = last == 1;
  for (int i = 0; i < l.nk; i++) l.n_out *= l.kdim[i];
  for (int i = 0; i < l.nr; i++) l.fiber *= l.rdim[i];
  return l;
}

// X offset of flat index q over the given groups (row-major).
int64_t offset_of(int64_t q, const int64_t* dims, const int64_t* strides, int n) {
  int64_t off = 0;
  for (int i = n - 1; i >= 0; i--) {
    off += (q % dims[i]) * strides[i];
    q /= dims[i];
  }
  return off;
}

// Fibers as contiguous runs (X's inner group is reduced): calls f(run_ptr, run_len) for fiber positions [b, e).
template <class T, class F>
void for_runs(const Layout& l, const T* base, int64_t b, int64_t e, F&& f) {
  int64_t len = l.rdim[l.nr - 1];
  int64_t q = b / len;
  int64_t c = b % len;
  while (b < e) {
    int64_t n = len - c < e - b ? len - c : e - b;
    f(base + offset_of(q, l.rdim, l.rstride, l.nr - 1) + c, n);
    b += n;
    q++;
    c = 0;
  }
}

// Fibers are contiguous runs: one output per fiber; a few large fibers are split into parts across threads.
template <int K, class T>
void reduce_runs(const KernelArgs& args, const Layout& l, const T* x, T* y) {
  using R = Reducer<K, T>;
  using A = typename R::A;
  int64_t fiber = l.fiber;
  if (l.n_out < 4 && fiber >= 4 * kWork && K != kLogSumExp) {  // fixed parts: results do not depend on threads
    const int parts = 16;
    for (int64_t o = 0; o < l.n_out; o++) {
      const T* base = x + offset_of(o, l.kdim, l.kstride, l.nk);
      A partial[parts];
      run_parallel(args, parts, 1, [&](int64_t pb, int64_t pe) {
        for (int64_t p = pb; p < pe; p++) {
          A acc = R::init();
          for_runs(l, base, fiber * p / parts, fiber * (p + 1) / parts,
                   [&](const T* run, int64_t n) { acc = R::comb(acc, R::run(run, n)); });
          partial[p] = acc;
        }
      });
      A acc = R::init();
      for (int p = 0; p < parts; p++) acc = R::comb(acc, partial[p]);
      y[o] = R::finish(acc, fiber);
    }
    return;
  }
  int64_t chunk = fiber >= kWork ? 1 : kWork / fiber;
  run_parallel(args, l.n_out, chunk, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; o++) {
      const T* base = x + offset_of(o, l.kdim, l.kstride, l.nk);
      if constexpr (K == kLogSumExp) {
        double m = -INFINITY;
        for_runs(l, base, 0, fiber, [&](const T* run, int64_t n) { m = lse_max_run(run, n, m); });
        double shift = lse_shift(m), s = 0;
        for_runs(l, base, 0, fiber, [&](const T* run, int64_t n) { s += lse_sum_run(run, n, shift); });
        y[o] = from_double<T>(shift + std::log(s));
      } else {
        A acc = R::init();
        for_runs(l, base, 0, fiber, [&](const T* run, int64_t n) { acc = R::comb(acc, R::run(run, n)); });
        y[o] = R::finish(acc, fiber);
      }
    }
  });
}

// X's inner group is kept: outputs [P, Kc]; each segment of columns accumulates whole rows (vectorizable).
template <int K, class T>
void reduce_columns(const KernelArgs& args, const Layout& l, const T* x, T* y) {
  using R = Reducer<K, T>;
  using A = typename R::A;
  int64_t cols = l.kdim[l.nk - 1];
  int64_t fiber = l.fiber;
  int64_t chunk = fiber >= kWork ? 1 : kWork / fiber;
  run_parallel(args, l.n_out, chunk, [&](int64_t b, int64_t e) {
    std::vector<A> acc;
    std::vector<double> m;
    while (b < e) {
      int64_t p = b / cols;
      int64_t c0 = b % cols;
      int64_t n = cols - c0 < e - b ? cols - c0 : e - b;
      const T* base = x + offset_of(p, l.kdim, l.kstride, l.nk - 1) + c0;
      T* out = y + b;
      if constexpr (K == kLogSumExp) {
        m.assign(n, -INFINITY);
        for (int64_t q = 0; q < fiber; q++) {
          const T* row = base + offset_of(q, l.rdim, l.rstride, l.nr);
          for (int64_t j = 0; j < n; j++) {
            double v = static_cast<double>(row[j]);
            if (v > m[j] || v != v) m[j] = v;
          }
        }
        for (int64_t j = 0; j < n; j++) m[j] = lse_shift(m[j]);
        std::vector<double> s(n, 0.0);
        for (int64_t q = 0; q < fiber; q++) {
          const T* row = base + offset_of(q, l.rdim, l.rstride, l.nr);
          for (int64_t j = 0; j < n; j++) s[j] += std::exp(static_cast<double>(row[j]) - m[j]);
        }
        for (int64_t j = 0; j < n; j++) out[j] = from_double<T>(m[j] + std::log(s[j]));
      } else {
        acc.assign(n, R::init());
        A* a = acc.data();
        for (int64_t q = 0; q < fiber; q++) {
          const T* row = base + offset_of(q, l.rdim, l.rstride, l.nr);
          for (int64_t j = 0; j < n; j++) a[j] = R::comb(a[j], R::prep(row[j]));
        }
        for (int64_t j = 0; j < n; j++) out[j] = R::finish(a[j], fiber);
      }
      b += n;
    }
  });
}

template <int K, class T>
void reduce_typed(const KernelArgs& args, uint64_t mask) {
  const T* x = args.in[0].as<const T>();
  T* y = args.out[0].as<T>();
  if (args.out[0].numel == 0) return;
  if (args.in[0].numel == 0) {  // every fiber is empty
    T v = K == kLogSumExp ? from_double<T>(-INFINITY) : Reducer<K, T>::finish(Reducer<K, T>::init(), 0);
    for (int64_t i = 0; i < args.out[0].numel; i++) y[i] = v;
    return;
  }
  Layout l = make_layout(args.in[0], mask);
  if (l.inner_reduced) reduce_runs<K, T>(args, l, x, y);
  else reduce_columns<K, T>(args, l, x, y);
}

// Y dims must be X dims with the masked axes set to 1.
const char* check_reduced_dims(const char* name, const TensorView& x, const TensorView& y, uint64_t mask, int axis) {
  bool ok = x.rank == y.rank;
  for (int j = 0; ok && j < x.rank; j++) {
    bool red = axis >= 0 ? j == axis : ((mask >> j) & 1) != 0;
    ok = y.dims[j] == (red ? 1 : x.dims[j]);
  }
  if (ok) return nullptr;
  return kernel_error("%s: output dims %s do not match input dims %s reduced over the given axes", name,
                      dims_str(y).c_str(), dims_str(x).c_str());
}

template <int K>
const char* reduce_kernel(const KernelArgs& args) {
  static const char* const names[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
                                      "reduce_sum_square", "reduce_l1", "reduce_l2", "reduce_log_sum_exp"};
  static const KernelArity* const arities[] = {
      &reduce_sum_args::kArity,  &reduce_mean_args::kArity,       &reduce_max_args::kArity,
      &reduce_min_args::kArity,  &reduce_prod_args::kArity,       &reduce_sum_square_args::kArity,
      &reduce_l1_args::kArity,   &reduce_l2_args::kArity,         &reduce_log_sum_exp_args::kArity};
  static_assert(reduce_sum_args::kAxes == reduce_mean_args::kAxes && reduce_sum_args::kAxes == reduce_max_args::kAxes &&
                    reduce_sum_args::kAxes == reduce_min_args::kAxes && reduce_sum_args::kAxes == reduce_prod_args::kAxes &&
                    reduce_sum_args::kAxes == reduce_sum_square_args::kAxes && reduce_sum_args::kAxes == reduce_l1_args::kAxes &&
                    reduce_sum_args::kAxes == reduce_l2_args::kAxes && reduce_sum_args::kAxes == reduce_log_sum_exp_args::kAxes,
                "the reductions read one axes position");
  const char* name = names[K];
  if (const char* err = check_counts(name, args, *arities[K])) return err;
  const TensorView& x = args.in[0];
  const int64_t axes = args.iargs[reduce_sum_args::kAxes];
  uint64_t mask = static_cast<uint64_t>(axes);
  if (axes < 0 || (x.rank < 64 && (mask >> x.rank) != 0)) {
    return kernel_error("%s: axes bitmask %lld names axes beyond rank %d", name, static_cast<long long>(axes), x.rank);
  }
  if (const char* err = check_reduced_dims(name, x, args.out[0], mask, -1)) return err;
  if (args.out[0].dtype != x.dtype) {
    return kernel_error("%s: output dtype %s differs from input dtype %s", name, dtype_name(args.out[0].dtype), dtype_name(x.dtype));
  }
  switch (x.dtype) {
    case kFloat32: reduce_typed<K, float>(args, mask); return nullptr;
    case kFloat64: reduce_typed<K, double>(args, mask); return nullptr;
    case kInt32: reduce_typed<K, int32_t>(args, mask); return nullptr;
    case kInt64: reduce_typed<K, int64_t>(args, mask); return nullptr;
    case kInt8: reduce_typed<K, int8_t>(args, mask); return nullptr;
    case kUint8: reduce_typed<K, uint8_t>(args, mask); return nullptr;
    case kBool:  // max is "any", min is "all"
      if (K != kMax && K != kMin) break;
      reduce_typed<K, uint8_t>(args, mask);
      return nullptr;
    default: break;
  }
  return kernel_error("%s: unsupported dtype %s", name, dtype_name(x.dtype));
}

// ---- argmax / argmin ----

// Whether v replaces best: first index wins ties unless select_last; NaN counts as the extreme value.
template <bool IsMax, class T> bool arg_better(T v, T best, bool last) {
  bool v_nan = v != v, b_nan = best != best;
  if (last) return v_nan || (!b_nan && (IsMax ? v >= best : v <= best));
  return !b_nan && (v_nan || (IsMax ? v > best : v < best));
}

template <bool IsMax, class T>
void arg_typed(const KernelArgs& args, int64_t outer, int64_t len, int64_t inner, bool last) {
  const T* x = args.in[0].as<const T>();
  int64_t* y = args.out[0].as<int64_t>();
  int64_t chunk = len >= kWork ? 1 : kWork / len;
  run_parallel(args, outer * inner, chunk, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; k++) {
      int64_t o = k / inner, q = k % inner;
      const T* f = x + o * len * inner + q;
      T best = f[0];
      int64_t arg = 0;
      for (int64_t i = 1; i < len; i++) {
        T v = f[i * inner];
        if (arg_better<IsMax>(v, best, last)) {
          best = v;
          arg = i;
        }
      }
      y[k] = arg;
    }
  });
}

template <bool IsMax>
const char* arg_kernel(const KernelArgs& args) {
  static_assert(argmax_args::kAxis == argmin_args::kAxis && argmax_args::kSelectLastIndex == argmin_args::kSelectLastIndex,
                "argmax and argmin read one argument layout");
  const char* name = IsMax ? "argmax" : "argmin";
  if (const char* err = check_counts(name, args, IsMax ? argmax_args::kArity : argmin_args::kArity)) return err;
  const TensorView& x = args.in[0];
  const int64_t given = args.iargs[argmax_args::kAxis];
  int64_t axis = given;
  if (axis < 0) axis += x.rank;
  if (axis < 0 || axis >= x.rank) {
    return kernel_error("%s: axis %lld is out of range for input dims %s", name, static_cast<long long>(given),
                        dims_str(x).c_str());
  }
  if (const char* err = check_reduced_dims(name, x, args.out[0], 0, static_cast<int>(axis))) return err;
  if (args.out[0].dtype != kInt64) return kernel_error("%s: output must be int64, got %s", name, dtype_name(args.out[0].dtype));
  int64_t len = x.dims[axis];
  if (len == 0 && args.out[0].numel > 0) return kernel_error("%s: axis %lld of input dims %s is empty", name, static_cast<long long>(axis), dims_str(x).c_str());
  if (args.out[0].numel == 0) return nullptr;
  int64_t outer = 1, inner = 1;
  for (int j = 0; j < axis; j++) outer *= x.dims[j];
  for (int j = static_cast<int>(axis) + 1; j < x.rank; j++) inner *= x.dims[j];
  bool last = args.iargs[argmax_args::kSelectLastIndex] != 0;
  switch (x.dtype) {
    case kFloat32: arg_typed<IsMax, float>(args, outer, len, inner, last); return nullptr;
    case kFloat64: arg_typed<IsMax, double>(args, outer, len, inner, last); return nullptr;
    case kInt32: arg_typed<IsMax, int32_t>(args, outer, len, inner, last); return nullptr;
    case kInt64: arg_typed<IsMax, int64_t>(args, outer, len, inner, last); return nullptr;
    case kInt8: arg_typed<IsMax, int8_t>(args, outer, len, inner, last); return nullptr;
    case kUint8: case kBool: arg_typed<IsMax, uint8_t>(args, outer, len, inner, last); return nullptr;
    default: return kernel_error("%s: unsupported dtype %s", name, dtype_name(x.dtype));
  }
}

// ---- cumsum ----

template <class T> T cum_add(T a, T b) {
  if constexpr (std::is_integral<T>::value) return static_cast<T>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b));
  else return a + b;
}

// Sums along the axis in the element type (float32 rounds each step, as numpy); segments of columns at a time.
template <class T>
void cumsum_typed(const KernelArgs& args, int64_t outer, int64_t len, int64_t inner, bool exclusive, bool reverse) {
  const T* x = args.in[0].as<const T>();
  T* y = args.out[0].as<T>();
  int64_t chunk = len >= kWork ? 1 : kWork / len;
  run_parallel(args, outer * inner, chunk, [&](int64_t b, int64_t e) {
    std::vector<T> acc;
    while (b < e) {
      int64_t o = b / inner, c0 = b % inner;
      int64_t n = inner - c0 < e - b ? inner - c0 : e - b;
      acc.assign(n, T(0));
      T* a = acc.data();
      for (int64_t s = 0; s < len; s++) {
        int64_t t = reverse ? len - 1 - s : s;
        int64_t p = (o * len + t) * inner + c0;
        if (exclusive) {
          for (int64_t j = 0; j < n; j++) {
            T v = x[p + j];
            y[p + j] = a[j];
            a[j] = cum_add(a[j], v);
          }
        } else {
          for (int64_t j = 0; j < n; j++) {
            a[j] = cum_add(a[j], x[p + j]);
            y[p + j] = a[j];
          }
        }
      }
      b += n;
    }
  });
}

const char* cumsum_kernel(const KernelArgs& args) {
  if (const char* err = check_counts("cumsum", args, cumsum_args::kArity)) return err;
  const TensorView& x = args.in[0];
  const TensorView& at = args.in[1];
  if (at.numel != 1 || (at.dtype != kInt64 && at.dtype != kInt32)) {
    return kernel_error("cumsum: axis must be one int32 or int64 element, got %s %s", dtype_name(at.dtype), dims_str(at).c_str());
  }
  int64_t axis0 = at.dtype == kInt64 ? at.as<const int64_t>()[0] : at.as<const int32_t>()[0];
  int64_t axis = axis0 < 0 ? axis0 + x.rank : axis0;
  if (axis < 0 || axis >= x.rank) {
    return kernel_error("cumsum: axis %lld is out of range for input dims %s", static_cast<long long>(axis0), dims_str(x).c_str());
  }
  const TensorView& y = args.out[0];
  bool same = y.rank == x.rank && y.dtype == x.dtype;
  for (int j = 0; same && j < x.rank; j++) same = y.dims[j] == x.dims[j];
  if (!same) {
    return kernel_error("cumsum: output %s %s differs from input %s %s", dtype_name(y.dtype), dims_str(y).c_str(),
                        dtype_name(x.dtype), dims_str(x).c_str());
  }
  if (x.numel == 0) return nullptr;
  int64_t outer = 1, inner = 1;
  for (int j = 0; j < axis; j++) outer *= x.dims[j];
  for (int j = static_cast<int>(axis) + 1; j < x.rank; j++) inner *= x.dims[j];
  int64_t len = x.dims[axis];
  bool exclusive = args.iargs[cumsum_args::kExclusive] != 0, reverse = args.iargs[cumsum_args::kReverse] != 0;
  switch (x.dtype) {
    case kFloat32: cumsum_typed<float>(args, outer, len, inner, exclusive, reverse); return nullptr;
    case kFloat64: cumsum_typed<double>(args, outer, len, inner, exclusive, reverse); return nullptr;
    case kInt32: cumsum_typed<int32_t>(args, outer, len, inner, exclusive, reverse); return nullptr;
    case kInt64: cumsum_typed<int64_t>(args, outer, len, inner, exclusive, reverse); return nullptr;
    default: return kernel_error("cumsum: unsupported dtype %s", dtype_name(x.dtype));
  }
}

const KernelDef kDefs[] = {
    {"reduce_sum", reduce_kernel<kSum>},
    {"reduce_mean", reduce_kernel<kMean>},
    {"reduce_max", reduce_kernel<kMax>},
    {"reduce_min", reduce_kernel<kMin>},
    {"reduce_prod", reduce_kernel<kProd>},
    {"reduce_sum_square", reduce_kernel<kSumSquare>},
    {"reduce_l1", reduce_kernel<kL1>},
    {"reduce_l2", reduce_kernel<kL2>},
    {"reduce_log_sum_exp", reduce_kernel<kLogSumExp>},
    {"argmax", arg_kernel<true>},
    {"argmin", arg_kernel<false>},
    {"cumsum", cumsum_kernel},
};

}  // namespace

KernelList reduce_kernels() { return KernelList{kDefs, sizeof(kDefs) / sizeof(kDefs[0])}; }

}  // namespace planc
