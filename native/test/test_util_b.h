// Shared helpers for the standalone kernel tests of gemm, softmax, norm and movement: views, random data, checks.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "kernel.h"
#include "kernel_call.h"
#include "threadpool.h"

namespace tb {

inline int g_failures = 0;
inline int g_checks = 0;

#define TB_CHECK(cond, ...)                                      \
  do {                                                           \
    tb::g_checks++;                                              \
    if (!(cond)) {                                               \
      tb::g_failures++;                                          \
      std::printf("FAIL %s:%d: ", __FILE__, __LINE__);           \
      std::printf(__VA_ARGS__);                                  \
      std::printf("\n");                                         \
    }                                                            \
  } while (0)

// Row-major strides of dims.
inline std::vector<int64_t> strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; i--) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

inline int64_t numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// A TensorView over a buffer.
inline planc::TensorView view(void* data, int32_t dtype, const std::vector<int64_t>& dims) {
  planc::TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(dims.size());
  t.numel = 1;
  for (size_t i = 0; i < dims.size(); i++) {
    t.dims[i] = dims[i];
    t.numel *= dims[i];
  }
  return t;
}

// A tensor that owns its bytes (8-byte aligned).
struct Buf {
  std::vector<int64_t> dims;
  int32_t dtype = planc::kFloat32;
  std::vector<uint64_t> store;
  Buf() = default;
  Buf(int32_t dt, std::vector<int64_t> d) : dims(std::move(d)), dtype(dt) {
    size_t bytes = static_cast<size_t>(numel(dims)) * planc::dtype_size(dtype);
    store.assign(std::max<size_t>(1, (bytes + 7) / 8), 0);  // never null, no slack past the end
  }
  int64_t n() const { return numel(dims); }
  float* f() { return reinterpret_cast<float*>(store.data()); }
  double* d() { return reinterpret_cast<double*>(store.data()); }
  int64_t* i64() { return reinterpret_cast<int64_t*>(store.data()); }
  int32_t* i32() { return reinterpret_cast<int32_t*>(store.data()); }
  uint8_t* u8() { return reinterpret_cast<uint8_t*>(store.data()); }
  void* data() { return store.data(); }
  planc::TensorView v() { return view(store.data(), dtype, dims); }
};

inline Buf f32(std::vector<int64_t> dims) { return Buf(planc::kFloat32, std::move(dims)); }

inline Buf f32(std::vector<int64_t> dims, std::initializer_list<float> vals) {
  Buf b(planc::kFloat32, std::move(dims));
  int64_t i = 0;
  for (float v : vals) b.f()[i++] = v;
  return b;
}

inline Buf i64(std::vector<int64_t> dims, std::initializer_list<int64_t> vals) {
  Buf b(planc::kInt64, std::move(dims));
  int64_t i = 0;
  for (int64_t v : vals) b.i64()[i++] = v;
  return b;
}

inline std::mt19937& rng() {
  static std::mt19937 g(12345);
  return g;
}

inline void fill_random(Buf& b, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  if (b.dtype == planc::kFloat32) for (int64_t i = 0; i < b.n(); i++) b.f()[i] = u(rng());
  else if (b.dtype == planc::kFloat64) for (int64_t i = 0; i < b.n(); i++) b.d()[i] = u(rng());
  else {
    size_t bytes = static_cast<size_t>(b.n()) * planc::dtype_size(b.dtype);
    uint8_t* p = b.u8();
    for (size_t i = 0; i < bytes; i++) p[i] = static_cast<uint8_t>(rng()());
  }
}

// Calls a kernel with the given views and args (and variant code: 0 = the kernel's default).
inline const char* call(planc::KernelFn fn, std::vector<planc::TensorView> in, std::vector<planc::TensorView> out,
                        std::vector<int64_t> iargs = {}, std::vector<double> fargs = {},
                        planc::ThreadPool* pool = nullptr, int64_t variant = 0) {
  return fn(kernel_call::args(in, out, iargs, fargs, pool, variant));
}

// Calls a kernel's variant as a program would: its prepared operand built first when the variant reads one.
inline const char* call_variant(const planc::KernelDef& def, std::vector<planc::TensorView> in, std::vector<planc::TensorView> out,
                                std::vector<int64_t> iargs, planc::ThreadPool* pool, int64_t variant) {
  std::vector<double> fargs;
  return kernel_call::run_prepared(def, kernel_call::args(in, out, iargs, fargs, pool, variant));
}

// A kernel's table entry by name in a family's list.
inline const planc::KernelDef* find_def(planc::KernelList list, const char* name) {
  for (size_t i = 0; i < list.count; i++)
    if (std::strcmp(list.defs[i].name, name) == 0) return &list.defs[i];
  std::printf("FAIL: kernel %s not found\n", name);
  g_failures++;
  return nullptr;
}

// Finds a kernel by name in a family's list.
inline planc::KernelFn find(planc::KernelList list, const char* name) {
  for (size_t i = 0; i < list.count; i++)
    if (std::strcmp(list.defs[i].name, name) == 0) return list.defs[i].fn;
  std::printf("FAIL: kernel %s not found\n", name);
  g_failures++;
  return nullptr;
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

inline bool close(const float* got, const double* want, int64_t n, double rtol, double atol, const char* what) {
  int64_t at = 0;
  double w = worst(got, want, n, rtol, atol, &at);
  bool ok = w <= 1.0;
  g_checks++;
  if (!ok) {
    g_failures++;
    std::printf("FAIL %s: element %lld got %.9g want %.9g (ratio %.3g)\n", what, (long long)at, (double)got[at], want[at], w);
  }
  return ok;
}

// Expects an error whose text contains `part`.
inline void expect_error(const char* err, const char* part, const char* what) {
  g_checks++;
  if (!err || !std::strstr(err, part)) {
    g_failures++;
    std::printf("FAIL %s: expected error containing '%s', got '%s'\n", what, part, err ? err : "(success)");
  }
}

inline void expect_ok(const char* err, const char* what) {
  g_checks++;
  if (err) {
    g_failures++;
    std::printf("FAIL %s: unexpected error '%s'\n", what, err);
  }
}

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline int finish(const char* name) {
  std::printf("%s: %d checks, %d failures\n", name, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace tb
