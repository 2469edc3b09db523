// The AVX-512 paths' kernels, included twice by qgemm_avx512.cc: QVNNI 0 (AVX-512BW: int8 widened to int16, vpmaddwd)
// and QVNNI 1 (vpdpbusd / vpdpwssd), QT being the matching target attribute. Every function touches zmm registers.

#if QVNNI
// vpdpbusd / vpdpwssd as inline assembly: GCC 12 copies the accumulators of the intrinsics through the stack.
QT inline __m512i dpbusd(__m512i acc, __m512i u8, __m512i s8) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
  return acc;
}
QT inline __m512i dpwssd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}
#endif

// Register tiles (rows × blocks of 16 channels): int8/int16 inputs, float32 inputs.
constexpr int kRows = QVNNI ? 6 : 4, kBlocks = QVNNI ? 4 : 2;
constexpr int kFRows = 4, kFBlocks = 1;

// acc[r][16 b + c] for R rows and G blocks of int8 Wq (the int32 sums of qgemm.h DotsI32).
template <int R, int G>
QT void tile_i8(const Rows& a, const Weights& w, int64_t r0, int64_t b0, int32_t* acc, int64_t ld) {
  const int64_t kg = w.kgroups;
  const int8_t* wb[G];
  for (int b = 0; b < G; b++) wb[b] = w.w8 + (b0 + b) * kg * 64;
#if QVNNI
  __m512i c[R][G];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++) c[r][b] = _mm512_setzero_si512();
  const uint8_t* ar[R];
  for (int r = 0; r < R; r++) ar[r] = a.u8 + (r0 + r) * a.kp;
  for (int64_t g = 0; g < kg; g++) {
    __m512i wv[G];
    for (int b = 0; b < G; b++) wv[b] = _mm512_loadu_si512(wb[b] + g * 64);
    for (int r = 0; r < R; r++) {
      int32_t x;
      std::memcpy(&x, ar[r] + 4 * g, 4);
      const __m512i av = _mm512_set1_epi32(x);
      for (int b = 0; b < G; b++) c[r][b] = dpbusd(c[r][b], av, wv[b]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++) _mm512_storeu_si512(acc + r * ld + b * 16, c[r][b]);
#else
  __m512i c[R][2 * G];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < 2 * G; b++) c[r][b] = _mm512_setzero_si512();
  const int16_t* ar[R];
  for (int r = 0; r < R; r++) ar[r] = a.q16 + (r0 + r) * a.kp;
  for (int64_t g = 0; g < kg; g++) {
    __m512i lo[G], hi[G];  // channels 0-7 and 8-15, four k each, as int16
    for (int b = 0; b < G; b++) {
      lo[b] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b] + g * 64)));
      hi[b] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b] + g * 64 + 32)));
    }
    for (int r = 0; r < R; r++) {
      long long x;
      std::memcpy(&x, ar[r] + 4 * g, 8);
      const __m512i av = _mm512_set1_epi64(x);
      for (int b = 0; b < G; b++) {
        c[r][2 * b] = _mm512_add_epi32(c[r][2 * b], _mm512_madd_epi16(lo[b], av));
        c[r][2 * b + 1] = _mm512_add_epi32(c[r][2 * b + 1], _mm512_madd_epi16(hi[b], av));
      }
    }
  }
  // Lane 2c + p of lo/hi holds channel c's pair p: the even and odd lanes of both, added, are the 16 channels.
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++) {
      const __m512i s = _mm512_add_epi32(_mm512_permutex2var_epi32(c[r][2 * b], even, c[r][2 * b + 1]),
                                         _mm512_permutex2var_epi32(c[r][2 * b], odd, c[r][2 * b + 1]));
      _mm512_storeu_si512(acc + r * ld + b * 16, s);
    }
#endif
}

// The same for int16 rows and int16 Wq (two k per 32-bit lane pair).
template <int R, int G>
QT void tile_i16(const Rows& a, const Weights& w, int64_t r0, int64_t b0, int32_t* acc, int64_t ld) {
  const int64_t kg = w.kgroups;
  const int16_t* wb[G];
  for (int b = 0; b < G; b++) wb[b] = w.w16 + (b0 + b) * kg * 32;
  __m512i c[R][G];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++) c[r][b] = _mm512_setzero_si512();
  const int16_t* ar[R];
  for (int r = 0; r < R; r++) ar[r] = a.q16 + (r0 + r) * a.kp;
  for (int64_t g = 0; g < kg; g++) {
    __m512i wv[G];
    for (int b = 0; b < G; b++) wv[b] = _mm512_loadu_si512(wb[b] + g * 32);
    for (int r = 0; r < R; r++) {
      int32_t x;
      std::memcpy(&x, ar[r] + 2 * g, 4);
      const __m512i av = _mm512_set1_epi32(x);
#if QVNNI
      for (int b = 0; b < G; b++) c[r][b] = dpwssd(c[r][b], av, wv[b]);
#else
      for (int b = 0; b < G; b++) c[r][b] = _mm512_add_epi32(c[r][b], _mm512_madd_epi16(wv[b], av));
#endif
    }
  }
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++) _mm512_storeu_si512(acc + r * ld + b * 16, c[r][b]);
}

// Float32 rows against int8 Wq converted in registers: lane 4i + j of part s holds channel 4s + i, k = 4g + j.
template <int R, int G>
QT void tile_f32(const Rows& a, const Weights& w, int64_t r0, int64_t b0, float* acc, int64_t ld) {
  const int64_t kg = w.kgroups;
  const int8_t* wb[G];
  for (int b = 0; b < G; b++) wb[b] = w.w8 + (b0 + b) * kg * 64;
  __m512 c[R][G][4];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++)
      for (int s = 0; s < 4; s++) c[r][b][s] = _mm512_setzero_ps();
  const float* ar[R];
  for (int r = 0; r < R; r++) ar[r] = a.f32 + (r0 + r) * a.kp;
  for (int64_t g = 0; g < kg; g++) {
    __m512 wf[G][4];
    for (int b = 0; b < G; b++)
      for (int s = 0; s < 4; s++)
        wf[b][s] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[b] + g * 64 + 16 * s))));
    for (int r = 0; r < R; r++) {
      const __m512 av = _mm512_broadcast_f32x4(_mm_loadu_ps(ar[r] + 4 * g));
      for (int b = 0; b < G; b++)
        for (int s = 0; s < 4; s++) c[r][b][s] = _mm512_fmadd_ps(wf[b][s], av, c[r][b][s]);
    }
  }
  alignas(64) float t[16];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++)
      for (int s = 0; s < 4; s++) {
        _mm512_store_ps(t, c[r][b][s]);
        for (int i = 0; i < 4; i++) acc[r * ld + b * 16 + 4 * s + i] = (t[4 * i] + t[4 * i + 1]) + (t[4 * i + 2] + t[4 * i + 3]);
      }
}

using TileI32 = void (*)(const Rows&, const Weights&, int64_t, int64_t, int32_t*, int64_t);
using TileF32 = void (*)(const Rows&, const Weights&, int64_t, int64_t, float*, int64_t);

#if QVNNI
#define QROW(T, r) {&T<r, 1>, &T<r, 2>, &T<r, 3>, &T<r, 4>}
const TileI32 kI8[kRows][kBlocks] = {QROW(tile_i8, 1), QROW(tile_i8, 2), QROW(tile_i8, 3), QROW(tile_i8, 4), QROW(tile_i8, 5), QROW(tile_i8, 6)};
const TileI32 kI16[kRows][kBlocks] = {QROW(tile_i16, 1), QROW(tile_i16, 2), QROW(tile_i16, 3), QROW(tile_i16, 4), QROW(tile_i16, 5), QROW(tile_i16, 6)};
#else
#define QROW(T, r) {&T<r, 1>, &T<r, 2>}
const TileI32 kI8[kRows][kBlocks] = {QROW(tile_i8, 1), QROW(tile_i8, 2), QROW(tile_i8, 3), QROW(tile_i8, 4)};
const TileI32 kI16[kRows][kBlocks] = {QROW(tile_i16, 1), QROW(tile_i16, 2), QROW(tile_i16, 3), QROW(tile_i16, 4)};
#endif
#undef QROW
const TileF32 kF32[kFRows][kFBlocks] = {{&tile_f32<1, 1>}, {&tile_f32<2, 1>}, {&tile_f32<3, 1>}, {&tile_f32<4, 1>}};

void dots_i8(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  kI8[nr - 1][nb - 1](a, w, r0, b0, acc, nb * 16);
}
void dots_i16(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  kI16[nr - 1][nb - 1](a, w, r0, b0, acc, nb * 16);
}
void dots_f32(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, float* acc) {
  kF32[nr - 1][nb - 1](a, w, r0, b0, acc, nb * 16);
}

// Asks for the cache lines of the next rows (scattered ids: the stream prefetchers do not follow them).
QT inline void prefetch_rows(const int8_t* w, int64_t dp, const int32_t* ids, int64_t j, int64_t nw) {
  for (int64_t t = j; t < j + 4 && t < nw; t++) {
    const int8_t* row = w + (ids ? ids[t] : t) * dp;
    for (int64_t d = 0; d < dp; d += 64) _mm_prefetch(reinterpret_cast<const char*>(row + d), _MM_HINT_T0);
  }
}

// The four int32 (float) sums of four accumulators, in order, by a transposing tree of unpacks and adds.
QT inline __m128i sum4(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
  const __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
QT inline __m128 sum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  const __m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
  const __m512 s = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
                                 _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// The four W rows of ids j0.. (the last repeated when fewer than four remain).
inline void row_ptrs(const int8_t* w, int64_t dp, const int32_t* ids, int64_t j0, int64_t nj, const int8_t* wr[4]) {
  for (int j = 0; j < 4; j++) {
    const int64_t t = j0 + (j < nj ? j : nj - 1);
    wr[j] = w + (ids ? ids[t] : t) * dp;
  }
}

// R rows of A against four W rows: the 4R int32 dot products into out (row stride nw, nj of the four kept).
template <int R>
QT void rows_by_4_i8(const Rows& a, int64_t r0, const int8_t* const wr[4], int64_t dp, int64_t nj, int32_t* out, int64_t nw) {
  __m512i c[R][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) c[r][j] = _mm512_setzero_si512();
#if QVNNI
  const uint8_t* x[R];
  for (int r = 0; r < R; r++) x[r] = a.u8 + (r0 + r) * a.kp;
  for (int64_t d = 0; d < dp; d += 64) {
    __m512i wv[4];
    for (int j = 0; j < 4; j++) wv[j] = _mm512_loadu_si512(wr[j] + d);
    for (int r = 0; r < R; r++) {
      const __m512i av = _mm512_loadu_si512(x[r] + d);
      for (int j = 0; j < 4; j++) c[r][j] = dpbusd(c[r][j], av, wv[j]);
    }
  }
#else
  const int16_t* x[R];
  for (int r = 0; r < R; r++) x[r] = a.q16 + (r0 + r) * a.kp;
  for (int64_t d = 0; d < dp; d += 32) {
    __m512i wv[4];
    for (int j = 0; j < 4; j++) wv[j] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[j] + d)));
    for (int r = 0; r < R; r++) {
      const __m512i av = _mm512_loadu_si512(x[r] + d);
      for (int j = 0; j < 4; j++) c[r][j] = _mm512_add_epi32(c[r][j], _mm512_madd_epi16(wv[j], av));
    }
  }
#endif
  for (int r = 0; r < R; r++) {
    alignas(16) int32_t s[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(s), sum4(c[r][0], c[r][1], c[r][2], c[r][3]));
    for (int j = 0; j < nj; j++) out[r * nw + j] = s[j];
  }
}

template <int R>
QT void rows_by_4_f32(const Rows& a, int64_t r0, const int8_t* const wr[4], int64_t dp, int64_t nj, float* out, int64_t nw) {
  __m512 c[R][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) c[r][j] = _mm512_setzero_ps();
  const float* x[R];
  for (int r = 0; r < R; r++) x[r] = a.f32 + (r0 + r) * a.kp;
  for (int64_t d = 0; d < dp; d += 16) {
    __m512 wv[4];
    for (int j = 0; j < 4; j++) wv[j] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr[j] + d))));
    for (int r = 0; r < R; r++) {
      const __m512 av = _mm512_loadu_ps(x[r] + d);
      for (int j = 0; j < 4; j++) c[r][j] = _mm512_fmadd_ps(wv[j], av, c[r][j]);
    }
  }
  for (int r = 0; r < R; r++) {
    alignas(16) float s[4];
    _mm_store_ps(s, sum4(c[r][0], c[r][1], c[r][2], c[r][3]));
    for (int j = 0; j < nj; j++) out[r * nw + j] = s[j];
  }
}

// out[r][j] (row stride nw) = rows [r0, r0 + nr) of A · the int8 rows ids[j] of w [V, dp]: four W rows at a time
// (prefetching the next four), four rows of A per pass over them (then two, then one). For few rows (the path's
// row_dots_i8, qrows_avx512_body.h, takes many rows on its blocked product).
QT void row_dots_i8_by4(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, int32_t* out) {
  for (int64_t j0 = 0; j0 < nw; j0 += 4) {
    const int64_t nj = nw - j0 < 4 ? nw - j0 : 4;
    const int8_t* wr[4];
    row_ptrs(w, dp, ids, j0, nj, wr);
    prefetch_rows(w, dp, ids, j0 + 4, nw);
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4) rows_by_4_i8<4>(a, r0 + r, wr, dp, nj, out + r * nw + j0, nw);
    for (; r + 2 <= nr; r += 2) rows_by_4_i8<2>(a, r0 + r, wr, dp, nj, out + r * nw + j0, nw);
    if (r < nr) rows_by_4_i8<1>(a, r0 + r, wr, dp, nj, out + r * nw + j0, nw);
  }
}

QT void row_dots_f32(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, float* out) {
  for (int64_t j0 = 0; j0 < nw; j0 += 4) {
    const int64_t nj = nw - j0 < 4 ? nw - j0 : 4;
    const int8_t* wr[4];
    row_ptrs(w, dp, ids, j0, nj, wr);
    prefetch_rows(w, dp, ids, j0 + 4, nw);
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4) rows_by_4_f32<4>(a, r0 + r, wr, dp, nj, out + r * nw + j0, nw);
    for (; r + 2 <= nr; r += 2) rows_by_4_f32<2>(a, r0 + r, wr, dp, nj, out + r * nw + j0, nw);
    if (r < nr) rows_by_4_f32<1>(a, r0 + r, wr, dp, nj, out + r * nw + j0, nw);
  }
}
