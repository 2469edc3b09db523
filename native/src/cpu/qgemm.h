// The quantized products' paths (qgemm_ref.cc, qgemm_avx2.cc, qgemm_avx512.cc, qgemm_amx.cc): int32 (or float) dot
// products of rows of A against blocks of 16 output channels of a packed Wq; quantize_rows.cc quantizes A, qgemm.cc
// dispatches, qgemm_epilogue.cc applies the epilogue.
#pragma once
#include <cstdint>
#include <vector>

#include "../kernel.h"

namespace planc {
namespace qgemm {

constexpr int64_t kBlock = 16;  // output channels per packed block of Wq
// A vocabulary table's residual plane refines each int8 step into this many (compiler/quant/pack.ts RESIDUAL_STEPS):
// a 12-bit row is (kResidualSteps · q + r) · s / kResidualSteps, r a 4-bit two's complement nibble.
constexpr int kResidualSteps = 15;
// Value d of a residual row (two per byte, low nibble first), sign-extended.
inline int residual_at(const uint8_t* row, int64_t d) { return (((row[d >> 1] >> ((d & 1) * 4)) & 15) ^ 8) - 8; }

// Rows of A in the forms the paths read, each [m, kp] row-major, zero padded from K to kp:
// int8 input: q8 (signed, ref), u8 (q + 128: the vpdpbusd paths), q16 (q widened: the vpmaddwd paths);
// int16 input: q16; float32 input: f32. Only the form the chosen path reads is filled.
struct Rows {
  int64_t m = 0, kp = 0;
  const int8_t* q8 = nullptr;
  const uint8_t* u8 = nullptr;
  const int16_t* q16 = nullptr;
  const float* f32 = nullptr;
};

// Packed Wq: int8 [blocks, kp / 4, 16, 4] or int16 [blocks, kp / 2, 16, 2] (64 bytes per k-group of a block).
struct Weights {
  const int8_t* w8 = nullptr;
  const int16_t* w16 = nullptr;
  int64_t blocks = 0, kgroups = 0;  // ceil(N / 16); kp / 4 (int8) or kp / 2 (int16)
  const void* block(int64_t b) const { return w8 ? static_cast<const void*>(w8 + b * kgroups * 64) : static_cast<const void*>(w16 + b * kgroups * 32); }
};

// acc [nr, nb · 16] (row stride nb · 16) = rows [r0, r0 + nr) of A · blocks [b0, b0 + nb) of Wq, for nr ≤ rows and
// nb ≤ blocks of the path's tile. Int8 input on vpdpbusd paths: Σ (q + 128) · w (qgemm.cc subtracts 128 · w_sum).
// Sums never wrap: int16 operands are bounded by int16_limit(K).
using DotsI32 = void (*)(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc);
using DotsF32 = void (*)(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, float* acc);

// The dot products of rows [r0, r0 + nr) of A (a.kp == dp, a multiple of 64) against nw rows of an int8 [V, dp] matrix
// (qproject_topk): out[r][j] (row stride nw) = Σ_d a[r][d] · w[id_j][d], id_j = ids[j] (ids null: j); the same A
// forms and offsets as the matmul paths.
using RowDotsI32 = void (*)(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, int32_t* out);
using RowDotsF32 = void (*)(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, float* out);

// One path: its kernels, the A form its int8 kernels read, and its register tile (rows × blocks).
struct Path {
  const char* name;
  bool unsigned_a;  // int8 input read as u8 (q + 128)
  int rows, blocks;  // the int8/int16 tile
  int f32_rows, f32_blocks;  // the float32-input tile
  DotsI32 dots_i8, dots_i16;
  DotsF32 dots_f32;
  RowDotsI32 row_dots_i8;
  RowDotsF32 row_dots_f32;
};

// The paths by variant code (compiler/kernel-schema.ts QGEMM_VARIANTS); null where this build or CPU lacks one.
const Path* ref_path();
const Path* avx2_path();        // AVX2 + FMA
const Path* avxvnni_path();     // AVX2 + AVX-VNNI
const Path* avx512bw_path();    // AVX-512 F/BW/VL
const Path* avx512vnni_path();  // AVX-512 F/BW/VL + VNNI
const Path* amx_path();         // AMX-TILE + AMX-INT8 (int8 inputs; the rest on avx512vnni's kernels)
// Why this CPU, OS or build cannot run AMX tiles (nullptr: it can; the first call asks Linux for the tile state).
const char* amx_unavailable();

// Why this machine cannot run a variant of qmatmul / qproject_topk (nullptr: it can); the path of a code it can run
// (auto: the best one).
const char* variant_unavailable(int64_t code);
const Path* path_for(int64_t code);
// A call's variant checked (a code of QGEMM_VARIANTS this machine runs), as "name: variant ... cannot run here: why".
const char* check_variant(const char* name, int64_t code);

// The int16 limit L of a product over K values: the largest L ≤ 32767 with K · L² ≤ 2^31 − 1, so that no int32 sum of
// int16 products can wrap. Weights and input rows of int16 products are scaled to [-L, L] (compiler/quant/pack.ts
// int16Limit is the same rule).
int64_t int16_limit(int64_t k);

// A caller's buffers for the quantized rows and their scales.
struct RowBuffers {
  std::vector<int8_t> q8;
  std::vector<uint8_t> u8;
  std::vector<int16_t> q16;
  std::vector<float> f32, scale;
};

// Quantizes the m rows of x [m, k] (input: a QuantInput) into the form `path` reads, zero padded to kp columns;
// scale[r] = the row's scale sa (int8: max|row| / 127, int16: max|row| / int16_limit(k); 0 for a zero row, NaN when
// the row has inf or NaN; float32: 1). Rows are split over the call's pool (quantize_rows.cc).
Rows quantize_rows(const KernelArgs& args, const float* x, int64_t m, int64_t k, int64_t kp, int64_t input, const Path& path,
                   RowBuffers& buf);

// Rows quantized by quantize_rows (int8 input: u8 = q + 128; int16: q16), each [m, kp], in the form `path` reads:
// read in place where it is that form, else converted into buf.
Rows quantized_rows(const void* a, int64_t m, int64_t kp, int64_t input, const Path& path, RowBuffers& buf);

// The epilogue's code (qgemm_epilogue.cc): scalar, or eight / sixteen columns a step; all give the same bits (the same
// float32 operations in the same order, no FMA; gelu, gelu_tanh and silu call libm on each value in every code).
enum class EpilogueCode : int { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
// The widest code this CPU runs within PLANC_ISA's cap (read once); whether it runs `code`.
EpilogueCode best_epilogue();
bool epilogue_runs(EpilogueCode code);

// Y = act(v · (sa · w_scale) + bias) + residual applied to a tile of sums (the qmatmul epilogue): y/res at [m, ldy].
// The reference path takes kScalar, the others best_epilogue(), so the tests' comparisons against ref check the vector
// codes.
struct Epilogue {
  int64_t act;
  const float* sa;     // [rows]
  const float* scale;  // [N]
  const float* bias;   // [N] or null
  const float* res;    // rows × ldy or null
  float* y;
  int64_t ldy;
  EpilogueCode code;
};
// Int32 sums: v = acc − 128 · wsum (wrapping; wsum [nc] from column c0, the vpdpbusd offset) where wsum is given.
void apply_epilogue(const Epilogue& e, const int32_t* acc, int64_t ld, const int32_t* wsum, int64_t r0, int64_t nr, int64_t c0,
                    int64_t nc);
void apply_epilogue(const Epilogue& e, const float* acc, int64_t ld, int64_t r0, int64_t nr, int64_t c0, int64_t nc);
// Asks for the cache lines of a tile's Y and residual ahead of its epilogue (issued before the tile's dot products:
// the residual rows are strided, out of the hardware prefetchers' reach).
void prefetch_epilogue(const Epilogue& e, int64_t r0, int64_t nr, int64_t c0, int64_t nc);

}  // namespace qgemm
}  // namespace planc
