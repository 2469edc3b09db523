// The qmatmul epilogue (qgemm.h apply_epilogue): Y = act(float(acc) · (sa · w_scale) + bias) + residual, scalar and on
// AVX2 / AVX-512 with the same float32 operations in the same order (no FMA), so every code gives the same bits.
#include <cmath>

#include "isa.h"
#include "activation.h"
#include "qgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PLANC_EPI_X86 1
// GCC 12 warns that the AVX-512 intrinsics read _mm512_undefined_*() (a false positive, GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

// Each operation rounded to float on its own: no FMA contraction, whatever the flags or the copy's target.
#if defined(__GNUC__) && !defined(__clang__)
#define NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define NO_CONTRACT
#endif

namespace planc {
namespace qgemm {

namespace {

using F = CpuFeature;

// The sum of column c of a tile row: int32 less the vpdpbusd offset 128 · w_sum (wrapping, as the paths' sums), or float.
inline float sum_at(const int32_t* s, const int32_t* wsum, int64_t c) {
  const uint32_t off = wsum ? 128u * static_cast<uint32_t>(wsum[c]) : 0u;
  return static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(s[c]) - off));
}
inline float sum_at(const float* s, const int32_t*, int64_t c) { return s[c]; }

// Columns [c_from, c_to) of one tile row, the reference order: every code's lanes compute exactly this.
template <class Acc>
NO_CONTRACT void row_scalar(const Epilogue& e, const Acc* s, const int32_t* wsum, int64_t row, int64_t c0, int64_t c_from, int64_t c_to) {
  const float sa = e.sa[row];
  float* y = e.y + row * e.ldy + c0;
  const float* ws = e.scale + c0;
  for (int64_t c = c_from; c < c_to; c++) {
    float v = sum_at(s, wsum, c) * (sa * ws[c]);
    if (e.bias) v += e.bias[c0 + c];
    v = e.act == kActRelu ? (v > 0.0f ? v : 0.0f) : e.act == kActNone ? v : activate(v, e.act);
    if (e.res) v += e.res[row * e.ldy + c0 + c];
    y[c] = v;
  }
}

template <class Acc>
void tile_scalar(const Epilogue& e, const Acc* acc, int64_t ld, const int32_t* wsum, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  for (int64_t r = 0; r < nr; r++) row_scalar(e, acc + r * ld, wsum, r0 + r, c0, 0, nc);
}

// The activations that call libm (gelu, gelu_tanh, silu) stay scalar: the vector loops leave v = float(acc) · (sa ·
// w_scale) + bias in y, and this applies act, then the residual, as row_scalar does.
NO_CONTRACT void finish_libm_row(const Epilogue& e, int64_t row, int64_t c0, int64_t nc) {
  float* y = e.y + row * e.ldy + c0;
  const float* res = e.res ? e.res + row * e.ldy + c0 : nullptr;
  for (int64_t c = 0; c < nc; c++) {
    float v = activate(y[c], e.act);
    if (res) v += res[c];
    y[c] = v;
  }
}

#ifdef PLANC_EPI_X86

// ---------- AVX2: eight columns a step, the tail by row_scalar ----------

#define QE256 __attribute__((target("avx2"))) NO_CONTRACT

QE256 inline __m256 sums8(const int32_t* s, const int32_t* wsum, int64_t c) {
  __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + c));
  if (wsum) v = _mm256_sub_epi32(v, _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wsum + c)), 7));
  return _mm256_cvtepi32_ps(v);
}
QE256 inline __m256 sums8(const float* s, const int32_t*, int64_t c) { return _mm256_loadu_ps(s + c); }

template <class Acc>
QE256 void tile_avx2(const Epilogue& e, const Acc* acc, int64_t ld, const int32_t* wsum, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  const bool relu = e.act == kActRelu, libm = e.act != kActRelu && e.act != kActNone;
  const __m256 zero = _mm256_setzero_ps();
  const float* ws = e.scale + c0;
  const float* bias = e.bias ? e.bias + c0 : nullptr;
  const int64_t nv = nc / 8 * 8;
  for (int64_t r = 0; r < nr; r++) {
    const int64_t row = r0 + r;
    const Acc* s = acc + r * ld;
    float* y = e.y + row * e.ldy + c0;
    const float* res = e.res && !libm ? e.res + row * e.ldy + c0 : nullptr;
    const __m256 sa = _mm256_set1_ps(e.sa[row]);
    for (int64_t c = 0; c < nv; c += 8) {
      __m256 v = _mm256_mul_ps(sums8(s, wsum, c), _mm256_mul_ps(sa, _mm256_loadu_ps(ws + c)));
      if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + c));
      if (relu) v = _mm256_and_ps(_mm256_cmp_ps(v, zero, _CMP_GT_OQ), v);  // v > 0 ? v : +0 (NaN: +0)
      if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + c));
      _mm256_storeu_ps(y + c, v);
    }
    if (libm) finish_libm_row(e, row, c0, nv);
    row_scalar(e, s, wsum, row, c0, nv, nc);
  }
}

// ---------- AVX-512: sixteen columns a step, the tail in masked lanes ----------

#define QE512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) NO_CONTRACT

QE512 inline __m512 sums16(const int32_t* s, const int32_t* wsum, int64_t c, __mmask16 m) {
  __m512i v = _mm512_maskz_loadu_epi32(m, s + c);
  if (wsum) v = _mm512_sub_epi32(v, _mm512_slli_epi32(_mm512_maskz_loadu_epi32(m, wsum + c), 7));
  return _mm512_cvtepi32_ps(v);
}
QE512 inline __m512 sums16(const float* s, const int32_t*, int64_t c, __mmask16 m) { return _mm512_maskz_loadu_ps(m, s + c); }

template <class Acc>
QE512 void tile_avx512(const Epilogue& e, const Acc* acc, int64_t ld, const int32_t* wsum, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  const bool relu = e.act == kActRelu, libm = e.act != kActRelu && e.act != kActNone;
  const __m512 zero = _mm512_setzero_ps();
  const float* ws = e.scale + c0;
  const float* bias = e.bias ? e.bias + c0 : nullptr;
  for (int64_t r = 0; r < nr; r++) {
    const int64_t row = r0 + r;
    const Acc* s = acc + r * ld;
    float* y = e.y + row * e.ldy + c0;
    const float* res = e.res && !libm ? e.res + row * e.ldy + c0 : nullptr;
    const __m512 sa = _mm512_set1_ps(e.sa[row]);
    for (int64_t c = 0; c < nc; c += 16) {
      const __mmask16 m = nc - c >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (nc - c)) - 1);
      __m512 v = _mm512_mul_ps(sums16(s, wsum, c, m), _mm512_mul_ps(sa, _mm512_maskz_loadu_ps(m, ws + c)));
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + c));
      if (relu) v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), v);  // v > 0 ? v : +0 (NaN: +0)
      if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + c));
      _mm512_mask_storeu_ps(y + c, m, v);
    }
    if (libm) finish_libm_row(e, row, c0, nc);
  }
}

#endif  // PLANC_EPI_X86

template <class Acc>
void apply(const Epilogue& e, const Acc* acc, int64_t ld, const int32_t* wsum, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  switch (e.code) {
#ifdef PLANC_EPI_X86
    case EpilogueCode::kAvx512: return tile_avx512(e, acc, ld, wsum, r0, nr, c0, nc);
    case EpilogueCode::kAvx2: return tile_avx2(e, acc, ld, wsum, r0, nr, c0, nc);
#endif
    default: return tile_scalar(e, acc, ld, wsum, r0, nr, c0, nc);
  }
}

}  // namespace

EpilogueCode best_epilogue() {
#ifdef PLANC_EPI_X86
  static const EpilogueCode best = cpu_has({F::kAvx512f, F::kAvx512bw, F::kAvx512vl, F::kAvx512dq}) ? EpilogueCode::kAvx512
                                   : cpu_has({F::kAvx2})                                             ? EpilogueCode::kAvx2
                                                                                                     : EpilogueCode::kScalar;
  return best;
#else
  return EpilogueCode::kScalar;
#endif
}

bool epilogue_runs(EpilogueCode code) {
  return static_cast<int>(code) <= static_cast<int>(best_epilogue());
}

void prefetch_epilogue(const Epilogue& e, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  for (int64_t r = r0; r < r0 + nr; r++) {
    const char* y = reinterpret_cast<const char*>(e.y + r * e.ldy + c0);
    const char* res = e.res ? reinterpret_cast<const char*>(e.res + r * e.ldy + c0) : nullptr;
    for (int64_t b = 0; b < nc * 4; b += 64) {
      __builtin_prefetch(y + b, 1, 3);
      if (res) __builtin_prefetch(res + b, 0, 3);
    }
  }
}

void apply_epilogue(const Epilogue& e, const int32_t* acc, int64_t ld, const int32_t* wsum, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  apply(e, acc, ld, wsum, r0, nr, c0, nc);
}
void apply_epilogue(const Epilogue& e, const float* acc, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  apply(e, acc, ld, nullptr, r0, nr, c0, nc);
}

}  // namespace qgemm
}  // namespace planc
