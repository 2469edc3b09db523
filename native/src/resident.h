// Resident buffers: native memory a loaded plan keeps between runs (KV caches, encoder outputs), reached from JS by
// an opaque handle, fed to runs and written by them without crossing to JS arrays (on CUDA: without leaving the GPU).
//
// The resident API (addon exports; runtime/backend.ts is its typed face):
//   residentNew(plan, bytes) / cudaResidentNew(cudaPlan, bytes) → handle: zeroed memory owned by that plan: 64-byte
//     aligned host memory for a cpu plan, device memory from cuMemAlloc for a cuda plan. It lives until
//     residentFree(handle), the handle's garbage collection, or the plan's close (the JS Backend frees every resident it
//     made); a run using it holds it alive meanwhile, and it holds its plan alive.
//   A feed: any program input may be a resident handle instead of a TypedArray (programRun, programRunAsync,
//     cudaProgramRun), its (offset, bytes) given in the run's `views` argument: a Float64Array of two words per feed,
//     then per output (words at TypedArray positions are ignored). [offset, offset + bytes) must lie in the resident;
//     program_bind checks bytes against the tensor's resolved size and the address's alignment to its element size, as
//     for any feed. Nothing is copied: STATE inputs are written in place there; async runs do not copy resident feeds.
//   An output: a resident handle (and its views words) in place of an output array: the run copies the output there
//     (cuda: device to device), never to the host.
//   residentCopy(src, dst, spans): spans is a Float64Array of (src offset, dst offset, bytes) triples. Every span is
//     checked to lie inside its resident before any byte moves. Spans apply in order, so a span may read what an earlier
//     one wrote: with src == dst this gathers or compacts rows in place. A single span whose source and destination
//     ranges overlap (in the same resident, at different offsets) is an error, not a memmove (CUDA copies forbid it).
//     cuda: device to device on the plan's stream, ordered before the next run; runs of spans with constant strides
//     become one 2D copy where their ranges do not overlap.
//   residentWrite(handle, offset, typedArray) / residentRead(handle, offset, typedArray): host bytes in and out
//     (setup and tests; each returns when the copy is done).
// All resident calls on a cpu plan fail while an async run of that plan is in flight (the plan is busy), and a resident
// only ever meets runs and copies of its own plan (checked).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "plan_state.h"

namespace planc {

struct Resident;

// One span of residentCopy, checked.
struct CopySpan {
  size_t src, dst, bytes;
};

// What a resident's plan kind does with it; each returns "" or an error.
struct ResidentOps {
  std::string (*copy)(Resident& src, Resident& dst, const std::vector<CopySpan>& spans);
  std::string (*write)(Resident& r, size_t offset, const void* data, size_t bytes);
  std::string (*read)(Resident& r, size_t offset, void* data, size_t bytes);
  void (*release)(Resident& r);  // frees data
};

struct Resident {
  uint8_t* data = nullptr;    // host pointer (cpu) or device address (cuda); never null
  size_t bytes = 0;
  bool device = false;        // data is a device address (feeds skip the upload, outputs copy device to device)
  const void* owner = nullptr;  // the PlanState or CudaPlan it belongs to (identity only)
  std::shared_ptr<void> keep;   // holds that plan alive
  void* base = nullptr;         // cpu: the allocation free() takes
  const ResidentOps* ops = nullptr;
  Resident() = default;
  Resident(const Resident&) = delete;
  Resident& operator=(const Resident&) = delete;
  ~Resident() {
    if (ops != nullptr && ops->release != nullptr) ops->release(*this);
  }
};

// The largest resident (and offset) accepted: 2^46 bytes, as the plan's arena.
constexpr int64_t kMaxResidentBytes = int64_t(1) << 46;

// Reads n_words / 3 (src offset, dst offset, bytes) triples, checking each: non-negative integers, inside src and dst,
// and not overlapping itself when src and dst are one resident. Zero-byte and same-offset in-place spans are dropped.
std::string check_spans(const double* words, size_t n_words, const Resident& src, const Resident& dst, std::vector<CopySpan>* out);

// A zeroed, 64-byte aligned host resident of a cpu plan; nullptr with *err on bad size or allocation failure.
std::shared_ptr<Resident> host_resident_new(std::shared_ptr<PlanState> plan, int64_t bytes, std::string* err);

}  // namespace planc
