// cudasim: CUDA's device language for g++ (C++17), force-included (-include) when a .cu is compiled for the CPU:
// qualifiers, builtin indices, vector types, math intrinsics, atomics, barriers and warp collectives over sched.h.
#pragma once
#define PLANC_CUDASIM 1
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

#include "fibers.h"

// ---- qualifiers ----
#define __global__
#define __device__ __attribute__((visibility("default")))  // module globals (planc_error) are found with dlsym
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
// Static shared memory: one instance per block (blocks run one at a time), in a section poisoned before blocks run.
// `extern __shared__ T name[];` (dynamic shared memory) is rewritten by the cudasim compiler (compile.cc).
#define __shared__ static __attribute__((section("cudasim_shm")))

// ---- builtin indices ----
#define threadIdx (::cudasim::g_fiber->tid)
#define blockIdx (::cudasim::g_block_idx)
#define blockDim (::cudasim::g_block_dim)
#define gridDim (::cudasim::g_grid_dim)
#define warpSize 32

namespace cudasim {
template <class T>
inline T* dynamic_shared() { return reinterpret_cast<T*>(g_dyn_smem); }
}  // namespace cudasim

// ---- vector types ----
#define CUDASIM_VEC2(T, N, A) struct __attribute__((aligned(A))) N##2 { T x, y; }; \
  inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }
#define CUDASIM_VEC4(T, N, A) struct __attribute__((aligned(A))) N##4 { T x, y, z, w; }; \
  inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
CUDASIM_VEC2(float, float, 8)
CUDASIM_VEC4(float, float, 16)
CUDASIM_VEC2(int, int, 8)
CUDASIM_VEC4(int, int, 16)
CUDASIM_VEC2(unsigned, uint, 8)
CUDASIM_VEC4(unsigned, uint, 16)
CUDASIM_VEC2(double, double, 16)
struct float3 { float x, y, z; };
inline float3 make_float3(float x, float y, float z) { return float3{x, y, z}; }
#undef CUDASIM_VEC2
#undef CUDASIM_VEC4

// ---- min / max as CUDA overloads them ----
template <class A, class B>
inline typename std::common_type<A, B>::type min(A a, B b) {
  using T = typename std::common_type<A, B>::type;
  return (T)a < (T)b ? (T)a : (T)b;
}
template <class A, class B>
inline typename std::common_type<A, B>::type max(A a, B b) {
  using T = typename std::common_type<A, B>::type;
  return (T)a > (T)b ? (T)a : (T)b;
}

// ---- math intrinsics (the fast ones computed at full precision) ----
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : x > 1.f ? 1.f : x; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
inline float __uint_as_float(unsigned i) { float x; memcpy(&x, &i, 4); return x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

// ---- cached loads: plain loads here ----
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { return *p; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stwt(T* p, T v) { *p = v; }

// ---- atomics: fibers switch only at barriers and collectives, so read-modify-write is atomic ----
template <class T> inline T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <class T> inline T atomicSub(T* p, T v) { T o = *p; *p = o - v; return o; }
template <class T> inline T atomicExch(T* p, T v) { T o = *p; *p = v; return o; }
template <class T> inline T atomicMin(T* p, T v) { T o = *p; *p = v < o ? v : o; return o; }
template <class T> inline T atomicMax(T* p, T v) { T o = *p; *p = v > o ? v : o; return o; }
template <class T> inline T atomicAnd(T* p, T v) { T o = *p; *p = o & v; return o; }
template <class T> inline T atomicOr(T* p, T v) { T o = *p; *p = o | v; return o; }
template <class T> inline T atomicXor(T* p, T v) { T o = *p; *p = o ^ v; return o; }
template <class T> inline T atomicCAS(T* p, T cmp, T v) { T o = *p; if (o == cmp) *p = v; return o; }
inline unsigned atomicInc(unsigned* p, unsigned v) { unsigned o = *p; *p = o >= v ? 0 : o + 1; return o; }
inline unsigned atomicDec(unsigned* p, unsigned v) { unsigned o = *p; *p = (o == 0 || o > v) ? v : o - 1; return o; }
// Mixed-type calls of the CUDA overloads (atomicAdd(unsigned*, 1)) take the pointer's type.
template <class T, class V, class = typename std::enable_if<!std::is_same<T, V>::value>::type>
inline T atomicAdd(T* p, V v) { return atomicAdd<T>(p, static_cast<T>(v)); }
template <class T, class C, class V, class = typename std::enable_if<!std::is_same<T, C>::value || !std::is_same<T, V>::value>::type>
inline T atomicCAS(T* p, C c, V v) { return atomicCAS<T>(p, static_cast<T>(c), static_cast<T>(v)); }

// ---- fences, barriers ----
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __syncthreads() { ::cudasim::block_barrier(0); }
inline int __syncthreads_count(int p) { return ::cudasim::block_barrier(p != 0); }
inline int __syncthreads_and(int p) { return ::cudasim::block_barrier(p != 0) == ::cudasim::g_bar_arrived; }
inline int __syncthreads_or(int p) { return ::cudasim::block_barrier(p != 0) > 0; }
[[noreturn]] inline void __trap() {
  ::cudasim::fail("__trap()");
  ::cudasim::abort_fiber();
}

// ---- warp collectives ----
namespace cudasim {

enum ShflKind { kShflIdx, kShflXor, kShflUp, kShflDown };

// arg = kind << 32 | (width << 16) | (lane argument & 0xffff).
inline void complete_shfl(Fiber** lanes, int) {
  for (int l = 0; l < 32; l++) {
    Fiber* f = lanes[l];
    if (f == nullptr) continue;
    const int kind = static_cast<int>(f->arg >> 32), width = static_cast<int>((f->arg >> 16) & 0xffff);
    const int v = static_cast<int>(f->arg & 0xffff);
    const int seg = l / width * width;
    int src = l;
    if (kind == kShflIdx) src = seg + (v % width);
    else if (kind == kShflXor) src = l ^ v;
    else if (kind == kShflUp) src = (l - seg) - v >= 0 ? l - v : l;
    else src = (l - seg) + v < width ? l + v : l;
    if (src < seg || src >= seg + width) src = l;  // xor past the segment: the lane's own value
    f->result = lanes[src] != nullptr ? lanes[src]->val : f->val;  // a lane outside the mask: undefined, own value
  }
}

inline void complete_ballot(Fiber** lanes, int) {
  unsigned bits = 0;
  for (int l = 0; l < 32; l++)
    if (lanes[l] != nullptr && lanes[l]->val != 0) bits |= 1u << l;
  for (int l = 0; l < 32; l++)
    if (lanes[l] != nullptr) lanes[l]->result = bits;
}

inline void complete_sync(Fiber**, int) {}

template <class T>
inline T shfl(unsigned mask, T v, int kind, int lane_arg, int width, const char* name) {
  static_assert(sizeof(T) <= 8, "cudasim shuffles values of at most 8 bytes");
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    fail(std::string(name) + ": width must be a power of 2 in [1, 32]");
    abort_fiber();
  }
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof(T));
  const uint64_t arg = (uint64_t(kind) << 32) | (uint64_t(width) << 16) | (uint64_t(lane_arg) & 0xffff);
  const uint64_t r = warp_collective(complete_shfl, mask, bits, arg, name);
  T out;
  memcpy(&out, &r, sizeof(T));
  return out;
}

}  // namespace cudasim

template <class T> inline T __shfl_sync(unsigned m, T v, int src, int w = 32) { return ::cudasim::shfl(m, v, ::cudasim::kShflIdx, src, w, "__shfl_sync"); }
template <class T> inline T __shfl_xor_sync(unsigned m, T v, int x, int w = 32) { return ::cudasim::shfl(m, v, ::cudasim::kShflXor, x, w, "__shfl_xor_sync"); }
template <class T> inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) { return ::cudasim::shfl(m, v, ::cudasim::kShflUp, static_cast<int>(d), w, "__shfl_up_sync"); }
template <class T> inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) { return ::cudasim::shfl(m, v, ::cudasim::kShflDown, static_cast<int>(d), w, "__shfl_down_sync"); }
inline unsigned __ballot_sync(unsigned m, int p) { return static_cast<unsigned>(::cudasim::warp_collective(::cudasim::complete_ballot, m, p != 0, 0, "__ballot_sync")); }
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
inline int __all_sync(unsigned m, int p) { return __ballot_sync(m, p) == m; }
inline void __syncwarp(unsigned m = 0xffffffffu) { ::cudasim::warp_collective(::cudasim::complete_sync, m, 0, 0, "__syncwarp"); }
// The lanes of the caller's warp that have not exited (fibers of a warp are never split by the model).
inline unsigned __activemask() {
  unsigned bits = 0;
  const int base = ::cudasim::g_fiber->warp * 32, n = static_cast<int>(::cudasim::g_fibers.size());
  for (int l = 0; l < 32 && base + l < n; l++)
    if (::cudasim::g_fibers[base + l].wait != ::cudasim::Wait::kDone) bits |= 1u << l;
  return bits;
}
inline unsigned __lanemask_lt() { return (1u << ::cudasim::g_fiber->lane) - 1u; }

// ---- entry points: a trampoline per kernel that unpacks cuLaunchKernel's void** params ----
namespace cudasim {

struct Entry {
  const char* name;
  KernelFn fn;
  int max_threads;  // __launch_bounds__'s first argument, 0 = 1024
  int n_params;
  int param_bytes[16];
};

inline std::vector<Entry>& entries() {
  static std::vector<Entry> e;
  return e;
}

template <class... A, size_t... I>
inline void call_unpacked(void (*f)(A...), void** p, std::index_sequence<I...>) {
  f(*static_cast<typename std::remove_cv<typename std::remove_reference<A>::type>::type*>(p[I])...);
}

template <class... A>
struct Register {
  Register(const char* name, void (*f)(A...), KernelFn tramp, int max_threads) {
    static_assert(sizeof...(A) <= 16, "cudasim entry points take at most 16 parameters");
    Entry e{name, tramp, max_threads, static_cast<int>(sizeof...(A)), {}};
    const int sizes[] = {0, static_cast<int>(sizeof(typename std::remove_reference<A>::type))...};
    for (size_t i = 0; i < sizeof...(A); i++) e.param_bytes[i] = sizes[i + 1];
    entries().push_back(e);
  }
};

}  // namespace cudasim

// CUDASIM_ENTRY(kernel, max threads per block): makes kernel launchable by name through the emulated driver.
#define CUDASIM_ENTRY(K, MAXT)                                                                                   \
  static void cudasim_tramp_##K(void** p) {                                                                      \
    ::cudasim::call_unpacked(K, p, std::make_index_sequence<::cudasim::Arity<decltype(&K)>::value>{});          \
  }                                                                                                              \
  static ::cudasim::Register cudasim_reg_##K(#K, K, cudasim_tramp_##K, MAXT);

namespace cudasim {
template <class F> struct Arity;
template <class... A> struct Arity<void (*)(A...)> { static constexpr size_t value = sizeof...(A); };
}  // namespace cudasim

// ---- module interface used by the emulated driver (driver.cc); exported from the module's shared object ----
#define CUDASIM_EXPORT extern "C" __attribute__((visibility("default"), used))
CUDASIM_EXPORT inline int cudasim_module_entry_count() { return static_cast<int>(::cudasim::entries().size()); }
CUDASIM_EXPORT inline const ::cudasim::Entry* cudasim_module_entry(int i) {
  return i >= 0 && i < cudasim_module_entry_count() ? &::cudasim::entries()[static_cast<size_t>(i)] : nullptr;
}
// Runs one grid; 0 or an error message (owned by the module until the next launch).
CUDASIM_EXPORT inline const char* cudasim_module_launch(int entry, const unsigned* grid, const unsigned* block,
                                                        unsigned dyn_smem, void** params, unsigned long long seed) {
  const ::cudasim::Entry* e = cudasim_module_entry(entry);
  if (e == nullptr) return "no such entry";
  ::cudasim::g_poison_blocks = getenv("PLANC_CUDASIM_CHECK") != nullptr;
  const unsigned threads = block[0] * block[1] * block[2];
  if (e->max_threads > 0 && threads > static_cast<unsigned>(e->max_threads)) {
    ::cudasim::g_error = std::string("launch of ") + e->name + ": " + std::to_string(threads) +
                         " threads per block exceed its __launch_bounds__ (" + std::to_string(e->max_threads) + ")";
    return ::cudasim::g_error.c_str();
  }
  const bool ok = ::cudasim::run_grid(e->fn, params, dim3(grid[0], grid[1], grid[2]), dim3(block[0], block[1], block[2]),
                                      dyn_smem, e->name, seed);
  return ok ? nullptr : ::cudasim::g_error.c_str();
}
// Where the running kernel is (for fault reports): "kernel K, block (x,y,z), thread (x,y,z)".
CUDASIM_EXPORT inline void cudasim_module_where(char* out, unsigned long n) {
  const ::cudasim::Fiber* f = ::cudasim::g_fiber;
  snprintf(out, n, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", ::cudasim::g_kernel_name, ::cudasim::g_block_idx.x,
           ::cudasim::g_block_idx.y, ::cudasim::g_block_idx.z, f ? f->tid.x : 0, f ? f->tid.y : 0, f ? f->tid.z : 0);
}

#include "include/cuda_fp16.h"
#include "include/cuda_bf16.h"
#include "include/mma.h"
