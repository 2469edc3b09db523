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
};

// True when this build has the AVX-512 kernels and the CPU and OS support them (checked once).
bool avx512_gemm_available();

// Runs the product on the AVX-512 kernels (M, N, K >= 1); call only when avx512_gemm_available(). pool may be null.
void avx512_gemm(const GemmCall& g, ThreadPool* pool);

}  // namespace planc
