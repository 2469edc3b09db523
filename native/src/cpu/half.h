// float16 and bfloat16 for the CPU kernels, one source of truth: the element conversions of cast (cast.cc) and the
// half-weight paths of matmul / fused_matmul (gemm.cc) and project_topk (project_topk.cc), where the other operand is
// rounded to the weight's dtype and both are widened to float32 (compiler/kernel-schema.ts F32_OR_HALF).
// Rounding is to nearest, ties to even; NaN stays a (quiet) NaN; float16 overflows to ±inf, bfloat16 (float32's
// exponent range) only past its largest value.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "../generated/kernel_enums.h"
#include "isa.h"
#include "vec_math.h"

namespace planc {
// Internal linkage, like vec_math.h: each kernel file gets its own copy (and its own clones of the hot loops).
namespace {

inline float f32_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

inline uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// ---- float16 ----

// Per lane: mask (all ones or all zeros) ? a : b, in integer ops so loops over it vectorize without branches.
inline uint32_t select_bits(uint32_t mask, uint32_t a, uint32_t b) { return (a & mask) | (b & ~mask); }
inline uint32_t mask_of(bool c) { return 0u - static_cast<uint32_t>(c); }

// float16 bits → float32, exact; branch-free so loops over it vectorize.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;                                       // exponent and mantissa
  const uint32_t normal = (em << 13) + (112u << 23) + (static_cast<uint32_t>(em >= 0x7c00u) * (112u << 23));  // inf/NaN: 255
  const float sub = f32_from_bits((em << 13) + (113u << 23)) - 0x1p-14f;  // subnormals and zero: em · 2^-24, exact
  return f32_from_bits(select_bits(mask_of(em < 0x0400u), f32_bits(sub), normal) | sign);
}

// The float16 nearest to a float32 (ties to even): inf from 65520 up, NaN → the quiet NaN 0x7e00. Branch-free.
inline uint16_t half_from_float(float x) {
  uint32_t f = f32_bits(x);
  const uint32_t sign = f & 0x80000000u;
  f ^= sign;
  // from 2^-14 (float16's smallest normal): rebias 127 → 15 and round 23 mantissa bits to 10, ties to even (a carry
  // into the exponent is correct, up to inf)
  const uint32_t normal = (f + (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + ((f >> 13) & 1u)) >> 13;
  // below 2^-14: adding 0.5 (ulp 2^-24) rounds to float16's subnormal quantum
  const uint32_t sub = f32_bits(f32_from_bits(f) + 0.5f) - (126u << 23);
  // 2^16 and up, inf, NaN
  const uint32_t big = select_bits(mask_of(f > 0x7f800000u), 0x7e00u, 0x7c00u);
  const uint32_t o = select_bits(mask_of(f >= (143u << 23)), big, select_bits(mask_of(f < (113u << 23)), sub, normal));
  return static_cast<uint16_t>(o | (sign >> 16));
}

// The float16 nearest to a double (ties to even), rounded once from the double; overflow gives ±inf.
inline uint16_t half_from_double(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000);
  const double a = std::fabs(x);
  if (a != a) return sign | 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;  // 65520 is halfway to 2^16: ties to even go up
  if (a < 6.103515625e-05) {               // below the smallest normal: quantum 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0));
  }
  const uint64_t au = u & 0x7fffffffffffffffull;
  const uint64_t e = (au >> 52) - 1023 + 15;               // float16 biased exponent, 1..30
  uint64_t v = (e << 52) | (au & 0xfffffffffffffull);      // exponent and 52 fraction bits
  v += (1ull << 41) - 1 + ((v >> 42) & 1);                 // round to 10 fraction bits, ties to even
  return sign | static_cast<uint16_t>(v >> 42);            // a carry into the exponent is correct
}

// ---- bfloat16: the upper 16 bits of a float32 ----

inline float bf16_to_float(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

// The bfloat16 nearest to a float32 (ties to even); NaN stays NaN, made quiet (sign and upper payload kept).
inline uint16_t bf16_from_float(float x) {
  const uint32_t f = f32_bits(x);
  const uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;  // FLT_MAX and its neighbours carry into inf
  const uint32_t quiet = (f >> 16) | 0x0040u;
  return static_cast<uint16_t>(select_bits(mask_of((f & 0x7fffffffu) > 0x7f800000u), quiet, rounded));
}

// The bfloat16 nearest to a double (ties to even), rounded once from the double (not through float32).
inline uint16_t bf16_from_double(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  const uint16_t sign = static_cast<uint16_t>((u >> 48) & 0x8000);
  const double a = std::fabs(x);
  if (a != a) return bf16_from_float(static_cast<float>(x));  // a quiet NaN of the same sign
  if (a >= 0x1.ffp127) return sign | 0x7f80;                  // halfway from the largest bfloat16 (0x1.fep127) to 2^128
  if (a < 0x1p-126) {                                         // below the smallest normal: quantum 2^-133
    return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p133));
  }
  const uint64_t au = u & 0x7fffffffffffffffull;
  const uint64_t e = (au >> 52) - 1023 + 127;              // bfloat16 biased exponent, 1..254
  uint64_t v = (e << 52) | (au & 0xfffffffffffffull);
  v += (1ull << 44) - 1 + ((v >> 45) & 1);                 // round to 7 fraction bits, ties to even
  return sign | static_cast<uint16_t>(v >> 45);
}

// ---- runs, for the half-weight products ----

inline bool is_half_dtype(int32_t dtype) { return dtype == kFloat16 || dtype == kBFloat16; }

#if defined(__GNUC__) && defined(__x86_64__)
// F16C (every AVX2 CPU): eight float16 conversions per instruction, the same values as half_to_float and
// half_from_float (round to nearest even; a NaN's payload may differ, it stays NaN). The bit loops below vectorize
// too but take about 3x as long for float16.
#define PLANC_F16C 1
inline bool f16c_available() {
  static const bool ok = cpu_has({CpuFeature::kAvx, CpuFeature::kF16c});
  return ok;
}

__attribute__((target("avx,f16c"))) inline void widen_half_f16c(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; i++) dst[i] = half_to_float(src[i]);
}

__attribute__((target("avx,f16c"))) inline void round_half_f16c(const float* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; i++) dst[i] = half_to_float(half_from_float(src[i]));
}
#endif

// dst[i] = src[i] widened to float32 (exact); dtype kFloat16 or kBFloat16.
PLANC_HOT_BODY void widen_run_body(int32_t dtype, const uint16_t* src, int64_t n, float* dst) {
  if (dtype == kBFloat16) {
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
    return;
  }
#ifdef PLANC_F16C
  if (f16c_available()) return widen_half_f16c(src, n, dst);
#endif
  for (int64_t i = 0; i < n; i++) dst[i] = half_to_float(src[i]);
}
PLANC_HOT_DISPATCH(void, widen_run, (int32_t dtype, const uint16_t* src, int64_t n, float* dst), (dtype, src, n, dst))

// dst[i] = src[i] rounded to dtype (kFloat16 or kBFloat16) and widened back: the value a tensor core takes.
PLANC_HOT_BODY void round_run_body(int32_t dtype, const float* src, int64_t n, float* dst) {
  if (dtype == kBFloat16) {
    for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_float(bf16_from_float(src[i]));
    return;
  }
#ifdef PLANC_F16C
  if (f16c_available()) return round_half_f16c(src, n, dst);
#endif
  for (int64_t i = 0; i < n; i++) dst[i] = half_to_float(half_from_float(src[i]));
}
PLANC_HOT_DISPATCH(void, round_run, (int32_t dtype, const float* src, int64_t n, float* dst), (dtype, src, n, dst))

}  // namespace
}  // namespace planc
