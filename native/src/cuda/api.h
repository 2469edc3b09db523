// The few CUDA driver API types and functions planc uses, declared here and loaded from libcuda.so.1 with dlsym
// (the addon never links CUDA, so it builds and loads on machines without it).
#pragma once
#include <cstddef>
#include <string>

namespace planc {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

constexpr int kCuStreamNonBlocking = 1;
constexpr int kCuCaptureModeThreadLocal = 1;
constexpr int kCuAttrCcMajor = 75, kCuAttrCcMinor = 76, kCuAttrMaxPitch = 11;
constexpr unsigned kCuMemoryTypeDevice = 2;

// CUDA_MEMCPY2D (the _v2 layout of cuda.h: size_t fields) for cuMemcpy2DAsync_v2.
struct CuMemcpy2D {
  size_t srcXInBytes, srcY;
  unsigned srcMemoryType;
  const void* srcHost;
  CUdeviceptr srcDevice;
  void* srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  unsigned dstMemoryType;
  void* dstHost;
  CUdeviceptr dstDevice;
  void* dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
};

// Function pointers, named after the driver symbols they are loaded from (the _v2 ones where the API has them).
struct CudaApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);  // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);  // _v2
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuModuleGetGlobal)(CUdeviceptr*, size_t*, CUmodule, const char*);  // _v2
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);                                 // _v2
  CUresult (*cuMemFree)(CUdeviceptr);                                           // _v2
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);   // _v2
  CUresult (*cuMemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);         // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);   // _v2
  CUresult (*cuMemcpy2DAsync)(const CuMemcpy2D*, CUstream);                    // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                             void**, void**);
  CUresult (*cuStreamBeginCapture)(CUstream, int);  // _v2
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuGetErrorName)(CUresult, const char**);
};

// The driver library: $PLANC_CUDA_DRIVER (the CPU emulator, native/cudasim, chosen by --device sim), else libcuda.so.1.
const char* cuda_driver_library();

// The table, loaded and cuInit'ed once; nullptr with *why set when there is no usable driver.
const CudaApi* cuda_api(std::string* why);

// "cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2)".
std::string cu_error(const CudaApi& api, const char* call, CUresult rc);

}  // namespace planc
