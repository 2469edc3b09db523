// The kernel ABI: resolved tensor views in, an error string (or nullptr) out; one registry of kernels by name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "generated/kernel_args.h"   // <kernel>_args::k<Arg> positions, KernelArity (from compiler/kernel-schema.ts)
#include "generated/kernel_enums.h"  // DType, dtype_size, dtype_name, Activation, MaskKind, PadMode, ...

namespace planc {

class ThreadPool;

constexpr int kMaxRank = 8;

// A tensor as a kernel sees it: data pointer, dtype and resolved dims (row-major, contiguous).
struct TensorView {
  void* data = nullptr;
  int32_t dtype = 0;
  int32_t rank = 0;
  int64_t dims[kMaxRank] = {0};
  int64_t numel = 0;  // product of dims
  size_t bytes() const { return static_cast<size_t>(numel) * dtype_size(dtype); }
  template <typename T> T* as() const { return static_cast<T*>(data); }
};

// Everything one kernel call gets. Omitted optional inputs have data == nullptr.
struct KernelArgs {
  const TensorView* in = nullptr;
  int n_in = 0;
  TensorView* out = nullptr;
  int n_out = 0;
  const int64_t* iargs = nullptr;
  int n_iargs = 0;
  const double* fargs = nullptr;
  int n_fargs = 0;
  ThreadPool* pool = nullptr;
  // The call's variant: a code of the kernel's <name>_args::kVariant* (generated/kernel_args.h), 0 = its default
  // (auto, or its only implementation). A kernel with variants rejects a code it lacks or this machine cannot run.
  int64_t variant = 0;
  // The call's prepared operand (KernelDef::prepare), 64-byte aligned; null when its variant prepares none.
  const void* prepared = nullptr;
};

// A kernel returns nullptr on success or a static/thread-local error message. Kernels never throw and must check
// every shape relation they rely on (input vs output dims, index ranges) before touching memory.
using KernelFn = const char* (*)(const KernelArgs&);

// Why this machine cannot run variant `code` of a kernel (a build without OpenBLAS, a CPU without AVX-512 or a PLANC_ISA
// cap below it: cpu/isa.h), or nullptr when it can. program_new asks before it accepts a call, and the addon's info()
// lists the variants each kernel runs by it; codes outside the kernel's list never get here.
using VariantCheck = const char* (*)(int64_t code);

// A constant operand reordered once for a variant that reads it in a layout of its own (project_topk `packed`): the
// plan keeps one per weight, kernel and variant (plan_state.h), built at the first run that binds the call.
struct PreparedOperand {
  std::vector<uint8_t> storage;
  void* data = nullptr;  // 64-byte aligned, inside storage
  // Room for `bytes` bytes at a 64-byte boundary; returns data.
  void* alloc(size_t bytes) {
    storage.assign(bytes + 64, 0);
    data = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
    return data;
  }
};

// Which input of a call with variant `code` the kernel reads prepared (-1: none).
using PreparedInput = int (*)(int64_t code);
// Builds the prepared operand from the call's resolved arguments (the input PreparedInput names is a plan weight);
// returns nullptr or an error.
using PrepareFn = const char* (*)(const KernelArgs& args, PreparedOperand* out);

struct KernelDef {
  const char* name;
  KernelFn fn;
  VariantCheck variant_unavailable = nullptr;  // null: every variant of the kernel runs everywhere
  PreparedInput prepared_input = nullptr;      // null: no variant prepares an operand
  PrepareFn prepare = nullptr;
};

// Each op-family file defines one of these, returning its kernels (see cpu/*.cc); registry.cc concatenates them.
struct KernelList {
  const KernelDef* defs;
  size_t count;
};

// The whole table, in a fixed order for this build; ids are positions in it.
const KernelDef* kernel_table(size_t* count);

// Formats an error message into a thread-local buffer and returns it (for kernels' error returns).
const char* kernel_error(const char* fmt, ...);

// A call's operand and argument counts against the kernel's schema counts (kernel_schema.cc): nullptr when they fit,
// else "name: needs ...; got ...". Every kernel checks its own (`check_arity(name, args, name_args::kArity)`).
const char* check_arity(const char* name, const KernelArgs& args, const KernelArity& arity);
// The same check for a call of the kernel named `name` by its table entry (program_new checks every call with it);
// a name without a schema entry fails.
const char* check_kernel_call(const char* name, int64_t n_in, int64_t n_out, int64_t n_iargs, int64_t n_fargs);

// Helpers every kernel family uses for checks and messages.
std::string dims_str(const TensorView& t);
// A usable view: known dtype, rank ≤ 8, numel = product of dims, data present unless empty.
bool view_ok(const TensorView& t);
bool same_dims(const TensorView& a, const TensorView& b);
// fn over [0, n) on the kernel's pool (chunks of at least min_chunk), or inline when it has none.
void run_parallel(const KernelArgs& args, int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace planc
