// Fused scaled dot-product attention over a K/V cache (decode row by row, prefill as register-tiled blocks) and cache_write.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"
#include "isa.h"
#include "vec_math.h"

namespace planc {
namespace {

// ---------- vector helpers ----------

#ifdef PLANC_VEC8
// Sum of the eight lanes as a pairwise tree (not in lane order as vec_math.h's sum8).
inline float sum8_pairwise(const v8f& v) {
  const float a = (v[0] + v[4]) + (v[1] + v[5]), b = (v[2] + v[6]) + (v[3] + v[7]);
  return a + b;
}
#endif

// ---------- row loops ----------

// s[j] = dot(q, k_j) for keys j < n (rows of k, stride d); four keys share each load of q.
PLANC_HOT_BODY void scores_run_body(const float* q, const float* k, int64_t d, int64_t n, float* s) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *k0 = k + j * d, *k1 = k0 + d, *k2 = k1 + d, *k3 = k2 + d;
    float t0 = 0, t1 = 0, t2 = 0, t3 = 0;
    int64_t c = 0;
#ifdef PLANC_VEC8
    v8f a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (; c + 8 <= d; c += 8) {
      const v8f qv = load8(q + c);
      a0 += qv * load8(k0 + c);
      a1 += qv * load8(k1 + c);
      a2 += qv * load8(k2 + c);
      a3 += qv * load8(k3 + c);
    }
    t0 = sum8_pairwise(a0);
    t1 = sum8_pairwise(a1);
    t2 = sum8_pairwise(a2);
    t3 = sum8_pairwise(a3);
#endif
    for (; c < d; c++) {
      t0 += q[c] * k0[c];
      t1 += q[c] * k1[c];
      t2 += q[c] * k2[c];
      t3 += q[c] * k3[c];
    }
    s[j] = t0;
    s[j + 1] = t1;
    s[j + 2] = t2;
    s[j + 3] = t3;
  }
  for (; j < n; j++) {
    const float* kj = k + j * d;
    float t = 0;
    int64_t c = 0;
#ifdef PLANC_VEC8
    v8f a = {};
    for (; c + 8 <= d; c += 8) a += load8(q + c) * load8(kj + c);
    t = sum8_pairwise(a);
#endif
    for (; c < d; c++) t += q[c] * kj[c];
    s[j] = t;
  }
}
PLANC_HOT_DISPATCH(void, scores_run, (const float* q, const float* k, int64_t d, int64_t n, float* s), (q, k, d, n, s))

// x[i] = e^(x[i] - m) in place; returns the sum.
PLANC_HOT_BODY float exp_sum_inplace_body(float* x, int64_t n, float m) {
  float s = 0;
  int64_t i = 0;
#ifdef PLANC_VEC8
  v8f s0 = {};
  for (; i + 8 <= n; i += 8) {
    const v8f e = exp8(load8(x + i) - m);
    store8(x + i, e);
    s0 += e;
  }
  s = sum8_pairwise(s0);
#endif
  for (; i < n; i++) {
    x[i] = exp_approx(x[i] - m);
    s += x[i];
  }
  return s;
}
PLANC_HOT_DISPATCH(float, exp_sum_inplace, (float* x, int64_t n, float m), (x, n, m))

// y = Σ_j p[j] v_j over rows j < n of v (stride d); four rows per pass over y.
PLANC_HOT_BODY void weighted_sum_body(const float* p, const float* v, int64_t d, int64_t n, float* y) {
  for (int64_t c = 0; c < d; c++) y[c] = 0.0f;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *v0 = v + j * d, *v1 = v0 + d, *v2 = v1 + d, *v3 = v2 + d;
    const float p0 = p[j], p1 = p[j + 1], p2 = p[j + 2], p3 = p[j + 3];
    for (int64_t c = 0; c < d; c++) y[c] += p0 * v0[c] + p1 * v1[c] + p2 * v2[c] + p3 * v3[c];
  }
  for (; j < n; j++) {
    const float* vj = v + j * d;
    const float pj = p[j];
    for (int64_t c = 0; c < d; c++) y[c] += pj * vj[c];
  }
}
PLANC_HOT_DISPATCH(void, weighted_sum, (const float* p, const float* v, int64_t d, int64_t n, float* y), (p, v, d, n, y))

PLANC_HOT_BODY void scale_copy_body(const float* x, float* y, int64_t n, float f) {
  for (int64_t i = 0; i < n; i++) y[i] = x[i] * f;
}
PLANC_HOT_DISPATCH(void, scale_copy, (const float* x, float* y, int64_t n, float f), (x, y, n, f))

// s[j] += m[j * step] (step 0: one value for the whole row).
PLANC_HOT_BODY void add_mask_body(float* s, const float* m, int64_t step, int64_t n) {
  if (step == 0) {
    const float v = m[0];
    for (int64_t j = 0; j < n; j++) s[j] += v;
    return;
  }
  for (int64_t j = 0; j < n; j++) s[j] += m[j];
}
PLANC_HOT_DISPATCH(void, add_mask, (float* s, const float* m, int64_t step, int64_t n), (s, m, step, n))

// s[j] = -inf where the bool m[j * step] is `drop` (nonzero counts as true).
void bool_mask(float* s, const uint8_t* m, int64_t step, int64_t n, bool drop) {
  if (step == 0) {
    if ((m[0] != 0) == drop) std::fill(s, s + n, -kInf);
    return;
  }
  for (int64_t j = 0; j < n; j++) s[j] = ((m[j] != 0) == drop) ? -kInf : s[j];
}

// ---------- tiles for blocks of query rows ----------

// s_r[j] = dot(q_r, k_j) for four query rows r and keys j < cols (a multiple of 32), from K transposed: kt is
// [d, ld] (column j of kt is key j). A register tile of 4 rows x 16 keys, no horizontal sums.
PLANC_HOT_BODY void scores_tile_body(const float* const q[4], const float* kt, int64_t ld, int64_t d, int64_t cols,
                                     float* const s[4]) {
  for (int64_t j = 0; j < cols; j += 16) {
#ifdef PLANC_VEC8
    v8f a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
    for (int64_t c = 0; c < d; c++) {
      const v8f k0 = load8(kt + c * ld + j), k1 = load8(kt + c * ld + j + 8);
      const v8f b0 = splat(q[0][c]), b1 = splat(q[1][c]), b2 = splat(q[2][c]), b3 = splat(q[3][c]);
      a00 += b0 * k0;
      a01 += b0 * k1;
      a10 += b1 * k0;
      a11 += b1 * k1;
      a20 += b2 * k0;
      a21 += b2 * k1;
      a30 += b3 * k0;
      a31 += b3 * k1;
    }
    store8(s[0] + j, a00);
    store8(s[0] + j + 8, a01);
    store8(s[1] + j, a10);
    store8(s[1] + j + 8, a11);
    store8(s[2] + j, a20);
    store8(s[2] + j + 8, a21);
    store8(s[3] + j, a30);
    store8(s[3] + j + 8, a31);
#else
    for (int r = 0; r < 4; r++)
      for (int64_t jj = j; jj < j + 16; jj++) {
        float t = 0;
        for (int64_t c = 0; c < d; c++) t += q[r][c] * kt[c * ld + jj];
        s[r][jj] = t;
      }
#endif
  }
}
PLANC_HOT_DISPATCH(void, scores_tile, (const float* const q[4], const float* kt, int64_t ld, int64_t d, int64_t cols, float* const s[4]), (q, kt, ld, d, cols, s))

// y_r = Σ_{j<n} p_r[j] v_j for four rows r (v rows of stride d), columns c0..d-1. Register tiles of 4 rows x 16
// (then 8) columns.
PLANC_HOT_BODY void pv_tile_body(const float* const p[4], const float* v, int64_t d, int64_t n, int64_t c0, float* const y[4]) {
  int64_t c = c0;
#ifdef PLANC_VEC8
  for (; c + 16 <= d; c += 16) {
    v8f a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
    for (int64_t j = 0; j < n; j++) {
      const v8f v0 = load8(v + j * d + c), v1 = load8(v + j * d + c + 8);
      const v8f b0 = splat(p[0][j]), b1 = splat(p[1][j]), b2 = splat(p[2][j]), b3 = splat(p[3][j]);
      a00 += b0 * v0;
      a01 += b0 * v1;
      a10 += b1 * v0;
      a11 += b1 * v1;
      a20 += b2 * v0;
      a21 += b2 * v1;
      a30 += b3 * v0;
      a31 += b3 * v1;
    }
    store8(y[0] + c, a00);
    store8(y[0] + c + 8, a01);
    store8(y[1] + c, a10);
    store8(y[1] + c + 8, a11);
    store8(y[2] + c, a20);
    store8(y[2] + c + 8, a21);
    store8(y[3] + c, a30);
    store8(y[3] + c + 8, a31);
  }
  for (; c + 8 <= d; c += 8) {
    v8f a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (int64_t j = 0; j < n; j++) {
      const v8f v0 = load8(v + j * d + c);
      a0 += splat(p[0][j]) * v0;
      a1 += splat(p[1][j]) * v0;
      a2 += splat(p[2][j]) * v0;
      a3 += splat(p[3][j]) * v0;
    }
    store8(y[0] + c, a0);
    store8(y[1] + c, a1);
    store8(y[2] + c, a2);
    store8(y[3] + c, a3);
  }
#endif
  for (; c < d; c++)
    for (int r = 0; r < 4; r++) {
      float t = 0;
      for (int64_t j = 0; j < n; j++) t += p[r][j] * v[j * d + c];
      y[r][c] = t;
    }
}
PLANC_HOT_DISPATCH(void, pv_tile, (const float* const p[4], const float* v, int64_t d, int64_t n, int64_t c0, float* const y[4]), (p, v, d, n, c0, y))

// ---------- AVX-512 tiles ----------

// The same two tiles 32 lanes wide (two zmm per row), compiled for AVX-512 alone and used when the CPU has it.
// PLANC_DISABLE_AVX512_ATTENTION (a compile definition) leaves them out, e.g. to test the portable tiles.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(PLANC_DISABLE_AVX512_ATTENTION)
#define PLANC_ATTN_AVX512 1
#define PLANC_AVX512 __attribute__((target("avx512f,fma")))
typedef float v16f __attribute__((vector_size(64)));

PLANC_AVX512 inline v16f load16(const float* p) {
  v16f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
PLANC_AVX512 inline void store16(float* p, const v16f& v) { std::memcpy(p, &v, sizeof v); }
PLANC_AVX512 inline v16f splat16(float x) { return v16f{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }

// scores_tile with 4 rows x 32 keys per register tile.
PLANC_AVX512 void scores_tile_avx512(const float* const q[4], const float* kt, int64_t ld, int64_t d, int64_t cols,
                                     float* const s[4]) {
  for (int64_t j = 0; j < cols; j += 32) {
    v16f a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
    for (int64_t c = 0; c < d; c++) {
      const v16f k0 = load16(kt + c * ld + j), k1 = load16(kt + c * ld + j + 16);
      const v16f b0 = splat16(q[0][c]), b1 = splat16(q[1][c]), b2 = splat16(q[2][c]), b3 = splat16(q[3][c]);
      a00 += b0 * k0;
      a01 += b0 * k1;
      a10 += b1 * k0;
      a11 += b1 * k1;
      a20 += b2 * k0;
      a21 += b2 * k1;
      a30 += b3 * k0;
      a31 += b3 * k1;
    }
    store16(s[0] + j, a00);
    store16(s[0] + j + 16, a01);
    store16(s[1] + j, a10);
    store16(s[1] + j + 16, a11);
    store16(s[2] + j, a20);
    store16(s[2] + j + 16, a21);
    store16(s[3] + j, a30);
    store16(s[3] + j + 16, a31);
  }
}

// pv_tile over the leading multiple of 32 columns (4 rows x 32 columns per register tile); returns the columns done.
PLANC_AVX512 int64_t pv_tile_avx512(const float* const p[4], const float* v, int64_t d, int64_t n, float* const y[4]) {
  int64_t c = 0;
  for (; c + 32 <= d; c += 32) {
    v16f a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
    for (int64_t j = 0; j < n; j++) {
      const v16f v0 = load16(v + j * d + c), v1 = load16(v + j * d + c + 16);
      const v16f b0 = splat16(p[0][j]), b1 = splat16(p[1][j]), b2 = splat16(p[2][j]), b3 = splat16(p[3][j]);
      a00 += b0 * v0;
      a01 += b0 * v1;
      a10 += b1 * v0;
      a11 += b1 * v1;
      a20 += b2 * v0;
      a21 += b2 * v1;
      a30 += b3 * v0;
      a31 += b3 * v1;
    }
    store16(y[0] + c, a00);
    store16(y[0] + c + 16, a01);
    store16(y[1] + c, a10);
    store16(y[1] + c + 16, a11);
    store16(y[2] + c, a20);
    store16(y[2] + c + 16, a21);
    store16(y[3] + c, a30);
    store16(y[3] + c + 16, a31);
  }
  return c;
}

bool avx512_ok() {
  static const bool ok = cpu_has({CpuFeature::kAvx512f, CpuFeature::kFma});
  return ok;
}
#endif

// The tiles on the widest vectors the CPU has.
void scores_tiles(const float* const q[4], const float* kt, int64_t ld, int64_t d, int64_t cols, float* const s[4]) {
#ifdef PLANC_ATTN_AVX512
  if (avx512_ok()) return scores_tile_avx512(q, kt, ld, d, cols, s);
#endif
  scores_tile(q, kt, ld, d, cols, s);
}

void pv_tiles(const float* const p[4], const float* v, int64_t d, int64_t n, float* const y[4]) {
  int64_t c = 0;
#ifdef PLANC_ATTN_AVX512
  if (avx512_ok()) c = pv_tile_avx512(p, v, d, n, y);
#endif
  if (c < d) pv_tile(p, v, d, n, c, y);
}

// kt[c * ld + j] = k[j * d + c] for keys j < n; columns n..ld-1 are zeroed.
void transpose_keys(const float* k, int64_t d, int64_t n, int64_t ld, float* kt) {
  for (int64_t c = 0; c < d; c++) std::fill(kt + c * ld + n, kt + (c + 1) * ld, 0.0f);
  constexpr int64_t kTile = 16;
  for (int64_t j0 = 0; j0 < n; j0 += kTile)
    for (int64_t c0 = 0; c0 < d; c0 += kTile) {
      const int64_t j1 = std::min(n, j0 + kTile), c1 = std::min(d, c0 + kTile);
      for (int64_t c = c0; c < c1; c++)
        for (int64_t j = j0; j < j1; j++) kt[c * ld + j] = k[j * d + c];
    }
}

// ---------- attention ----------

// The resolved geometry of one attention call.
struct Attn {
  int64_t b, h, sq, d, c, l;
  int q_layout, mask_kind;
  bool causal;
  float scale;
  const float *q, *k, *v;
  float* y;
  const void* mask;
  int64_t m_sb, m_sh, m_si, m_sl;  // mask element strides per b, h, i, j (0 = broadcast)
  const int64_t* past;  // past_lens [B] (checked: 0 <= past[b] <= l - sq), or null: every row attends l keys
};

// Keys batch row b attends: past_lens[b] + Sq, or L for every row.
inline int64_t l_of(const Attn& a, int64_t b) { return a.past ? a.past[b] + a.sq : a.l; }

// Offset of query row (b, h, i) in Q and Y.
inline int64_t q_offset(const Attn& a, int64_t b, int64_t h, int64_t i) {
  if (a.q_layout == 0) return ((b * a.h + h) * a.sq + i) * a.d;
  return (b * a.sq + i) * a.h * a.d + h * a.d;
}

// Keys query row i of batch row b may attend: all of its L_b (l_of), or with is_causal those up to its absolute
// position L_b - Sq + i (the later ones are -inf, so they are never computed). May be <= 0: then the row is all -inf.
// A row's keys (and so its loops and their order) depend on its own L_b only, never on the other rows'.
inline int64_t keys_for(const Attn& a, int64_t b, int64_t i) {
  const int64_t l = l_of(a, b);
  return a.causal ? std::min(l, l - a.sq + i + 1) : l;
}

// Masks the scores s[0..n) of query row (b, h, i) and replaces them by e^(s - max); returns their sum, 0 when every
// score is -inf (a fully masked row: its Y is zeros, as ONNX Attention gives), or NaN when a score is NaN or +inf.
// *used: the keys whose weights may be nonzero. The keys at the end whose e^(s - max) is exactly 0 (exp_approx's
// underflow: masked keys, e.g. a padded source's) are left out of the sum and their weights zeroed, so a row's result
// does not depend on how much padding follows its keys (the lanes and tails of the sums are those of its own keys):
// a sentence gets the same bits alone or in a batch with longer ones.
float softmax_scores(const Attn& a, int64_t b, int64_t h, int64_t i, float* s, int64_t n, int64_t* used) {
  *used = n;
  if (a.mask_kind != kMaskNone) {
    const int64_t mo = b * a.m_sb + h * a.m_sh + i * a.m_si;
    if (a.mask_kind == kMaskAdd) add_mask(s, static_cast<const float*>(a.mask) + mo, a.m_sl, n);
    else bool_mask(s, static_cast<const uint8_t*>(a.mask) + mo, a.m_sl, n, a.mask_kind == kMaskBoolDrop);
  }
  const float m = nan_max(s, n);
  if (m == -kInf) return 0.0f;
  if (!std::isfinite(m)) return kNaN;
  int64_t e = n;
  while (e > 0 && s[e - 1] - m < kExpUnderflow) e--;  // the max's own key stays (s - m = 0)
  std::fill(s + e, s + n, 0.0f);
  *used = e;
  return exp_sum_inplace(s, e, m);
}

// Per-thread scratch of the attention paths.
struct Scratch {
  std::vector<float> s, qs, kt, dummy;
};

// One query row (decode): scores, mask, softmax and the weighted sum of V rows into Y.
void attention_row(const Attn& a, int64_t r, Scratch& w) {
  const int64_t i = r % a.sq, h = (r / a.sq) % a.h, b = r / (a.sq * a.h);
  const int64_t off = q_offset(a, b, h, i);
  float* y = a.y + off;
  const int64_t n = keys_for(a, b, i);
  if (n <= 0) {
    std::fill(y, y + a.d, 0.0f);
    return;
  }
  w.s.resize(static_cast<size_t>(a.l));
  w.qs.resize(static_cast<size_t>(a.d));
  float *s = w.s.data(), *qs = w.qs.data();
  scale_copy(a.q + off, qs, a.d, a.scale);  // Q * scale first, as the decomposition does; also allows Y == Q
  const int64_t kv = (b * a.h + h) * a.c * a.d;
  scores_run(qs, a.k + kv, a.d, n, s);
  int64_t used = n;
  const float sum = softmax_scores(a, b, h, i, s, n, &used);
  if (!(sum > 0)) {
    std::fill(y, y + a.d, sum == 0 ? 0.0f : kNaN);
    return;
  }
  weighted_sum(s, a.v + kv, a.d, used, y);
  scale_run(y, a.d, 1.0f / sum);
}

// Query rows i0..i1-1 of head (b, h), four at a time: K is transposed once for the block, then per tile of four
// rows the scores, softmax and P·V are register-tiled small matrix products.
void attention_block(const Attn& a, int64_t b, int64_t h, int64_t i0, int64_t i1, Scratch& w) {
  const int64_t rows = i1 - i0, d = a.d;
  const int64_t n_max = keys_for(a, b, i1 - 1);  // keys_for grows with i
  if (n_max <= 0) {
    for (int64_t i = i0; i < i1; i++) std::fill(a.y + q_offset(a, b, h, i), a.y + q_offset(a, b, h, i) + d, 0.0f);
    return;
  }
  const int64_t ld = (n_max + 31) / 32 * 32;
  w.kt.resize(static_cast<size_t>(d * ld));
  w.s.resize(static_cast<size_t>(5 * ld));  // four score rows and a dummy one
  w.qs.resize(static_cast<size_t>(rows * d));
  w.dummy.resize(static_cast<size_t>(d));
  const int64_t kv = (b * a.h + h) * a.c * d;
  transpose_keys(a.k + kv, d, n_max, ld, w.kt.data());
  for (int64_t r = 0; r < rows; r++) scale_copy(a.q + q_offset(a, b, h, i0 + r), w.qs.data() + r * d, d, a.scale);
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const int64_t nr = std::min<int64_t>(4, rows - r0);
    const int64_t n_tile = keys_for(a, b, i0 + r0 + nr - 1);
    const float* q[4];
    float* s[4];
    float* y[4];
    float sum[4];
    for (int r = 0; r < 4; r++) {  // missing rows repeat the last one into dummy outputs
      const bool real = r < nr;
      q[r] = w.qs.data() + (r0 + (real ? r : nr - 1)) * d;
      s[r] = w.s.data() + (real ? r : 4) * ld;
      y[r] = real ? a.y + q_offset(a, b, h, i0 + r0 + r) : w.dummy.data();
    }
    if (n_tile > 0) scores_tiles(q, w.kt.data(), ld, d, (n_tile + 31) / 32 * 32, s);
    for (int r = 0; r < nr; r++) {
      const int64_t i = i0 + r0 + r, n = keys_for(a, b, i);
      int64_t used = 0;
      sum[r] = n > 0 ? softmax_scores(a, b, h, i, s[r], n, &used) : 0.0f;
      // a masked or NaN row's weights are zeroed (its Y is overwritten); P·V adds the keys one by one, so the zero
      // weights after `used` leave the sums as they are
      const int64_t keep = sum[r] > 0 ? used : 0;
      if (n_tile > 0) std::fill(s[r] + keep, s[r] + n_tile, 0.0f);
    }
    if (n_tile > 0) pv_tiles(s, a.v + kv, d, n_tile, y);
    for (int r = 0; r < nr; r++) {
      if (sum[r] > 0) scale_run(y[r], d, 1.0f / sum[r]);
      else std::fill(y[r], y[r] + d, sum[r] == 0 ? 0.0f : kNaN);
    }
  }
}

// Checks the mask's dims against [B, H, Sq, L] and sets its broadcast strides.
const char* check_mask(const TensorView& m, Attn* a) {
  const int32_t want = a->mask_kind == kMaskAdd ? kFloat32 : kBool;
  if (m.dtype != want)
    return kernel_error("attention: mask_kind %d needs a %s mask, got %s", a->mask_kind, dtype_name(want),
                        dtype_name(m.dtype));
  if (m.rank != 4) return kernel_error("attention: mask must be rank 4, got %s", dims_str(m).c_str());
  const int64_t full[4] = {a->b, a->h, a->sq, a->l};
  for (int k = 0; k < 4; k++)
    if (m.dims[k] != 1 && m.dims[k] != full[k])
      return kernel_error("attention: mask %s does not broadcast to [%lld,%lld,%lld,%lld] (B,H,Sq,L)",
                          dims_str(m).c_str(), (long long)a->b, (long long)a->h, (long long)a->sq, (long long)a->l);
  a->m_sl = m.dims[3] == 1 ? 0 : 1;
  a->m_si = m.dims[2] == 1 ? 0 : m.dims[3];
  a->m_sh = m.dims[1] == 1 ? 0 : m.dims[2] * m.dims[3];
  a->m_sb = m.dims[0] == 1 ? 0 : m.dims[1] * m.dims[2] * m.dims[3];
  a->mask = m.data;
  return nullptr;
}

// Whether optional input `i` was given (an omitted one is a default view: no data, rank 0, no elements).
inline bool given(const KernelArgs& args, int i) {
  return args.n_in > i && (args.in[i].data != nullptr || args.in[i].rank != 0 || args.in[i].numel != 0);
}

// Checks a past_lens input: int64 [B], every value in 0..hi (`what` names the kernel, `bound` the limit's meaning).
const char* check_past_lens(const char* what, const TensorView& p, int64_t b, int64_t hi, const char* bound) {
  if (!view_ok(p)) return kernel_error("%s: past_lens is malformed", what);
  if (p.dtype != kInt64) return kernel_error("%s: past_lens must be int64, got %s", what, dtype_name(p.dtype));
  if (p.rank != 1 || p.dims[0] != b)
    return kernel_error("%s: past_lens must be [%lld] (B), got %s", what, (long long)b, dims_str(p).c_str());
  const int64_t* v = p.as<int64_t>();
  for (int64_t i = 0; i < b; i++)
    if (v[i] < 0 || v[i] > hi)
      return kernel_error("%s: past_lens[%lld] = %lld is outside 0..%lld (%s)", what, (long long)i, (long long)v[i],
                          (long long)hi, bound);
  return nullptr;
}

// Checks every input, output and argument and fills a; returns an error or nullptr.
const char* check_attention(const KernelArgs& args, Attn* a) {
  if (const char* err = check_arity("attention", args, attention_args::kArity)) return err;
  const TensorView &q = args.in[0], &k = args.in[1], &v = args.in[2], &y = args.out[0];
  const char* names[4] = {"Q", "K", "V", "Y"};
  const TensorView* views[4] = {&q, &k, &v, &y};
  for (int t = 0; t < 4; t++) {
    if (!view_ok(*views[t])) return kernel_error("attention: %s is missing or malformed", names[t]);
    if (views[t]->dtype != kFloat32)
      return kernel_error("attention: %s must be float32, got %s", names[t], dtype_name(views[t]->dtype));
  }
  using namespace attention_args;
  const int64_t heads = args.iargs[kNumHeads], layout = args.iargs[kQLayout], l = args.iargs[kKvLen],
                kind = args.iargs[kMaskKind], causal = args.iargs[kIsCausal];
  if (layout != 0 && layout != 1) return kernel_error("attention: q_layout must be 0 or 1, got %lld", (long long)layout);
  if (kind < 0 || kind >= kMaskCount) return kernel_error("attention: mask_kind must be 0..%d, got %lld", static_cast<int>(kMaskCount) - 1, (long long)kind);
  if (causal != 0 && causal != 1) return kernel_error("attention: is_causal must be 0 or 1, got %lld", (long long)causal);
  if (k.rank != 4) return kernel_error("attention: K must be [B,H,C,D], got %s", dims_str(k).c_str());
  if (!same_dims(k, v))
    return kernel_error("attention: V %s differs from K %s", dims_str(v).c_str(), dims_str(k).c_str());
  a->b = k.dims[0];
  a->h = k.dims[1];
  a->c = k.dims[2];
  a->d = k.dims[3];
  if (heads != a->h)
    return kernel_error("attention: num_heads %lld differs from K %s", (long long)heads, dims_str(k).c_str());
  const bool q_ok = layout == 0 ? (q.rank == 4 && q.dims[0] == a->b && q.dims[1] == a->h && q.dims[3] == a->d)
                                : (q.rank == 3 && q.dims[0] == a->b && q.dims[2] == a->h * a->d);
  if (!q_ok)
    return kernel_error("attention: Q %s does not match K %s for q_layout %lld", dims_str(q).c_str(),
                        dims_str(k).c_str(), (long long)layout);
  if (!same_dims(q, y)) return kernel_error("attention: Y %s differs from Q %s", dims_str(y).c_str(), dims_str(q).c_str());
  a->sq = layout == 0 ? q.dims[2] : q.dims[1];
  if (l < 1 || l > a->c)
    return kernel_error("attention: kv_len %lld is outside 1..%lld (K %s)", (long long)l, (long long)a->c,
                        dims_str(k).c_str());
  a->l = l;
  a->q_layout = static_cast<int>(layout);
  a->mask_kind = static_cast<int>(kind);
  a->causal = causal != 0;
  a->scale = static_cast<float>(args.fargs[kScale]);
  a->q = q.as<float>();
  a->k = k.as<float>();
  a->v = v.as<float>();
  a->y = y.as<float>();
  a->mask = nullptr;
  a->m_sb = a->m_sh = a->m_si = a->m_sl = 0;
  a->past = nullptr;
  if (given(args, 4)) {  // each row's past_lens[b] + Sq keys must be in 1..kv_len
    if (a->sq < 1 && a->b > 0) return "attention: past_lens needs at least one query row";
    if (const char* err = check_past_lens("attention", args.in[4], a->b, l - a->sq, "past_lens[b] + Sq must be in 1..kv_len"))
      return err;
    a->past = args.in[4].as<int64_t>();
  }
  const bool has_mask = args.n_in >= 4 && args.in[3].data != nullptr;
  if (kind == kMaskNone) {
    if (has_mask) return "attention: mask_kind 0 but a mask was given";
    return nullptr;
  }
  if (!has_mask) return kernel_error("attention: mask_kind %lld but no mask was given", (long long)kind);
  if (!view_ok(args.in[3])) return "attention: mask is malformed";
  return check_mask(args.in[3], a);
}

const char* attention(const KernelArgs& args) {
  Attn a;
  if (const char* err = check_attention(args, &a)) return err;
  const int64_t rows = a.b * a.h * a.sq;
  if (rows == 0 || a.d == 0) return nullptr;  // Y is empty
  const int64_t work = a.l * a.d + 1;  // per query row
  if (a.sq < 4) {  // decode: one row at a time
    run_parallel(args, rows, std::max<int64_t>(1, 32768 / work), [&](int64_t r0, int64_t r1) {
      static thread_local Scratch w;
      for (int64_t r = r0; r < r1; r++) attention_row(a, r, w);
    });
    return nullptr;
  }
  // Blocks of query rows: whole heads when there are enough heads to keep the threads busy (K is transposed once
  // per block), else split so that there are about 4 tasks per thread.
  const int64_t threads = args.pool ? args.pool->threads() : 1;
  const int64_t heads = a.b * a.h;
  const int64_t per_head = std::min((4 * threads + heads - 1) / heads, (a.sq + 3) / 4);
  const int64_t block = ((a.sq + per_head - 1) / per_head + 3) / 4 * 4;
  const int64_t blocks = (a.sq + block - 1) / block;
  run_parallel(args, heads * blocks, std::max<int64_t>(1, 32768 / (block * work)), [&](int64_t t0, int64_t t1) {
    static thread_local Scratch w;
    for (int64_t t = t0; t < t1; t++) {
      const int64_t bh = t / blocks, i0 = (t % blocks) * block;
      attention_block(a, bh / a.h, bh % a.h, i0, std::min(a.sq, i0 + block), w);
    }
  });
  return nullptr;
}

// ---------- cache_write ----------

const char* cache_write(const KernelArgs& args) {
  if (const char* err = check_arity("cache_write", args, cache_write_args::kArity)) return err;
  const TensorView &cache = args.in[0], &nw = args.in[1], &y = args.out[0];
  const char* names[3] = {"Cache", "New", "Y"};
  const TensorView* views[3] = {&cache, &nw, &y};
  for (int t = 0; t < 3; t++) {
    if (!view_ok(*views[t])) return kernel_error("cache_write: %s is missing or malformed", names[t]);
    if (views[t]->dtype != kFloat32)
      return kernel_error("cache_write: %s must be float32, got %s", names[t], dtype_name(views[t]->dtype));
  }
  using namespace cache_write_args;
  const int64_t pos = args.iargs[kPos], layout = args.iargs[kNewLayout], heads = args.iargs[kNumHeads];
  const bool per_row = given(args, 2);  // past_lens: batch row b's rows go to past_lens[b].. (pos unused)
  if (cache.rank != 4) return kernel_error("cache_write: Cache must be [B,H,C,D], got %s", dims_str(cache).c_str());
  if (!same_dims(cache, y))
    return kernel_error("cache_write: Y %s differs from Cache %s", dims_str(y).c_str(), dims_str(cache).c_str());
  const int64_t b = cache.dims[0], h = cache.dims[1], c = cache.dims[2], d = cache.dims[3];
  if (layout != 0 && layout != 1)
    return kernel_error("cache_write: new_layout must be 0 or 1, got %lld", (long long)layout);
  if (heads != h)
    return kernel_error("cache_write: num_heads %lld differs from Cache %s", (long long)heads, dims_str(cache).c_str());
  const bool ok = layout == 0 ? (nw.rank == 4 && nw.dims[0] == b && nw.dims[1] == h && nw.dims[3] == d)
                              : (nw.rank == 3 && nw.dims[0] == b && nw.dims[2] == h * d);
  if (!ok)
    return kernel_error("cache_write: New %s does not match Cache %s for new_layout %lld", dims_str(nw).c_str(),
                        dims_str(cache).c_str(), (long long)layout);
  const int64_t sn = layout == 0 ? nw.dims[2] : nw.dims[1];
  const int64_t* past = nullptr;
  if (per_row) {
    if (const char* err = check_past_lens("cache_write", args.in[2], b, c - sn, "its rows must fit the capacity"))
      return err;
    past = args.in[2].as<int64_t>();
  } else if (pos < 0 || pos > c - sn)
    return kernel_error("cache_write: rows %lld..%lld are outside the capacity %lld (Cache %s, New %s)",
                        (long long)pos, (long long)(pos + sn - 1), (long long)c, dims_str(cache).c_str(),
                        dims_str(nw).c_str());
  const float* src = nw.as<float>();
  float* dst = y.as<float>();
  if (y.data != cache.data && cache.numel > 0) std::memcpy(dst, cache.data, cache.bytes());
  const int64_t rows = b * h * sn;
  if (rows == 0 || d == 0) return nullptr;
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  run_parallel(args, rows, std::max<int64_t>(1, 65536 / d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      const int64_t s = r % sn, hh = (r / sn) % h, bb = r / (sn * h);
      const int64_t from = layout == 0 ? r * d : (bb * sn + s) * h * d + hh * d;
      const int64_t at = past ? past[bb] : pos;
      std::memcpy(dst + ((bb * h + hh) * c + at + s) * d, src + from, row_bytes);
    }
  });
  return nullptr;
}

const KernelDef kDefs[] = {
    {"attention", attention},
    {"cache_write", cache_write},
};

}  // namespace

KernelList attention_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
