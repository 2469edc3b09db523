// planc CUDA kernel templates, part 4: row-wise kernels: layer_norm / rms_norm (a warp per row) and softmax.
namespace planc {

// Normalizes rows of D = product of the dims from the norm axis on (D0 > 0: D is that constant, a multiple of 32,
// and each lane keeps D0/32 values in registers; D0 = 0: any D, read three times). 8 warps per block.
template <int D0, bool RMS, bool BIAS>
__device__ void norm(const KArgs& a) {
  const Tensor &tx = a.in[0], &ts = a.in[1], &ty = a.out[0];
  static_assert(layer_norm_args::kAxis == rms_norm_args::kAxis && layer_norm_args::kEpsilon == rms_norm_args::kEpsilon,
                "layer_norm and rms_norm read one argument layout");
  const int axis = (int)a.iargs[layer_norm_args::kAxis];
  int64_t D = 1;
  for (int i = axis; i < tx.rank; i++) D *= tx.dims[i];
  if (D == 0) return;
  const int64_t rows = tx.numel / D;
  const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const float* X = (const float*)tx.data + row * D;
  float* Y = (float*)ty.data + row * D;
  const float* S = (const float*)ts.data;
  const float* Bi = BIAS ? (const float*)a.in[2].data : nullptr;
  const float eps = (float)a.fargs[layer_norm_args::kEpsilon];
  if (D0 > 0) {
    constexpr int PER = D0 > 0 ? D0 / 32 : 1;
    float v[PER];
    float sum = 0.f;
#pragma unroll
    for (int t = 0; t < PER; t++) { v[t] = X[t * 32 + lane]; sum += v[t]; }
    float mean = 0.f;
    if (!RMS) {
      mean = warp_sum(sum) / (float)D0;
    }
    float sq = 0.f;
#pragma unroll
    for (int t = 0; t < PER; t++) { const float d = v[t] - mean; sq += d * d; }
    const float inv = rsqrtf(warp_sum(sq) / (float)D0 + eps);
#pragma unroll
    for (int t = 0; t < PER; t++) {
      const int j = t * 32 + lane;
      float y = (v[t] - mean) * inv * __ldg(S + j);
      if (BIAS) y += __ldg(Bi + j);
      Y[j] = y;
    }
  } else {
    float mean = 0.f;
    if (!RMS) {
      float sum = 0.f;
      for (int64_t j = lane; j < D; j += 32) sum += X[j];
      mean = warp_sum(sum) / (float)D;
    }
    float sq = 0.f;
    for (int64_t j = lane; j < D; j += 32) { const float d = X[j] - mean; sq += d * d; }
    const float inv = rsqrtf(warp_sum(sq) / (float)D + eps);
    for (int64_t j = lane; j < D; j += 32) {
      float y = (X[j] - mean) * inv * __ldg(S + j);
      if (BIAS) y += __ldg(Bi + j);
      Y[j] = y;
    }
  }
}

// Softmax (LOG: log-softmax) along iarg axis. LAST (axis is the last dim): a warp per row, three passes over the row
// (max, sum of exp, write: the row stays in L1/L2). Otherwise a thread per (outer, inner) pair walks the axis.
template <bool LOG, bool LAST>
__device__ void softmax(const KArgs& a) {
  const Tensor &tx = a.in[0], &ty = a.out[0];
  const int axis = (int)a.iargs[softmax_args::kAxis];
  const int64_t n = tx.dims[axis];
  int64_t inner = 1;
  for (int i = axis + 1; i < tx.rank; i++) inner *= tx.dims[i];
  if (n == 0 || inner == 0) return;
  const float* X = (const float*)tx.data;
  float* Y = (float*)ty.data;
  if (LAST) {
    const int64_t rows = tx.numel / n;
    const int64_t row = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* x = X + row * n;
    float* y = Y + row * n;
    float mx = -INFINITY;
    for (int64_t j = lane; j < n; j += 32) mx = fmaxf(mx, x[j]);
    mx = warp_max(mx);
    float s = 0.f;
    for (int64_t j = lane; j < n; j += 32) s += expf(x[j] - mx);
    s = warp_sum(s);
    if (LOG) {
      const float ls = logf(s);
      for (int64_t j = lane; j < n; j += 32) y[j] = x[j] - mx - ls;
    } else {
      const float inv = 1.0f / s;
      for (int64_t j = lane; j < n; j += 32) y[j] = expf(x[j] - mx) * inv;
    }
  } else {
    const int64_t pairs = tx.numel / n;
    for (int64_t p = gtid(); p < pairs; p += gstride()) {
      const int64_t o = p / inner, in = p % inner;
      const float* x = X + o * n * inner + in;
      float* y = Y + o * n * inner + in;
      float mx = -INFINITY;
      for (int64_t j = 0; j < n; j++) mx = fmaxf(mx, x[j * inner]);
      float s = 0.f;
      for (int64_t j = 0; j < n; j++) s += expf(x[j * inner] - mx);
      const float ls = logf(s), inv = 1.0f / s;
      for (int64_t j = 0; j < n; j++) y[j * inner] = LOG ? x[j * inner] - mx - ls : expf(x[j * inner] - mx) * inv;
    }
  }
}

}  // namespace planc
