// AVX-512 float32 GEMM (Goto/BLIS blocking with packed panels and a 14x32 zmm micro-kernel), picked at run time.
#pragma once
#include <cstdint>

namespace planc {

class ThreadPool;

// C[M,N] (row stride ldc) = alpha * op(A) op(B) (+ C when accumulate); op(X) is X, or X^T when its flag is set.
// A is stored [M, K] (ta: [K, M]) with row stride lda; B is stored [K, N] (tb: [N, K]) with row stride ldb.
struct GemmCall {
  int64_t m, n, k;
  float alpha;
  const float* a;
  int64_t lda;
  bool ta;
  const float* b;
  int64_t ldb;
  bool tb;
  float* c;
  int64_t ldc;
  bool accumulate;
  // op(B) already in avx512_pack_b's layout (b, ldb and tb unused): its first panel is column 0 of this product's B,
  // so the caller passes the whole layout's pointer plus (j0 / 32) * k * 32 for a product starting at column j0.
  const float* bpacked = nullptr;
};

// True when this build has the AVX-512 kernels and the CPU supports them within PLANC_ISA's cap (checked once).
bool avx512_gemm_available();
// Why not (nullptr when avx512_gemm_available()).
const char* avx512_gemm_unavailable();

// Floats of avx512_pack_b's layout of a K x N op(B): ceil(N / 32) panels of K x 32.
int64_t avx512_packed_b_floats(int64_t k, int64_t n);

// op(B) (B stored [K, N], or [N, K] when tb) in 32-column panels: panel t holds columns 32t.. as K rows of 32 floats
// at dst + t * K * 32, zero past N. dst is 64-byte aligned with avx512_packed_b_floats(k, n) floats. Call only when
// avx512_gemm_available().
void avx512_pack_b(const float* b, int64_t ldb, bool tb, int64_t k, int64_t n, float* dst);

// Runs the product on the AVX-512 kernels (M, N, K >= 1); call only when avx512_gemm_available(). pool may be null.
void avx512_gemm(const GemmCall& g, ThreadPool* pool);

}  // namespace planc
