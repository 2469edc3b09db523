// Reference float16 / bfloat16 conversions for the standalone kernel tests (cast_test, half_weights_test), written
// independently of native/src/cpu/half.h: float16 through the compiler's _Float16 (round to nearest even), bfloat16
// by scaling to the value's quantum.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace half_ref {

// The float16 bits of a double (one rounding, nearest even; overflow to ±inf).
inline uint16_t f16_bits(double v) {
  _Float16 h = static_cast<_Float16>(v);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

inline double f16_value(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<double>(h);
}

// The bfloat16 bits of a double: the multiple of its quantum (8 significant bits, no smaller than 2^-133) nearest to v,
// ties to even by nearbyint; inf from halfway past the largest finite value; NaN: the quiet 0x7fc0.
inline uint16_t bf16_bits(double v) {
  if (v != v) return 0x7fc0;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 0x1.ffp127) return sign | 0x7f80;
  if (a == 0) return sign;
  const double q = std::ldexp(1.0, std::max(std::ilogb(a), -126) - 7);
  const float r = static_cast<float>(std::nearbyint(a / q) * q);  // exact: an integer times a power of two
  uint32_t b;
  std::memcpy(&b, &r, 4);
  return sign | static_cast<uint16_t>(b >> 16);
}

inline double bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace half_ref
