// The CUDA executor: a plan's weights, arena and generated kernels on one GPU, and programs launched on a stream.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../program.h"

namespace planc {

struct CudaPlan;
struct CudaProgram;
struct Resident;

// Creates a context (the device's primary one) and stream on device 0, loads the fatbin, uploads the weights
// (n_pairs [offset, length] pairs into blob), allocates the zeroed arena and scratch. nullptr with *err on failure.
CudaPlan* cuda_plan_new(const uint8_t* blob, size_t blob_bytes, const int64_t* pairs, size_t n_pairs, int64_t arena_bytes,
                        const uint8_t* fatbin, size_t fatbin_bytes, int64_t scratch_bytes, std::string* err);
void cuda_plan_free(CudaPlan* plan);
// "NVIDIA H100 80GB HBM3 (sm_90)".
std::string cuda_plan_device(const CudaPlan* plan);

// A zeroed device resident buffer of the plan (../resident.h; cuda/resident.cc). nullptr with *err on failure.
std::shared_ptr<Resident> cuda_resident_new(std::shared_ptr<CudaPlan> plan, int64_t bytes, std::string* err);

// Decodes program code against the plan (as program_new) and resolves each call's launches: `launches` holds per
// call n_variants, then per variant entry index, block, max_rows, n_grid, n_grid × (operand, from, to, div, mul).
// entries: the fatbin's entry names; nodes: each call's plan node (for errors).
CudaProgram* cuda_program_new(std::shared_ptr<CudaPlan> plan, const int64_t* code, size_t n_code, const int64_t* launches,
                              size_t n_launch, const std::vector<std::string>& entries, const std::vector<std::string>& nodes,
                              std::string* err);
void cuda_program_free(CudaProgram* program);
size_t cuda_program_n_inputs(const CudaProgram* program);
// The plan the program runs on (what its resident buffers' owner must be).
const CudaPlan* cuda_program_plan(const CudaProgram* program);
size_t cuda_program_n_outputs(const CudaProgram* program);
// Replays a CUDA graph of the launches when the symbols and buffers match the last run's (captured when not).
void cuda_program_set_graph(CudaProgram* program, bool on);

// One run: host feeds uploaded (device ones, resident buffers, used in place), kernels launched, outputs copied to
// host memory or, for device ones, device to device; host STATE feeds written back (device ones were written in place).
// Returns nullptr or an error owned by the program naming the driver call, its result and the plan node.
const char* cuda_program_run(CudaProgram* program, const int64_t* syms, size_t n_syms, const FeedView* feeds, size_t n_feeds,
                             const OutputView* outs, size_t n_outs);

}  // namespace planc
