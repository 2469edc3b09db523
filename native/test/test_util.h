// Shared helpers for the standalone kernel tests: tensors built by hand, kernel calls by name, checks and counters.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "kernel.h"
#include "kernel_call.h"
#include "threadpool.h"

namespace planc {
KernelList elementwise_kernels();
KernelList unary_kernels();
KernelList cast_kernels();
KernelList reduce_kernels();
KernelList select_kernels();
}  // namespace planc

namespace test {

using namespace planc;

inline int g_failures = 0;
inline int g_checks = 0;

#define CHECK(cond)                                                             \
  do {                                                                          \
    ::test::g_checks++;                                                         \
    if (!(cond)) {                                                              \
      ::test::g_failures++;                                                     \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                           \
  } while (0)

// A tensor that owns its bytes.
struct Tensor {
  std::vector<uint8_t> bytes;
  TensorView view;

  Tensor() = default;
  Tensor(int32_t dtype, std::vector<int64_t> dims) { reset(dtype, dims); }

  void reset(int32_t dtype, const std::vector<int64_t>& dims) {
    view = TensorView();
    view.dtype = dtype;
    view.rank = static_cast<int32_t>(dims.size());
    view.numel = 1;
    for (size_t i = 0; i < dims.size(); i++) {
      view.dims[i] = dims[i];
      view.numel *= dims[i];
    }
    bytes.assign(view.numel * dtype_size(dtype) + 8, 0);  // + 8: never a null pointer for empty tensors
    view.data = bytes.data();
  }
  template <class T> T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
  template <class T> T at(int64_t i) const { return data<T>()[i]; }
  int64_t numel() const { return view.numel; }
};

template <class T>
Tensor make(int32_t dtype, std::vector<int64_t> dims, std::initializer_list<T> vals) {
  Tensor t(dtype, dims);
  size_t i = 0;
  for (T v : vals) t.data<T>()[i++] = v;
  return t;
}

template <class T>
Tensor make_vec(int32_t dtype, std::vector<int64_t> dims, const std::vector<T>& vals) {
  Tensor t(dtype, dims);
  for (size_t i = 0; i < vals.size() && i < static_cast<size_t>(t.numel()); i++) t.data<T>()[i] = vals[i];
  return t;
}

inline ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

inline KernelFn find_kernel(std::initializer_list<KernelList> lists, const char* name) {
  for (const KernelList& l : lists) {
    for (size_t i = 0; i < l.count; i++) {
      if (std::strcmp(l.defs[i].name, name) == 0) return l.defs[i].fn;
    }
  }
  std::fprintf(stderr, "no kernel named %s\n", name);
  g_failures++;
  return nullptr;
}

// Calls a kernel; omitted optional inputs are given as nullptr. Returns the kernel's error or nullptr.
inline const char* call(KernelFn fn, std::vector<Tensor*> ins, std::vector<Tensor*> outs, std::vector<int64_t> iargs = {},
                        std::vector<double> fargs = {}, bool threaded = true) {
  if (fn == nullptr) return "missing kernel";
  std::vector<TensorView> in_views;
  for (Tensor* t : ins) in_views.push_back(t ? t->view : TensorView());
  std::vector<TensorView> out_views;
  for (Tensor* t : outs) out_views.push_back(t->view);
  return fn(kernel_call::args(in_views, out_views, iargs, fargs, threaded ? &pool() : nullptr, 0));
}

// Expects an error message that contains `part`.
inline void expect_error(const char* err, const char* part, int line) {
  g_checks++;
  if (err == nullptr || std::strstr(err, part) == nullptr) {
    g_failures++;
    std::fprintf(stderr, "line %d: expected an error containing '%s', got '%s'\n", line, part, err ? err : "(none)");
  }
}
#define EXPECT_ERROR(err, part) ::test::expect_error((err), (part), __LINE__)
#define EXPECT_OK(err)                                                                      \
  do {                                                                                      \
    const char* e_ = (err);                                                                 \
    ::test::g_checks++;                                                                     \
    if (e_ != nullptr) {                                                                    \
      ::test::g_failures++;                                                                 \
      std::fprintf(stderr, "%s:%d: unexpected error: %s\n", __FILE__, __LINE__, e_);      \
    }                                                                                       \
  } while (0)

// Bitwise-equal or both NaN.
template <class T> bool same(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (a != a && b != b) return true;
    return std::memcmp(&a, &b, sizeof(T)) == 0 || a == b;
  } else {
    return a == b;
  }
}

// Counts mismatches between two arrays, printing the first few.
template <class T> int compare(const T* got, const T* want, int64_t n, const char* what, double tol = 0) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    bool ok = same(got[i], want[i]);
    if (!ok && tol > 0) ok = std::fabs(double(got[i]) - double(want[i])) <= tol * (1 + std::fabs(double(want[i])));
    if (!ok) {
      if (bad < 5) std::fprintf(stderr, "%s: [%lld] got %.17g want %.17g\n", what, (long long)i, double(got[i]), double(want[i]));
      bad++;
    }
  }
  g_checks++;
  if (bad) g_failures++;
  return bad;
}

// Deterministic pseudo-random numbers.
struct Rng {
  uint64_t s = 0x9e3779b97f4a7c15ull;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() >> 11) / 9007199254740992.0; }
  int64_t integer(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(next() % uint64_t(hi - lo + 1)); }
};

inline double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

inline int finish(const char* name) {
  std::printf("%s: %d checks, %d failures\n", name, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace test
