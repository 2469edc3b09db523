// The CUDA executor: device memory for weights, arena, scratch and feeds; one cuLaunchKernel per program call with
// the by-value KArgs of codegen/cuda/kernels/common.cuh; optional CUDA-graph replay. Every driver call is checked.
#include "launch.h"

#include <cstdlib>
#include <cstring>

#include "../kernel.h"
#include "../plan_state.h"
#include "api.h"
#include "plan.h"

namespace planc {

// ---- the launch ABI (must match codegen/cuda/kernels/common.cuh) ----
constexpr int kCuMaxIn = 8, kCuMaxOut = 4, kCuMaxIargs = 32, kCuMaxFargs = 4;

struct CuTensor {
  uint64_t data;
  int64_t numel;
  int32_t rank;
  int32_t dtype;
  int64_t dims[kMaxRank];
};

struct CuArgs {
  CuTensor in[kCuMaxIn];
  CuTensor out[kCuMaxOut];
  int64_t iargs[kCuMaxIargs];
  double fargs[kCuMaxFargs];
  uint64_t scratch;
  int32_t n_in, n_out;
  int32_t call;
  int32_t pad;
};
static_assert(sizeof(CuTensor) == 88, "CuTensor must match planc::Tensor of common.cuh");
static_assert(sizeof(CuArgs) == 1368, "CuArgs must match planc::KArgs of common.cuh");

// Messages of the kernels' error codes (common.cuh enum Err).
static const char* kernel_error_text(unsigned code) {
  switch (code) {
    case 1: return "an index is out of range";
    case 2: return "a slice reads outside its input";
    case 3: return "operand dims do not fit the kernel";
    case 4: return "the cache write goes past the cache capacity";
    case 5: return "kv_len is outside [1, cache capacity]";
    default: return "unknown kernel error";
  }
}

static size_t round_up(size_t n, size_t a = 256) { return (n + a - 1) / a * a; }

// ---- plan ----

#define PLANC_CU(call, what)                          \
  do {                                                \
    CUresult rc_ = (call);                            \
    if (rc_ != 0) {                                   \
      *err = cu_error(*api, what, rc_);               \
      return false;                                   \
    }                                                 \
  } while (0)

static bool plan_init(CudaPlan& p, const uint8_t* blob, size_t blob_bytes, const int64_t* pairs, size_t n_pairs,
                      int64_t arena_bytes, const uint8_t* fatbin, int64_t scratch_bytes, std::string* err) {
  const CudaApi* api = p.api;
  int count = 0;
  PLANC_CU(api->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (count < 1) {
    *err = "no CUDA device";
    return false;
  }
  PLANC_CU(api->cuDeviceGet(&p.dev, 0), "cuDeviceGet");
  char name[256] = {0};
  int major = 0, minor = 0;
  PLANC_CU(api->cuDeviceGetName(name, sizeof name - 1, p.dev), "cuDeviceGetName");
  PLANC_CU(api->cuDeviceGetAttribute(&major, kCuAttrCcMajor, p.dev), "cuDeviceGetAttribute");
  PLANC_CU(api->cuDeviceGetAttribute(&minor, kCuAttrCcMinor, p.dev), "cuDeviceGetAttribute");
  int max_pitch = 0;
  PLANC_CU(api->cuDeviceGetAttribute(&max_pitch, kCuAttrMaxPitch, p.dev), "cuDeviceGetAttribute(max pitch)");
  p.max_pitch = max_pitch > 0 ? static_cast<size_t>(max_pitch) : 0;
  p.device = std::string(name) + " (sm_" + std::to_string(major * 10 + minor) + ")";
  PLANC_CU(api->cuDevicePrimaryCtxRetain(&p.ctx, p.dev), "cuDevicePrimaryCtxRetain");
  PLANC_CU(api->cuCtxSetCurrent(p.ctx), "cuCtxSetCurrent");
  PLANC_CU(api->cuStreamCreate(&p.stream, kCuStreamNonBlocking), "cuStreamCreate");
  CUresult rc = api->cuModuleLoadData(&p.module, fatbin);
  if (rc != 0) {
    *err = cu_error(*api, "cuModuleLoadData", rc) + ": the plan's kernels do not load on " + p.device +
           " (re-optimize with --arch including this GPU's sm arch)";
    return false;
  }
  size_t global_bytes = 0;
  PLANC_CU(api->cuModuleGetGlobal(&p.err_global, &global_bytes, p.module, "planc_error"), "cuModuleGetGlobal(planc_error)");
  // Weights: one allocation, each weight 256-byte aligned.
  size_t total = 0;
  for (size_t i = 0; i < n_pairs; i++) {
    int64_t off = pairs[2 * i], len = pairs[2 * i + 1];
    if (off < 0 || len < 0 || static_cast<uint64_t>(off) > blob_bytes || static_cast<uint64_t>(len) > blob_bytes - static_cast<uint64_t>(off)) {
      *err = "weight #" + std::to_string(i) + " does not lie inside the blob";
      return false;
    }
    total += round_up(static_cast<size_t>(len));
  }
  PLANC_CU(api->cuMemAlloc(&p.weights, total > 0 ? total : 256), "cuMemAlloc(weights)");
  const size_t arena = round_up(static_cast<size_t>(arena_bytes) + 64);
  PLANC_CU(api->cuMemAlloc(&p.arena, arena), "cuMemAlloc(arena)");
  // PLANC_CUDA_POISON=1 (test:gpu): the arena starts as 0xff bytes (NaN floats), so an element no kernel writes shows.
  const unsigned char fill = std::getenv("PLANC_CUDA_POISON") != nullptr ? 0xff : 0;
  PLANC_CU(api->cuMemsetD8Async(p.arena, fill, arena, p.stream), "cuMemsetD8Async(arena)");
  const size_t scratch = round_up(static_cast<size_t>(scratch_bytes) + 64);
  PLANC_CU(api->cuMemAlloc(&p.scratch, scratch), "cuMemAlloc(scratch)");
  PLANC_CU(api->cuMemsetD8Async(p.scratch, 0, scratch, p.stream), "cuMemsetD8Async(scratch)");
  PlanState* shadow = new PlanState;
  p.shadow.reset(shadow, plan_free);  // its host bases stay null: plan_free only deletes it
  shadow->arena = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(p.arena));
  shadow->arena_bytes = static_cast<size_t>(arena_bytes);
  CUdeviceptr w = p.weights;
  for (size_t i = 0; i < n_pairs; i++) {
    size_t off = static_cast<size_t>(pairs[2 * i]), len = static_cast<size_t>(pairs[2 * i + 1]);
    if (len > 0) PLANC_CU(api->cuMemcpyHtoDAsync(w, blob + off, len, p.stream), "cuMemcpyHtoDAsync(weights)");
    shadow->weights.push_back(WeightSpan{reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(w)), len});
    w += round_up(len);
  }
  PLANC_CU(api->cuStreamSynchronize(p.stream), "cuStreamSynchronize(upload)");
  return true;
}

CudaPlan* cuda_plan_new(const uint8_t* blob, size_t blob_bytes, const int64_t* pairs, size_t n_pairs, int64_t arena_bytes,
                        const uint8_t* fatbin, size_t fatbin_bytes, int64_t scratch_bytes, std::string* err) {
  std::string why;
  const CudaApi* api = cuda_api(&why);
  if (api == nullptr) {
    *err = "no GPU: " + why;
    return nullptr;
  }
  if (fatbin_bytes == 0 || arena_bytes < 0 || scratch_bytes < 0) {
    *err = "bad CUDA plan: empty fatbin or negative sizes";
    return nullptr;
  }
  CudaPlan* p = new CudaPlan;
  p->api = api;
  if (!plan_init(*p, blob, blob_bytes, pairs, n_pairs, arena_bytes, fatbin, scratch_bytes, err)) {
    cuda_plan_free(p);
    return nullptr;
  }
  return p;
}

void cuda_plan_free(CudaPlan* p) {
  if (p == nullptr) return;
  const CudaApi* api = p->api;
  if (p->ctx != nullptr) api->cuCtxSetCurrent(p->ctx);
  if (p->stream != nullptr) api->cuStreamSynchronize(p->stream);
  for (CUdeviceptr d : {p->weights, p->arena, p->scratch}) {
    if (d != 0) api->cuMemFree(d);
  }
  if (p->module != nullptr) api->cuModuleUnload(p->module);
  if (p->stream != nullptr) api->cuStreamDestroy(p->stream);
  if (p->ctx != nullptr) api->cuDevicePrimaryCtxRelease(p->dev);
  delete p;
}

std::string cuda_plan_device(const CudaPlan* plan) { return plan->device; }

// ---- programs ----

struct GridRule {
  int32_t operand, from, to;
  int64_t div, mul;
};

struct Variant {
  CUfunction fn = nullptr;
  int32_t entry = 0;
  uint32_t block = 0;
  int64_t max_rows = 0;
  int n_grid = 0;
  GridRule grid[3];
};

struct CudaProgram {
  std::shared_ptr<CudaPlan> plan;
  Program* program = nullptr;
  std::vector<std::vector<Variant>> calls;
  std::vector<std::string> entries, nodes;
  std::vector<CUdeviceptr> feed_bufs;
  std::vector<size_t> feed_caps;
  std::vector<CuArgs> args;  // one per call, filled each run (graph replays read them when captured)
  std::string err;
  bool use_graph = false;
  CUgraphExec exec = nullptr;
  std::vector<int64_t> graph_key;
  ~CudaProgram();
};

CudaProgram::~CudaProgram() {
  const CudaApi* api = plan ? plan->api : nullptr;
  if (api != nullptr) {
    api->cuCtxSetCurrent(plan->ctx);
    if (exec != nullptr) api->cuGraphExecDestroy(exec);
    for (CUdeviceptr d : feed_bufs) {
      if (d != 0) api->cuMemFree(d);
    }
  }
  if (program != nullptr) program_free(program);
}

static bool decode_launches(CudaProgram& cp, const int64_t* w, size_t n, std::string* err) {
  size_t pos = 0;
  auto next = [&](int64_t lo, int64_t hi, const char* what, int64_t* v) {
    if (pos >= n) {
      *err = std::string("CUDA launch table ends while reading ") + what;
      return false;
    }
    *v = w[pos++];
    if (*v < lo || *v > hi) {
      *err = std::string("CUDA launch table: ") + what + " = " + std::to_string(*v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
      return false;
    }
    return true;
  };
  const size_t n_calls = program_n_kernels(cp.program);
  cp.calls.resize(n_calls);
  for (size_t k = 0; k < n_calls; k++) {
    const KernelArgs ka = program_kernel_args(cp.program, k);
    const int64_t n_operands = ka.n_in + ka.n_out;
    int64_t nv = 0;
    if (!next(1, 4, "a call's variant count", &nv)) return false;
    for (int64_t v = 0; v < nv; v++) {
      Variant var;
      int64_t entry, block, max_rows, n_grid;
      if (!next(0, static_cast<int64_t>(cp.entries.size()) - 1, "an entry index", &entry) || !next(1, 1024, "a block size", &block) ||
          !next(0, int64_t(1) << 40, "max_rows", &max_rows) || !next(0, 3, "a grid rank", &n_grid)) {
        return false;
      }
      var.entry = static_cast<int32_t>(entry);
      var.block = static_cast<uint32_t>(block);
      var.max_rows = max_rows;
      var.n_grid = static_cast<int>(n_grid);
      for (int g = 0; g < var.n_grid; g++) {
        int64_t op, from, to, div, mul;
        if (!next(0, n_operands - 1, "a grid operand", &op) || !next(0, kMaxRank, "a grid dim start", &from) ||
            !next(from, kMaxRank, "a grid dim end", &to) || !next(1, int64_t(1) << 31, "a grid divisor", &div) ||
            !next(1, int64_t(1) << 31, "a grid multiplier", &mul)) {
          return false;
        }
        var.grid[g] = GridRule{static_cast<int32_t>(op), static_cast<int32_t>(from), static_cast<int32_t>(to), div, mul};
      }
      CUresult rc = cp.plan->api->cuModuleGetFunction(&var.fn, cp.plan->module, cp.entries[static_cast<size_t>(entry)].c_str());
      if (rc != 0) {
        *err = cu_error(*cp.plan->api, "cuModuleGetFunction", rc) + " for entry " + cp.entries[static_cast<size_t>(entry)] + " (node " + cp.nodes[k] + ")";
        return false;
      }
      cp.calls[k].push_back(var);
    }
  }
  if (pos != n) {
    *err = "CUDA launch table has " + std::to_string(n - pos) + " words left over";
    return false;
  }
  return true;
}

CudaProgram* cuda_program_new(std::shared_ptr<CudaPlan> plan, const int64_t* code, size_t n_code, const int64_t* launches,
                              size_t n_launch, const std::vector<std::string>& entries, const std::vector<std::string>& nodes,
                              std::string* err) {
  if (plan == nullptr) {
    *err = "cuda_program_new: no plan";
    return nullptr;
  }
  CudaProgram* cp = new CudaProgram;
  cp->plan = plan;
  cp->entries = entries;
  cp->nodes = nodes;
  cp->program = program_new(plan->shadow, code, n_code, err);
  if (cp->program == nullptr) {
    delete cp;
    return nullptr;
  }
  if (nodes.size() != program_n_kernels(cp->program)) {
    *err = "cuda_program_new: " + std::to_string(nodes.size()) + " node names for " + std::to_string(program_n_kernels(cp->program)) + " kernels";
    delete cp;
    return nullptr;
  }
  CUresult rc = plan->api->cuCtxSetCurrent(plan->ctx);
  if (rc != 0) {
    *err = cu_error(*plan->api, "cuCtxSetCurrent", rc);
    delete cp;
    return nullptr;
  }
  if (!decode_launches(*cp, launches, n_launch, err)) {
    delete cp;
    return nullptr;
  }
  cp->args.resize(cp->calls.size());
  cp->feed_bufs.assign(program_n_inputs(cp->program), 0);
  cp->feed_caps.assign(program_n_inputs(cp->program), 0);
  return cp;
}

void cuda_program_free(CudaProgram* program) { delete program; }
size_t cuda_program_n_inputs(const CudaProgram* program) { return program_n_inputs(program->program); }
const CudaPlan* cuda_program_plan(const CudaProgram* program) { return program->plan.get(); }
size_t cuda_program_n_outputs(const CudaProgram* program) { return program_n_outputs(program->program); }
void cuda_program_set_graph(CudaProgram* program, bool on) { program->use_graph = on; }

// ---- runs ----

static const char* fail(CudaProgram& cp, std::string msg) {
  cp.err = std::move(msg);
  return cp.err.c_str();
}

static void fill_tensor(CuTensor& t, const TensorView& v) {
  t.data = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(v.data));
  t.numel = v.numel;
  t.rank = v.rank;
  t.dtype = v.dtype;
  for (int i = 0; i < kMaxRank; i++) t.dims[i] = i < v.rank ? v.dims[i] : 1;
}

// Grid of one variant from the resolved operands; false when there is nothing to do (a 0 dimension).
static bool grid_of(const Variant& v, const KernelArgs& ka, uint64_t g[3]) {
  g[0] = g[1] = g[2] = 1;
  for (int i = 0; i < v.n_grid; i++) {
    const GridRule& r = v.grid[i];
    const TensorView& t = r.operand < ka.n_in ? ka.in[r.operand] : ka.out[r.operand - ka.n_in];
    uint64_t p = static_cast<uint64_t>(r.mul);
    for (int d = r.from; d < r.to && d < t.rank; d++) p *= static_cast<uint64_t>(t.dims[d]);
    g[i] = (p + static_cast<uint64_t>(r.div) - 1) / static_cast<uint64_t>(r.div);
    if (g[i] == 0) return false;
  }
  return true;
}

static const Variant& pick_variant(const std::vector<Variant>& vs, const KernelArgs& ka) {
  const TensorView& y = ka.out[0];
  const int64_t last = y.rank > 0 ? y.dims[y.rank - 1] : 1;
  const int64_t rows = last > 0 ? y.numel / last : 0;
  for (const Variant& v : vs) {
    if (v.max_rows == 0 || rows <= v.max_rows) return v;
  }
  return vs.back();
}

// The launches of one run, on the plan's stream (also what a graph capture records).
static const char* launch_all(CudaProgram& cp) {
  const CudaApi& api = *cp.plan->api;
  static const bool sync_each = std::getenv("PLANC_CUDA_SYNC") != nullptr;
  for (size_t k = 0; k < cp.calls.size(); k++) {
    const KernelArgs ka = program_kernel_args(cp.program, k);
    const Variant& v = pick_variant(cp.calls[k], ka);
    uint64_t g[3];
    if (!grid_of(v, ka, g)) continue;
    if (g[0] >= (uint64_t(1) << 31) || g[1] > 65535 || g[2] > 65535) {
      return fail(cp, "kernel #" + std::to_string(k) + " (" + program_kernel_name(cp.program, k) + ", node " + cp.nodes[k] +
                          "): grid [" + std::to_string(g[0]) + ", " + std::to_string(g[1]) + ", " + std::to_string(g[2]) + "] is over the CUDA limits");
    }
    CuArgs& a = cp.args[k];
    std::memset(&a, 0, sizeof a);
    if (ka.n_in > kCuMaxIn || ka.n_out > kCuMaxOut || ka.n_iargs > kCuMaxIargs || ka.n_fargs > kCuMaxFargs) {
      return fail(cp, "kernel #" + std::to_string(k) + " (node " + cp.nodes[k] + ") has more arguments than a CUDA launch carries");
    }
    for (int i = 0; i < ka.n_in; i++) fill_tensor(a.in[i], ka.in[i]);
    for (int i = 0; i < ka.n_out; i++) fill_tensor(a.out[i], ka.out[i]);
    for (int i = 0; i < ka.n_iargs; i++) a.iargs[i] = ka.iargs[i];
    for (int i = 0; i < ka.n_fargs; i++) a.fargs[i] = ka.fargs[i];
    a.scratch = cp.plan->scratch;
    a.n_in = ka.n_in;
    a.n_out = ka.n_out;
    a.call = static_cast<int32_t>(k);
    void* params[] = {&a};
    CUresult rc = api.cuLaunchKernel(v.fn, static_cast<unsigned>(g[0]), static_cast<unsigned>(g[1]), static_cast<unsigned>(g[2]),
                                     v.block, 1, 1, 0, cp.plan->stream, params, nullptr);
    if (rc == 0 && sync_each) rc = api.cuStreamSynchronize(cp.plan->stream);
    if (rc != 0) {
      return fail(cp, cu_error(api, sync_each ? "cuLaunchKernel/cuStreamSynchronize" : "cuLaunchKernel", rc) + " in kernel #" + std::to_string(k) +
                          " (" + program_kernel_name(cp.program, k) + ", entry " + cp.entries[static_cast<size_t>(v.entry)] + ", node " + cp.nodes[k] + ")");
    }
  }
  return nullptr;
}

// Launches directly, or through a graph captured for this run's symbols and feed addresses (replayed while they repeat).
static const char* launch_or_replay(CudaProgram& cp, const int64_t* syms, size_t n_syms, const std::vector<FeedView>& dev) {
  const CudaApi& api = *cp.plan->api;
  if (!cp.use_graph || std::getenv("PLANC_CUDA_SYNC") != nullptr) return launch_all(cp);
  std::vector<int64_t> key(syms, syms + n_syms);
  for (const FeedView& f : dev) key.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(f.data)));
  if (cp.exec != nullptr && key == cp.graph_key) {
    CUresult rc = api.cuGraphLaunch(cp.exec, cp.plan->stream);
    return rc == 0 ? nullptr : fail(cp, cu_error(api, "cuGraphLaunch", rc));
  }
  if (cp.exec != nullptr) {
    api.cuGraphExecDestroy(cp.exec);
    cp.exec = nullptr;
  }
  CUresult rc = api.cuStreamBeginCapture(cp.plan->stream, kCuCaptureModeThreadLocal);
  if (rc != 0) return fail(cp, cu_error(api, "cuStreamBeginCapture", rc));
  const char* e = launch_all(cp);
  CUgraph graph = nullptr;
  rc = api.cuStreamEndCapture(cp.plan->stream, &graph);
  if (e != nullptr) {
    if (graph != nullptr) api.cuGraphDestroy(graph);
    return e;
  }
  if (rc != 0) return fail(cp, cu_error(api, "cuStreamEndCapture", rc));
  rc = api.cuGraphInstantiateWithFlags(&cp.exec, graph, 0);
  api.cuGraphDestroy(graph);
  if (rc != 0) {
    cp.exec = nullptr;
    return fail(cp, cu_error(api, "cuGraphInstantiateWithFlags", rc));
  }
  cp.graph_key = key;
  rc = api.cuGraphLaunch(cp.exec, cp.plan->stream);
  return rc == 0 ? nullptr : fail(cp, cu_error(api, "cuGraphLaunch", rc));
}

// Copies host feeds into per-input device buffers (grown as needed) and returns the device views of all feeds (device
// feeds, resident buffers, as they are).
static const char* upload_feeds(CudaProgram& cp, const FeedView* feeds, size_t n, std::vector<FeedView>* dev) {
  const CudaApi& api = *cp.plan->api;
  dev->resize(n);
  for (size_t i = 0; i < n; i++) {
    const size_t bytes = feeds[i].bytes;
    if (feeds[i].device) {
      (*dev)[i] = feeds[i];
      continue;
    }
    if (bytes > cp.feed_caps[i]) {
      if (cp.feed_bufs[i] != 0) api.cuMemFree(cp.feed_bufs[i]);
      cp.feed_bufs[i] = 0;
      cp.feed_caps[i] = 0;
      const size_t cap = round_up(bytes * 5 / 4 + 64);
      CUresult rc = api.cuMemAlloc(&cp.feed_bufs[i], cap);
      if (rc != 0) return fail(cp, cu_error(api, "cuMemAlloc(feed)", rc) + " for feed " + std::to_string(i) + " of " + std::to_string(bytes) + " bytes");
      cp.feed_caps[i] = cap;
    }
    if (bytes > 0) {
      CUresult rc = api.cuMemcpyHtoDAsync(cp.feed_bufs[i], feeds[i].data, bytes, cp.plan->stream);
      if (rc != 0) return fail(cp, cu_error(api, "cuMemcpyHtoDAsync(feed)", rc) + " for feed " + std::to_string(i));
    }
    (*dev)[i] = FeedView{bytes > 0 ? reinterpret_cast<const void*>(static_cast<uintptr_t>(cp.feed_bufs[i])) : nullptr, bytes};
  }
  return nullptr;
}

// After the stream is idle: the first kernel-reported error (planc_error), reset for the next run.
static const char* check_kernel_errors(CudaProgram& cp) {
  const CudaApi& api = *cp.plan->api;
  unsigned long long word = 0;
  CUresult rc = api.cuMemcpyDtoHAsync(&word, cp.plan->err_global, sizeof word, cp.plan->stream);
  if (rc == 0) rc = api.cuStreamSynchronize(cp.plan->stream);
  if (rc != 0) return fail(cp, cu_error(api, "cuMemcpyDtoHAsync(planc_error)", rc));
  if (word == 0) return nullptr;
  api.cuMemsetD8Async(cp.plan->err_global, 0, sizeof word, cp.plan->stream);
  api.cuStreamSynchronize(cp.plan->stream);
  const size_t k = static_cast<size_t>(word >> 32) - 1;
  const unsigned code = static_cast<unsigned>(word & 0xffffffffu);
  if (k >= cp.calls.size()) return fail(cp, std::string("a CUDA kernel reported: ") + kernel_error_text(code));
  return fail(cp, "kernel #" + std::to_string(k) + " (" + program_kernel_name(cp.program, k) + ", node " + cp.nodes[k] + "): " + kernel_error_text(code));
}

const char* cuda_program_run(CudaProgram* program, const int64_t* syms, size_t n_syms, const FeedView* feeds, size_t n_feeds,
                             const OutputView* outs, size_t n_outs) {
  CudaProgram& cp = *program;
  const CudaApi& api = *cp.plan->api;
  CUresult rc = api.cuCtxSetCurrent(cp.plan->ctx);
  if (rc != 0) return fail(cp, cu_error(api, "cuCtxSetCurrent", rc));
  if (n_feeds != cp.feed_bufs.size()) return fail(cp, "expected " + std::to_string(cp.feed_bufs.size()) + " feeds, got " + std::to_string(n_feeds));
  std::vector<FeedView> dev;
  if (const char* e = upload_feeds(cp, feeds, n_feeds, &dev)) return e;
  if (const char* e = program_bind(cp.program, syms, n_syms, dev.data(), dev.size())) return fail(cp, e);
  if (const char* e = program_check_outputs(cp.program, outs, n_outs)) return fail(cp, e);
  if (const char* e = launch_or_replay(cp, syms, n_syms, dev)) {
    api.cuStreamSynchronize(cp.plan->stream);
    return e;
  }
  rc = api.cuStreamSynchronize(cp.plan->stream);
  if (rc != 0) return fail(cp, cu_error(api, "cuStreamSynchronize", rc) + " after the kernels (set PLANC_CUDA_SYNC=1 to find the kernel)");
  if (const char* e = check_kernel_errors(cp)) return e;
  for (size_t i = 0; i < n_outs; i++) {
    const TensorView& v = program_output_view(cp.program, i);
    if (outs[i].bytes == 0) continue;
    const CUdeviceptr from = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(v.data));
    if (outs[i].device) {
      rc = api.cuMemcpyDtoDAsync(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(outs[i].data)), from, outs[i].bytes, cp.plan->stream);
      if (rc != 0) return fail(cp, cu_error(api, "cuMemcpyDtoDAsync(output)", rc) + " for output " + std::to_string(i));
      continue;
    }
    rc = api.cuMemcpyDtoHAsync(outs[i].data, from, outs[i].bytes, cp.plan->stream);
    if (rc != 0) return fail(cp, cu_error(api, "cuMemcpyDtoHAsync(output)", rc) + " for output " + std::to_string(i));
  }
  // Host STATE feeds (in-place KV caches) go back to the caller's buffers; device ones were written in place.
  for (size_t i = 0; i < n_feeds; i++) {
    if (program_input_kind(cp.program, i) != kState || feeds[i].bytes == 0 || feeds[i].device) continue;
    rc = api.cuMemcpyDtoHAsync(const_cast<void*>(feeds[i].data), cp.feed_bufs[i], feeds[i].bytes, cp.plan->stream);
    if (rc != 0) return fail(cp, cu_error(api, "cuMemcpyDtoHAsync(state)", rc) + " for feed " + std::to_string(i));
  }
  rc = api.cuStreamSynchronize(cp.plan->stream);
  if (rc != 0) return fail(cp, cu_error(api, "cuStreamSynchronize", rc));
  return nullptr;
}

}  // namespace planc
