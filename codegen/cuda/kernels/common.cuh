// planc CUDA kernel templates, part 1: the launch ABI shared with native/src/cuda/launch.cc, and helpers.
// codegen/cuda/generate.ts pastes these files into one .cu per plan and adds extern "C" entry points.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>
#include <type_traits>

// The first error a kernel of this module reports: (call index + 1) << 32 | error code; 0 = none.
// The runtime reads it after a run (cuModuleGetGlobal) and resets it.
extern "C" __device__ unsigned long long planc_error = 0;

namespace planc {

constexpr int kMaxRank = 8, kMaxIn = 8, kMaxOut = 4, kMaxIargs = 32, kMaxFargs = 4;

// One operand: device pointer, element count, rank, ONNX dtype and resolved dims (row-major, contiguous).
struct Tensor {
  void* data;
  int64_t numel;
  int32_t rank;
  int32_t dtype;
  int64_t dims[kMaxRank];
};

// The single by-value parameter of every entry point (see native/src/cuda/launch.cc, which fills the same layout).
struct KArgs {
  Tensor in[kMaxIn];
  Tensor out[kMaxOut];
  int64_t iargs[kMaxIargs];
  double fargs[kMaxFargs];
  void* scratch;      // the plan's device scratch (zeroed at load; kernels that use it leave it as they found it)
  int32_t n_in, n_out;
  int32_t call;       // index of this call in its program (names the node in errors)
  int32_t pad;
};

// The plan's scratch (zeroed at load): kScratchCounters ticket counters first, which every kernel that uses them
// returns to zero, then data (partial results) from kScratchData bytes on. Calls run one after another on one stream.
constexpr int kScratchCounters = 16384;
constexpr int kScratchData = kScratchCounters * 4;

// Error codes (native/src/cuda/launch.cc has their messages).
enum Err : int {
  kErrIndex = 1,     // gather: index out of range
  kErrSlice = 2,     // slice: source index out of range
  kErrShape = 3,     // operand dims do not fit the kernel
  kErrCache = 4,     // cache_write: pos + rows past the cache capacity
  kErrKvLen = 5,     // attention: kv_len outside [1, capacity]
};

__device__ __forceinline__ void fail(const KArgs& a, int code) {
  atomicCAS(&planc_error, 0ull, ((unsigned long long)(a.call + 1) << 32) | (unsigned)code);
}

__device__ __forceinline__ int64_t gtid() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t gstride() { return (int64_t)gridDim.x * blockDim.x; }

// Offset into t (right-aligned against the R output dims od, numpy broadcasting) of output element i.
template <int R>
__device__ __forceinline__ int64_t bcast_off(int64_t i, const int64_t* od, const Tensor& t) {
  int64_t off = 0, stride = 1;
#pragma unroll
  for (int ax = R - 1; ax >= 0; --ax) {
    const int64_t d = od[ax];
    const int64_t c = i % d;
    i /= d;
    const int tax = ax - (R - t.rank);
    if (tax >= 0) {
      const int64_t td = t.dims[tax];
      if (td != 1) off += c * stride;
      stride *= td;
    }
  }
  return off;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Conversions with ONNX Cast semantics: float→int truncates, bool = x != 0, half through float.
template <class TY, class TX> struct Conv { __device__ static TY f(TX x) { return (TY)x; } };
template <class TX> struct Conv<__half, TX> { __device__ static __half f(TX x) { return __float2half((float)x); } };
template <class TY> struct Conv<TY, __half> { __device__ static TY f(__half x) { return (TY)__half2float(x); } };
template <> struct Conv<__half, __half> { __device__ static __half f(__half x) { return x; } };
template <class TX> struct Conv<__nv_bfloat16, TX> { __device__ static __nv_bfloat16 f(TX x) { return __float2bfloat16_rn((float)x); } };
template <class TY> struct Conv<TY, __nv_bfloat16> { __device__ static TY f(__nv_bfloat16 x) { return (TY)__bfloat162float(x); } };
template <> struct Conv<__nv_bfloat16, __nv_bfloat16> { __device__ static __nv_bfloat16 f(__nv_bfloat16 x) { return x; } };
template <> struct Conv<__half, __nv_bfloat16> { __device__ static __half f(__nv_bfloat16 x) { return __float2half(__bfloat162float(x)); } };
template <> struct Conv<__nv_bfloat16, __half> { __device__ static __nv_bfloat16 f(__half x) { return __float2bfloat16_rn(__half2float(x)); } };

// A product's weight element (float, or float16 / bfloat16 with --quantize fp16|bf16: compiler/kernel-schema.ts
// F32_OR_HALF): load widens one exactly to float; round gives the other operand's value as the weight's dtype holds it
// (nearest even), so that products of the two are exact in float32, as on the tensor cores.
template <class T> struct WType;
template <> struct WType<float> {
  __device__ static __forceinline__ float load(const float* p) { return __ldg(p); }
  __device__ static __forceinline__ float round(float x) { return x; }
};
template <> struct WType<__half> {
  __device__ static __forceinline__ float load(const __half* p) { return __half2float(__ldg(p)); }
  __device__ static __forceinline__ float round(float x) { return __half2float(__float2half_rn(x)); }
};
template <> struct WType<__nv_bfloat16> {
  __device__ static __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(__ldg(p)); }
  __device__ static __forceinline__ float round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
};

// The epilogue activations of fused_matmul (Activation, enums.cuh).
template <int ACT>
__device__ __forceinline__ float activate(float x) {
  if (ACT == kActRelu) return x > 0.0f ? x : 0.0f;
  if (ACT == kActGelu) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  if (ACT == kActGeluTanh) return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  if (ACT == kActSilu) return x / (1.0f + expf(-x));
  return x;
}

}  // namespace planc
