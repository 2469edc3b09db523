// The 256-bit paths' kernels, included twice by qgemm_avx2.cc: QVNNI 0 (AVX2: int8 widened to int16, vpmaddwd) and
// QVNNI 1 (AVX-VNNI: vpdpbusd / vpdpwssd), QT being the matching target attribute.

#if QVNNI
// vpdpbusd / vpdpwssd in their VEX (AVX-VNNI) encoding, as inline assembly: registers ymm0-15 only ("x"); GCC 12
// copies the accumulators of the intrinsics through the stack.
QT inline __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) {
  asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "x"(s8));
  return acc;
}
QT inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b) {
  asm("%{vex%} vpdpwssd %2, %1, %0" : "+x"(acc) : "x"(a), "x"(b));
  return acc;
}
#endif

// Register tiles (rows × blocks of 16 channels) for int8/int16 inputs and for float32 inputs (16 ymm registers).
constexpr int kRows = 2, kBlocks = QVNNI ? 2 : 1;
constexpr int kFRows = 1, kFBlocks = 1;

template <int R, int G>
QT void tile_i8(const Rows& a, const Weights& w, int64_t r0, int64_t b0, int32_t* acc, int64_t ld) {
  const int64_t kg = w.kgroups;
  const int8_t* wb[G];
  for (int b = 0; b < G; b++) wb[b] = w.w8 + (b0 + b) * kg * 64;
#if QVNNI
  __m256i c[R][2 * G];  // channels 0-7 and 8-15 of each block
  for (int r = 0; r < R; r++)
    for (int b = 0; b < 2 * G; b++) c[r][b] = _mm256_setzero_si256();
  const uint8_t* ar[R];
  for (int r = 0; r < R; r++) ar[r] = a.u8 + (r0 + r) * a.kp;
  for (int64_t g = 0; g < kg; g++) {
    __m256i wv[2 * G];
    for (int b = 0; b < 2 * G; b++) wv[b] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b / 2] + g * 64 + 32 * (b % 2)));
    for (int r = 0; r < R; r++) {
      int32_t x;
      std::memcpy(&x, ar[r] + 4 * g, 4);
      const __m256i av = _mm256_set1_epi32(x);
      for (int b = 0; b < 2 * G; b++) c[r][b] = dpbusd(c[r][b], av, wv[b]);
    }
  }
  for (int r = 0; r < R; r++)
    for (int b = 0; b < 2 * G; b++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + r * ld + b * 8), c[r][b]);
#else
  __m256i c[R][4 * G];  // part s: channels 4s..4s+3, lane 2i + p = channel 4s + i, pair p
  for (int r = 0; r < R; r++)
    for (int b = 0; b < 4 * G; b++) c[r][b] = _mm256_setzero_si256();
  const int16_t* ar[R];
  for (int r = 0; r < R; r++) ar[r] = a.q16 + (r0 + r) * a.kp;
  for (int64_t g = 0; g < kg; g++) {
    __m256i wv[4 * G];
    for (int b = 0; b < 4 * G; b++)
      wv[b] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[b / 4] + g * 64 + 16 * (b % 4))));
    for (int r = 0; r < R; r++) {
      long long x;
      std::memcpy(&x, ar[r] + 4 * g, 8);
      const __m256i av = _mm256_set1_epi64x(x);
      for (int b = 0; b < 4 * G; b++) c[r][b] = _mm256_add_epi32(c[r][b], _mm256_madd_epi16(wv[b], av));
    }
  }
  for (int r = 0; r < R; r++)
    for (int b = 0; b < 4 * G; b += 2) {
      // hadd of parts b, b+1 gives channels (4b', 4b'+1, 4b'+4, 4b'+5 | 4b'+2, 4b'+3, 4b'+6, 4b'+7); reorder the quads.
      const __m256i s = _mm256_permute4x64_epi64(_mm256_hadd_epi32(c[r][b], c[r][b + 1]), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + r * ld + b * 4), s);
    }
#endif
}

template <int R, int G>
QT void tile_i16(const Rows& a, const Weights& w, int64_t r0, int64_t b0, int32_t* acc, int64_t ld) {
  const int64_t kg = w.kgroups;
  const int16_t* wb[G];
  for (int b = 0; b < G; b++) wb[b] = w.w16 + (b0 + b) * kg * 32;
  __m256i c[R][2 * G];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < 2 * G; b++) c[r][b] = _mm256_setzero_si256();
  const int16_t* ar[R];
  for (int r = 0; r < R; r++) ar[r] = a.q16 + (r0 + r) * a.kp;
  for (int64_t g = 0; g < kg; g++) {
    __m256i wv[2 * G];
    for (int b = 0; b < 2 * G; b++) wv[b] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b / 2] + g * 32 + 16 * (b % 2)));
    for (int r = 0; r < R; r++) {
      int32_t x;
      std::memcpy(&x, ar[r] + 2 * g, 4);
      const __m256i av = _mm256_set1_epi32(x);
#if QVNNI
      for (int b = 0; b < 2 * G; b++) c[r][b] = dpwssd(c[r][b], av, wv[b]);
#else
      for (int b = 0; b < 2 * G; b++) c[r][b] = _mm256_add_epi32(c[r][b], _mm256_madd_epi16(wv[b], av));
#endif
    }
  }
  for (int r = 0; r < R; r++)
    for (int b = 0; b < 2 * G; b++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + r * ld + b * 8), c[r][b]);
}

// Float32 rows: part s holds channels 2s, 2s+1 (lane 4i + j: channel 2s + i, k = 4g + j).
template <int R, int G>
QT void tile_f32(const Rows& a, const Weights& w, int64_t r0, int64_t b0, float* acc, int64_t ld) {
  const int64_t kg = w.kgroups;
  const int8_t* wb[G];
  for (int b = 0; b < G; b++) wb[b] = w.w8 + (b0 + b) * kg * 64;
  __m256 c[R][G][8];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++)
      for (int s = 0; s < 8; s++) c[r][b][s] = _mm256_setzero_ps();
  const float* ar[R];
  for (int r = 0; r < R; r++) ar[r] = a.f32 + (r0 + r) * a.kp;
  for (int64_t g = 0; g < kg; g++) {
    __m256 av[R];
    for (int r = 0; r < R; r++) av[r] = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(ar[r] + 4 * g));
    for (int b = 0; b < G; b++)
      for (int s = 0; s < 8; s++) {
        const __m256 wf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wb[b] + g * 64 + 8 * s))));
        for (int r = 0; r < R; r++) c[r][b][s] = _mm256_fmadd_ps(wf, av[r], c[r][b][s]);
      }
  }
  alignas(32) float t[8];
  for (int r = 0; r < R; r++)
    for (int b = 0; b < G; b++)
      for (int s = 0; s < 8; s++) {
        _mm256_store_ps(t, c[r][b][s]);
        for (int i = 0; i < 2; i++) acc[r * ld + b * 16 + 2 * s + i] = (t[4 * i] + t[4 * i + 1]) + (t[4 * i + 2] + t[4 * i + 3]);
      }
}

using TileI32 = void (*)(const Rows&, const Weights&, int64_t, int64_t, int32_t*, int64_t);
using TileF32 = void (*)(const Rows&, const Weights&, int64_t, int64_t, float*, int64_t);

#if QVNNI
const TileI32 kI8[kRows][kBlocks] = {{&tile_i8<1, 1>, &tile_i8<1, 2>}, {&tile_i8<2, 1>, &tile_i8<2, 2>}};
const TileI32 kI16[kRows][kBlocks] = {{&tile_i16<1, 1>, &tile_i16<1, 2>}, {&tile_i16<2, 1>, &tile_i16<2, 2>}};
#else
const TileI32 kI8[kRows][kBlocks] = {{&tile_i8<1, 1>}, {&tile_i8<2, 1>}};
const TileI32 kI16[kRows][kBlocks] = {{&tile_i16<1, 1>}, {&tile_i16<2, 1>}};
#endif
const TileF32 kF32[kFRows][kFBlocks] = {{&tile_f32<1, 1>}};

void dots_i8(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  kI8[nr - 1][nb - 1](a, w, r0, b0, acc, nb * 16);
}
void dots_i16(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  kI16[nr - 1][nb - 1](a, w, r0, b0, acc, nb * 16);
}
void dots_f32(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, float* acc) {
  kF32[nr - 1][nb - 1](a, w, r0, b0, acc, nb * 16);
}

QT inline void prefetch_rows(const int8_t* w, int64_t dp, const int32_t* ids, int64_t j, int64_t nw) {
  for (int64_t t = j; t < j + 4 && t < nw; t++) {
    const int8_t* row = w + (ids ? ids[t] : t) * dp;
    for (int64_t d = 0; d < dp; d += 64) _mm_prefetch(reinterpret_cast<const char*>(row + d), _MM_HINT_T0);
  }
}

// The four int32 (float) sums of four accumulators, in order: a tree of horizontal adds.
QT inline __m128i sum4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
QT inline __m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// The four W rows of ids j0.. (the last repeated when fewer than four remain).
inline void row_ptrs(const int8_t* w, int64_t dp, const int32_t* ids, int64_t j0, int64_t nj, const int8_t* wr[4]) {
  for (int j = 0; j < 4; j++) {
    const int64_t t = j0 + (j < nj ? j : nj - 1);
    wr[j] = w + (ids ? ids[t] : t) * dp;
  }
}

// R rows of A against four W rows: the 4R dot products into out (row stride nw, nj of the four kept).
template <int R>
QT void rows_by_4_i8(const Rows& a, int64_t r0, const int8_t* const wr[4], int64_t dp, int64_t nj, int32_t* out, int64_t nw) {
  __m256i c[R][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) c[r][j] = _mm256_setzero_si256();
#if QVNNI
  const uint8_t* x[R];
  for (int r = 0; r < R; r++) x[r] = a.u8 + (r0 + r) * a.kp;
  for (int64_t d = 0; d < dp; d += 32) {
    __m256i wv[4];
    for (int j = 0; j < 4; j++) wv[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr[j] + d));
    for (int r = 0; r < R; r++) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r] + d));
      for (int j = 0; j < 4; j++) c[r][j] = dpbusd(c[r][j], av, wv[j]);
    }
  }
#else
  const int16_t* x[R];
  for (int r = 0; r < R; r++) x[r] = a.q16 + (r0 + r) * a.kp;
  for (int64_t d = 0; d < dp; d += 16) {
    __m256i wv[4];
    for (int j = 0; j < 4; j++) wv[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr[j] + d)));
    for (int r = 0; r < R; r++) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[r] + d));
      for (int j = 0; j < 4; j++) c[r][j] = _mm256_add_epi32(c[r][j], _mm256_madd_epi16(wv[j], av));
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
  __m256 c[R][4];
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 4; j++) c[r][j] = _mm256_setzero_ps();
  const float* x[R];
  for (int r = 0; r < R; r++) x[r] = a.f32 + (r0 + r) * a.kp;
  for (int64_t d = 0; d < dp; d += 8) {
    __m256 wv[4];
    for (int j = 0; j < 4; j++)
      wv[j] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wr[j] + d))));
    for (int r = 0; r < R; r++) {
      const __m256 av = _mm256_loadu_ps(x[r] + d);
      for (int j = 0; j < 4; j++) c[r][j] = _mm256_fmadd_ps(wv[j], av, c[r][j]);
    }
  }
  for (int r = 0; r < R; r++) {
    alignas(16) float s[4];
    _mm_store_ps(s, sum4(c[r][0], c[r][1], c[r][2], c[r][3]));
    for (int j = 0; j < nj; j++) out[r * nw + j] = s[j];
  }
}

// out[r][j] (row stride nw) = rows [r0, r0 + nr) of A · the int8 rows ids[j] of w [V, dp]: four W rows at a time
// (prefetching the next four), two rows of A per pass over them. All rows on avxvnni; few rows on avx2 (its
// row_dots_i8, qrows_avx2_body.h, takes many rows on a blocked product).
QT void row_dots_i8_by4(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, int32_t* out) {
  for (int64_t j0 = 0; j0 < nw; j0 += 4) {
    const int64_t nj = nw - j0 < 4 ? nw - j0 : 4;
    const int8_t* wr[4];
    row_ptrs(w, dp, ids, j0, nj, wr);
    prefetch_rows(w, dp, ids, j0 + 4, nw);
    int64_t r = 0;
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
    for (; r + 2 <= nr; r += 2) rows_by_4_f32<2>(a, r0 + r, wr, dp, nj, out + r * nw + j0, nw);
    if (r < nr) rows_by_4_f32<1>(a, r0 + r, wr, dp, nj, out + r * nw + j0, nw);
  }
}
