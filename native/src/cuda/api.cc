// Loads the CUDA driver API table from libcuda.so.1 with dlopen/dlsym, once.
#include "api.h"

#include <dlfcn.h>

#include <cstdlib>

#include <mutex>

namespace planc {

template <typename F>
static bool load(void* lib, F* fn, const char* name, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn == nullptr) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
    return false;
  }
  return true;
}

static CudaApi g_api;
static std::string g_why;
static bool g_ok = false;

const char* cuda_driver_library() {
  const char* path = std::getenv("PLANC_CUDA_DRIVER");
  return path != nullptr && *path != 0 ? path : "libcuda.so.1";
}

static void load_api() {
  const char* path = cuda_driver_library();
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    g_why = std::string(path) == "libcuda.so.1" ? std::string("libcuda.so.1 not found (no NVIDIA driver on this machine)")
                                                : std::string("PLANC_CUDA_DRIVER=") + path + " does not load: " + dlerror();
    return;
  }
  std::string missing;
  CudaApi& a = g_api;
  bool ok = true;
  ok &= load(lib, &a.cuInit, "cuInit", &missing);
  ok &= load(lib, &a.cuDriverGetVersion, "cuDriverGetVersion", &missing);
  ok &= load(lib, &a.cuDeviceGetCount, "cuDeviceGetCount", &missing);
  ok &= load(lib, &a.cuDeviceGet, "cuDeviceGet", &missing);
  ok &= load(lib, &a.cuDeviceGetName, "cuDeviceGetName", &missing);
  ok &= load(lib, &a.cuDeviceGetAttribute, "cuDeviceGetAttribute", &missing);
  ok &= load(lib, &a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", &missing);
  ok &= load(lib, &a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", &missing);
  ok &= load(lib, &a.cuCtxSetCurrent, "cuCtxSetCurrent", &missing);
  ok &= load(lib, &a.cuStreamCreate, "cuStreamCreate", &missing);
  ok &= load(lib, &a.cuStreamDestroy, "cuStreamDestroy_v2", &missing);
  ok &= load(lib, &a.cuStreamSynchronize, "cuStreamSynchronize", &missing);
  ok &= load(lib, &a.cuModuleLoadData, "cuModuleLoadData", &missing);
  ok &= load(lib, &a.cuModuleUnload, "cuModuleUnload", &missing);
  ok &= load(lib, &a.cuModuleGetFunction, "cuModuleGetFunction", &missing);
  ok &= load(lib, &a.cuModuleGetGlobal, "cuModuleGetGlobal_v2", &missing);
  ok &= load(lib, &a.cuMemAlloc, "cuMemAlloc_v2", &missing);
  ok &= load(lib, &a.cuMemFree, "cuMemFree_v2", &missing);
  ok &= load(lib, &a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", &missing);
  ok &= load(lib, &a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", &missing);
  ok &= load(lib, &a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", &missing);
  ok &= load(lib, &a.cuMemcpy2DAsync, "cuMemcpy2DAsync_v2", &missing);
  ok &= load(lib, &a.cuMemsetD8Async, "cuMemsetD8Async", &missing);
  ok &= load(lib, &a.cuLaunchKernel, "cuLaunchKernel", &missing);
  ok &= load(lib, &a.cuStreamBeginCapture, "cuStreamBeginCapture_v2", &missing);
  ok &= load(lib, &a.cuStreamEndCapture, "cuStreamEndCapture", &missing);
  ok &= load(lib, &a.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", &missing);
  ok &= load(lib, &a.cuGraphLaunch, "cuGraphLaunch", &missing);
  ok &= load(lib, &a.cuGraphExecDestroy, "cuGraphExecDestroy", &missing);
  ok &= load(lib, &a.cuGraphDestroy, "cuGraphDestroy", &missing);
  ok &= load(lib, &a.cuGetErrorName, "cuGetErrorName", &missing);
  if (!ok) {
    g_why = "libcuda.so.1 lacks " + missing + " (driver too old: planc needs CUDA 12 or newer)";
    return;
  }
  CUresult rc = a.cuInit(0);
  if (rc != 0) {
    g_why = cu_error(a, "cuInit", rc);
    return;
  }
  g_ok = true;
}

const CudaApi* cuda_api(std::string* why) {
  static std::once_flag once;
  std::call_once(once, load_api);
  if (!g_ok) {
    *why = g_why;
    return nullptr;
  }
  return &g_api;
}

std::string cu_error(const CudaApi& api, const char* call, CUresult rc) {
  const char* name = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(rc, &name) != 0 || name == nullptr) name = "unknown CUresult";
  return std::string(call) + " failed: " + name + " (" + std::to_string(rc) + ")";
}

}  // namespace planc
