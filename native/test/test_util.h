// The one harness of the standalone kernel tests: owned tensors, kernel calls by name, checks, counters and the summary.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "generated/kernel_calls.h"
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
inline int g_skips = 0;

// Counts one check; a failed one is counted and printed as "FAIL [file:line: ]" and the printf-style message.
template <class... A> inline bool check_at(bool ok, const char* file, int line, const char* fmt, A... args) {
  g_checks++;
  if (ok) return true;
  g_failures++;
  if (*file) std::printf("FAIL %s:%d: ", file, line);
  else std::printf("FAIL ");
  if constexpr (sizeof...(A) == 0) std::printf("%s", fmt);
  else std::printf(fmt, args...);
  std::printf("\n");
  return false;
}

// CHECK(cond) names the condition; CHECK_MSG(cond, fmt, ...) says what went wrong with values.
#define CHECK(cond) ::test::check_at(static_cast<bool>(cond), __FILE__, __LINE__, "CHECK failed: %s", #cond)
#define CHECK_MSG(cond, ...) ::test::check_at(static_cast<bool>(cond), __FILE__, __LINE__, __VA_ARGS__)

inline int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Row-major strides of dims.
inline std::vector<int64_t> strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; i--) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// A tensor that owns its bytes: 8-byte aligned, never null, no slack past the end; `view` is what a kernel is given.
struct Tensor {
  std::vector<int64_t> dims;
  TensorView view;
  std::vector<uint64_t> store;

  Tensor() = default;
  Tensor(int32_t dtype, std::vector<int64_t> d) : dims(std::move(d)) {
    view.dtype = dtype;
    view.rank = static_cast<int32_t>(dims.size());
    view.numel = ::test::numel(dims);
    for (size_t i = 0; i < dims.size(); i++) view.dims[i] = dims[i];
    store.assign(std::max<size_t>(1, (view.bytes() + 7) / 8), 0);
    view.data = store.data();
  }
  Tensor(const Tensor& o) : dims(o.dims), view(o.view), store(o.store) { view.data = store.data(); }
  Tensor(Tensor&& o) noexcept : dims(std::move(o.dims)), view(o.view), store(std::move(o.store)) { view.data = store.data(); }
  Tensor& operator=(Tensor o) {
    dims = std::move(o.dims);
    view = o.view;
    store = std::move(o.store);
    view.data = store.data();
    return *this;
  }

  int32_t dtype() const { return view.dtype; }
  int64_t numel() const { return view.numel; }
  void* data() { return store.data(); }
  const void* data() const { return store.data(); }
  template <class T> T* data() { return reinterpret_cast<T*>(store.data()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(store.data()); }
  template <class T> T at(int64_t i) const { return data<T>()[i]; }
};

template <class T> Tensor make(int32_t dtype, std::vector<int64_t> dims, std::initializer_list<T> vals) {
  Tensor t(dtype, std::move(dims));
  size_t i = 0;
  for (T v : vals) t.data<T>()[i++] = v;
  return t;
}

template <class T> Tensor make_vec(int32_t dtype, std::vector<int64_t> dims, const std::vector<T>& vals) {
  Tensor t(dtype, std::move(dims));
  for (size_t i = 0; i < vals.size() && i < static_cast<size_t>(t.numel()); i++) t.data<T>()[i] = vals[i];
  return t;
}

inline Tensor f32(std::vector<int64_t> dims) { return Tensor(kFloat32, std::move(dims)); }
inline Tensor f32(std::vector<int64_t> dims, std::initializer_list<float> vals) { return make<float>(kFloat32, std::move(dims), vals); }
inline Tensor i64(std::vector<int64_t> dims, std::initializer_list<int64_t> vals) { return make<int64_t>(kInt64, std::move(dims), vals); }

// Deterministic pseudo-random numbers, one stream per test that makes one.
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

// The program-wide engine behind fill_random (fixed seed: every run sees the same data).
inline std::mt19937& random_engine() {
  static std::mt19937 g(12345);
  return g;
}

// Uniform values in [lo, hi) for float tensors, random bytes for the others.
inline void fill_random(Tensor& t, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  if (t.dtype() == kFloat32) for (int64_t i = 0; i < t.numel(); i++) t.data<float>()[i] = u(random_engine());
  else if (t.dtype() == kFloat64) for (int64_t i = 0; i < t.numel(); i++) t.data<double>()[i] = u(random_engine());
  else for (size_t i = 0; i < t.view.bytes(); i++) t.data<uint8_t>()[i] = static_cast<uint8_t>(random_engine()());
}

// The two-thread pool the tests share.
inline ThreadPool& pool() {
  static ThreadPool p(2);
  return p;
}

// The shared pool, or none (the calling thread alone).
inline ThreadPool* threads(bool on) { return on ? &pool() : nullptr; }

// A kernel's table entry by name, in any of `lists`; a missing one is a failed check.
inline const KernelDef* find_def(std::initializer_list<KernelList> lists, const char* name) {
  for (const KernelList& l : lists)
    for (size_t i = 0; i < l.count; i++)
      if (std::strcmp(l.defs[i].name, name) == 0) return &l.defs[i];
  check_at(false, __FILE__, __LINE__, "no kernel named %s", name);
  return nullptr;
}

inline KernelFn find_kernel(std::initializer_list<KernelList> lists, const char* name) {
  const KernelDef* def = find_def(lists, name);
  return def ? def->fn : nullptr;
}

// A call's arguments in the kernel's order; a builder that leaves a required argument unset is a failed check, and
// its text the call's error.
inline const char* ordered_args(const kernel_call::Args& args, std::vector<int64_t>& iargs, std::vector<double>& fargs) {
  const char* err = args.resolve(iargs, fargs);
  if (err) check_at(false, "", 0, "kernel arguments: %s", err);
  return err;
}

// Calls a kernel as a program does: views in and out (TensorView() for an omitted optional input), its arguments by
// name (a builder of generated/kernel_calls.h; {}: none), the pool (the shared one unless given; nullptr: the calling
// thread) and the variant (0: the kernel's default). Returns its error.
inline const char* call(KernelFn fn, std::vector<TensorView> in, std::vector<TensorView> out, const kernel_call::Args& args = {},
                        ThreadPool* pool = &test::pool(), int64_t variant = 0) {
  if (fn == nullptr) return "missing kernel";
  std::vector<int64_t> iargs;
  std::vector<double> fargs;
  if (const char* err = ordered_args(args, iargs, fargs)) return err;
  return fn(kernel_call::args(in, out, iargs, fargs, pool, variant));
}

// As call, for a variant that reads a prepared operand: builds it first, as a program would.
inline const char* call_variant(const KernelDef& def, std::vector<TensorView> in, std::vector<TensorView> out,
                                const kernel_call::Args& args, ThreadPool* pool, int64_t variant) {
  if (args.kernel() != nullptr && std::strcmp(args.kernel(), def.name) != 0)
    check_at(false, "", 0, "arguments of %s passed to %s", args.kernel(), def.name);
  std::vector<int64_t> iargs;
  std::vector<double> fargs;
  if (const char* err = ordered_args(args, iargs, fargs)) return err;
  return kernel_call::run_prepared(def, kernel_call::args(in, out, iargs, fargs, pool, variant));
}

// As call with the iargs and fargs as the kernel receives them, for the few checks that pass a wrong count on purpose
// (the kernel's count check); each line that uses it says "positional on purpose" (test/kernel-schema.test.ts).
inline const char* call_positional(KernelFn fn, std::vector<TensorView> in, std::vector<TensorView> out,
                                   std::vector<int64_t> iargs, std::vector<double> fargs, ThreadPool* pool = &test::pool()) {
  if (fn == nullptr) return "missing kernel";
  return fn(kernel_call::args(in, out, iargs, fargs, pool, 0));
}

// Expects an error whose text contains `part`; `what` names the case.
inline void expect_error(const char* err, const char* part, const char* what) {
  check_at(err != nullptr && std::strstr(err, part) != nullptr, "", 0, "%s: expected an error containing '%s', got '%s'", what,
           part, err ? err : "(success)");
}

inline void expect_ok(const char* err, const char* what) {
  check_at(err == nullptr, "", 0, "%s: unexpected error '%s'", what, err ? err : "");
}

inline std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }
#define EXPECT_ERROR(err, part) ::test::expect_error((err), (part), ::test::where(__FILE__, __LINE__).c_str())
#define EXPECT_OK(err) ::test::expect_ok((err), ::test::where(__FILE__, __LINE__).c_str())

// Bitwise-equal or both NaN.
template <class T> bool same(T a, T b) {
  if constexpr (std::is_floating_point<T>::value) {
    if (a != a && b != b) return true;
    return std::memcmp(&a, &b, sizeof(T)) == 0 || a == b;
  } else {
    return a == b;
  }
}

// Counts mismatches between two arrays (exact, or within tol relative), printing the first few; one check.
template <class T> int compare(const T* got, const T* want, int64_t n, const char* what, double tol = 0) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    bool ok = same(got[i], want[i]);
    if (!ok && tol > 0) ok = std::fabs(double(got[i]) - double(want[i])) <= tol * (1 + std::fabs(double(want[i])));
    if (!ok) {
      if (bad < 5) std::printf("%s: [%lld] got %.17g want %.17g\n", what, (long long)i, double(got[i]), double(want[i]));
      bad++;
    }
  }
  check_at(bad == 0, "", 0, "%s: %d of %lld differ", what, bad, (long long)n);
  return bad;
}

// Largest |got - want| / (atol + rtol |want|) over n values; NaN positions must agree.
inline double worst(const float* got, const double* want, int64_t n, double rtol, double atol, int64_t* at = nullptr) {
  double w = 0;
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], e = want[i];
    double r;
    if (std::isnan(e) || std::isnan(g)) r = (std::isnan(e) && std::isnan(g)) ? 0 : 1e9;
    else if (std::isinf(e) || std::isinf(g)) r = (g == e) ? 0 : 1e9;
    else r = std::fabs(g - e) / (atol + rtol * std::fabs(e));
    if (r > w) {
      w = r;
      if (at) *at = i;
    }
  }
  return w;
}

// got within rtol/atol of a float64 reference; one check.
inline bool close(const float* got, const double* want, int64_t n, double rtol, double atol, const char* what) {
  int64_t at = 0;
  double w = worst(got, want, n, rtol, atol, &at);
  return check_at(w <= 1.0, "", 0, "%s: element %lld got %.9g want %.9g (ratio %.3g)", what, (long long)at,
                  n ? (double)got[at] : 0.0, n ? want[at] : 0.0, w);
}

// A part of the program this machine cannot run (a variant its CPU lacks): counted, and printed as "SKIP what: why",
// the line test/native-kernels.test.ts adds to npm test's skip summary.
inline void skip(const std::string& what, const char* why) {
  g_skips++;
  std::printf("SKIP %s: %s\n", what.c_str(), why);
}

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The last line of every program, which test/native-kernels.test.ts reads; the exit code.
inline int finish(const char* name) {
  std::printf("%s: %d checks, %d failures, %d skipped\n", name, g_checks, g_failures, g_skips);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace test
