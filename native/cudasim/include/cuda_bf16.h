// cudasim's <cuda_bf16.h>: __nv_bfloat16 as the upper 16 bits of a float, rounding to nearest even (NaN kept quiet).
#pragma once
#include <stdint.h>
#include <string.h>

namespace cudasim {

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

}  // namespace cudasim

struct __nv_bfloat16 {
  uint16_t __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : __x(::cudasim::float_to_bf16_bits(f)) {}
  operator float() const { return ::cudasim::bf16_bits_to_float(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
inline float __bfloat162float(__nv_bfloat16 b) { return ::cudasim::bf16_bits_to_float(b.__x); }
