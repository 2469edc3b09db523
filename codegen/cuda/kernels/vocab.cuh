// planc CUDA kernel templates, part 7: cluster_mask (the active vocabulary of planc.ClusterMask; its consumer is
// project_topk's ACT path in attention.cuh).
namespace planc {

// cluster_mask: X [rows..., D], centroids [R, D], cnorm [R] (‖C_r‖²), offsets [R + 1] int32, ids [nnz] int32 ->
// active uint8/bool [V]; iarg vocab V. Per row r* = argmin_r cnorm[r] − 2 x·C_r (ties and NaN as cpu/kmeans.cc: the
// first strictly smaller value wins, starting from +inf at r = 0); active = 1 exactly at ids[offsets[r*] ..
// offsets[r* + 1]) of every row's r*, 0 elsewhere (no rows: all 0).
// A fixed grid of blocks of 256 threads walks the groups of RB rows (x in shared memory, warp w takes centroids w,
// w + 8, ... for all RB rows at once, so a centroid is read once per group), then marks each row's r* in a bitmap
// kept in the scratch's ticket counters (words 1 .. ceil(R / 32); word 0 is the ticket). The last block to finish
// zeroes the mask, checks offsets (non-decreasing within [0, nnz]), sets the ids of the marked clusters (each
// checked in [0, V)), and returns the counters to zero. Bad offsets or ids: kErrIndex in the module's error word.
template <int D, int R>
__device__ void cluster_mask(const KArgs& a) {
  constexpr int RB = 8, NW = 8, WORDS = (R + 31) / 32;
  static_assert(D % 32 == 0 && D <= 1024, "D must be a multiple of 32, at most 1024");
  static_assert(R >= 1 && 1 + WORDS <= kScratchCounters, "the cluster bitmap must fit the scratch's counters");
  __shared__ __align__(16) float xs[RB * D];
  __shared__ float bestv[NW][RB];
  __shared__ int besti[NW][RB];
  __shared__ bool last, bad;
  const Tensor &tx = a.in[0], &tout = a.out[0];
  const float* C = (const float*)a.in[1].data;
  const float* cnorm = (const float*)a.in[2].data;
  const int32_t* offsets = (const int32_t*)a.in[3].data;
  const int32_t* ids = (const int32_t*)a.in[4].data;
  const int64_t nnz = a.in[4].numel, V = a.iargs[cluster_mask_args::kVocab];
  const int64_t rows = tx.numel / D, groups = (rows + RB - 1) / RB;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned* counters = (unsigned*)a.scratch;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const int64_t r0 = g * RB;
    const int nr = (int)min((int64_t)RB, rows - r0);
    const float* X = (const float*)tx.data + r0 * D;
    __syncthreads();  // the previous group is done with xs and best*
    for (int e = threadIdx.x; e < nr * D; e += blockDim.x) xs[e] = X[e];
    __syncthreads();
    float bv[RB];
    int bi[RB];
#pragma unroll
    for (int r = 0; r < RB; r++) { bv[r] = INFINITY; bi[r] = 0; }
    for (int c = warp; c < R; c += NW) {
      const float* cr = C + (int64_t)c * D;
      float part[RB];
#pragma unroll
      for (int r = 0; r < RB; r++) part[r] = 0.f;
#pragma unroll 4
      for (int d = lane; d < D; d += 32) {
        const float w = __ldg(cr + d);
#pragma unroll
        for (int r = 0; r < RB; r++) if (r < nr) part[r] = fmaf(w, xs[r * D + d], part[r]);
      }
      const float cn = __ldg(cnorm + c);
#pragma unroll
      for (int r = 0; r < RB; r++) {
        if (r < nr) {
          const float v = cn - 2.0f * warp_sum(part[r]);
          if (v < bv[r]) { bv[r] = v; bi[r] = c; }  // ascending c per warp: ties keep the lower r
        }
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < RB; r++) { bestv[warp][r] = bv[r]; besti[warp][r] = bi[r]; }
    }
    __syncthreads();
    if (threadIdx.x < nr) {
      const int r = threadIdx.x;
      float v = INFINITY;
      int best = 0;
      for (int w = 0; w < NW; w++) {
        const float wv = bestv[w][r];
        const int wi = besti[w][r];
        if (wv < v || (wv == v && wi < best)) { v = wv; best = wi; }
      }
      atomicOr(counters + 1 + (best >> 5), 1u << (best & 31));
    }
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counters, 1u) == gridDim.x - 1;
    bad = false;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  uint8_t* mask = (uint8_t*)tout.data;
  for (int64_t e = threadIdx.x; e < V; e += blockDim.x) mask[e] = 0;
  for (int j = threadIdx.x; j <= R; j += blockDim.x) {
    const int64_t lo = j == 0 ? 0 : offsets[j - 1];
    if (offsets[j] < lo || offsets[j] > nnz) bad = true;
  }
  __syncthreads();
  if (!bad) {
    for (int c = warp; c < R; c += NW) {
      if (!((__ldcg(counters + 1 + (c >> 5)) >> (c & 31)) & 1u)) continue;
      for (int64_t t = offsets[c] + lane; t < offsets[c + 1]; t += 32) {
        const int32_t id = ids[t];
        if (id < 0 || id >= V) bad = true;
        else mask[id] = 1;
      }
    }
  }
  __syncthreads();  // every bitmap word is read before it is cleared
  for (int w = threadIdx.x; w < WORDS; w += blockDim.x) counters[1 + w] = 0;
  if (threadIdx.x == 0) {
    counters[0] = 0;  // ready for the next run
    if (bad) fail(a, kErrIndex);  // one report (a fail() per bad id made ptxas spill at D 32)
  }
}

}  // namespace planc
