// qproject_topk's row products at many rows on AVX-512 (included by qgemm_avx512.cc after qgemm_avx512_body.h, QVNNI
// and QT as there): a register-blocked GEMM, the rows of A packed per block of 16 (one row per 32-bit lane) and each W
// row's k-group broadcast to them; fewer rows stay on row_dots_i8_by4. The same int32 sums as every path.

// Rows per 32-bit lane block, and the fewest rows the blocked product takes (below: four W rows × a few A rows).
constexpr int64_t kLanes = 16;
constexpr int64_t kGemmMinRows = 8;

// 32-bit words per row of A in the form the path reads (VNNI: u8 quads; BW: int16 pairs).
inline int64_t row_words(int64_t kp) { return QVNNI ? kp / 4 : kp / 2; }

// Rows [r0, r0 + nr) of A packed in blocks of 16: xb[(b · words + g) · 16 + i] = word g of row 16 b + i (zero past nr).
QT void pack_rows16(const Rows& a, int64_t r0, int64_t nr, uint32_t* xb) {
  const int64_t words = row_words(a.kp), blocks = (nr + kLanes - 1) / kLanes;
  for (int64_t b = 0; b < blocks; b++) {
    uint32_t* dst = xb + b * words * kLanes;
    for (int64_t i = 0; i < kLanes; i++) {
      const int64_t r = b * kLanes + i;
      if (r >= nr) {
        for (int64_t g = 0; g < words; g++) dst[g * kLanes + i] = 0;
        continue;
      }
#if QVNNI
      const void* src = a.u8 + (r0 + r) * a.kp;
#else
      const void* src = a.q16 + (r0 + r) * a.kp;
#endif
      const uint32_t* s = static_cast<const uint32_t*>(src);
      for (int64_t g = 0; g < words; g++) dst[g * kLanes + i] = s[g];
    }
  }
}

#if QVNNI
// acc += Σ over the four bytes of each lane of x (u8) · the broadcast word at p (s8): vpdpbusd with an embedded
// broadcast, as inline assembly (GCC 12 copies the accumulators of the intrinsics through the stack, and of an "m"
// operand's too). The word is read through a register operand: nothing writes W while the kernels run.
QT inline __m512i dpbusd_bcast(__m512i acc, __m512i x, const int32_t* p) {
  asm("vpdpbusd (%2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(x), "r"(p));
  return acc;
}
#endif

// V W rows (word pointers wr[v], VNNI: int8 quads; BW: int16 pairs) × RB blocks of 16 packed rows over `words` words:
// c[v][16 rb + i] = the int32 sum of W row v and row 16 rb + i.
template <int V, int RB>
QT void tile_rows(const uint32_t* xb, int64_t words, const int32_t* const wr[V], int32_t* c) {
  __m512i acc[V][RB];
  for (int v = 0; v < V; v++)
    for (int b = 0; b < RB; b++) acc[v][b] = _mm512_setzero_si512();
  for (int64_t g = 0; g < words; g++) {
    __m512i x[RB];
    for (int b = 0; b < RB; b++) x[b] = _mm512_loadu_si512(xb + (b * words + g) * kLanes);
    for (int v = 0; v < V; v++) {
#if QVNNI
      if (RB == 1) {  // the broadcast embedded in the multiply-add
        acc[v][0] = dpbusd_bcast(acc[v][0], x[0], wr[v] + g);
        continue;
      }
      const __m512i wv = _mm512_set1_epi32(wr[v][g]);  // one broadcast for the RB blocks
      for (int b = 0; b < RB; b++) acc[v][b] = dpbusd(acc[v][b], x[b], wv);
#else
      const __m512i wv = _mm512_set1_epi32(wr[v][g]);
      for (int b = 0; b < RB; b++) acc[v][b] = _mm512_add_epi32(acc[v][b], _mm512_madd_epi16(x[b], wv));
#endif
    }
  }
  for (int v = 0; v < V; v++)
    for (int b = 0; b < RB; b++) _mm512_storeu_si512(c + (v * RB + b) * kLanes, acc[v][b]);
}

// W rows per tile for RB row blocks: 16 to 24 accumulators, enough to hide the multiply-add latency.
template <int RB> constexpr int tile_w() { return RB == 1 ? 16 : RB == 2 ? 8 : RB == 3 ? 6 : 4; }

using TileRows = void (*)(const uint32_t*, int64_t, const int32_t* const*, int32_t*);
template <int RB> QT void tile_rows_rb(const uint32_t* xb, int64_t words, const int32_t* const* wr, int32_t* c) {
  tile_rows<tile_w<RB>(), RB>(xb, words, wr, c);
}

// Asks for the cache lines of W rows (the next tile's, while this one runs).
QT inline void prefetch_w(const int8_t* const* rows, int n, int64_t dp) {
  for (int v = 0; v < n; v++)
    for (int64_t d = 0; d < dp; d += 64) _mm_prefetch(reinterpret_cast<const char*>(rows[v] + d), _MM_HINT_T0);
}

// The blocked product of rows [r0, r0 + nr) (nr ≤ 64: up to four blocks of 16) against nw W rows: tiles of V W rows
// (the last repeating its last row), all row blocks per tile, written to out[r][j] (row stride nw).
QT void row_gemm_i8(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, int32_t* out) {
  static thread_local std::vector<uint32_t> xb;
#if !QVNNI
  static thread_local std::vector<int16_t> wide;  // the tile's W rows widened to int16
#endif
  const int64_t words = row_words(a.kp), rb = (nr + kLanes - 1) / kLanes;
  xb.resize(static_cast<size_t>(rb * words * kLanes));
  pack_rows16(a, r0, nr, xb.data());
  static const TileRows kTiles[4] = {&tile_rows_rb<1>, &tile_rows_rb<2>, &tile_rows_rb<3>, &tile_rows_rb<4>};
  static constexpr int kW[4] = {tile_w<1>(), tile_w<2>(), tile_w<3>(), tile_w<4>()};
  const TileRows tile = kTiles[rb - 1];
  const int V = kW[rb - 1];
  alignas(64) int32_t c[16 * 4 * kLanes];
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
    if (ids && j1 < nw) prefetch_w(next, V, dp);
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
    tile(xb.data(), words, wr, c);
    for (int64_t r = 0; r < nr; r++) {
      const int32_t* s = c + (r / kLanes) * kLanes + r % kLanes;
      int32_t* o = out + r * nw + j0;
      for (int64_t v = 0; v < nj; v++) o[v] = s[v * rb * kLanes];
    }
  }
}

// out[r][j] (row stride nw) = rows [r0, r0 + nr) of A · the int8 rows ids[j] of w [V, dp]: blocks of up to 64 rows on
// the blocked product (a last block of at most four rows, and fewer than eight rows in all, on row_dots_i8_by4).
QT void row_dots_i8(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, int32_t* out) {
  if (nr < kGemmMinRows || nw <= 0) {
    row_dots_i8_by4(a, r0, nr, w, dp, ids, nw, out);
    return;
  }
  const int64_t tail = nr % kLanes <= 4 ? nr % kLanes : 0, body = nr - tail;
  for (int64_t r = 0; r < body; r += 4 * kLanes) {
    const int64_t n = body - r < 4 * kLanes ? body - r : 4 * kLanes;
    row_gemm_i8(a, r0 + r, n, w, dp, ids, nw, out + r * nw);
  }
  if (tail) row_dots_i8_by4(a, r0 + body, tail, w, dp, ids, nw, out + body * nw);
}
