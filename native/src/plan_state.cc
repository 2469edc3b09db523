// Plan state: weight copies and the arena, allocated zeroed and 64-byte aligned.
#include "plan_state.h"

#include <cstdlib>
#include <cstring>

namespace planc {

constexpr size_t kAlign = 64;
constexpr int64_t kMaxBytes = int64_t(1) << 46;  // 64 TiB: anything larger is a corrupt plan, not a real one

static size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// calloc (lazily zeroed pages for big sizes) plus manual alignment; *base is what free() takes.
static uint8_t* alloc_zeroed(size_t bytes, void** base) {
  *base = std::calloc(1, bytes + kAlign);
  if (*base == nullptr) return nullptr;
  uintptr_t p = reinterpret_cast<uintptr_t>(*base);
  return reinterpret_cast<uint8_t*>((p + kAlign - 1) / kAlign * kAlign);
}

static bool check_weights(size_t blob_bytes, const int64_t* pairs, size_t n_pairs, size_t* total, std::string* err) {
  *total = 0;
  for (size_t i = 0; i < n_pairs; i++) {
    int64_t off = pairs[2 * i], len = pairs[2 * i + 1];
    if (off < 0 || len < 0 || static_cast<uint64_t>(off) > blob_bytes ||
        static_cast<uint64_t>(len) > blob_bytes - static_cast<uint64_t>(off)) {
      *err = "weight #" + std::to_string(i) + ": [offset " + std::to_string(off) + ", length " + std::to_string(len) +
             "] does not lie inside the blob of " + std::to_string(blob_bytes) + " bytes";
      return false;
    }
    *total += round_up(static_cast<size_t>(len));
  }
  return true;
}

PlanState* plan_new(const uint8_t* blob, size_t blob_bytes, const int64_t* pairs, size_t n_pairs, int64_t arena_bytes,
                    std::string* err) {
  if (arena_bytes < 0 || arena_bytes > kMaxBytes) {
    *err = "arena size " + std::to_string(arena_bytes) + " is negative or absurdly large";
    return nullptr;
  }
  size_t total = 0;
  if (!check_weights(blob_bytes, pairs, n_pairs, &total, err)) return nullptr;
  PlanState* plan = new PlanState;
  uint8_t* w = alloc_zeroed(total, &plan->weights_base);
  plan->arena = alloc_zeroed(round_up(static_cast<size_t>(arena_bytes)) + kAlign, &plan->arena_base);
  if (w == nullptr || plan->arena == nullptr) {
    *err = "cannot allocate " + std::to_string(total) + " bytes of weights and " + std::to_string(arena_bytes) +
           " bytes of arena";
    plan_free(plan);
    return nullptr;
  }
  plan->arena_bytes = static_cast<size_t>(arena_bytes);
  plan->weights.reserve(n_pairs);
  for (size_t i = 0; i < n_pairs; i++) {
    size_t off = static_cast<size_t>(pairs[2 * i]), len = static_cast<size_t>(pairs[2 * i + 1]);
    if (len > 0) std::memcpy(w, blob + off, len);
    plan->weights.push_back(WeightSpan{w, len});
    w += round_up(len);
  }
  return plan;
}

void plan_free(PlanState* plan) {
  if (plan == nullptr) return;
  std::free(plan->weights_base);
  std::free(plan->arena_base);
  delete plan;
}

bool plan_acquire(PlanState* plan) {
  bool expected = false;
  return plan->busy.compare_exchange_strong(expected, true);
}

void plan_release(PlanState* plan) { plan->busy.store(false); }

}  // namespace planc
