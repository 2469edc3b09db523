// What qrows_avx2_body.h and qrows_avx512_body.h share (each includes it after its kBlockRows, kPassRows and
// kGemmMinRows; QT and rows_by_4_i8 as there): the tail rows' products within a pass, and the passes over the rows.

// Rows [r, r + tail) of A (tail 1 or 2) against the nj W rows `rows` (still in cache), four W rows at a time; out[i][v]
// (row stride nw).
QT void tail_rows_i8(const Rows& a, int64_t r, int64_t tail, const int8_t* const* rows, int64_t nj, int64_t dp, int32_t* out, int64_t nw) {
  for (int64_t q = 0; q < nj; q += 4) {
    const int64_t nq = nj - q < 4 ? nj - q : 4;
    const int8_t* w4[4];
    for (int t = 0; t < 4; t++) w4[t] = rows[q + (t < nq ? t : nq - 1)];
    if (tail == 2) rows_by_4_i8<2>(a, r, w4, dp, nq, out + q, nw);
    else rows_by_4_i8<1>(a, r, w4, dp, nq, out + q, nw);
  }
}

// One pass: rows [r0, r0 + nr) on the blocked product, then `tail` rows after them (defined by the ISA's body).
QT void row_gemm_i8(const Rows& a, int64_t r0, int64_t nr, int64_t tail, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw,
                    int32_t* out);

// out[r][j] (row stride nw) = rows [r0, r0 + nr) of A · the int8 rows ids[j] of w [V, dp]: passes of up to kPassRows
// rows on the blocked product, a last block of one or two rows on rows_by_4_i8 within the last pass (the W rows in
// cache); fewer than kGemmMinRows rows in all on row_dots_i8_by4.
QT void row_dots_i8(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, int32_t* out) {
  if (nr < kGemmMinRows || nw <= 0) {
    row_dots_i8_by4(a, r0, nr, w, dp, ids, nw, out);
    return;
  }
  const int64_t tail = nr % kBlockRows <= 2 ? nr % kBlockRows : 0, body = nr - tail;
  for (int64_t r = 0; r < body; r += kPassRows) {
    const int64_t n = body - r < kPassRows ? body - r : kPassRows;
    row_gemm_i8(a, r0 + r, n, r + n == body ? tail : 0, w, dp, ids, nw, out + r * nw);
  }
}
