// Vector math shared by the CPU kernels: dispatch macros, 8- and 16-lane helpers, e^x (Cephes), NaN-propagating max, sums, dot.
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>

// Hot loops are compiled twice with GCC on x86-64 (AVX2+FMA and the portable baseline), the copy picked at run time
// within PLANC_ISA's cap (PLANC_HOT_BODY / PLANC_HOT_DISPATCH, isa.h). PLANC_HOT16_DISPATCH loops work on 16 lanes
// (v16f) and get an AVX-512 copy as well.
#include "isa.h"

// Eight floats as one value (GCC/Clang vector extension: AVX ymm, two SSE/NEON registers); plain loops elsewhere.
#if defined(__GNUC__)
#define PLANC_VEC8 1
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));  // one zmm, two ymm or four SSE registers
typedef int32_t v16i __attribute__((vector_size(64)));
#pragma GCC diagnostic ignored "-Wpsabi"  // v8f only passes between inline helpers: no ABI is crossed
#endif

namespace planc {
// Internal linkage, as when each kernel file carried its own copy: every file gets its own copies of the hot loops.
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// e^(c - n ln 2) by the Cephes polynomial, for n = round(c / ln 2): on one float or on eight lanes (T = v8f).
template <class T>
inline T exp_poly(const T& c, const T& n) {
  T r = c - n * 0.693359375f;  // ln 2 in two parts (Cody-Waite), the first exact in float times n
  r = r + n * 2.12194440e-4f;
  T p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

// Below this, exp_approx and exp_lanes give exactly 0.
constexpr float kExpUnderflow = -87.3365478515625f;

// e^x in float32 (Cephes polynomial, about 1 ulp), branch-free so loops over it vectorize: 0 below -87.33,
// +inf above 88.72, NaN stays NaN.

inline float exp_approx(float x) {
  const float lo = kExpUnderflow, hi = 88.0f;
  float c = x > lo ? x : lo;  // also maps NaN to lo; fixed below
  c = c < hi ? c : hi;
  const float round = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer
  const float n = (c * 1.44269504088896341f + round) - round;
  const float p = exp_poly(c, n);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  float y = p * scale;
  y = x < lo ? 0.0f : y;
  y = x > 88.72283935546875f ? kInf : y;
  return x != x ? x : y;
}

#ifdef PLANC_VEC8
// Eight-lane versions of the helpers (GCC/Clang vector extension; two SSE or NEON registers, one AVX).

inline v8f splat(float v) { return v8f{v, v, v, v, v, v, v, v}; }
inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, const v8f& v) { std::memcpy(p, &v, sizeof v); }
// Per lane: mask ? a : b (mask lanes are all ones or all zeros); F a float vector, I its int32 lanes.
template <class F, class I>
inline F select_lanes(const I& mask, const F& a, const F& b) { return (F)((mask & (I)a) | (~mask & (I)b)); }
inline v8f select8(const v8i& mask, const v8f& a, const v8f& b) { return select_lanes<v8f, v8i>(mask, a, b); }
// Per lane: the NaN-propagating max of the reference's scan.
inline v8f nan_max8(const v8f& m, const v8f& v) { return select8((v > m) | (v != v), v, m); }

// exp_approx on the lanes of F (I: its int32 lanes), the same polynomial and clamps.
template <class F, class I>
inline F exp_lanes(const F& x) {
  const F lo = F{} + kExpUnderflow, round = F{} + 12582912.0f;
  F c = select_lanes<F, I>(x > lo, x, lo);
  c = select_lanes<F, I>(c < 88.0f, c, F{} + 88.0f);
  const F n = (c * 1.44269504088896341f + round) - round;
  const F p = exp_poly(c, n);
  const I bits = (__builtin_convertvector(n, I) + 127) << 23;
  F y = p * (F)bits;
  y = select_lanes<F, I>(x < lo, F{}, y);
  y = select_lanes<F, I>(x > 88.72283935546875f, F{} + kInf, y);
  return select_lanes<F, I>(x != x, x, y);
}
inline v8f exp8(const v8f& x) { return exp_lanes<v8f, v8i>(x); }

// Sum of the eight lanes, added in lane order.
inline float sum8(const v8f& v) {
  float s = 0;
  for (int l = 0; l < 8; l++) s += v[l];
  return s;
}
#endif

// Max of a run that is NaN when any element is NaN (as the reference's max scan); -inf for an empty run.
PLANC_HOT_BODY float nan_max_body(const float* x, int64_t n) {
  float m = -kInf;
  int64_t i = 0;
#ifdef PLANC_VEC8
  v8f m0 = splat(-kInf), m1 = m0;
  for (; i + 16 <= n; i += 16) {
    m0 = nan_max8(m0, load8(x + i));
    m1 = nan_max8(m1, load8(x + i + 8));
  }
  m0 = nan_max8(m0, m1);
  for (int l = 0; l < 8; l++) m = (m0[l] > m || m0[l] != m0[l]) ? m0[l] : m;
#endif
  for (; i < n; i++) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;
  return m;
}
PLANC_HOT_DISPATCH(float, nan_max, (const float* x, int64_t n), (x, n))

// The first i in [j, n) with x[i] > t (NaN never is), or n. Runs of 32 with none above t are passed over whole.
PLANC_HOT_BODY int64_t first_above_body(const float* x, int64_t j, int64_t n, float t) {
#ifdef PLANC_VEC8
  for (; j + 32 <= n; j += 32) {
    const v8i hit = (load8(x + j) > t) | (load8(x + j + 8) > t) | (load8(x + j + 16) > t) | (load8(x + j + 24) > t);
    uint64_t w[4];
    std::memcpy(w, &hit, sizeof w);
    if (w[0] | w[1] | w[2] | w[3]) break;  // the scalar loop finds it within these 32
  }
#endif
  for (; j < n; j++)
    if (x[j] > t) return j;
  return n;
}
PLANC_HOT_DISPATCH(int64_t, first_above, (const float* x, int64_t j, int64_t n, float t), (x, j, n, t))

// y[i] += b[i].
PLANC_HOT_BODY void add_run_body(float* y, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] += b[i];
}
PLANC_HOT_DISPATCH(void, add_run, (float* y, const float* b, int64_t n), (y, b, n))

// Sum of e^(x[i] - m).
PLANC_HOT_BODY float exp_sum_body(const float* x, int64_t n, float m) {
  float s = 0;
  int64_t i = 0;
#ifdef PLANC_VEC8
  v16f acc = {};
  for (; i + 16 <= n; i += 16) {
    v16f v;
    std::memcpy(&v, x + i, sizeof v);
    acc += exp_lanes<v16f, v16i>(v - m);
  }
  for (int l = 0; l < 8; l++) s += acc[l] + acc[l + 8];  // the order of two 8-lane sums added lane by lane
#endif
  for (; i < n; i++) s += exp_approx(x[i] - m);
  return s;
}
PLANC_HOT16_DISPATCH(float, exp_sum, (const float* x, int64_t n, float m), (x, n, m))

// y[i] *= f.
PLANC_HOT_BODY void scale_run_body(float* y, int64_t n, float f) {
  for (int64_t i = 0; i < n; i++) y[i] *= f;
}
PLANC_HOT_DISPATCH(void, scale_run, (float* y, int64_t n, float f), (y, n, f))

// o[j] += a * w[j] for j < n.
inline void add_scaled(float* o, float a, const float* w, int64_t n) {
  for (int64_t j = 0; j < n; j++) o[j] += a * w[j];
}

// Dot product of two contiguous float runs, in 16 independent lanes.
PLANC_HOT_BODY float dot_body(const float* x, const float* y, int64_t n) {
  float lanes[16] = {0};
  int64_t p = 0;
  for (; p + 16 <= n; p += 16)
    for (int l = 0; l < 16; l++) lanes[l] += x[p + l] * y[p + l];
  float s = 0;
  for (; p < n; p++) s += x[p] * y[p];
  for (int l = 0; l < 16; l++) s += lanes[l];
  return s;
}
PLANC_HOT_DISPATCH(float, dot, (const float* x, const float* y, int64_t n), (x, y, n))

}  // namespace
}  // namespace planc
