// The rows of a quantized product's A quantized (qgemm.h quantize_rows / quantize_into / quantized_rows: scalar, AVX2
// and AVX-512 quantizers giving the same values), and the quantize_rows kernel that does it once for several qmatmuls.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "../threadpool.h"
#include "isa.h"
#include "qgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define PLANC_QROWS_X86 1
// GCC 12 warns that the AVX-512 intrinsics read _mm512_undefined_*() (a false positive, GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace planc {
namespace qgemm {
namespace {

using F = CpuFeature;

// The largest |x| of a row as float bits (NaN and inf compare above every finite value).
uint32_t max_abs_bits(const float* x, int64_t k) {
  uint32_t m = 0;
  for (int64_t i = 0; i < k; i++) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    b &= 0x7fffffffu;
    m = b > m ? b : m;
  }
  return m;
}

constexpr uint32_t kInfBits = 0x7f800000u;

// A zero row (scale 0) or one with inf or NaN (scale NaN): q all 0 in every form asked for.
float degenerate_row(uint32_t mb, int64_t k, int8_t* q8, uint8_t* u8, int16_t* q16) {
  const size_t n = k > 0 ? static_cast<size_t>(k) : 0;
  if (q8) std::memset(q8, 0, n);
  if (u8) std::memset(u8, 128, n);
  if (q16) std::memset(q16, 0, n * sizeof(int16_t));
  return mb == 0 ? 0.0f : std::numeric_limits<float>::quiet_NaN();
}

// One row on [-lim, lim], the rule every quantizer follows: s = max|x| / lim, q = round-half-even(x / s) (an exact
// division) clamped; written as q8, u8 = q + 128 and q16, each where asked for. Returns s.
float quantize_scalar(const float* x, int64_t k, float lim, int8_t* q8, uint8_t* u8, int16_t* q16) {
  const uint32_t mb = max_abs_bits(x, k);
  if (mb == 0 || mb >= kInfBits) return degenerate_row(mb, k, q8, u8, q16);
  float amax;
  std::memcpy(&amax, &mb, 4);
  const float s = amax / lim;
  for (int64_t i = 0; i < k; i++) {
    const float r = std::nearbyint(x[i] / s);  // the default rounding mode: half to even
    const int32_t v = static_cast<int32_t>(std::min(lim, std::max(-lim, r)));
    if (q8) q8[i] = static_cast<int8_t>(v);
    if (u8) u8[i] = static_cast<uint8_t>(v + 128);
    if (q16) q16[i] = static_cast<int16_t>(v);
  }
  return s;
}

#ifdef PLANC_QROWS_X86
// The rule eight lanes at a time (AVX2); the tail as quantize_scalar. q8 / u8 only for lim ≤ 127.
__attribute__((target("avx2,fma"))) float quantize_avx2(const float* x, int64_t k, float lim, int8_t* q8, uint8_t* u8, int16_t* q16) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  __m256i mv = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    mv = _mm256_max_epu32(mv, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), abs_mask));
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mv);
  uint32_t mb = max_abs_bits(x + i, k - i);
  for (uint32_t b : lanes) mb = b > mb ? b : mb;
  if (mb == 0 || mb >= kInfBits) return degenerate_row(mb, k, q8, u8, q16);
  float amax;
  std::memcpy(&amax, &mb, 4);
  const float s = amax / lim;
  const __m256 sv = _mm256_set1_ps(s), hi = _mm256_set1_ps(lim), lo = _mm256_set1_ps(-lim);
  for (i = 0; i + 16 <= k; i += 16) {
    __m256 r0 = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r1 = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i + 8), sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r0 = _mm256_min_ps(hi, _mm256_max_ps(lo, r0));
    r1 = _mm256_min_ps(hi, _mm256_max_ps(lo, r1));
    // int32 lanes -> int16 (in order after the lane permute; |q| ≤ 32767 packs exactly) -> int8
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(_mm256_cvtps_epi32(r0), _mm256_cvtps_epi32(r1)), 0xd8);
    if (q16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q16 + i), w);
    if (!q8 && !u8) continue;
    const __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    if (q8) _mm_storeu_si128(reinterpret_cast<__m128i*>(q8 + i), b);
    if (u8) _mm_storeu_si128(reinterpret_cast<__m128i*>(u8 + i), _mm_xor_si128(b, _mm_set1_epi8(static_cast<char>(0x80))));
  }
  for (; i < k; i++) {
    const int32_t v = static_cast<int32_t>(std::min(lim, std::max(-lim, std::nearbyint(x[i] / s))));
    if (q8) q8[i] = static_cast<int8_t>(v);
    if (u8) u8[i] = static_cast<uint8_t>(v + 128);
    if (q16) q16[i] = static_cast<int16_t>(v);
  }
  return s;
}

#define QR512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
// The rule sixteen lanes at a time (AVX-512), the tail in masked lanes.
QR512 float quantize_avx512(const float* x, int64_t k, float lim, int8_t* q8, uint8_t* u8, int16_t* q16) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  __m512i mv = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) mv = _mm512_max_epu32(mv, _mm512_and_si512(_mm512_loadu_si512(x + i), abs_mask));
  const __mmask16 tail = static_cast<__mmask16>((1u << (k - i)) - 1);
  if (tail) mv = _mm512_max_epu32(mv, _mm512_and_si512(_mm512_maskz_loadu_epi32(tail, x + i), abs_mask));
  const uint32_t mb = _mm512_reduce_max_epu32(mv);
  if (mb == 0 || mb >= kInfBits) return degenerate_row(mb, k, q8, u8, q16);
  float amax;
  std::memcpy(&amax, &mb, 4);
  const float s = amax / lim;
  const __m512 sv = _mm512_set1_ps(s), hi = _mm512_set1_ps(lim), lo = _mm512_set1_ps(-lim);
  const __m512i off = _mm512_set1_epi32(128);
  for (i = 0; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? static_cast<__mmask16>(0xffff) : tail;
    __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i v = _mm512_cvtps_epi32(_mm512_min_ps(hi, _mm512_max_ps(lo, r)));  // integral: converts exactly
    if (q16) _mm256_mask_storeu_epi16(q16 + i, m, _mm512_cvtepi32_epi16(v));
    if (q8) _mm_mask_storeu_epi8(q8 + i, m, _mm512_cvtepi32_epi8(v));
    if (u8) _mm_mask_storeu_epi8(u8 + i, m, _mm512_cvtepi32_epi8(_mm512_add_epi32(v, off)));
  }
  return s;
}
#endif

// The quantizers, by what this CPU runs within PLANC_ISA's cap.
enum class Quantizer { kScalar, kAvx2, kAvx512 };

Quantizer best_quantizer() {
#ifdef PLANC_QROWS_X86
  static const Quantizer best = cpu_has({F::kAvx512f, F::kAvx512bw, F::kAvx512vl, F::kAvx512dq}) ? Quantizer::kAvx512
                                : cpu_has({F::kAvx2, F::kFma})                                    ? Quantizer::kAvx2
                                                                                                  : Quantizer::kScalar;
  return best;
#else
  return Quantizer::kScalar;
#endif
}

// fn(r0, r1) over m rows of k values, split over the call's pool from about 16K values.
template <class Fn> void for_rows(const KernelArgs& args, int64_t m, int64_t k, Fn&& fn) {
  const int64_t min_rows = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, k));
  if (m > min_rows) run_parallel(args, m, min_rows, fn);
  else fn(0, m);
}

// The m rows of x [m, k] (int8 / int16 input) in the forms given (any may be null), each [m, kp] zero padded (u8:
// 128), and scale [m], by quantizer `qz`.
void quantize_into(const KernelArgs& args, const float* x, int64_t m, int64_t k, int64_t kp, int64_t input, Quantizer qz, int8_t* q8,
                   uint8_t* u8, int16_t* q16, float* scale) {
  const float lim = input == kQuantInInt16 ? static_cast<float>(int16_limit(k)) : 127.0f;
  for_rows(args, m, k, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const float* xr = x + r * k;
      int8_t* q = q8 ? q8 + r * kp : nullptr;
      uint8_t* u = u8 ? u8 + r * kp : nullptr;
      int16_t* h = q16 ? q16 + r * kp : nullptr;
#ifdef PLANC_QROWS_X86
      if (qz == Quantizer::kAvx512) scale[r] = quantize_avx512(xr, k, lim, q, u, h);
      else if (qz == Quantizer::kAvx2) scale[r] = quantize_avx2(xr, k, lim, q, u, h);
      else
#endif
        scale[r] = quantize_scalar(xr, k, lim, q, u, h);
      const size_t pad = static_cast<size_t>(kp - k);
      if (q) std::memset(q + k, 0, pad);
      if (u) std::memset(u + k, 128, pad);
      if (h) std::memset(h + k, 0, pad * sizeof(int16_t));
    }
  });
  (void)qz;
}

}  // namespace

Rows quantize_rows(const KernelArgs& args, const float* x, int64_t m, int64_t k, int64_t kp, int64_t input, const Path& path,
                   RowBuffers& buf) {
  Rows rows;
  rows.m = m;
  rows.kp = kp;
  const size_t total = static_cast<size_t>(m * kp);
  buf.scale.resize(static_cast<size_t>(m));
  if (input == kQuantInFloat32) {
    buf.f32.resize(total);
    for_rows(args, m, k, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; r++) {
        float* f = buf.f32.data() + r * kp;
        std::memcpy(f, x + r * k, static_cast<size_t>(k) * sizeof(float));
        std::fill(f + k, f + kp, 0.0f);
        buf.scale[static_cast<size_t>(r)] = 1.0f;
      }
    });
    rows.f32 = buf.f32.data();
    return rows;
  }
  const bool ref = &path == ref_path();
  // Each row is written whole (its k values, then the padding to kp): the buffers are only resized. Only the
  // reference path reads the signed bytes.
  int8_t* q8 = nullptr;
  uint8_t* u8 = nullptr;
  int16_t* q16 = nullptr;
  if (input == kQuantInInt8 && ref) q8 = (buf.q8.resize(total), buf.q8.data());
  else if (input == kQuantInInt8 && path.unsigned_a) u8 = (buf.u8.resize(total), buf.u8.data());
  else q16 = (buf.q16.resize(total), buf.q16.data());
  rows.q8 = q8;
  rows.u8 = u8;
  rows.q16 = q16;
  // The reference path keeps the scalar rule, so the tests' bit-for-bit comparisons of each path against ref check
  // the vector quantizers too.
  quantize_into(args, x, m, k, kp, input, ref ? Quantizer::kScalar : best_quantizer(), q8, u8, q16, buf.scale.data());
  return rows;
}

Rows quantized_rows(const void* a, int64_t m, int64_t kp, int64_t input, const Path& path, RowBuffers& buf) {
  Rows rows;
  rows.m = m;
  rows.kp = kp;
  if (input == kQuantInInt16) {
    rows.q16 = static_cast<const int16_t*>(a);
    return rows;
  }
  const uint8_t* u = static_cast<const uint8_t*>(a);
  if (path.unsigned_a) {
    rows.u8 = u;
    return rows;
  }
  const size_t total = static_cast<size_t>(m * kp);
  if (&path == ref_path()) {
    buf.q8.resize(total);
    for (size_t i = 0; i < total; i++) buf.q8[i] = static_cast<int8_t>(static_cast<int32_t>(u[i]) - 128);
    rows.q8 = buf.q8.data();
  } else {
    buf.q16.resize(total);
    for (size_t i = 0; i < total; i++) buf.q16[i] = static_cast<int16_t>(static_cast<int32_t>(u[i]) - 128);
    rows.q16 = buf.q16.data();
  }
  return rows;
}

}  // namespace qgemm

namespace {

namespace v = quantize_rows_args;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Input x [..., K] float32; outputs q (uint8 / int16 [..., kp]) and scale [...] float32; iargs input (int8 / int16), k.
const char* quantize_rows(const KernelArgs& args) {
  if (const char* err = check_arity("quantize_rows", args, v::kArity)) return err;
  const int64_t input = args.iargs[v::kInput], k = args.iargs[v::kK];
  if (input != kQuantInInt8 && input != kQuantInInt16)
    return kernel_error("quantize_rows: input must be int8 or int16 (codes %d, %d), got %lld", kQuantInInt8, kQuantInInt16, (long long)input);
  if (k < 0 || k > (int64_t(1) << 31)) return kernel_error("quantize_rows: K = %lld out of range", (long long)k);
  const TensorView &x = args.in[0], &q = args.out[0], &scale = args.out[1];
  for (const TensorView* t : {&x, &q, &scale})
    if (!view_ok(*t)) return "quantize_rows: a malformed input or output view";
  const bool i16 = input == kQuantInInt16;
  const int32_t qdt = i16 ? kInt16 : kUint8;
  const int64_t kp = i16 ? ceil_div(k, 2) * 2 : ceil_div(k, 4) * 4;
  if (x.dtype != kFloat32 || scale.dtype != kFloat32 || q.dtype != qdt)
    return kernel_error("quantize_rows: x and scale must be float32 and q %s, got %s, %s, %s", dtype_name(qdt), dtype_name(x.dtype),
                        dtype_name(scale.dtype), dtype_name(q.dtype));
  if (x.rank < 1 || x.dims[x.rank - 1] != k) return kernel_error("quantize_rows: x %s must end in K = %lld", dims_str(x).c_str(), (long long)k);
  bool ok = q.rank == x.rank && q.dims[q.rank - 1] == kp && scale.rank == x.rank - 1;
  for (int i = 0; ok && i < x.rank - 1; i++) ok = q.dims[i] == x.dims[i] && scale.dims[i] == x.dims[i];
  if (!ok)
    return kernel_error("quantize_rows: q %s must be x's leading dims + [%lld] and scale %s x's leading dims (x %s)", dims_str(q).c_str(),
                        (long long)kp, dims_str(scale).c_str(), dims_str(x).c_str());
  const int64_t m = scale.numel;
  if (m == 0) return nullptr;
  if (!scale.data || (k > 0 && !x.data) || (kp > 0 && !q.data)) return "quantize_rows: missing input or output data";
  qgemm::quantize_into(args, x.as<float>(), m, k, kp, input, qgemm::best_quantizer(), nullptr, i16 ? nullptr : q.as<uint8_t>(),
                       i16 ? q.as<int16_t>() : nullptr, scale.as<float>());
  return nullptr;
}

const KernelDef kDefs[] = {
    {"quantize_rows", quantize_rows},
};

}  // namespace

KernelList quantize_rows_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
