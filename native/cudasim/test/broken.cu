// Deliberately broken kernels that cudasim must catch: a missing __syncthreads (a shift through shared memory that the
// in-order schedule happens to get right, and a seeded schedule does not), and an off-by-one index past the end of a
// device allocation (a fault naming the kernel, block and thread).
#include <stdio.h>
#include <stdlib.h>

#include <string>

#include "harness.h"

using harness::check;

// out[t] = in[t - 1]: thread t reads what thread t - 1 wrote, with no barrier between.
__global__ void shift_no_barrier(const float* in, float* out) {
  __shared__ float s[128];
  const int t = threadIdx.x;
  s[t] = in[t];
  // missing: __syncthreads();
  out[t] = t > 0 ? s[t - 1] : 0.f;
}

__global__ void shift_with_barrier(const float* in, float* out) {
  __shared__ float s[128];
  const int t = threadIdx.x;
  s[t] = in[t];
  __syncthreads();
  out[t] = t > 0 ? s[t - 1] : 0.f;
}

// Off by one: n + 1 elements written.
__global__ void scale_off_by_one(const float* in, float* out, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x) out[i] = 2.f * in[i < n ? i : 0];
}

static int wrong(const float* in, const float* out) {
  int bad = 0;
  for (int t = 1; t < 128; t++) bad += out[t] != in[t - 1];
  return bad;
}

int main() {
  float* in = harness::alloc<float>(128);
  float* out = harness::alloc<float>(128);
  for (int i = 0; i < 128; i++) in[i] = (float)(i + 1);
  std::string per_seed;
  int caught = 0, correct_ok = 0;
  for (int seed = 0; seed <= 4; seed++) {
    setenv("PLANC_CUDASIM_SEED", std::to_string(seed).c_str(), 1);
    harness::launch<shift_no_barrier>("shift_no_barrier", dim3(1), dim3(128), 0, (const float*)in, out);
    const int bad = wrong(in, out);
    per_seed += " seed " + std::to_string(seed) + ": " + std::to_string(bad) + " wrong;";
    if (seed > 0 && bad > 0) caught++;
    harness::launch<shift_with_barrier>("shift_with_barrier", dim3(1), dim3(128), 0, (const float*)in, out);
    correct_ok += wrong(in, out) == 0;
  }
  printf("# missing barrier:%s\n", per_seed.c_str());
  check(caught >= 3, "a missing __syncthreads changes the result under seeded schedules", per_seed);
  check(correct_ok == 5, "the same kernel with its barrier is right under every schedule");
  unsetenv("PLANC_CUDASIM_SEED");

  const int n = 1000;
  float* a = harness::alloc<float>(n);
  float* b = harness::alloc<float>(n);
  for (int i = 0; i < n; i++) a[i] = (float)i;
  const bool ok = harness::launch<scale_off_by_one>("scale_off_by_one", dim3(4), dim3(256), 0, (const float*)a, b, n);
  printf("# off by one: %s\n", harness::g_last_error.c_str());
  check(!ok && harness::g_last_error.find("out-of-bounds access") != std::string::npos &&
            harness::g_last_error.find("0 bytes past the end of a 4000-byte device allocation") != std::string::npos &&
            harness::g_last_error.find("kernel scale_off_by_one, block (3,0,0), thread (232,0,0)") != std::string::npos,
        "an off-by-one write past a device allocation faults, naming the kernel, block and thread", harness::g_last_error);
  printf(harness::g_failed == 0 ? "all passed\n" : "%d failed\n", harness::g_failed);
  return harness::g_failed == 0 ? 0 : 1;
}
