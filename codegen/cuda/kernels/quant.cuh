// int8 weight-only products (w8: float32 input rows) on CUDA: qmatmul over packed int8 weights (dequantized by the
// channel scale after the sum, as cpu/qgemm.cc's float32-input path), and qgather over int8 vocabulary rows (12-bit
// with the residual plane). qproject_topk is project_topk's Q path (attention.cuh).
namespace planc {

// A vocabulary row's residual plane refines each int8 step into this many (compiler/quant/pack.ts RESIDUAL_STEPS).
constexpr int kResidualSteps = 15;

// qmatmul, float32 input: Y[m, n] = act(float(Σ_k A[m, k] · Wq(k, n)) · w_scale[n] + bias[n]) + residual[m, n], Wq
// packed [NB, KG, 16, 4] int8 (compiler/kernel-schema.ts qmatmul). Each warp owns one block of 16 channels for RB rows;
// lane l streams k-groups l, l + 32, ... (64 contiguous bytes each: coalesced) and keeps RB x 16 partial sums, which
// the warp then adds up. Grid (ceil(NB / 8), ceil(M / RB)).
template <int K, int N, int ACT, bool BIAS, bool RES>
__device__ void qmatmul_w8(const KArgs& a) {
  constexpr int RB = 4, KG = (K + 3) / 4, NB = (N + 15) / 16;
  const Tensor &ta = a.in[0], &ty = a.out[0];
  const int64_t M = ty.numel / N;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int b = blockIdx.x * 8 + warp;
  const int64_t m0 = (int64_t)blockIdx.y * RB;
  if (b >= NB || m0 >= M) return;
  const int nr = (int)min((int64_t)RB, M - m0);
  const float* A = (const float*)ta.data + m0 * K;
  const int8_t* W = (const int8_t*)a.in[1].data + (int64_t)b * KG * 64;
  float acc[RB][16];
#pragma unroll
  for (int r = 0; r < RB; r++)
#pragma unroll
    for (int c = 0; c < 16; c++) acc[r][c] = 0.f;
  for (int g = lane; g < KG; g += 32) {
    float x[RB][4];
#pragma unroll
    for (int r = 0; r < RB; r++)
#pragma unroll
      for (int j = 0; j < 4; j++) x[r][j] = r < nr && 4 * g + j < K ? __ldg(A + r * K + 4 * g + j) : 0.f;
    const int4* w4 = (const int4*)(W + (int64_t)g * 64);
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int4 v = __ldg(w4 + q);
      const int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int cc = 0; cc < 4; cc++) {
        const int c = q * 4 + cc;  // channel c's four k values, one byte each
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const float w = (float)(int8_t)(words[cc] >> (8 * j));
#pragma unroll
          for (int r = 0; r < RB; r++) acc[r][c] = fmaf(x[r][j], w, acc[r][c]);
        }
      }
    }
  }
  const float* scale = (const float*)a.in[2].data;
  const float* bias = BIAS ? (const float*)a.in[4].data : nullptr;
  const float* res = RES ? (const float*)a.in[5].data : nullptr;
  float* Y = (float*)ty.data;
#pragma unroll
  for (int r = 0; r < RB; r++) {
#pragma unroll
    for (int c = 0; c < 16; c++) {
      const float s = warp_sum(acc[r][c]);
      const int n = b * 16 + c;
      if (lane == c && r < nr && n < N) {
        float v = s * __ldg(scale + n);
        if (BIAS) v += __ldg(bias + n);
        v = activate<ACT>(v);
        const int64_t o = (m0 + r) * N + n;
        if (RES) v += res[o];
        Y[o] = v;
      }
    }
  }
}

// The sign-extended 4-bit residual of value d of a row (two per byte, low nibble first).
__device__ __forceinline__ int residual_at(const uint8_t* row, int d) { return (((row[d >> 1] >> ((d & 1) * 4)) & 15) ^ 8) - 8; }

// qgather: Y[i, :] = Wq[ids[i], :D] · scale[ids[i]], or with the residual plane (15 · Wq + r) · (scale / 15). A thread per output value; an index out of range is error 1 (output 0).
template <class TI, bool RES>
__device__ void qgather(const KArgs& a) {
  const Tensor &tw = a.in[0], &ty = a.out[0];
  const int64_t V = tw.dims[0], Dp = tw.dims[1], D = ty.dims[ty.rank - 1];
  const int8_t* W = (const int8_t*)tw.data;
  const float* scale = (const float*)a.in[1].data;
  const TI* ids = (const TI*)a.in[2].data;
  const uint8_t* R = RES ? (const uint8_t*)a.in[3].data : nullptr;
  float* Y = (float*)ty.data;
  for (int64_t e = gtid(); e < ty.numel; e += gstride()) {
    const int64_t k = e / D, d = e % D;
    int64_t i = (int64_t)ids[k];
    if (i < 0) i += V;
    if (i < 0 || i >= V) {
      fail(a, kErrIndex);
      Y[e] = 0.f;
      continue;
    }
    const int q = W[i * Dp + d];
    Y[e] = RES ? (float)(kResidualSteps * q + residual_at(R + i * (Dp / 2), (int)d)) * (scale[i] / (float)kResidualSteps) : (float)q * scale[i];
  }
}

}  // namespace planc
