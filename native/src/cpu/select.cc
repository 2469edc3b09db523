// Selection kernels: topk along an axis (ties: lower index first), trilu (triangle masks), one_hot.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"

namespace planc {
namespace {

// The schema's counts (arity); inputs past the required ones may be omitted (data == nullptr), the rest well formed.
const char* check_counts(const char* name, const KernelArgs& a, const KernelArity& arity) {
  if (const char* err = check_arity(name, a, arity)) return err;
  for (int i = 0; i < a.n_in; i++) {
    if (i >= arity.min_in && a.in[i].data == nullptr) continue;
    if (!view_ok(a.in[i])) return kernel_error("%s: input %d is missing or malformed", name, i);
  }
  for (int i = 0; i < a.n_out; i++) {
    if (!view_ok(a.out[i])) return kernel_error("%s: output %d is malformed", name, i);
  }
  return nullptr;
}

constexpr int64_t kWork = 1 << 15;  // elements of work per parallel chunk

// A one-element integer or float tensor's value, truncated to int64; false if it is not one.
bool scalar_int(const TensorView& t, int64_t* v) {
  if (t.numel != 1) return false;
  switch (t.dtype) {
    case kInt64: *v = t.as<const int64_t>()[0]; return true;
    case kInt32: *v = t.as<const int32_t>()[0]; return true;
    case kFloat32: case kFloat64: {
      double d = t.dtype == kFloat32 ? t.as<const float>()[0] : t.as<const double>()[0];
      if (!(std::fabs(d) < 9.2e18)) return false;
      *v = static_cast<int64_t>(d);
      return true;
    }
    default: return false;
  }
}

// ---- topk ----

// True when (a, ia) ranks before (b, ib): larger (or smaller) first, NaN as the largest value, then lower index.
template <class T> bool ranks_before(T a, int64_t ia, T b, int64_t ib, bool largest) {
  bool an = a != a, bn = b != b;
  if (an || bn) {
    if (an && bn) return ia < ib;
    return an ? largest : !largest;
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

// Whether v (at a later index than the current worst kept value w) displaces w: strictly better, NaN largest.
template <class T> bool displaces(T v, T w, bool largest) {
  if (largest) return v > w || (v != v && w == w);
  return v < w || (w != w && v == v);
}

// Small k: one pass keeping the best k sorted; most values fail a single comparison with the worst kept one.
template <class T> void top_small(const T* f, int64_t len, int64_t k, bool largest, int64_t* best) {
  int64_t n = 0;
  for (int64_t i = 0; i < len; i++) {
    if (n == k && !displaces(f[i], f[best[k - 1]], largest)) continue;
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      int64_t mid = (lo + hi) / 2;
      if (ranks_before(f[best[mid]], best[mid], f[i], i, largest)) lo = mid + 1;
      else hi = mid;
    }
    if (n < k) n++;
    for (int64_t j = n - 1; j > lo; j--) best[j] = best[j - 1];
    best[lo] = i;
  }
}

// Larger k: sort the positions (partially when k is well below len).
template <class T> void top_sort(const T* f, int64_t len, int64_t k, bool largest, std::vector<int64_t>& order) {
  order.resize(len);
  for (int64_t i = 0; i < len; i++) order[i] = i;
  auto cmp = [&](int64_t i, int64_t j) { return ranks_before(f[i], i, f[j], j, largest); };
  if (k * 4 < len) std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
  else std::sort(order.begin(), order.end(), cmp);
}

template <class T>
void topk_typed(const KernelArgs& args, int64_t outer, int64_t len, int64_t inner, int64_t k, bool largest) {
  const T* x = args.in[0].as<const T>();
  T* vals = args.out[0].as<T>();
  int64_t* idxs = args.out[1].as<int64_t>();
  int64_t chunk = len >= kWork ? 1 : kWork / len;
  run_parallel(args, outer * inner, chunk, [&](int64_t b, int64_t e) {
    std::vector<T> fiber(inner == 1 ? 0 : len);
    std::vector<int64_t> order(k);
    for (int64_t g = b; g < e; g++) {
      int64_t o = g / inner, q = g % inner;
      const T* src = x + o * len * inner + q;
      const T* f = src;
      if (inner != 1) {
        for (int64_t i = 0; i < len; i++) fiber[i] = src[i * inner];
        f = fiber.data();
      }
      if (k <= 64 && k * 8 <= len) top_small(f, len, k, largest, order.data());
      else top_sort(f, len, k, largest, order);
      T* vo = vals + o * k * inner + q;
      int64_t* io = idxs + o * k * inner + q;
      for (int64_t t = 0; t < k; t++) {
        vo[t * inner] = f[order[t]];
        io[t * inner] = order[t];
      }
    }
  });
}

const char* topk_kernel(const KernelArgs& args) {
  if (const char* err = check_counts("topk", args, topk_args::kArity)) return err;
  const TensorView& x = args.in[0];
  const TensorView& v = args.out[0];
  const TensorView& ix = args.out[1];
  const int64_t given = args.iargs[topk_args::kAxis];
  int64_t axis = given < 0 ? given + x.rank : given;
  if (axis < 0 || axis >= x.rank) {
    return kernel_error("topk: axis %lld is out of range for input dims %s", static_cast<long long>(given), dims_str(x).c_str());
  }
  if (args.in[1].dtype != kInt64 || args.in[1].numel != 1) {
    return kernel_error("topk: K must be one int64 element, got %s %s", dtype_name(args.in[1].dtype), dims_str(args.in[1]).c_str());
  }
  int64_t k = args.in[1].as<const int64_t>()[0];
  int64_t len = x.dims[axis];
  if (k < 0 || k > len) return kernel_error("topk: K = %lld is out of range for axis %lld of input dims %s", static_cast<long long>(k), static_cast<long long>(axis), dims_str(x).c_str());
  bool ok = v.rank == x.rank && ix.rank == x.rank;
  for (int j = 0; ok && j < x.rank; j++) ok = v.dims[j] == (j == axis ? k : x.dims[j]) && ix.dims[j] == v.dims[j];
  if (!ok) {
    return kernel_error("topk: output dims %s and %s do not match input dims %s with K = %lld on axis %lld",
                        dims_str(v).c_str(), dims_str(ix).c_str(), dims_str(x).c_str(), static_cast<long long>(k),
                        static_cast<long long>(axis));
  }
  if (v.dtype != x.dtype || ix.dtype != kInt64) {
    return kernel_error("topk: outputs must be %s and int64, got %s and %s", dtype_name(x.dtype), dtype_name(v.dtype), dtype_name(ix.dtype));
  }
  if (v.numel == 0) return nullptr;
  int64_t outer = 1, inner = 1;
  for (int j = 0; j < axis; j++) outer *= x.dims[j];
  for (int j = static_cast<int>(axis) + 1; j < x.rank; j++) inner *= x.dims[j];
  bool largest = args.iargs[topk_args::kLargest] != 0;  // kSorted: results are always sorted, which sorted=0 allows too
  switch (x.dtype) {
    case kFloat32: topk_typed<float>(args, outer, len, inner, k, largest); return nullptr;
    case kFloat64: topk_typed<double>(args, outer, len, inner, k, largest); return nullptr;
    case kInt32: topk_typed<int32_t>(args, outer, len, inner, k, largest); return nullptr;
    case kInt64: topk_typed<int64_t>(args, outer, len, inner, k, largest); return nullptr;
    case kInt8: topk_typed<int8_t>(args, outer, len, inner, k, largest); return nullptr;
    case kUint8: topk_typed<uint8_t>(args, outer, len, inner, k, largest); return nullptr;
    default: return kernel_error("topk: unsupported dtype %s", dtype_name(x.dtype));
  }
}

// ---- trilu ----

// Keeps j − i ≥ k (upper) or j − i ≤ k (lower) in each matrix of the last two dims; zeroes the rest (any dtype).
const char* trilu_kernel(const KernelArgs& args) {
  if (const char* err = check_counts("trilu", args, trilu_args::kArity)) return err;
  const TensorView& x = args.in[0];
  const TensorView& y = args.out[0];
  if (x.rank < 2) return kernel_error("trilu: input must have rank at least 2, got dims %s", dims_str(x).c_str());
  bool same = y.rank == x.rank && y.dtype == x.dtype;
  for (int j = 0; same && j < x.rank; j++) same = y.dims[j] == x.dims[j];
  if (!same) {
    return kernel_error("trilu: output %s %s differs from input %s %s", dtype_name(y.dtype), dims_str(y).c_str(),
                        dtype_name(x.dtype), dims_str(x).c_str());
  }
  int64_t k = 0;
  if (args.n_in == 2 && args.in[1].data != nullptr) {
    if (args.in[1].dtype != kInt64 || args.in[1].numel != 1) {
      return kernel_error("trilu: k must be one int64 element, got %s %s", dtype_name(args.in[1].dtype), dims_str(args.in[1]).c_str());
    }
    k = args.in[1].as<const int64_t>()[0];
  }
  if (x.numel == 0) return nullptr;
  bool upper = args.iargs[trilu_args::kUpper] != 0;
  int64_t rows = x.dims[x.rank - 2], cols = x.dims[x.rank - 1];
  int64_t bound = rows + cols + 1;
  k = std::max(-bound, std::min(bound, k));  // beyond this every element is kept or every one zeroed
  size_t es = dtype_size(x.dtype);
  const char* src = static_cast<const char*>(x.data);
  char* dst = static_cast<char*>(y.data);
  int64_t chunk = cols >= kWork ? 1 : kWork / cols;
  run_parallel(args, x.numel / cols, chunk, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; r++) {
      int64_t i = r % rows;
      // kept columns: [lo, hi)
      int64_t lo = upper ? std::max<int64_t>(0, std::min(cols, i + k)) : 0;
      int64_t hi = upper ? cols : std::max<int64_t>(0, std::min(cols, i + k + 1));
      const char* s = src + r * cols * es;
      char* d = dst + r * cols * es;
      if (lo > 0) std::memset(d, 0, lo * es);
      if (hi > lo && s != d) std::memmove(d + lo * es, s + lo * es, (hi - lo) * es);
      if (hi < cols) std::memset(d + hi * es, 0, (cols - hi) * es);
    }
  });
  return nullptr;
}

// ---- one_hot ----

template <class E>
void one_hot_fill(const KernelArgs& args, const TensorView& values) {
  const E off = values.as<const E>()[0];
  E* y = args.out[0].as<E>();
  run_parallel(args, args.out[0].numel, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; i++) y[i] = off;
  });
}

// The position of index value v among depth classes: negative values count from the end; -1 when out of range.
template <class I> int64_t class_of(I v, int64_t depth) {
  if constexpr (std::is_floating_point<I>::value) {
    double t = std::trunc(static_cast<double>(v));
    if (t < 0) t += static_cast<double>(depth);
    return (t >= 0 && t < static_cast<double>(depth)) ? static_cast<int64_t>(t) : -1;
  } else {
    int64_t c = static_cast<int64_t>(v);
    if (c < 0) c += depth;
    return (c >= 0 && c < depth) ? c : -1;
  }
}

template <class I, class E>
void one_hot_set(const KernelArgs& args, const TensorView& values, int64_t depth, int64_t inner) {
  const I* idx = args.in[0].as<const I>();
  const E on = values.as<const E>()[1];
  E* y = args.out[0].as<E>();
  run_parallel(args, args.in[0].numel, 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; p++) {
      int64_t c = class_of(idx[p], depth);
      if (c >= 0) y[((p / inner) * depth + c) * inner + p % inner] = on;
    }
  });
}

template <class E>
const char* one_hot_elems(const KernelArgs& args, const TensorView& values, int64_t depth, int64_t inner) {
  one_hot_fill<E>(args, values);
  switch (args.in[0].dtype) {
    case kInt64: one_hot_set<int64_t, E>(args, values, depth, inner); return nullptr;
    case kInt32: one_hot_set<int32_t, E>(args, values, depth, inner); return nullptr;
    case kFloat32: one_hot_set<float, E>(args, values, depth, inner); return nullptr;
    case kFloat64: one_hot_set<double, E>(args, values, depth, inner); return nullptr;
    default: return kernel_error("one_hot: unsupported indices dtype %s", dtype_name(args.in[0].dtype));
  }
}

const char* one_hot_kernel(const KernelArgs& args) {
  if (const char* err = check_counts("one_hot", args, one_hot_args::kArity)) return err;
  const TensorView& ind = args.in[0];
  const TensorView& values = args.in[2];
  const TensorView& y = args.out[0];
  int r = ind.rank;
  const int64_t given = args.iargs[one_hot_args::kAxis];
  int64_t axis = given < 0 ? given + r + 1 : given;
  if (axis < 0 || axis > r) {
    return kernel_error("one_hot: axis %lld is out of range for output rank %d", static_cast<long long>(given), r + 1);
  }
  int64_t depth = 0;
  if (!scalar_int(args.in[1], &depth)) {
    return kernel_error("one_hot: depth must be one numeric element, got %s %s", dtype_name(args.in[1].dtype), dims_str(args.in[1]).c_str());
  }
  if (depth < 1) return kernel_error("one_hot: depth must be positive, got %lld", static_cast<long long>(depth));
  if (values.numel != 2) return kernel_error("one_hot: values must have 2 elements, got dims %s", dims_str(values).c_str());
  bool ok = y.rank == r + 1 && y.dtype == values.dtype;
  for (int j = 0; ok && j <= r; j++) ok = y.dims[j] == (j < axis ? ind.dims[j] : j == axis ? depth : ind.dims[j - 1]);
  if (!ok) {
    return kernel_error("one_hot: output %s %s does not match indices dims %s with depth %lld at axis %lld (values %s)",
                        dtype_name(y.dtype), dims_str(y).c_str(), dims_str(ind).c_str(), static_cast<long long>(depth),
                        static_cast<long long>(axis), dtype_name(values.dtype));
  }
  int32_t it = ind.dtype;
  if (it != kInt64 && it != kInt32 && it != kFloat32 && it != kFloat64) {
    return kernel_error("one_hot: unsupported indices dtype %s", dtype_name(it));
  }
  if (y.numel == 0) return nullptr;
  int64_t inner = 1;
  for (int j = static_cast<int>(axis); j < r; j++) inner *= ind.dims[j];
  switch (dtype_size(values.dtype)) {
    case 1: return one_hot_elems<uint8_t>(args, values, depth, inner);
    case 2: return one_hot_elems<uint16_t>(args, values, depth, inner);
    case 4: return one_hot_elems<uint32_t>(args, values, depth, inner);
    case 8: return one_hot_elems<uint64_t>(args, values, depth, inner);
    default: return kernel_error("one_hot: unsupported values dtype %s", dtype_name(values.dtype));
  }
}

const KernelDef kDefs[] = {
    {"topk", topk_kernel},
    {"trilu", trilu_kernel},
    {"one_hot", one_hot_kernel},
};

}  // namespace

KernelList select_kernels() { return KernelList{kDefs, sizeof(kDefs) / sizeof(kDefs[0])}; }

}  // namespace planc
