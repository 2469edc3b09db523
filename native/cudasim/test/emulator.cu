// cudasim's own tests: barriers, shuffles, ballot/any/all, atomics and the last-block merge, static and dynamic shared
// memory, fp16/bf16 conversions, TF32 rounding and WMMA (1 and 3 passes) against a double CPU reference, and the
// model's refusals (divergent barriers, exited lanes in a mask). Prints ok/FAIL lines; exit status 1 on a failure.
#include <math.h>
#include <stdio.h>

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>

#include <string>
#include <vector>

#include "harness.h"

using harness::check;

__global__ void reverse_block(const float* in, float* out) {
  __shared__ float s[256];
  const int t = threadIdx.x, n = blockDim.x;
  s[t] = in[blockIdx.x * n + t];
  __syncthreads();
  out[blockIdx.x * n + t] = s[n - 1 - t];
}

__global__ void shuffles(int* out) {
  const int lane = threadIdx.x & 31, gt = blockIdx.x * blockDim.x + threadIdx.x;
  int v = lane + 1;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  out[gt * 5 + 0] = v;                                                   // 528 everywhere
  out[gt * 5 + 1] = __shfl_sync(0xffffffffu, lane * 10, 7);              // 70
  out[gt * 5 + 2] = __shfl_down_sync(0xffffffffu, lane, 3, 16);          // lane+3 inside each 16-lane half, else lane
  out[gt * 5 + 3] = __shfl_up_sync(0xffffffffu, lane, 1);                // lane-1, lane 0 keeps 0
  double d = lane * 0.5;
  out[gt * 5 + 4] = (int)(__shfl_sync(0xffffffffu, d, 31 - lane) * 2.0);  // 31 - lane
}

__global__ void votes(unsigned* out) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
  out[w * 4 + 0] = __ballot_sync(0xffffffffu, lane % 3 == 0);
  out[w * 4 + 1] = __any_sync(0xffffffffu, lane == 17 && w == 1);
  out[w * 4 + 2] = __all_sync(0xffffffffu, lane < 32);
  out[w * 4 + 3] = __syncthreads_count(threadIdx.x % 2 == 0);
}

// Half the lanes meet in a 16-lane mask: the other half never has to arrive.
__global__ void half_mask(int* out) {
  const int lane = threadIdx.x & 31;
  if (lane < 16) out[lane] = __shfl_xor_sync(0x0000ffffu, lane, 1);
  else out[lane] = -1;
}

__global__ void atomics(unsigned* counter, int* mx, unsigned long long* cas, float* fsum) {
  atomicAdd(counter, 1u);
  atomicMax(mx, (int)(blockIdx.x * blockDim.x + threadIdx.x));
  atomicCAS(cas, 0ull, 42ull);
  atomicAdd(fsum, 0.5f);
}

// Each block writes its partial, takes a ticket; the last block sums the partials and resets the ticket.
__global__ void last_block_sum(const float* x, float* partial, unsigned* ticket, float* total) {
  __shared__ float red[128];
  __shared__ bool last;
  red[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (int s = 64; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = red[0];
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (unsigned b = 0; b < gridDim.x; b++) t += __ldcg(partial + b);
    *total = t;
    *ticket = 0;
  }
}

__global__ void dynamic_shared(const int* in, int* out) {
  extern __shared__ __align__(16) int dyn[];
  dyn[threadIdx.x] = in[threadIdx.x] * 2;
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (unsigned i = 0; i < blockDim.x; i++) s += dyn[i];
    out[blockIdx.x] = s;
  }
}

// A shared variable read before any thread writes it in this launch sees poison (0xffffffff), not zero.
__global__ void shared_poison(unsigned* out) {
  __shared__ unsigned never_written;
  if (threadIdx.x == 0) *out = never_written;
}

// The same in a template (its statics are found through the module's dynamic symbols: build with -rdynamic).
template <int N>
__global__ void shared_poison_t(unsigned* out) {
  __shared__ unsigned never_written[N];
  if (threadIdx.x == 0) *out = never_written[N - 1];
}

__global__ void divergent_barrier(int* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void exited_lane(int* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
}

// One 64 x 64 tile (4 warps of 32 x 32) of C = A B with K a multiple of 8, as gemm.cuh computes it.
template <int PASSES>
__global__ void wmma_tile(const float* A, const float* B, float* C, int K) {
  using namespace nvcuda;
  const int warp = threadIdx.x >> 5, wm = warp >> 1, wn = warp & 1;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
  for (int kk = 0; kk < K; kk += 8) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> ahi[2], alo[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> bhi[2], blo[2];
    for (int i = 0; i < 2; i++) {
      wmma::load_matrix_sync(ahi[i], A + (wm * 32 + i * 16) * K + kk, K);
      for (int t = 0; t < ahi[i].num_elements; t++) {
        const float x = ahi[i].x[t], hi = wmma::__float_to_tf32(x);
        ahi[i].x[t] = hi;
        if (PASSES == 3) alo[i].x[t] = wmma::__float_to_tf32(x - hi);
      }
    }
    for (int j = 0; j < 2; j++) {
      wmma::load_matrix_sync(bhi[j], B + kk * 64 + wn * 32 + j * 16, 64);
      for (int t = 0; t < bhi[j].num_elements; t++) {
        const float x = bhi[j].x[t], hi = wmma::__float_to_tf32(x);
        bhi[j].x[t] = hi;
        if (PASSES == 3) blo[j].x[t] = wmma::__float_to_tf32(x - hi);
      }
    }
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++) {
        if (PASSES == 3) {
          wmma::mma_sync(acc[i][j], alo[i], bhi[j], acc[i][j]);
          wmma::mma_sync(acc[i][j], ahi[i], blo[j], acc[i][j]);
        }
        wmma::mma_sync(acc[i][j], ahi[i], bhi[j], acc[i][j]);
      }
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      wmma::store_matrix_sync(C + (wm * 32 + i * 16) * 64 + wn * 32 + j * 16, acc[i][j], 64, wmma::mem_row_major);
}

static unsigned bits_of(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static float float_of(unsigned u) { float f; memcpy(&f, &u, 4); return f; }

int main() {
  {
    const int n = 256, blocks = 3;
    float* in = harness::alloc<float>(n * blocks);
    float* out = harness::alloc<float>(n * blocks);
    for (int i = 0; i < n * blocks; i++) in[i] = (float)i;
    bool ok = harness::launch<reverse_block>("reverse_block", dim3(blocks), dim3(n), 0, (const float*)in, out);
    int bad = 0;
    for (int b = 0; b < blocks; b++)
      for (int t = 0; t < n; t++) bad += out[b * n + t] != in[b * n + n - 1 - t];
    check(ok && bad == 0, "barrier: a block reverses its values through shared memory", harness::g_last_error + " bad=" + std::to_string(bad));
  }
  {
    const int threads = 64;
    int* out = harness::alloc<int>(threads * 5);
    bool ok = harness::launch<shuffles>("shuffles", dim3(1), dim3(threads), 0, out);
    int bad = 0;
    for (int t = 0; t < threads; t++) {
      const int lane = t & 31;
      bad += out[t * 5] != 528;
      bad += out[t * 5 + 1] != 70;
      bad += out[t * 5 + 2] != ((lane % 16) + 3 < 16 ? lane + 3 : lane);
      bad += out[t * 5 + 3] != (lane == 0 ? 0 : lane - 1);
      bad += out[t * 5 + 4] != 31 - lane;
    }
    check(ok && bad == 0, "shuffles: xor reduction, idx broadcast, down/up with widths, 8-byte values", harness::g_last_error + " bad=" + std::to_string(bad));
    int* hm = harness::alloc<int>(32);
    ok = harness::launch<half_mask>("half_mask", dim3(1), dim3(32), 0, hm);
    bad = 0;
    for (int l = 0; l < 32; l++) bad += hm[l] != (l < 16 ? (l ^ 1) : -1);
    check(ok && bad == 0, "shuffles: a partial mask completes without the other lanes", harness::g_last_error);
  }
  {
    unsigned* out = harness::alloc<unsigned>(8);
    bool ok = harness::launch<votes>("votes", dim3(1), dim3(64), 0, out);
    unsigned expect = 0;
    for (int l = 0; l < 32; l += 3) expect |= 1u << l;
    check(ok && out[0] == expect && out[4] == expect, "ballot_sync", harness::g_last_error);
    check(ok && out[1] == 0 && out[5] == 1 && out[2] == 1 && out[6] == 1, "any_sync / all_sync");
    check(ok && out[3] == 32 && out[7] == 32, "syncthreads_count");
  }
  {
    unsigned* counter = harness::alloc<unsigned>(1);
    int* mx = harness::alloc<int>(1);
    unsigned long long* cas = harness::alloc<unsigned long long>(1);
    float* fsum = harness::alloc<float>(1);
    *counter = 0; *mx = -1; *cas = 0; *fsum = 0.f;
    bool ok = harness::launch<atomics>("atomics", dim3(5), dim3(96), 0, counter, mx, cas, fsum);
    check(ok && *counter == 480 && *mx == 479 && *cas == 42 && *fsum == 240.f, "atomics: add, max, CAS, float add",
          "counter=" + std::to_string(*counter) + " max=" + std::to_string(*mx));
    const int blocks = 7;
    float* x = harness::alloc<float>(blocks * 128);
    float* partial = harness::alloc<float>(blocks);
    unsigned* ticket = harness::alloc<unsigned>(1);
    float* total = harness::alloc<float>(1);
    *ticket = 0;
    double ref = 0;
    for (int i = 0; i < blocks * 128; i++) { x[i] = (float)(i % 13) - 6.f; ref += x[i]; }
    ok = harness::launch<last_block_sum>("last_block_sum", dim3(blocks), dim3(128), 0, (const float*)x, partial, ticket, total);
    check(ok && *total == (float)ref && *ticket == 0, "threadfence + ticket: the last block merges and resets", harness::g_last_error);
  }
  {
    int* in = harness::alloc<int>(64);
    int* out = harness::alloc<int>(2);
    for (int i = 0; i < 64; i++) in[i] = i;
    bool ok = harness::launch<dynamic_shared>("dynamic_shared", dim3(2), dim3(64), 64 * sizeof(int), (const int*)in, out);
    check(ok && out[0] == 4032 && out[1] == 4032, "dynamic shared memory (extern __shared__)", harness::g_last_error);
    unsigned* p = harness::alloc<unsigned>(1);
    ok = harness::launch<shared_poison>("shared_poison", dim3(1), dim3(32), 0, p);
    check(ok && *p == 0xffffffffu, "static shared memory starts poisoned", harness::g_last_error);
    *p = 0;
    ok = harness::launch<shared_poison_t<4>>("shared_poison_t<4>", dim3(1), dim3(32), 0, p);
    check(ok && *p == 0xffffffffu, "static shared memory of a template starts poisoned", harness::g_last_error);
  }
  {
    check(cudasim::float_to_half_bits(1.f / 3.f) == 0x3555 && cudasim::float_to_half_bits(65504.f) == 0x7bff &&
              cudasim::float_to_half_bits(65520.f) == 0x7c00 && cudasim::float_to_half_bits(5.9604645e-8f) == 0x0001 &&
              cudasim::float_to_half_bits(-2.f) == 0xc000 && cudasim::float_to_half_bits(1.f + 1.f / 2048.f) == 0x3c00 &&
              cudasim::float_to_half_bits(1.f + 3.f / 2048.f) == 0x3c02,
          "fp16: rounding to nearest even, overflow, subnormals");
    bool round_trip = true;
    for (unsigned h = 0; h < 0x7c00; h++) round_trip &= cudasim::float_to_half_bits(cudasim::half_bits_to_float((uint16_t)h)) == h;
    check(round_trip, "fp16: every finite half round-trips through float");
    check(__bfloat162float(__float2bfloat16(1.f / 3.f)) == float_of(0x3eab0000u) &&
              __float2bfloat16(float_of(0x3f808000u)).__x == 0x3f80 && __float2bfloat16(float_of(0x3f818000u)).__x == 0x3f82,
          "bf16: rounding to nearest even");
    check(bits_of(nvcuda::wmma::__float_to_tf32(float_of(0x3f801000u))) == 0x3f802000u &&
              bits_of(nvcuda::wmma::__float_to_tf32(float_of(0x3f800fffu))) == 0x3f800000u &&
              bits_of(nvcuda::wmma::__float_to_tf32(float_of(0xbf801000u))) == 0xbf802000u,
          "tf32: round to nearest, ties away from zero");
  }
  {
    const int K = 64;
    float* A = harness::alloc<float>(64 * K);
    float* B = harness::alloc<float>(K * 64);
    float* C1 = harness::alloc<float>(64 * 64);
    float* C3 = harness::alloc<float>(64 * 64);
    uint32_t s = 12345;
    auto rnd = [&]() { s = s * 1664525u + 1013904223u; return (float)((s >> 8) & 0xffff) / 32768.f - 1.f; };
    for (int i = 0; i < 64 * K; i++) A[i] = rnd();
    for (int i = 0; i < K * 64; i++) B[i] = rnd();
    bool ok1 = harness::launch<wmma_tile<1>>("wmma_tile<1>", dim3(1), dim3(128), 0, (const float*)A, (const float*)B, C1, K);
    bool ok3 = harness::launch<wmma_tile<3>>("wmma_tile<3>", dim3(1), dim3(128), 0, (const float*)A, (const float*)B, C3, K);
    double e1 = 0, e3 = 0, mx = 0, e_tf32 = 0;
    for (int i = 0; i < 64; i++)
      for (int j = 0; j < 64; j++) {
        double r = 0, rt = 0;
        for (int k = 0; k < K; k++) {
          r += (double)A[i * K + k] * B[k * 64 + j];
          rt += (double)nvcuda::wmma::__float_to_tf32(A[i * K + k]) * nvcuda::wmma::__float_to_tf32(B[k * 64 + j]);
        }
        mx = fmax(mx, fabs(r));
        e1 = fmax(e1, fabs(C1[i * 64 + j] - r));
        e3 = fmax(e3, fabs(C3[i * 64 + j] - r));
        e_tf32 = fmax(e_tf32, fabs(C1[i * 64 + j] - rt));
      }
    char msg[200];
    snprintf(msg, sizeof msg, "max|ref| %.3g, 1 pass %.3g, 3 passes %.3g, 1 pass vs tf32 reference %.3g", mx, e1 / mx, e3 / mx, e_tf32 / mx);
    printf("# wmma: %s\n", msg);
    check(ok1 && ok3 && e1 / mx > 1e-5 && e1 / mx < 5e-3 && e_tf32 / mx < 1e-5, "wmma TF32: one pass carries TF32's error, exactly the TF32 products", msg);
    check(ok3 && e3 / mx < 2e-6, "wmma 3xTF32: fp32-level accuracy against a double reference", msg);
  }
  {
    int* out = harness::alloc<int>(32);
    bool ok = harness::launch<divergent_barrier>("divergent_barrier", dim3(1), dim3(32), 0, out);
    // Exited threads count as arrived (as on the hardware): this one completes; a barrier vs collective cannot.
    check(ok, "a __syncthreads that exited threads never reach completes", harness::g_last_error);
    ok = harness::launch<exited_lane>("exited_lane", dim3(1), dim3(32), 0, out);
    check(!ok && harness::g_last_error.find("lane 5 of the mask has exited") != std::string::npos &&
              harness::g_last_error.find("exited_lane") != std::string::npos,
          "a shuffle naming an exited lane is refused, naming the kernel", harness::g_last_error);
  }
  printf(harness::g_failed == 0 ? "all passed\n" : "%d failed\n", harness::g_failed);
  return harness::g_failed == 0 ? 0 : 1;
}
