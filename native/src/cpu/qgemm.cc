// qmatmul: Y = act(float(Σ quant(A) · Wq) · (sa · w_scale) + bias) + residual over packed int8/int16 weights; the rows
// of A quantized here, the dot products on the path of the call's variant (qgemm.h), the epilogue shared by all paths.
#include "qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "../threadpool.h"
#include "isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace planc {
namespace qgemm {

// ---------- variants ----------

namespace v = qmatmul_args;
static_assert(qproject_topk_args::kVariantCount == v::kVariantCount && qproject_topk_args::kVariantAvx512vnni == v::kVariantAvx512vnni,
              "qmatmul and qproject_topk share QGEMM_VARIANTS");

namespace {
using F = CpuFeature;
// What each vector path needs (isa.h: the CPU's features within PLANC_ISA's cap), or nullptr.
const char* avx512_unavailable() {
  return cpu_unavailable({F::kAvx512f, F::kAvx512bw, F::kAvx512vl, F::kAvx512dq, F::kFma},
                         "this CPU lacks AVX-512 F/BW/VL/DQ with FMA");
}
const char* avx512vnni_unavailable() {
  return cpu_unavailable({F::kAvx512f, F::kAvx512bw, F::kAvx512vl, F::kAvx512dq, F::kFma, F::kAvx512vnni},
                         "this CPU lacks AVX-512 VNNI (or AVX-512 F/BW/VL/DQ with FMA)");
}
}  // namespace

const char* variant_unavailable(int64_t code) {
  switch (code) {
    case v::kVariantAvx2:
      if (!avx2_path()) return "this build has no x86-64 vector paths";
      return cpu_unavailable({F::kAvx2, F::kFma}, "this CPU lacks AVX2 with FMA");
    case v::kVariantAvx512bw:
      if (!avx512bw_path()) return "this build has no x86-64 vector paths";
      return avx512_unavailable();
    case v::kVariantAvxvnni:
      if (!avxvnni_path()) return "this build has no x86-64 vector paths";
      return cpu_unavailable({F::kAvx2, F::kFma, F::kAvxvnni}, "this CPU lacks AVX-VNNI (or AVX2 with FMA)");
    case v::kVariantAvx512vnni:
      if (!avx512vnni_path()) return "this build has no x86-64 vector paths";
      return avx512vnni_unavailable();
    case v::kVariantAmx:
      if (!amx_path()) return amx_unavailable();
      if (const char* why = amx_unavailable()) return why;
      if (avx512vnni_unavailable() != nullptr)
        return kernel_error("%s, which amx also uses", avx512vnni_unavailable());
      return nullptr;
    default: return nullptr;
  }
}

const Path* path_for(int64_t code) {
  switch (code) {
    case v::kVariantRef: return ref_path();
    case v::kVariantAvx2: return avx2_path();
    case v::kVariantAvx512bw: return avx512bw_path();
    case v::kVariantAvxvnni: return avxvnni_path();
    case v::kVariantAvx512vnni: return avx512vnni_path();
    case v::kVariantAmx: return amx_path();
    default: break;
  }
  // auto: amx > avx512vnni > avxvnni > avx512bw > avx2 > ref (compiler/kernel-schema.ts QGEMM_VARIANTS), chosen once
  static const Path* const best = [] {
    for (int64_t c : {v::kVariantAmx, v::kVariantAvx512vnni, v::kVariantAvxvnni, v::kVariantAvx512bw, v::kVariantAvx2})
      if (variant_unavailable(c) == nullptr) return path_for(c);
    return ref_path();
  }();
  return best;
}

const char* check_variant(const char* name, int64_t code) {
  if (code < 0 || code >= v::kVariantCount)
    return kernel_error("%s: unknown variant code %lld (0..%d)", name, static_cast<long long>(code), v::kVariantCount - 1);
  if (const char* why = variant_unavailable(code))
    return kernel_error("%s: variant %s cannot run here: %s", name, v::kVariantNames[code], why);
  return nullptr;
}

int64_t int16_limit(int64_t k) {
  constexpr int64_t kMax = 2147483647;  // INT32_MAX
  if (k < 1) k = 1;
  int64_t l = std::min<int64_t>(32767, static_cast<int64_t>(std::sqrt(static_cast<double>(kMax / k))));
  while (l > 1 && k * l * l > kMax) l--;
  while (l < 32767 && k * (l + 1) * (l + 1) <= kMax) l++;
  return l;
}

// ---------- rows of A ----------

namespace {

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

// One row on [-lim, lim]: s = max|x| / lim, q = round-half-even(x / s) clamped; 0 for a zero row, NaN when the row
// has inf or NaN (q all 0).
template <class T>
float quantize_row(const float* x, int64_t k, float lim, T* q) {
  const uint32_t mb = max_abs_bits(x, k);
  if (mb == 0 || mb >= kInfBits) {
    for (int64_t i = 0; i < k; i++) q[i] = 0;
    return mb == 0 ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  float amax;
  std::memcpy(&amax, &mb, 4);
  const float s = amax / lim;
  for (int64_t i = 0; i < k; i++) {
    const float r = std::nearbyint(x[i] / s);  // the default rounding mode: half to even
    q[i] = static_cast<T>(std::min(lim, std::max(-lim, r)));
  }
  return s;
}

// int8 rows on [-127, 127]; int16 rows on [-L, L], L = int16_limit(k).
float quantize_i8(const float* x, int64_t k, int8_t* q) { return quantize_row(x, k, 127.0f, q); }
float quantize_i16(const float* x, int64_t k, int16_t* q) { return quantize_row(x, k, static_cast<float>(int16_limit(k)), q); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PLANC_QGEMM_ROWS_AVX2 1
// One int8 row with AVX2: the same operations as quantize_i8 (an exact division, round-half-even, clamp), eight lanes
// at a time, writing the forms asked for (q8, u8 = q + 128, q16) directly. Returns s.
__attribute__((target("avx2,fma"))) float quantize_i8_avx2(const float* x, int64_t k, int8_t* q8, uint8_t* u8, int16_t* q16) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  __m256i mv = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    mv = _mm256_max_epu32(mv, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), abs_mask));
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), mv);
  uint32_t mb = 0;
  for (uint32_t b : lanes) mb = b > mb ? b : mb;
  const uint32_t tail = max_abs_bits(x + i, k - i);
  mb = tail > mb ? tail : mb;
  if (mb == 0 || mb >= kInfBits) {
    if (q8) std::memset(q8, 0, static_cast<size_t>(k));
    if (u8) std::memset(u8, 128, static_cast<size_t>(k));
    if (q16) std::memset(q16, 0, static_cast<size_t>(k) * sizeof(int16_t));
    return mb == 0 ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }
  float amax;
  std::memcpy(&amax, &mb, 4);
  const float s = amax / 127.0f;
  const __m256 sv = _mm256_set1_ps(s), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
  for (i = 0; i + 16 <= k; i += 16) {
    __m256 r0 = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r1 = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i + 8), sv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r0 = _mm256_min_ps(hi, _mm256_max_ps(lo, r0));
    r1 = _mm256_min_ps(hi, _mm256_max_ps(lo, r1));
    // int32 lanes -> int16 (in order after the lane permute) -> int8
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(_mm256_cvtps_epi32(r0), _mm256_cvtps_epi32(r1)), 0xd8);
    const __m128i w16lo = _mm256_castsi256_si128(w), w16hi = _mm256_extracti128_si256(w, 1);
    if (q16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q16 + i), w);
    const __m128i b = _mm_packs_epi16(w16lo, w16hi);
    if (q8) _mm_storeu_si128(reinterpret_cast<__m128i*>(q8 + i), b);
    if (u8) _mm_storeu_si128(reinterpret_cast<__m128i*>(u8 + i), _mm_xor_si128(b, _mm_set1_epi8(static_cast<char>(0x80))));
  }
  for (; i < k; i++) {
    const float r = std::nearbyint(x[i] / s);
    const int8_t v = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, r)));
    if (q8) q8[i] = v;
    if (u8) u8[i] = static_cast<uint8_t>(v + 128);
    if (q16) q16[i] = v;
  }
  return s;
}
#endif

// Whether int8 rows for `path` are quantized with AVX2: every vector path (they all run on AVX2 CPUs); the reference
// path keeps the scalar rule, so the tests' bit-for-bit comparisons of each path against ref check both quantizers.
bool rows_avx2(const Path& path) {
#ifdef PLANC_QGEMM_ROWS_AVX2
  static const bool avx2 = cpu_has({F::kAvx2, F::kFma});
  return &path != ref_path() && avx2;
#else
  (void)path;
  return false;
#endif
}

}  // namespace

Rows quantize_rows(const KernelArgs& args, const float* x, int64_t m, int64_t k, int64_t kp, int64_t input, const Path& path,
                   RowBuffers& buf) {
  Rows rows;
  rows.m = m;
  rows.kp = kp;
  const size_t total = static_cast<size_t>(m * kp);
  buf.scale.resize(static_cast<size_t>(m));
  bool want_q8 = false, want_u8 = false, want_q16 = false;
  if (input == kQuantInFloat32) {
    buf.f32.resize(total);
  } else if (input == kQuantInInt16) {
    want_q16 = true;
  } else {
    want_q8 = &path == ref_path();  // only the reference path reads the signed bytes
    want_u8 = path.unsigned_a;
    want_q16 = !path.unsigned_a && &path != ref_path();
  }
  // Each row is written whole (its k values, then the padding to kp): the buffers are only resized.
  if (want_q8) buf.q8.resize(total);
  if (want_u8) buf.u8.resize(total);
  if (want_q16) buf.q16.resize(total);
  const bool fast = rows_avx2(path);
  auto run = [&](int64_t r0, int64_t r1) {
    std::vector<int8_t> tmp;
    for (int64_t r = r0; r < r1; r++) {
      const float* xr = x + r * k;
      const size_t pad = static_cast<size_t>(kp - k);
      if (input == kQuantInFloat32) {
        float* f = buf.f32.data() + r * kp;
        std::memcpy(f, xr, static_cast<size_t>(k) * sizeof(float));
        std::fill(f + k, f + kp, 0.0f);
        buf.scale[static_cast<size_t>(r)] = 1.0f;
        continue;
      }
      int8_t* q = want_q8 ? buf.q8.data() + r * kp : nullptr;
      uint8_t* u = want_u8 ? buf.u8.data() + r * kp : nullptr;
      int16_t* h = want_q16 ? buf.q16.data() + r * kp : nullptr;
      if (input == kQuantInInt16) {
        buf.scale[static_cast<size_t>(r)] = quantize_i16(xr, k, h);
      } else {
#ifdef PLANC_QGEMM_ROWS_AVX2
        if (fast) {
          buf.scale[static_cast<size_t>(r)] = quantize_i8_avx2(xr, k, q, u, h);
        } else
#endif
        {
          int8_t* qs = q;
          if (!qs) {
            tmp.resize(static_cast<size_t>(k));
            qs = tmp.data();
          }
          buf.scale[static_cast<size_t>(r)] = quantize_i8(xr, k, qs);
          if (u)
            for (int64_t i = 0; i < k; i++) u[i] = static_cast<uint8_t>(qs[i] + 128);
          if (h)
            for (int64_t i = 0; i < k; i++) h[i] = qs[i];
        }
      }
      if (q) std::memset(q + k, 0, pad);
      if (u) std::memset(u + k, 128, pad);
      if (h) std::memset(h + k, 0, pad * sizeof(int16_t));
    }
  };
  (void)fast;
  const int64_t min_rows = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, k));
  if (m > min_rows) run_parallel(args, m, min_rows, run);
  else run(0, m);
  rows.f32 = input == kQuantInFloat32 ? buf.f32.data() : nullptr;
  rows.q8 = want_q8 ? buf.q8.data() : nullptr;
  rows.u8 = want_u8 ? buf.u8.data() : nullptr;
  rows.q16 = want_q16 ? buf.q16.data() : nullptr;
  return rows;
}

// ---------- epilogue ----------

namespace {

// The epilogue activation, computed in double and rounded once (the formulas of gemm.cc's fused_matmul epilogue).
inline float activate(float v, int64_t act) {
  const double x = v;
  switch (act) {
    case kActRelu: return v > 0.0f ? v : 0.0f;
    case kActGelu: return static_cast<float>(0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440)));
    case kActGeluTanh: return static_cast<float>(0.5 * x * (1.0 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x))));
    case kActSilu: return static_cast<float>(x / (1.0 + std::exp(-x)));
    default: return v;
  }
}

// Each operation rounded to float on its own: no FMA contraction (this file is compiled for the portable baseline, and
// the attribute keeps it so under other flags), so every path's equal sums give equal outputs.
template <class Acc>
__attribute__((optimize("fp-contract=off"))) void epilogue_tile(const Epilogue& e, const Acc* acc, int64_t ld, int64_t r0,
                                                                int64_t nr, int64_t c0, int64_t nc) {
  for (int64_t r = 0; r < nr; r++) {
    const int64_t row = r0 + r;
    const float sa = e.sa[row];
    float* y = e.y + row * e.ldy + c0;
    const Acc* s = acc + r * ld;
    const float* ws = e.scale + c0;
    if (e.act == kActNone && !e.bias && !e.res) {
      for (int64_t c = 0; c < nc; c++) y[c] = static_cast<float>(s[c]) * (sa * ws[c]);
      continue;
    }
    for (int64_t c = 0; c < nc; c++) {
      float v = static_cast<float>(s[c]) * (sa * ws[c]);
      if (e.bias) v += e.bias[c0 + c];
      v = e.act == kActRelu ? (v > 0.0f ? v : 0.0f) : e.act == kActNone ? v : activate(v, e.act);
      if (e.res) v += e.res[row * e.ldy + c0 + c];
      y[c] = v;
    }
  }
}

}  // namespace

void apply_epilogue(const Epilogue& e, const int32_t* acc, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  epilogue_tile(e, acc, ld, r0, nr, c0, nc);
}
void apply_epilogue(const Epilogue& e, const float* acc, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc) {
  epilogue_tile(e, acc, ld, r0, nr, c0, nc);
}

// ---------- qmatmul ----------

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The call's operands, checked.
struct Call {
  const float* a;
  int64_t m, n, k, kp, act, input;
  Weights w;
  const float* scale;
  const int32_t* wsum;
  const float* bias;
  const float* res;
  float* y;
};

bool dims_are(const TensorView& t, std::initializer_list<int64_t> d) {
  if (t.rank != static_cast<int32_t>(d.size())) return false;
  int i = 0;
  for (int64_t x : d)
    if (t.dims[i++] != x) return false;
  return true;
}

const char* check_qmatmul(const KernelArgs& args, Call* c) {
  if (const char* err = check_arity("qmatmul", args, v::kArity)) return err;
  if (const char* err = check_variant("qmatmul", args.variant)) return err;
  const int64_t act = args.iargs[v::kActivation], input = args.iargs[v::kInput], n = args.iargs[v::kN], k = args.iargs[v::kK];
  if (act < 0 || act >= kActCount) return kernel_error("qmatmul: unknown activation %lld", (long long)act);
  if (input < 0 || input >= kQuantInCount) return kernel_error("qmatmul: unknown input kind %lld", (long long)input);
  if (n < 0 || k < 0 || n > (int64_t(1) << 31) || k > (int64_t(1) << 31))
    return kernel_error("qmatmul: N = %lld and K = %lld out of range", (long long)n, (long long)k);
  const TensorView &a = args.in[0], &w = args.in[1], &ws = args.in[2], &sum = args.in[3], &bias = args.in[4], &res = args.in[5];
  const TensorView& y = args.out[0];
  for (const TensorView* t : {&a, &w, &ws, &y})
    if (!view_ok(*t)) return "qmatmul: a malformed input or output view";
  if (a.dtype != kFloat32 || y.dtype != kFloat32 || ws.dtype != kFloat32)
    return kernel_error("qmatmul: A, w_scale and Y must be float32, got %s, %s, %s", dtype_name(a.dtype), dtype_name(ws.dtype), dtype_name(y.dtype));
  if (a.rank < 1 || a.dims[a.rank - 1] != k) return kernel_error("qmatmul: A %s must end in K = %lld", dims_str(a).c_str(), (long long)k);
  const int64_t blocks = ceil_div(n, kBlock);
  const bool i16 = input == kQuantInInt16;
  const int32_t wdt = i16 ? kInt16 : kInt8;
  const int64_t kp = i16 ? ceil_div(k, 2) * 2 : ceil_div(k, 4) * 4;
  if (w.dtype != wdt || !dims_are(w, {blocks, i16 ? kp / 2 : kp / 4, kBlock, i16 ? 2 : 4}))
    return kernel_error("qmatmul: w must be %s [%lld, %lld, 16, %d] for N = %lld, K = %lld and %s input, got %s %s", dtype_name(wdt),
                        (long long)blocks, (long long)(i16 ? kp / 2 : kp / 4), i16 ? 2 : 4, (long long)n, (long long)k,
                        i16 ? "int16" : input == kQuantInInt8 ? "int8" : "float32", dtype_name(w.dtype), dims_str(w).c_str());
  if (!dims_are(ws, {n})) return kernel_error("qmatmul: w_scale must be [%lld], got %s", (long long)n, dims_str(ws).c_str());
  if (sum.data && (!view_ok(sum) || sum.dtype != kInt32 || !dims_are(sum, {n})))
    return kernel_error("qmatmul: w_sum must be int32 [%lld], got %s %s", (long long)n, dtype_name(sum.dtype), dims_str(sum).c_str());
  if (bias.data && (!view_ok(bias) || bias.dtype != kFloat32 || !dims_are(bias, {n})))
    return kernel_error("qmatmul: bias must be float32 [%lld], got %s %s", (long long)n, dtype_name(bias.dtype), dims_str(bias).c_str());
  bool y_ok = y.rank == a.rank && y.dims[y.rank - 1] == n;
  for (int i = 0; y_ok && i < a.rank - 1; i++) y_ok = y.dims[i] == a.dims[i];
  if (!y_ok) return kernel_error("qmatmul: Y %s must be A's leading dims + [%lld] (A %s)", dims_str(y).c_str(), (long long)n, dims_str(a).c_str());
  if (res.data && (!view_ok(res) || res.dtype != kFloat32 || !same_dims(res, y)))
    return kernel_error("qmatmul: residual must be float32 %s (Y's dims), got %s %s", dims_str(y).c_str(), dtype_name(res.dtype), dims_str(res).c_str());
  int64_t m = 1;
  for (int i = 0; i < a.rank - 1; i++) m *= a.dims[i];
  if (m > 0 && n > 0 && (!a.data || !y.data || !ws.data || (w.numel > 0 && !w.data))) return "qmatmul: missing input or output data";
  Weights wt;
  wt.w8 = i16 ? nullptr : w.as<int8_t>();
  wt.w16 = i16 ? w.as<int16_t>() : nullptr;
  wt.blocks = blocks;
  wt.kgroups = i16 ? kp / 2 : kp / 4;
  *c = Call{a.as<float>(), m, n, k, kp, act, input, wt, ws.as<float>(), sum.data ? sum.as<int32_t>() : nullptr,
            bias.data ? bias.as<float>() : nullptr, res.data ? res.as<float>() : nullptr, y.as<float>()};
  return nullptr;
}

// Σ_k Wq(k, c) of nb blocks from b0 (the vpdpbusd offset when the call has no w_sum): sums[16 b + c].
void block_sums(const Weights& w, int64_t b0, int64_t nb, int32_t* sums) {
  for (int64_t b = 0; b < nb; b++) {
    int32_t s[kBlock] = {0};
    const int8_t* p = w.w8 + (b0 + b) * w.kgroups * 64;
    for (int64_t g = 0; g < w.kgroups; g++, p += 64)
      for (int c = 0; c < kBlock; c++) s[c] += p[4 * c] + p[4 * c + 1] + p[4 * c + 2] + p[4 * c + 3];
    std::memcpy(sums + b * kBlock, s, sizeof s);
  }
}

// The product and epilogue over tasks of (a group of the path's blocks) × (a chunk of rows).
void run_product(const KernelArgs& args, const Call& c, const Path& path, const Rows& rows, const float* sa) {
  const bool f32 = c.input == kQuantInFloat32, i16 = c.input == kQuantInInt16;
  const int64_t R = f32 ? path.f32_rows : path.rows, G = f32 ? path.f32_blocks : path.blocks;
  const int64_t groups = ceil_div(c.w.blocks, G);
  const int64_t threads = args.pool ? args.pool->threads() : 1;
  // Rows per task: all of them unless there are too few groups to keep every thread busy.
  int64_t chunk = c.m;
  if (groups < 4 * threads && c.m > R) {
    const int64_t parts = std::min(ceil_div(4 * threads, groups), ceil_div(c.m, R));
    chunk = ceil_div(ceil_div(c.m, parts), R) * R;
  }
  const int64_t chunks = ceil_div(c.m, chunk);
  const bool offset = !f32 && !i16 && path.unsigned_a;
  const Epilogue e{c.act, sa, c.scale, c.bias, c.res, c.y, c.n};
  auto run = [&](int64_t t0, int64_t t1) {
    static thread_local std::vector<int32_t> acc_i, sums;
    static thread_local std::vector<float> acc_f;
    acc_i.resize(static_cast<size_t>(R * G * kBlock));
    acc_f.resize(static_cast<size_t>(R * G * kBlock));
    sums.resize(static_cast<size_t>(G * kBlock));
    int64_t sums_group = -1;
    for (int64_t t = t0; t < t1; t++) {
      const int64_t grp = t / chunks, rc = t % chunks;
      const int64_t b0 = grp * G, nb = std::min(G, c.w.blocks - b0), c0 = b0 * kBlock, nc = std::min(nb * kBlock, c.n - c0);
      const int64_t ld = nb * kBlock;
      const int32_t* wsum = c.wsum ? c.wsum + c0 : nullptr;
      if (offset && !c.wsum) {
        if (sums_group != grp) block_sums(c.w, b0, nb, sums.data());
        sums_group = grp;
        wsum = sums.data();
      }
      for (int64_t r0 = rc * chunk; r0 < std::min(c.m, (rc + 1) * chunk); r0 += R) {
        const int64_t nr = std::min(R, c.m - r0);
        if (f32) {
          path.dots_f32(rows, c.w, r0, nr, b0, nb, acc_f.data());
          apply_epilogue(e, acc_f.data(), ld, r0, nr, c0, nc);
          continue;
        }
        (i16 ? path.dots_i16 : path.dots_i8)(rows, c.w, r0, nr, b0, nb, acc_i.data());
        if (offset) {
          for (int64_t r = 0; r < nr; r++)
            for (int64_t j = 0; j < nc; j++) {
              int32_t& s = acc_i[static_cast<size_t>(r * ld + j)];
              s = static_cast<int32_t>(static_cast<uint32_t>(s) - 128u * static_cast<uint32_t>(wsum[j]));
            }
        }
        apply_epilogue(e, acc_i.data(), ld, r0, nr, c0, nc);
      }
    }
  };
  const int64_t tasks = groups * chunks;
  // The pool only from about half a million multiply-adds: below that one thread takes a few microseconds (int8 at
  // M = 1: ~80 GB/s of weights from cache), less than waking the others.
  if (args.pool && threads > 1 && c.m * c.kp * c.n >= (int64_t(1) << 19)) run_parallel(args, tasks, 1, run);
  else run(0, tasks);
}

// Inputs A [..., K] float32, w (int8 / int16 packed), w_scale [N], w_sum? [N] int32, bias? [N], residual? (Y's dims);
// output Y [..., N]; iargs activation, input (QuantInput), n, k.
const char* qmatmul(const KernelArgs& args) {
  Call c{};
  if (const char* err = check_qmatmul(args, &c)) return err;
  if (c.m == 0 || c.n == 0) return nullptr;
  const Path& path = *path_for(args.variant);
  static thread_local RowBuffers buf;
  const Rows rows = quantize_rows(args, c.a, c.m, c.k, c.kp, c.input, path, buf);
  run_product(args, c, path, rows, buf.scale.data());
  return nullptr;
}

const KernelDef kDefs[] = {
    {"qmatmul", qmatmul, variant_unavailable},
};

}  // namespace
}  // namespace qgemm

KernelList qgemm_kernels() { return {qgemm::kDefs, sizeof qgemm::kDefs / sizeof qgemm::kDefs[0]}; }

}  // namespace planc
