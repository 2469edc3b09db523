// N-API side of resident buffers (resident.h): handles, resident views in run arguments, and the
// residentFree/Copy/Write/Read exports shared by cpu and cuda plans.
#pragma once
#include <napi.h>

#include <memory>
#include <string>

#include "resident.h"

namespace planc {

// A new JS handle of r (its bytes counted as external memory while the handle holds it).
Napi::Value resident_handle(Napi::Env env, std::shared_ptr<Resident> r);

// A view of a resident in a run's feeds or outputs.
struct ResidentView {
  std::shared_ptr<Resident> res;
  size_t offset = 0;
  size_t bytes = 0;
  uint8_t* data() const { return res->data + offset; }
};

// The `views` argument of a run: (offset, bytes) of every resident feed and output, two words per position, feeds
// first (a position holding a TypedArray is ignored). Reads a Float64Array, or nothing from undefined.
struct RunViews {
  const double* words = nullptr;
  size_t n = 0;
};
bool run_views(Napi::Env env, Napi::Value v, const std::string& what, RunViews* out);

// Whether a run's feed or output is a resident handle (else it must be a TypedArray).
bool is_resident_arg(Napi::Value v);

// The resident view at run position `pos` (feeds then outputs) of handle v, checked: a live handle of owner's plan,
// a range in `views` inside it. false with a pending JS error (naming `what`) otherwise.
bool resident_view(Napi::Env env, Napi::Value v, const RunViews& views, size_t pos, const std::string& what, const void* owner, ResidentView* out);

void register_resident_bindings(Napi::Env env, Napi::Object exports);

}  // namespace planc
