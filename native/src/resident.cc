// Resident buffers: span checks shared by every plan kind, and host residents of cpu plans (see resident.h).
#include "resident.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

namespace planc {

static std::string span_error(size_t i, const std::string& msg) { return "span " + std::to_string(i) + ": " + msg; }

// A span word as a byte count: a non-negative integer no larger than kMaxResidentBytes.
static bool span_word(double w, size_t* out) {
  if (!(w >= 0 && w <= static_cast<double>(kMaxResidentBytes)) || w != std::floor(w)) return false;
  *out = static_cast<size_t>(w);
  return true;
}

std::string check_spans(const double* words, size_t n_words, const Resident& src, const Resident& dst, std::vector<CopySpan>* out) {
  if (n_words % 3 != 0) return "spans must hold (src offset, dst offset, bytes) triples (length " + std::to_string(n_words) + ")";
  const bool same = &src == &dst;
  out->clear();
  out->reserve(n_words / 3);
  for (size_t i = 0; i < n_words / 3; i++) {
    CopySpan s{};
    if (!span_word(words[3 * i], &s.src) || !span_word(words[3 * i + 1], &s.dst) || !span_word(words[3 * i + 2], &s.bytes)) {
      return span_error(i, "(" + std::to_string(words[3 * i]) + ", " + std::to_string(words[3 * i + 1]) + ", " +
                               std::to_string(words[3 * i + 2]) + ") are not byte counts (integers in [0, 2^46])");
    }
    if (s.src > src.bytes || s.bytes > src.bytes - s.src) {
      return span_error(i, "source [" + std::to_string(s.src) + ", " + std::to_string(s.src + s.bytes) + ") is outside the source resident of " + std::to_string(src.bytes) + " bytes");
    }
    if (s.dst > dst.bytes || s.bytes > dst.bytes - s.dst) {
      return span_error(i, "destination [" + std::to_string(s.dst) + ", " + std::to_string(s.dst + s.bytes) + ") is outside the destination resident of " + std::to_string(dst.bytes) + " bytes");
    }
    if (s.bytes == 0 || (same && s.src == s.dst)) continue;
    if (same && s.src < s.dst + s.bytes && s.dst < s.src + s.bytes) {
      return span_error(i, "source [" + std::to_string(s.src) + ", " + std::to_string(s.src + s.bytes) + ") and destination [" +
                               std::to_string(s.dst) + ", " + std::to_string(s.dst + s.bytes) + ") overlap in one resident (split it, or copy through another resident)");
    }
    out->push_back(s);
  }
  return std::string();
}

// ---- host residents (cpu plans) ----

static const char kHostBusy[] = "the plan is busy: an async run of it is in progress (resident buffers are not touched meanwhile)";

// The plan a host resident belongs to, marked busy for one operation (false: a run is in flight).
struct HostOp {
  PlanState* plan;
  bool ok;
  explicit HostOp(const Resident& r) : plan(static_cast<PlanState*>(const_cast<void*>(r.owner))), ok(plan_acquire(plan)) {}
  ~HostOp() {
    if (ok) plan_release(plan);
  }
};

static std::string host_copy(Resident& src, Resident& dst, const std::vector<CopySpan>& spans) {
  HostOp op(src);
  if (!op.ok) return kHostBusy;
  for (const CopySpan& s : spans) std::memcpy(dst.data + s.dst, src.data + s.src, s.bytes);
  return std::string();
}

static std::string host_write(Resident& r, size_t offset, const void* data, size_t bytes) {
  HostOp op(r);
  if (!op.ok) return kHostBusy;
  if (bytes > 0) std::memcpy(r.data + offset, data, bytes);
  return std::string();
}

static std::string host_read(Resident& r, size_t offset, void* data, size_t bytes) {
  HostOp op(r);
  if (!op.ok) return kHostBusy;
  if (bytes > 0) std::memcpy(data, r.data + offset, bytes);
  return std::string();
}

static void host_release(Resident& r) {
  std::free(r.base);
  r.base = nullptr;
  r.data = nullptr;
}

static const ResidentOps kHostOps = {host_copy, host_write, host_read, host_release};

std::shared_ptr<Resident> host_resident_new(std::shared_ptr<PlanState> plan, int64_t bytes, std::string* err) {
  if (bytes < 0 || bytes > kMaxResidentBytes) {
    *err = "resident size " + std::to_string(bytes) + " is negative or over 2^46 bytes";
    return nullptr;
  }
  constexpr size_t kAlign = 64;
  auto r = std::make_shared<Resident>();
  r->base = std::calloc(1, static_cast<size_t>(bytes) + kAlign);  // lazily zeroed pages for big sizes
  if (r->base == nullptr) {
    *err = "cannot allocate a resident buffer of " + std::to_string(bytes) + " bytes";
    return nullptr;
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(r->base);
  r->data = reinterpret_cast<uint8_t*>((p + kAlign - 1) / kAlign * kAlign);
  r->bytes = static_cast<size_t>(bytes);
  r->owner = plan.get();
  r->keep = std::move(plan);
  r->ops = &kHostOps;
  return r;
}

}  // namespace planc
