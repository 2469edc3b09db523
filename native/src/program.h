// A Program: the program code of native/PROGRAM.md decoded with every word checked, then run against a plan.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plan_state.h"

namespace planc {

class ThreadPool;
struct Program;

constexpr int64_t kProgramMagic = 0x31474f5250434c50;  // "PLCPROG1" little-endian

struct FeedView {
  const void* data;  // may be null when bytes == 0
  size_t bytes;
  bool device = false;  // data is a device address (a resident buffer of a cuda plan): executors skip the upload
};

struct OutputView {
  void* data;
  size_t bytes;
  bool device = false;  // data is a device address (a resident buffer of a cuda plan): copied device to device
};

// Decodes code (n_words int64 words) for plan. Returns nullptr with *err naming the offending word on bad code.
Program* program_new(std::shared_ptr<PlanState> plan, const int64_t* code, size_t n_words, std::string* err);
void program_free(Program* program);

PlanState* program_plan(const Program* program);
size_t program_n_syms(const Program* program);
size_t program_n_inputs(const Program* program);
size_t program_n_outputs(const Program* program);
size_t program_n_kernels(const Program* program);

// A run, in the steps of PROGRAM.md. Each returns nullptr on success or an error owned by the program (valid until
// its next call). The caller holds the plan (plan_acquire) from bind to the output copy.
// Steps 1-2: evaluate expressions, resolve every tensor's dims and storage and check its size.
const char* program_bind(Program* program, const int64_t* syms, size_t n_syms, const FeedView* feeds, size_t n_feeds);
// Step 3: run the kernels in order.
const char* program_exec(Program* program, ThreadPool* pool);
// Step 4: check (then copy) each output tensor into the matching buffer.
const char* program_check_outputs(Program* program, const OutputView* outs, size_t n_outs);
const char* program_copy_outputs(Program* program, const OutputView* outs, size_t n_outs);

// Profiling: when on, each run adds every kernel's wall time (ns) to a per-kernel sum; turning it on resets the sums.
void program_set_profiling(Program* program, bool on);
const std::vector<double>& program_profile(const Program* program);

// A plan tensor's kind (compiler/plan/types.ts TENSOR_KIND).
// kState: a graph input whose feed buffer kernels write in place (a KV cache kept by the caller between runs).
enum TensorKind : int32_t { kArena = 0, kWeight = 1, kInput = 2, kAlias = 3, kState = 4 };

// For other executors (the CUDA launcher), after program_bind: kernel k's resolved arguments (views into the plan's
// storage; pool is null), its table name, input i's TensorKind (kInput or kState) and output i's view.
struct KernelArgs;
struct TensorView;
KernelArgs program_kernel_args(const Program* program, size_t k);
const char* program_kernel_name(const Program* program, size_t k);
int32_t program_input_kind(const Program* program, size_t i);
const TensorView& program_output_view(const Program* program, size_t i);

}  // namespace planc
