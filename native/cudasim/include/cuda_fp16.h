// cudasim's <cuda_fp16.h>: __half as IEEE binary16 bits, conversions rounding to nearest even as the hardware does.
#pragma once
#include <stdint.h>
#include <string.h>

namespace cudasim {

inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));  // NaN / inf
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);                                 // overflow
  if (ax < 0x38800000u) {  // subnormal half (or zero): scale into integer units of 2^-24, round to nearest even
    if (ax < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 2^-24 units: m * 2^(e-127-23) / 2^-24 = m >> (126 - e)
    const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    const uint32_t r = q + (rem > half || (rem == half && (q & 1u)));
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t e = (ax >> 23) - 112, m = ax & 0x7fffffu;
  uint32_t h = (e << 10) | (m >> 13);
  const uint32_t rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return static_cast<uint16_t>(sign | h);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
  else if (e != 0) x = sign | ((e + 112) << 23) | (m << 13);
  else if (m == 0) x = sign;
  else {  // subnormal: normalize
    int s = 0;
    uint32_t mm = m;
    while (!(mm & 0x400u)) { mm <<= 1; s++; }
    x = sign | ((113u - s) << 23) | ((mm & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

}  // namespace cudasim

struct __half {
  uint16_t __x;
  __half() = default;
  __half(float f) : __x(::cudasim::float_to_half_bits(f)) {}
  __half(double d) : __x(::cudasim::float_to_half_bits(static_cast<float>(d))) {}
  __half(int i) : __x(::cudasim::float_to_half_bits(static_cast<float>(i))) {}
  operator float() const { return ::cudasim::half_bits_to_float(__x); }
};
typedef __half half;
struct __half2 { __half x, y; };

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return ::cudasim::half_bits_to_float(h.__x); }
inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
