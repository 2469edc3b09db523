// A fake libcuda.so.1 for testing the CUDA launcher without a GPU: "device" memory is host memory, copies are memcpy,
// and each cuLaunchKernel appends one line to $PLANC_CUDA_STUB_LOG (entry, grid, block, the call index, operand
// dims). No kernel runs, so outputs are whatever the arena held; the test checks the plumbing, not the numbers.
// Each memory copy appends one line to $PLANC_CUDA_STUB_COPY_LOG: "HtoD <bytes>", "DtoH <bytes>" ("DtoH <bytes> err"
// for the kernel error word), "DtoD <bytes>" or "2D <width> x <height>" (device to device, pitched).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static unsigned long long g_error_word;

CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int i) { (void)i; *d = 0; return 0; }
CUresult cuDeviceGetName(char* s, int n, int d) { (void)d; snprintf(s, (size_t)n, "planc stub GPU"); return 0; }
CUresult cuDeviceGetAttribute(int* v, int attr, int d) { (void)d; *v = attr == 75 ? 9 : attr == 11 ? 2147483647 : 0; return 0; }
CUresult cuDevicePrimaryCtxRetain(void** c, int d) { (void)d; *c = (void*)0x1; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }
CUresult cuCtxSetCurrent(void* c) { (void)c; return 0; }
CUresult cuStreamCreate(void** s, unsigned f) { (void)f; *s = (void*)0x2; return 0; }
CUresult cuStreamDestroy_v2(void* s) { (void)s; return 0; }
CUresult cuStreamSynchronize(void* s) { (void)s; return 0; }
CUresult cuModuleLoadData(void** m, const void* image) { (void)image; *m = (void*)0x3; return 0; }
CUresult cuModuleUnload(void* m) { (void)m; return 0; }
CUresult cuModuleGetFunction(void** f, void* m, const char* name) { (void)m; *f = strdup(name); return 0; }
CUresult cuModuleGetGlobal_v2(CUdeviceptr* p, size_t* bytes, void* m, const char* name) {
  (void)m;
  if (strcmp(name, "planc_error") != 0) return 500;  // CUDA_ERROR_NOT_FOUND
  *p = (CUdeviceptr)(uintptr_t)&g_error_word;
  *bytes = sizeof g_error_word;
  return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  void* m = aligned_alloc(256, (n + 255) / 256 * 256);
  if (!m) return 2;  // CUDA_ERROR_OUT_OF_MEMORY
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) { free((void*)(uintptr_t)p); return 0; }
static void log_copy(const char* kind, size_t bytes, size_t height, int err) {
  const char* path = getenv("PLANC_CUDA_STUB_COPY_LOG");
  FILE* log = path ? fopen(path, "a") : NULL;
  if (!log) return;
  if (height) fprintf(log, "%s %zu x %zu\n", kind, bytes, height);
  else fprintf(log, "%s %zu%s\n", kind, bytes, err ? " err" : "");
  fclose(log);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, void* st) {
  (void)st;
  log_copy("HtoD", n, 0, 0);
  memcpy((void*)(uintptr_t)d, s, n);
  return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, void* st) {
  (void)st;
  log_copy("DtoH", n, 0, s == (CUdeviceptr)(uintptr_t)&g_error_word);
  memcpy(d, (const void*)(uintptr_t)s, n);
  return 0;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void* st) {
  (void)st;
  log_copy("DtoD", n, 0, 0);
  memmove((void*)(uintptr_t)d, (const void*)(uintptr_t)s, n);
  return 0;
}

// CUDA_MEMCPY2D (_v2 layout): device to device only here.
typedef struct {
  size_t srcXInBytes, srcY; unsigned srcMemoryType; const void* srcHost; CUdeviceptr srcDevice; void* srcArray; size_t srcPitch;
  size_t dstXInBytes, dstY; unsigned dstMemoryType; void* dstHost; CUdeviceptr dstDevice; void* dstArray; size_t dstPitch;
  size_t WidthInBytes, Height;
} StubMemcpy2D;

CUresult cuMemcpy2DAsync_v2(const StubMemcpy2D* c, void* st) {
  (void)st;
  if (c->srcMemoryType != 2 || c->dstMemoryType != 2 || c->WidthInBytes > c->srcPitch || c->WidthInBytes > c->dstPitch) return 1;  // CUDA_ERROR_INVALID_VALUE
  log_copy("2D", c->WidthInBytes, c->Height, 0);
  for (size_t y = 0; y < c->Height; y++) {
    memmove((void*)(uintptr_t)(c->dstDevice + c->dstXInBytes + (c->dstY + y) * c->dstPitch),
            (const void*)(uintptr_t)(c->srcDevice + c->srcXInBytes + (c->srcY + y) * c->srcPitch), c->WidthInBytes);
  }
  return 0;
}
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void* st) { (void)st; memset((void*)(uintptr_t)d, v, n); return 0; }

// Mirrors planc::KArgs (codegen/cuda/kernels/common.cuh).
typedef struct { uint64_t data; int64_t numel; int32_t rank, dtype; int64_t dims[8]; } StubTensor;
typedef struct { StubTensor in[8], out[4]; int64_t iargs[32]; double fargs[4]; uint64_t scratch; int32_t n_in, n_out, call, pad; } StubArgs;

CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
                        void* stream, void** params, void** extra) {
  (void)by; (void)bz; (void)smem; (void)stream; (void)extra;
  const StubArgs* a = (const StubArgs*)params[0];
  const char* path = getenv("PLANC_CUDA_STUB_LOG");
  FILE* log = path ? fopen(path, "a") : NULL;
  if (log) {
    fprintf(log, "%s grid=%u,%u,%u block=%u call=%d", (const char*)f, gx, gy, gz, bx, a->call);
    for (int i = 0; i < a->n_in + a->n_out; i++) {
      const StubTensor* t = i < a->n_in ? &a->in[i] : &a->out[i - a->n_in];
      fprintf(log, " %s[", i < a->n_in ? "in" : "out");
      for (int d = 0; d < t->rank; d++) fprintf(log, d ? ",%lld" : "%lld", (long long)t->dims[d]);
      fprintf(log, "]%s", t->data ? "" : "null");
    }
    fprintf(log, "\n");
    fclose(log);
  }
  if (getenv("PLANC_CUDA_STUB_FAIL_CALL") && atoi(getenv("PLANC_CUDA_STUB_FAIL_CALL")) == a->call) g_error_word = ((unsigned long long)(a->call + 1) << 32) | 1u;
  return 0;
}

CUresult cuStreamBeginCapture_v2(void* s, int mode) { (void)s; (void)mode; return 0; }
CUresult cuStreamEndCapture(void* s, void** g) { (void)s; *g = (void*)0x4; return 0; }
CUresult cuGraphInstantiateWithFlags(void** e, void* g, unsigned long long f) { (void)g; (void)f; *e = (void*)0x5; return 0; }
CUresult cuGraphLaunch(void* e, void* s) { (void)e; (void)s; return 0; }
CUresult cuGraphExecDestroy(void* e) { (void)e; return 0; }
CUresult cuGraphDestroy(void* g) { (void)g; return 0; }
CUresult cuGetErrorName(CUresult rc, const char** s) { *s = rc == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_STUB"; return 0; }
