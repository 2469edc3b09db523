// qproject_topk's row products at many rows on AVX-512 (included by qgemm_avx512.cc after qgemm_avx512_body.h, QVNNI
// and QT as there): a register-blocked GEMM, the rows of A packed per block of 8 (a row's two consecutive words of k
// per lane pair) and two words of each W row broadcast to them; fewer rows stay on row_dots_i8_by4. The same int32
// sums as every path.

// Rows per block (each zmm: 8 rows × two words of k, lanes 2i and 2i + 1 row i's words 2h and 2h + 1), the most rows
// per pass over a tile of W (four blocks), and the fewest rows the blocked product takes (below: row_dots_i8_by4).
constexpr int64_t kBlockRows = 8, kPassRows = 32, kGemmMinRows = 8;

#include "qrows_common_body.h"

// 32-bit words per row of A in the form the path reads (VNNI: u8 quads; BW: int16 pairs); a multiple of 16 (kp is a
// multiple of 64 in qproject_topk).
inline int64_t row_words(int64_t kp) { return QVNNI ? kp / 4 : kp / 2; }

// Rows [r0, r0 + nr) of A packed in blocks of 8: xb[((b · words / 2 + h) · 8 + i) · 2 + e] = word 2h + e of row 8b + i
// (zero past nr).
QT void pack_rows8(const Rows& a, int64_t r0, int64_t nr, uint32_t* xb) {
  const int64_t words = row_words(a.kp), blocks = (nr + kBlockRows - 1) / kBlockRows;
  for (int64_t b = 0; b < blocks; b++) {
    uint32_t* dst = xb + b * words * kBlockRows;
    for (int64_t i = 0; i < kBlockRows; i++) {
      const int64_t r = b * kBlockRows + i;
      if (r >= nr) {
        for (int64_t h = 0; h < words / 2; h++) std::memset(dst + (h * kBlockRows + i) * 2, 0, 8);
        continue;
      }
#if QVNNI
      const char* src = reinterpret_cast<const char*>(a.u8 + (r0 + r) * a.kp);
#else
      const char* src = reinterpret_cast<const char*>(a.q16 + (r0 + r) * a.kp);
#endif
      for (int64_t h = 0; h < words / 2; h++) std::memcpy(dst + (h * kBlockRows + i) * 2, src + 8 * h, 8);
    }
  }
}

// The next tile's W rows, asked for a line or two per step of a tile (a burst of them would stall on the miss buffers;
// twelve rows advancing a few bytes a step are more streams than the hardware prefetchers follow).
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

// V W rows (word pointers wr[v], VNNI: int8 quads; BW: int16 pairs) × RB blocks of 8 packed rows over `words` words:
// out[r][v] (row stride nw; rows r < nr, columns v < nj) = the int32 sum of W row v and row r (its two lanes added,
// wrapping as the instructions do).
template <int V, int RB>
QT void tile_rows(const uint32_t* xb, int64_t words, const int32_t* const* wr, Prefetch& pf, int32_t* out, int64_t nw, int64_t nr,
                  int64_t nj) {
  static_assert(V % 2 == 0, "W rows in pairs");
  __m512i acc[V][RB];
  for (int v = 0; v < V; v++)
    for (int b = 0; b < RB; b++) acc[v][b] = _mm512_setzero_si512();
  const int64_t half = words / 2;
  for (int64_t h = 0; h < half; h++) {
    pf.step();
    if (QVNNI && V > 8) pf.step();  // VNNI: V / 8 lines a step (BW: V / 16)
    __m512i x[RB];
    for (int b = 0; b < RB; b++) x[b] = _mm512_loadu_si512(xb + (b * half + h) * 16);
    for (int v = 0; v < V; v++) {
      long long pair;
      std::memcpy(&pair, wr[v] + 2 * h, 8);
      const __m512i wv = _mm512_set1_epi64(pair);  // words 2h, 2h + 1 of W row v in every lane pair
      for (int b = 0; b < RB; b++)
#if QVNNI
        acc[v][b] = dpbusd(acc[v][b], x[b], wv);
#else
        acc[v][b] = _mm512_add_epi32(acc[v][b], _mm512_madd_epi16(x[b], wv));
#endif
    }
  }
  // Per block: each 64-bit lane i of t[p] = row i's sums with W rows 2p and 2p + 1 (lane pairs added), then each row's
  // V sums copied out eight bytes at a time.
  alignas(64) int64_t t[V / 2][8];
  for (int b = 0; b < RB; b++) {
    for (int p = 0; p < V / 2; p++) {
      const __m512i e = _mm512_add_epi32(acc[2 * p][b], _mm512_srli_epi64(acc[2 * p][b], 32));
      const __m512i o = _mm512_add_epi32(acc[2 * p + 1][b], _mm512_slli_epi64(acc[2 * p + 1][b], 32));
      _mm512_store_si512(t[p], _mm512_mask_blend_epi32(0xAAAA, e, o));
    }
    const int64_t rows = nr - 8 * b < 8 ? nr - 8 * b : 8;
    for (int64_t i = 0; i < rows; i++) {
      int32_t* o = out + (8 * b + i) * nw;
      if (nj == V) {
        for (int p = 0; p < V / 2; p++) std::memcpy(o + 2 * p, &t[p][i], 8);
      } else {
        for (int64_t v = 0; v < nj; v++) std::memcpy(o + v, reinterpret_cast<const int32_t*>(&t[v / 2][i]) + v % 2, 4);
      }
    }
  }
}

// W rows per tile for RB row blocks: 16 to 24 accumulators, enough to hide the multiply-add latency.
template <int RB> constexpr int tile_w() { return RB == 1 ? 16 : RB == 2 ? 12 : RB == 3 ? 8 : 6; }

using TileRows = void (*)(const uint32_t*, int64_t, const int32_t* const*, Prefetch&, int32_t*, int64_t, int64_t, int64_t);
template <int RB>
QT void tile_rows_rb(const uint32_t* xb, int64_t words, const int32_t* const* wr, Prefetch& pf, int32_t* out, int64_t nw, int64_t nr, int64_t nj) {
  tile_rows<tile_w<RB>(), RB>(xb, words, wr, pf, out, nw, nr, nj);
}

// The blocked product of rows [r0, r0 + nr) (nr ≤ 32: up to four blocks of 8) against nw W rows: tiles of V W rows
// (the last repeating its last row), all row blocks per tile, written to out[r][j] (row stride nw); then the `tail`
// (0-2) rows after them against each tile's W rows on rows_by_4_i8, written to out[nr + t][j].
QT void row_gemm_i8(const Rows& a, int64_t r0, int64_t nr, int64_t tail, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw,
                    int32_t* out) {
  static thread_local std::vector<uint32_t> xb;
#if !QVNNI
  static thread_local std::vector<int16_t> wide;  // the tile's W rows widened to int16
#endif
  const int64_t words = row_words(a.kp), rb = (nr + kBlockRows - 1) / kBlockRows;
  xb.resize(static_cast<size_t>(rb * words * kBlockRows));
  pack_rows8(a, r0, nr, xb.data());
  static const TileRows kTiles[4] = {&tile_rows_rb<1>, &tile_rows_rb<2>, &tile_rows_rb<3>, &tile_rows_rb<4>};
  static constexpr int kW[4] = {tile_w<1>(), tile_w<2>(), tile_w<3>(), tile_w<4>()};
  const TileRows tile = kTiles[rb - 1];
  const int V = kW[rb - 1];
  const int8_t* rows[16];
  const int8_t* next[16];
  auto row_at = [&](int64_t j) { return w + (ids ? ids[j] : j) * dp; };
  for (int v = 0; v < V; v++) next[v] = row_at(v < nw ? v : nw - 1);
#if !QVNNI
  wide.resize(static_cast<size_t>(V * dp));
#endif
  for (int64_t j0 = 0; j0 < nw; j0 += V) {
    const int64_t nj = nw - j0 < V ? nw - j0 : V;
    for (int v = 0; v < V; v++) rows[v] = next[v];
    const int64_t j1 = j0 + V;
    for (int v = 0; v < V; v++) next[v] = row_at(j1 + v < nw ? j1 + v : nw - 1);
    Prefetch pf;
    if (j1 < nw) pf = Prefetch{next, V, dp, 0, 0};
    const int32_t* wr[16];
#if QVNNI
    for (int v = 0; v < V; v++) wr[v] = reinterpret_cast<const int32_t*>(rows[v]);
#else
    for (int v = 0; v < V; v++) {
      int16_t* dst = wide.data() + v * dp;
      for (int64_t d = 0; d < dp; d += 32)
        _mm512_storeu_si512(dst + d, _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[v] + d))));
      wr[v] = reinterpret_cast<const int32_t*>(dst);
    }
#endif
    tile(xb.data(), words, wr, pf, out + j0, nw, nr, nj);
    // the tail rows against the same W rows while they are in cache
    if (tail) tail_rows_i8(a, r0 + nr, tail, rows, nj, dp, out + nr * nw + j0, nw);
  }
}
