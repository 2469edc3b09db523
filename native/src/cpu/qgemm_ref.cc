// The portable scalar path of the quantized products (variant ref): the sums every vector path must reproduce.
#include <cstdint>

#include "qgemm.h"

namespace planc {
namespace qgemm {
namespace {

// Wq(k, channel c of block b) of the packed int8 / int16 layouts (qgemm.h Weights).
inline int32_t w8_at(const Weights& w, int64_t b, int64_t k, int64_t c) { return w.w8[(b * w.kgroups + k / 4) * 64 + c * 4 + k % 4]; }
inline int32_t w16_at(const Weights& w, int64_t b, int64_t k, int64_t c) { return w.w16[(b * w.kgroups + k / 2) * 32 + c * 2 + k % 2]; }

// Int32 sums in unsigned arithmetic: they wrap modulo 2^32 as the vector instructions do.
void dots_i8(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  const int64_t ld = nb * kBlock;
  for (int64_t r = 0; r < nr; r++) {
    const int8_t* q = a.q8 + (r0 + r) * a.kp;
    for (int64_t b = 0; b < nb; b++)
      for (int64_t c = 0; c < kBlock; c++) {
        uint32_t s = 0;
        for (int64_t k = 0; k < a.kp; k++) s += static_cast<uint32_t>(static_cast<int32_t>(q[k]) * w8_at(w, b0 + b, k, c));
        acc[r * ld + b * kBlock + c] = static_cast<int32_t>(s);
      }
  }
}

void dots_i16(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  const int64_t ld = nb * kBlock;
  for (int64_t r = 0; r < nr; r++) {
    const int16_t* q = a.q16 + (r0 + r) * a.kp;
    for (int64_t b = 0; b < nb; b++)
      for (int64_t c = 0; c < kBlock; c++) {
        uint32_t s = 0;
        for (int64_t k = 0; k < a.kp; k++) {
          const int64_t p = static_cast<int64_t>(q[k]) * w16_at(w, b0 + b, k, c);  // -32768² does not fit int32
          s += static_cast<uint32_t>(p);
        }
        acc[r * ld + b * kBlock + c] = static_cast<int32_t>(s);
      }
  }
}

void dots_f32(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, float* acc) {
  const int64_t ld = nb * kBlock;
  for (int64_t r = 0; r < nr; r++) {
    const float* x = a.f32 + (r0 + r) * a.kp;
    for (int64_t b = 0; b < nb; b++)
      for (int64_t c = 0; c < kBlock; c++) {
        float s = 0;
        for (int64_t k = 0; k < a.kp; k++) s += x[k] * static_cast<float>(w8_at(w, b0 + b, k, c));
        acc[r * ld + b * kBlock + c] = s;
      }
  }
}

void row_dots_i8(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, int32_t* out) {
  for (int64_t r = 0; r < nr; r++) {
    const int8_t* q = a.q8 + (r0 + r) * a.kp;
    for (int64_t j = 0; j < nw; j++) {
      const int8_t* row = w + (ids ? ids[j] : j) * dp;
      uint32_t s = 0;
      for (int64_t d = 0; d < dp; d++) s += static_cast<uint32_t>(static_cast<int32_t>(q[d]) * row[d]);
      out[r * nw + j] = static_cast<int32_t>(s);
    }
  }
}

void row_dots_f32(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, float* out) {
  for (int64_t r = 0; r < nr; r++) {
    const float* x = a.f32 + (r0 + r) * a.kp;
    for (int64_t j = 0; j < nw; j++) {
      const int8_t* row = w + (ids ? ids[j] : j) * dp;
      float s = 0;
      for (int64_t d = 0; d < dp; d++) s += x[d] * static_cast<float>(row[d]);
      out[r * nw + j] = s;
    }
  }
}

const Path kRef = {"ref", false, 4, 1, 4, 1, dots_i8, dots_i16, dots_f32, row_dots_i8, row_dots_f32};

}  // namespace

const Path* ref_path() { return &kRef; }

}  // namespace qgemm
}  // namespace planc
