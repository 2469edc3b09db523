// qproject_topk's row products at many rows on AVX2 (included by qgemm_avx2.cc after qgemm_avx2_body.h for the avx2
// path, QT as there): a register-blocked GEMM, the int16 rows of A packed per block of 8 (one row per 32-bit lane: a
// pair of k) and each W row's pair, widened, broadcast to them (vpmaddwd, vpaddd); fewer rows stay on
// row_dots_i8_by4. The same int32 sums as every path.

// Rows per ymm block, per pass over W (two blocks: 5 W rows × 2 blocks measured faster than 2 × 4 at 32 and 64 rows),
// and the fewest rows the blocked product takes (at 8 rows the four-row kernel was faster: 3.1 vs 3.6 ms).
constexpr int64_t kBlockRows = 8, kPassRows = 16, kGemmMinRows = 16;

#include "qrows_common_body.h"

// Rows [r0, r0 + nr) of A (int16, kp / 2 pairs each) packed in blocks of 8: xb[(b · pairs + g) · 8 + i] = pair g of row
// 8 b + i (zero past nr).
QT void pack_rows8(const Rows& a, int64_t r0, int64_t nr, uint32_t* xb) {
  const int64_t pairs = a.kp / 2, blocks = (nr + kBlockRows - 1) / kBlockRows;
  for (int64_t b = 0; b < blocks; b++) {
    uint32_t* dst = xb + b * pairs * kBlockRows;
    for (int64_t i = 0; i < kBlockRows; i++) {
      const int64_t r = b * kBlockRows + i;
      if (r >= nr) {
        for (int64_t g = 0; g < pairs; g++) dst[g * kBlockRows + i] = 0;
        continue;
      }
      const int16_t* s = a.q16 + (r0 + r) * a.kp;
      for (int64_t g = 0; g < pairs; g++) std::memcpy(dst + g * kBlockRows + i, s + 2 * g, 4);
    }
  }
}

// The next tile's W rows, asked for a line a step of a tile (the widening copy then finds them in cache; a burst of
// prefetches would stall on the miss buffers).
struct Prefetch {
  const int8_t* const* rows = nullptr;  // null: none
  int n = 0;                            // rows
  int64_t dp = 0, v = 0, off = 0;       // line v, off next
  QT inline void step() {
    if (v >= n) return;
    _mm_prefetch(reinterpret_cast<const char*>(rows[v] + off), _MM_HINT_T0);
    off += 64;
    if (off == dp) off = 0, v++;
  }
};

// V widened W rows (int16 pairs wr[v]) × RB blocks of 8 packed rows: c[v][8 rb + i] = the int32 sum of W row v and
// row 8 rb + i.
template <int V, int RB>
QT void tile_rows(const uint32_t* xb, int64_t pairs, const int32_t* const* wr, int32_t* c, Prefetch& pf) {
  __m256i acc[V][RB];
  for (int v = 0; v < V; v++)
    for (int b = 0; b < RB; b++) acc[v][b] = _mm256_setzero_si256();
  for (int64_t g = 0; g < pairs; g++) {
    pf.step();
    __m256i x[RB];
    for (int b = 0; b < RB; b++) x[b] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + (b * pairs + g) * kBlockRows));
    for (int v = 0; v < V; v++) {
      int32_t pair;
      std::memcpy(&pair, wr[v] + g, 4);
      const __m256i wv = _mm256_set1_epi32(pair);
      for (int b = 0; b < RB; b++) acc[v][b] = _mm256_add_epi32(acc[v][b], _mm256_madd_epi16(x[b], wv));
    }
  }
  for (int v = 0; v < V; v++)
    for (int b = 0; b < RB; b++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + (v * RB + b) * kBlockRows), acc[v][b]);
}

// W rows per tile for RB row blocks (16 ymm registers: the accumulators, RB rows, a broadcast and a product).
template <int RB> constexpr int tile_w() { return RB == 1 ? 12 : 5; }

using TileRows = void (*)(const uint32_t*, int64_t, const int32_t* const*, int32_t*, Prefetch&);
template <int RB> QT void tile_rows_rb(const uint32_t* xb, int64_t pairs, const int32_t* const* wr, int32_t* c, Prefetch& pf) {
  tile_rows<tile_w<RB>(), RB>(xb, pairs, wr, c, pf);
}

// The blocked product of rows [r0, r0 + nr) (nr ≤ 16: one or two blocks of 8) against nw W rows: tiles of V W rows
// (widened to int16; the last tile repeating its last row), all row blocks per tile, written to out[r][j] (row stride nw);
// then the `tail` (0-2) rows after them against each tile's W rows on rows_by_4_i8, written to out[nr + t][j].
QT void row_gemm_i8(const Rows& a, int64_t r0, int64_t nr, int64_t tail, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw,
                    int32_t* out) {
  static thread_local std::vector<uint32_t> xb;
  static thread_local std::vector<int16_t> wide;
  const int64_t pairs = a.kp / 2, rb = (nr + kBlockRows - 1) / kBlockRows;
  xb.resize(static_cast<size_t>(rb * pairs * kBlockRows));
  pack_rows8(a, r0, nr, xb.data());
  static const TileRows kTiles[2] = {&tile_rows_rb<1>, &tile_rows_rb<2>};
  static constexpr int kW[2] = {tile_w<1>(), tile_w<2>()};
  const TileRows tile = kTiles[rb - 1];
  const int V = kW[rb - 1];
  alignas(32) int32_t c[12 * kBlockRows];
  wide.resize(static_cast<size_t>(V * dp));
  const int8_t* next[12];
  auto row_at = [&](int64_t j) { return w + (ids ? ids[j] : j) * dp; };
  for (int v = 0; v < V; v++) next[v] = row_at(v < nw ? v : nw - 1);
  for (int64_t j0 = 0; j0 < nw; j0 += V) {
    const int64_t nj = nw - j0 < V ? nw - j0 : V;
    const int32_t* wr[12];
    const int8_t* rows[12];
    for (int v = 0; v < V; v++) {
      const int8_t* row = rows[v] = next[v];
      int16_t* dst = wide.data() + v * dp;
      for (int64_t d = 0; d < dp; d += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + d), _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + d))));
      wr[v] = reinterpret_cast<const int32_t*>(dst);
    }
    const int64_t j1 = j0 + V;
    for (int v = 0; v < V; v++) next[v] = row_at(j1 + v < nw ? j1 + v : nw - 1);
    Prefetch pf;
    if (j1 < nw) pf = Prefetch{next, V, dp, 0, 0};
    tile(xb.data(), pairs, wr, c, pf);
    for (int64_t r = 0; r < nr; r++) {
      const int32_t* s = c + (r / kBlockRows) * kBlockRows + r % kBlockRows;
      int32_t* o = out + r * nw + j0;
      for (int64_t v = 0; v < nj; v++) o[v] = s[v * rb * kBlockRows];
    }
    // the tail rows against the same W rows while they are in cache
    if (tail) tail_rows_i8(a, r0 + nr, tail, rows, nj, dp, out + nr * nw + j0, nw);
  }
}
