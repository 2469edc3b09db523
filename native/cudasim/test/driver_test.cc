// The emulated driver on its own (driver_test LIBCUDA): a module loaded from CUDA source, launches with parameters,
// copies, stream capture and graph replay in order (parameters copied at capture), launch bounds, refusals, and an
// out-of-bounds kernel reported as CUDA_ERROR_ILLEGAL_ADDRESS (sticky). Prints ok/FAIL lines; exit 1 on a failure.
#include <dlfcn.h>
#include <stdio.h>

#include <string>

using CUresult = int;
using CUdeviceptr = unsigned long long;

static int g_failed = 0;
static void check(bool ok, const char* name, const std::string& why = "") {
  printf(ok ? "ok %s\n" : "FAIL %s: %s\n", name, why.c_str());
  g_failed += !ok;
}

static const char* kSource = R"(
extern "C" __device__ int calls = 0;
extern "C" __global__ void __launch_bounds__(128) scale(float* p, float s, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] *= s;
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&calls, 1);
}
extern "C" __global__ void __launch_bounds__(128) off_by_one(float* p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += gridDim.x * blockDim.x) p[i] = 1.f;
}
#ifdef PLANC_CUDASIM
CUDASIM_ENTRY(scale, 128)
CUDASIM_ENTRY(off_by_one, 128)
#endif
)";

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    printf("FAIL load: %s\n", dlerror());
    return 1;
  }
#define FN(name, ...) auto name = reinterpret_cast<CUresult (*)(__VA_ARGS__)>(dlsym(lib, #name))
  FN(cuInit, unsigned);
  FN(cuModuleLoadData, void**, const void*);
  FN(cuModuleGetFunction, void**, void*, const char*);
  FN(cuModuleGetGlobal_v2, CUdeviceptr*, size_t*, void*, const char*);
  FN(cuMemAlloc_v2, CUdeviceptr*, size_t);
  FN(cuMemcpyHtoDAsync_v2, CUdeviceptr, const void*, size_t, void*);
  FN(cuMemcpyDtoHAsync_v2, void*, CUdeviceptr, size_t, void*);
  FN(cuStreamCreate, void**, unsigned);
  FN(cuStreamSynchronize, void*);
  FN(cuLaunchKernel, void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
  FN(cuStreamBeginCapture_v2, void*, int);
  FN(cuStreamEndCapture, void*, void**);
  FN(cuGraphInstantiateWithFlags, void**, void*, unsigned long long);
  FN(cuGraphLaunch, void*, void*);
#undef FN
  check(cuInit(0) == 0, "cuInit");
  void* mod = nullptr;
  CUresult rc = cuModuleLoadData(&mod, kSource);
  check(rc == 0, "cuModuleLoadData builds CUDA source", std::to_string(rc));
  if (rc != 0) return 1;
  void *scale = nullptr, *oob = nullptr, *none = nullptr;
  check(cuModuleGetFunction(&scale, mod, "scale") == 0 && cuModuleGetFunction(&oob, mod, "off_by_one") == 0, "cuModuleGetFunction finds entries");
  check(cuModuleGetFunction(&none, mod, "missing") == 500, "an unknown entry is CUDA_ERROR_NOT_FOUND");
  CUdeviceptr calls = 0;
  size_t calls_bytes = 0;
  check(cuModuleGetGlobal_v2(&calls, &calls_bytes, mod, "calls") == 0 && calls_bytes == 4, "cuModuleGetGlobal: a module global and its size");
  void* stream = nullptr;
  cuStreamCreate(&stream, 1);
  const int n = 1000;
  float host[n];
  for (int i = 0; i < n; i++) host[i] = (float)i;
  CUdeviceptr d = 0;
  cuMemAlloc_v2(&d, n * sizeof(float));
  cuMemcpyHtoDAsync_v2(d, host, sizeof host, stream);
  float s = 2.f;
  int nn = n;
  void* params[] = {&d, &s, &nn};
  rc = cuLaunchKernel(scale, 3, 1, 1, 128, 1, 1, 0, stream, params, nullptr);
  cuMemcpyDtoHAsync_v2(host, d, sizeof host, stream);
  check(rc == 0 && cuStreamSynchronize(stream) == 0 && host[999] == 1998.f && host[1] == 2.f, "a launch with parameters", std::to_string(rc));
  check(cuLaunchKernel(scale, 1, 1, 1, 256, 1, 1, 0, stream, params, nullptr) == 701, "more threads than __launch_bounds__: LAUNCH_OUT_OF_RESOURCES");

  // Capture: nothing runs until the graph launches; the parameters are the ones at capture time.
  check(cuStreamBeginCapture_v2(stream, 1) == 0, "begin capture");
  s = 3.f;
  cuLaunchKernel(scale, 2, 1, 1, 128, 1, 1, 0, stream, params, nullptr);
  s = 100.f;
  float out[n];
  cuMemcpyDtoHAsync_v2(out, d, sizeof out, stream);
  void* graph = nullptr;
  void* exec = nullptr;
  check(cuStreamEndCapture(stream, &graph) == 0 && cuGraphInstantiateWithFlags(&exec, graph, 0) == 0, "end capture, instantiate");
  float probe[n];
  cuMemcpyDtoHAsync_v2(probe, d, sizeof probe, stream);
  check(probe[10] == 20.f, "captured work has not run", std::to_string(probe[10]));
  check(cuGraphLaunch(exec, stream) == 0 && cuGraphLaunch(exec, stream) == 0 && out[10] == 180.f, "graph replays in order with the captured parameters",
        std::to_string(out[10]));
  int ncalls = 0;
  cuMemcpyDtoHAsync_v2(&ncalls, calls, 4, stream);
  check(ncalls == 3, "the module global counts every launch", std::to_string(ncalls));

  void* bad = nullptr;
  const unsigned fatbin[4] = {0xBA55ED50u, 0, 0, 0};
  check(cuModuleLoadData(&bad, fatbin) == 200, "a fatbin is not loadable on the emulator (INVALID_IMAGE)");
  check(cuModuleLoadData(&bad, "__global__ void k() { asm(\"trap;\"); }\n") == 300, "a construct it cannot model: INVALID_SOURCE");

  void* oparams[] = {&d, &nn};
  rc = cuLaunchKernel(oob, 4, 1, 1, 128, 1, 1, 0, stream, oparams, nullptr);
  check(rc == 700, "an off-by-one write: CUDA_ERROR_ILLEGAL_ADDRESS", std::to_string(rc));
  check(cuStreamSynchronize(stream) == 700, "the error is sticky, as on a device");
  return g_failed == 0 ? 0 : 1;
}
