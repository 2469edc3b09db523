// A loaded plan's native state: every weight copied into one 64-byte-aligned allocation, the zeroed arena, and the
// weights some kernel variants read reordered (prepared operands).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <list>
#include <vector>

#include "kernel.h"

namespace planc {

struct WeightSpan {
  const uint8_t* data;
  size_t bytes;
};

// A prepared operand of the plan (kernel.h PreparedOperand): weight `weight` as kernel `kernel` variant `variant`
// reads it in a call with integer arguments `iargs` (which may decide the layout, e.g. a transposed flag). Kept in a
// list whose entries never move, so programs hold their data pointers.
struct PreparedEntry {
  size_t weight;
  std::string kernel;
  int64_t variant;
  std::vector<int64_t> iargs;
  PreparedOperand op;
};

struct PlanState {
  void* weights_base = nullptr;  // the allocation (weights start at the next 64-byte boundary)
  std::vector<WeightSpan> weights;
  void* arena_base = nullptr;
  uint8_t* arena = nullptr;  // 64-byte aligned, zeroed, never null (at least 64 bytes even for an empty arena)
  size_t arena_bytes = 0;
  std::list<PreparedEntry> prepared;  // built by program_bind, one run at a time (busy)
  std::atomic<bool> busy{false};  // one run at a time: all programs of a plan share its arena
};

// Copies the weights (`pairs` holds n_pairs [offset, length] pairs into blob, each checked to lie inside it) and
// allocates a zeroed arena. Returns nullptr and sets *err on bad input or allocation failure.
PlanState* plan_new(const uint8_t* blob, size_t blob_bytes, const int64_t* pairs, size_t n_pairs, int64_t arena_bytes,
                    std::string* err);
void plan_free(PlanState* plan);

// Marks the plan busy for one run; false if a run is already in progress.
bool plan_acquire(PlanState* plan);
void plan_release(PlanState* plan);

}  // namespace planc
