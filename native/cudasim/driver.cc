// cudasim's libcuda.so.1: exactly the driver entry points native/src/cuda/api.cc loads, on the CPU. Device memory is
// guarded host memory; cuModuleLoadData takes the plan's CUDA source (not a fatbin), builds it with g++ against
// cudasim.h (compile.cc, cached) and dlopens it; cuLaunchKernel runs the grid there (fibers.h) with memory faults caught;
// streams run in order at once; stream capture records the calls into a graph that cuGraphLaunch replays in order.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compile.h"
#include "guard.h"

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;

enum : int {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNotInitialized = 3,
  kInvalidImage = 200,
  kInvalidContext = 201,
  kInvalidSource = 300,
  kNotFound = 500,
  kInvalidHandle = 400,
  kIllegalAddress = 700,
  kLaunchOutOfResources = 701,
  kLaunchFailed = 719,
  kNotSupported = 801,
  kCaptureUnsupported = 900,
  kCaptureInvalidated = 901,
  kUnknown = 999,
};

struct ModuleEntry {
  const char* name;
  void (*fn)(void**);
  int max_threads;
  int n_params;
  int param_bytes[16];
};

struct Module {
  void* lib = nullptr;
  std::string path;
  int (*count)() = nullptr;
  const ModuleEntry* (*entry)(int) = nullptr;
  const char* (*launch)(int, const unsigned*, const unsigned*, unsigned, void**, unsigned long long) = nullptr;
  void (*where)(char*, unsigned long) = nullptr;
};

struct Function {
  Module* module;
  int index;
  const ModuleEntry* entry;
};

// One recorded stream operation (run at once, or kept in a graph while capturing).
struct Op {
  enum Kind { kCopy, kCopy2D, kSet, kLaunch } kind = kCopy;
  // kCopy: dst, src, bytes. kSet: dst, value, bytes.
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  unsigned char value = 0;
  // kCopy2D
  size_t src_pitch = 0, dst_pitch = 0, width = 0, height = 0;
  // kLaunch
  Function* fn = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, smem = 0;
  std::vector<std::vector<unsigned char>> params;  // the parameter values, copied as the driver does at launch
};

struct Stream {
  bool capturing = false;
  std::vector<Op> captured;
};

struct Graph {
  std::vector<Op> ops;
};

std::recursive_mutex g_mu;
bool g_inited = false;
CUresult g_sticky = kSuccess;  // a faulted kernel leaves the context unusable, as on the device
std::map<uintptr_t, size_t> g_globals;  // module globals handed out by cuModuleGetGlobal: address → bytes
int g_ctx_dummy = 0;
bool g_announced = false;

// PLANC_CUDASIM_STATS=1: kernel launches run directly and from graph replays, printed at exit (tests read them).
struct Stats {
  unsigned long long direct = 0, replayed = 0, graphs = 0, captured = 0;
  ~Stats() {
    if (getenv("PLANC_CUDASIM_STATS") != nullptr)
      fprintf(stderr, "cudasim stats: %llu launches, %llu graph launches replaying %llu kernel launches, %llu captured\n", direct, graphs,
              replayed, captured);
  }
} g_stats;

uint64_t seed() {
  const char* s = getenv("PLANC_CUDASIM_SEED");
  return s != nullptr ? strtoull(s, nullptr, 10) : 0;
}

void say(const std::string& s) { fprintf(stderr, s.rfind("cudasim", 0) == 0 ? "%s\n" : "cudasim: %s\n", s.c_str()); }

// [p, p + n) lies in a device allocation or a module global.
bool device_range(const void* p, size_t n) {
  if (n == 0) return true;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uintptr_t base = 0;
  {
    std::lock_guard<std::mutex> lock(cudasim::alloc_mutex());
    if (cudasim::allocation_of(a, n, &base) != nullptr) return true;
  }
  auto it = g_globals.upper_bound(a);
  if (it == g_globals.begin()) return false;
  --it;
  return a + n <= it->first + it->second;
}

CUresult check_range(const void* p, size_t n, const char* call) {
  if (device_range(p, n)) return kSuccess;
  char buf[200];
  snprintf(buf, sizeof buf, "%s: [%p, +%zu) is not inside one device allocation", call, p, n);
  say(buf);
  return kInvalidValue;
}

CUresult run_launch(Op& op) {
  Function* f = op.fn;
  std::vector<void*> ptrs;
  for (auto& p : op.params) ptrs.push_back(p.data());
  struct Call {
    Function* f;
    Op* op;
    void** params;
    const char* error;
  } call{f, &op, ptrs.data(), nullptr};
  std::string fault;
  const bool no_fault = cudasim::run_guarded(
      [](void* c) {
        Call* k = static_cast<Call*>(c);
        k->error = k->f->module->launch(k->f->index, k->op->grid, k->op->block, k->op->smem, k->params, seed());
      },
      &call, f->module->where, &fault);
  if (!no_fault) {
    say(fault);
    g_sticky = kIllegalAddress;
    return kIllegalAddress;
  }
  if (call.error != nullptr) {
    say(call.error);
    g_sticky = kLaunchFailed;
    return kLaunchFailed;
  }
  return kSuccess;
}

CUresult run_op(Op& op) {
  switch (op.kind) {
    case Op::kCopy:
      memmove(op.dst, op.src, op.bytes);
      return kSuccess;
    case Op::kSet:
      memset(op.dst, op.value, op.bytes);
      return kSuccess;
    case Op::kCopy2D:
      for (size_t r = 0; r < op.height; r++)
        memmove(static_cast<unsigned char*>(op.dst) + r * op.dst_pitch, static_cast<const unsigned char*>(op.src) + r * op.src_pitch, op.width);
      return kSuccess;
    case Op::kLaunch:
      return run_launch(op);
  }
  return kUnknown;
}

// Runs op now, or records it when the stream captures.
CUresult submit(void* stream, Op&& op) {
  if (g_sticky != kSuccess) return g_sticky;
  Stream* s = static_cast<Stream*>(stream);
  if (s != nullptr && s->capturing) {
    g_stats.captured += op.kind == Op::kLaunch;
    s->captured.push_back(std::move(op));
    return kSuccess;
  }
  g_stats.direct += op.kind == Op::kLaunch;
  return run_op(op);
}

}  // namespace

#define CUDASIM_API extern "C" __attribute__((visibility("default")))

CUDASIM_API CUresult cuInit(unsigned) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_inited = true;
  if (!g_announced && getenv("PLANC_CUDASIM_QUIET") == nullptr) {
    say("emulating the CUDA device on the CPU (slow: for checking kernels, not for speed)");
    g_announced = true;
  }
  return kSuccess;
}
CUDASIM_API CUresult cuDriverGetVersion(int* v) {
  if (v == nullptr) return kInvalidValue;
  *v = 12040;
  return kSuccess;
}
CUDASIM_API CUresult cuDeviceGetCount(int* n) {
  if (n == nullptr) return kInvalidValue;
  *n = g_inited ? 1 : 0;
  return g_inited ? kSuccess : kNotInitialized;
}
CUDASIM_API CUresult cuDeviceGet(int* d, int ordinal) {
  if (d == nullptr || ordinal != 0) return kInvalidValue;
  *d = 0;
  return kSuccess;
}
CUDASIM_API CUresult cuDeviceGetName(char* name, int len, int) {
  if (name == nullptr || len <= 0) return kInvalidValue;
  snprintf(name, static_cast<size_t>(len), "planc cudasim (emulated on the CPU)");
  return kSuccess;
}
CUDASIM_API CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  if (v == nullptr) return kInvalidValue;
  switch (attr) {
    case 75: *v = 8; break;              // compute capability major
    case 76: *v = 0; break;              // minor
    case 11: *v = 2147483647; break;     // max pitch
    case 1: *v = 1024; break;            // max threads per block
    case 8: *v = 48 * 1024; break;       // max shared memory per block
    case 10: *v = 32; break;             // warp size
    default: *v = 0;
  }
  return kSuccess;
}
CUDASIM_API CUresult cuDevicePrimaryCtxRetain(void** ctx, int) {
  if (ctx == nullptr) return kInvalidValue;
  *ctx = &g_ctx_dummy;
  return kSuccess;
}
CUDASIM_API CUresult cuDevicePrimaryCtxRelease_v2(int) { return kSuccess; }
CUDASIM_API CUresult cuCtxSetCurrent(void*) { return kSuccess; }

CUDASIM_API CUresult cuStreamCreate(void** s, unsigned) {
  if (s == nullptr) return kInvalidValue;
  *s = new Stream;
  return kSuccess;
}
CUDASIM_API CUresult cuStreamDestroy_v2(void* s) {
  delete static_cast<Stream*>(s);
  return kSuccess;
}
CUDASIM_API CUresult cuStreamSynchronize(void* s) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (s != nullptr && static_cast<Stream*>(s)->capturing) return kCaptureUnsupported;
  return g_sticky;
}

CUDASIM_API CUresult cuModuleLoadData(void** module, const void* image) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (module == nullptr || image == nullptr) return kInvalidValue;
  uint32_t magic = 0;
  memcpy(&magic, image, 4);
  if (magic == 0xBA55ED50u || magic == 0x464C457Fu) {
    say("cuModuleLoadData: this is a fatbin/cubin; the emulator loads the plan's CUDA source (select it with --device sim / PLANC_DEVICE=sim)");
    return kInvalidImage;
  }
  std::string so, err;
  if (!cudasim::build_module(static_cast<const char*>(image), &so, &err)) {
    say(err);
    return kInvalidSource;
  }
  auto m = std::make_unique<Module>();
  m->path = so;
  m->lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (m->lib == nullptr) {
    say(std::string("cannot load the module: ") + dlerror());
    return kInvalidImage;
  }
  m->count = reinterpret_cast<int (*)()>(dlsym(m->lib, "cudasim_module_entry_count"));
  m->entry = reinterpret_cast<const ModuleEntry* (*)(int)>(dlsym(m->lib, "cudasim_module_entry"));
  m->launch = reinterpret_cast<const char* (*)(int, const unsigned*, const unsigned*, unsigned, void**, unsigned long long)>(
      dlsym(m->lib, "cudasim_module_launch"));
  m->where = reinterpret_cast<void (*)(char*, unsigned long)>(dlsym(m->lib, "cudasim_module_where"));
  if (m->count == nullptr || m->entry == nullptr || m->launch == nullptr || m->where == nullptr) {
    say("the module lacks the cudasim entry table (was it built with cudasim.h?)");
    dlclose(m->lib);
    return kInvalidImage;
  }
  *module = m.release();
  return kSuccess;
}
CUDASIM_API CUresult cuModuleUnload(void* module) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (module == nullptr) return kInvalidHandle;
  // The module (and its library) stays: functions handed out may outlive it in captured graphs.
  return kSuccess;
}
CUDASIM_API CUresult cuModuleGetFunction(void** fn, void* module, const char* name) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Module* m = static_cast<Module*>(module);
  if (fn == nullptr || m == nullptr || name == nullptr) return kInvalidValue;
  for (int i = 0; i < m->count(); i++) {
    const ModuleEntry* e = m->entry(i);
    if (strcmp(e->name, name) == 0) {
      *fn = new Function{m, i, e};
      return kSuccess;
    }
  }
  return kNotFound;
}
CUDASIM_API CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, void* module, const char* name) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Module* m = static_cast<Module*>(module);
  if (m == nullptr || name == nullptr) return kInvalidValue;
  void* p = dlsym(m->lib, name);
  if (p == nullptr) return kNotFound;
  Dl_info info{};
  const void* sym = nullptr;
  size_t size = 8;
  if (dladdr1(p, &info, const_cast<void**>(&sym), RTLD_DL_SYMENT) != 0 && sym != nullptr) {
    const auto* s = static_cast<const unsigned char*>(sym);
    uint64_t st_size = 0;
    memcpy(&st_size, s + 16, 8);  // Elf64_Sym: name 4, info 1, other 1, shndx 2, value 8, size 8
    if (st_size > 0) size = st_size;
  }
  g_globals[reinterpret_cast<uintptr_t>(p)] = size;
  if (dptr != nullptr) *dptr = reinterpret_cast<uintptr_t>(p);
  if (bytes != nullptr) *bytes = size;
  return kSuccess;
}

CUDASIM_API CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return kInvalidValue;
  void* m = cudasim::guarded_alloc(bytes);
  if (m == nullptr) return kOutOfMemory;
  *p = reinterpret_cast<uintptr_t>(m);
  return kSuccess;
}
CUDASIM_API CUresult cuMemFree_v2(CUdeviceptr p) {
  if (p == 0) return kSuccess;
  return cudasim::guarded_free(reinterpret_cast<void*>(p)) ? kSuccess : kInvalidValue;
}

CUDASIM_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  void* d = reinterpret_cast<void*>(dst);
  if (CUresult rc = check_range(d, n, "cuMemcpyHtoDAsync")) return rc;
  Op op;
  op.kind = Op::kCopy;
  op.dst = d;
  op.src = src;
  op.bytes = n;
  return submit(stream, std::move(op));
}
CUDASIM_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const void* s = reinterpret_cast<const void*>(src);
  if (CUresult rc = check_range(s, n, "cuMemcpyDtoHAsync")) return rc;
  Op op;
  op.kind = Op::kCopy;
  op.dst = dst;
  op.src = s;
  op.bytes = n;
  return submit(stream, std::move(op));
}
CUDASIM_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  void* d = reinterpret_cast<void*>(dst);
  const void* s = reinterpret_cast<const void*>(src);
  if (CUresult rc = check_range(d, n, "cuMemcpyDtoDAsync (dst)")) return rc;
  if (CUresult rc = check_range(s, n, "cuMemcpyDtoDAsync (src)")) return rc;
  Op op;
  op.kind = Op::kCopy;
  op.dst = d;
  op.src = s;
  op.bytes = n;
  return submit(stream, std::move(op));
}

// CUDA_MEMCPY2D, the _v2 layout (as native/src/cuda/api.h).
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

CUDASIM_API CUresult cuMemcpy2DAsync_v2(const CuMemcpy2D* c, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (c == nullptr) return kInvalidValue;
  const unsigned kHost = 1, kDevice = 2;
  if ((c->srcMemoryType != kHost && c->srcMemoryType != kDevice) || (c->dstMemoryType != kHost && c->dstMemoryType != kDevice))
    return kNotSupported;
  const unsigned char* s = c->srcMemoryType == kHost ? static_cast<const unsigned char*>(c->srcHost)
                                                     : reinterpret_cast<const unsigned char*>(c->srcDevice);
  unsigned char* d = c->dstMemoryType == kHost ? static_cast<unsigned char*>(c->dstHost) : reinterpret_cast<unsigned char*>(c->dstDevice);
  s += c->srcY * c->srcPitch + c->srcXInBytes;
  d += c->dstY * c->dstPitch + c->dstXInBytes;
  if (c->Height > 0 && c->WidthInBytes > 0) {
    const size_t sspan = (c->Height - 1) * c->srcPitch + c->WidthInBytes, dspan = (c->Height - 1) * c->dstPitch + c->WidthInBytes;
    if (c->srcMemoryType == kDevice)
      if (CUresult rc = check_range(s, sspan, "cuMemcpy2DAsync (src)")) return rc;
    if (c->dstMemoryType == kDevice)
      if (CUresult rc = check_range(d, dspan, "cuMemcpy2DAsync (dst)")) return rc;
  }
  Op op;
  op.kind = Op::kCopy2D;
  op.dst = d;
  op.src = s;
  op.src_pitch = c->srcPitch;
  op.dst_pitch = c->dstPitch;
  op.width = c->WidthInBytes;
  op.height = c->Height;
  return submit(stream, std::move(op));
}
CUDASIM_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  void* d = reinterpret_cast<void*>(dst);
  if (CUresult rc = check_range(d, n, "cuMemsetD8Async")) return rc;
  Op op;
  op.kind = Op::kSet;
  op.dst = d;
  op.value = v;
  op.bytes = n;
  return submit(stream, std::move(op));
}

CUDASIM_API CUresult cuLaunchKernel(void* fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                    unsigned smem, void* stream, void** params, void** extra) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Function* f = static_cast<Function*>(fn);
  if (f == nullptr) return kInvalidHandle;
  if (extra != nullptr) return kNotSupported;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || uint64_t{bx} * by * bz > 1024) return kInvalidValue;
  if (smem > 227 * 1024) return kInvalidValue;
  if (f->entry->max_threads > 0 && bx * by * bz > static_cast<unsigned>(f->entry->max_threads)) return kLaunchOutOfResources;
  if (f->entry->n_params > 0 && params == nullptr) return kInvalidValue;
  Op op;
  op.kind = Op::kLaunch;
  op.fn = f;
  op.grid[0] = gx, op.grid[1] = gy, op.grid[2] = gz;
  op.block[0] = bx, op.block[1] = by, op.block[2] = bz;
  op.smem = smem;
  for (int i = 0; i < f->entry->n_params; i++) {
    const auto* p = static_cast<const unsigned char*>(params[i]);
    op.params.emplace_back(p, p + f->entry->param_bytes[i]);
  }
  return submit(stream, std::move(op));
}

CUDASIM_API CUresult cuStreamBeginCapture_v2(void* stream, int) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Stream* s = static_cast<Stream*>(stream);
  if (s == nullptr) return kNotSupported;  // the legacy stream cannot capture
  if (s->capturing) return kCaptureUnsupported;
  s->capturing = true;
  s->captured.clear();
  return kSuccess;
}
CUDASIM_API CUresult cuStreamEndCapture(void* stream, void** graph) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Stream* s = static_cast<Stream*>(stream);
  if (s == nullptr || !s->capturing || graph == nullptr) return kInvalidValue;
  s->capturing = false;
  Graph* g = new Graph;
  g->ops = std::move(s->captured);
  s->captured.clear();
  *graph = g;
  return kSuccess;
}
CUDASIM_API CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  if (exec == nullptr || graph == nullptr) return kInvalidValue;
  *exec = new Graph(*static_cast<Graph*>(graph));
  return kSuccess;
}
CUDASIM_API CUresult cuGraphLaunch(void* exec, void* stream) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Graph* g = static_cast<Graph*>(exec);
  if (g == nullptr) return kInvalidHandle;
  Stream* s = static_cast<Stream*>(stream);
  if (s != nullptr && s->capturing) return kCaptureUnsupported;
  if (g_sticky != kSuccess) return g_sticky;
  g_stats.graphs++;
  for (Op& op : g->ops) {
    g_stats.replayed += op.kind == Op::kLaunch;
    if (CUresult rc = run_op(op)) return rc;
  }
  return kSuccess;
}
CUDASIM_API CUresult cuGraphExecDestroy(void* exec) {
  delete static_cast<Graph*>(exec);
  return kSuccess;
}
CUDASIM_API CUresult cuGraphDestroy(void* graph) {
  delete static_cast<Graph*>(graph);
  return kSuccess;
}

CUDASIM_API CUresult cuGetErrorName(CUresult rc, const char** name) {
  if (name == nullptr) return kInvalidValue;
  switch (rc) {
    case kSuccess: *name = "CUDA_SUCCESS"; break;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case kNotInitialized: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case kInvalidContext: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case kInvalidSource: *name = "CUDA_ERROR_INVALID_SOURCE"; break;
    case kInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; break;
    case kIllegalAddress: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    case kLaunchOutOfResources: *name = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; break;
    case kLaunchFailed: *name = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case kNotSupported: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case kCaptureUnsupported: *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case kCaptureInvalidated: *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    default: *name = "CUDA_ERROR_UNKNOWN"; return kInvalidValue;
  }
  return kSuccess;
}
