// CUDA driver probe: dlopen of libcuda.so.1 and cuInit/cuDeviceGetCount through dlsym, only to report availability.
#include "driver.h"

#include "api.h"

#include <dlfcn.h>

#include <mutex>

namespace planc {

using CuInitFn = int (*)(unsigned int);
using CuCountFn = int (*)(int*);
using CuVersionFn = int (*)(int*);

static CudaStatus probe() {
  void* lib = dlopen(cuda_driver_library(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return {false, std::string("no GPU: ") + cuda_driver_library() + " not found"};
  auto init = reinterpret_cast<CuInitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CuCountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto version = reinterpret_cast<CuVersionFn>(dlsym(lib, "cuDriverGetVersion"));
  if (init == nullptr || count == nullptr || version == nullptr) return {false, "no GPU: libcuda.so.1 lacks cuInit/cuDeviceGetCount"};
  int rc = init(0);
  if (rc != 0) return {false, "no GPU: cuInit failed with CUresult " + std::to_string(rc)};
  int devices = 0, driver = 0;
  rc = count(&devices);
  if (rc != 0) return {false, "no GPU: cuDeviceGetCount failed with CUresult " + std::to_string(rc)};
  version(&driver);
  std::string v = std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  if (devices == 0) return {false, "no GPU: CUDA driver " + v + " reports no devices"};
  return {true, "CUDA driver " + v + ", " + std::to_string(devices) + " device(s)"};
}

CudaStatus cuda_status() {
  static std::once_flag once;
  static CudaStatus status;
  std::call_once(once, [] { status = probe(); });
  return status;
}

}  // namespace planc
