// N-API side of resident buffers: tagged handles, views read from run arguments, and the plan-kind-neutral exports.
#include "resident_js.h"

#include <vector>

namespace planc {
namespace {

struct ResidentHandle {
  std::shared_ptr<Resident> res;
  int64_t counted = 0;  // bytes reported to V8 as external memory, returned when the handle lets go
};

const napi_type_tag kResidentTag = {0x706c616e632d7265ULL, 0x736964656e742d68ULL};


Napi::Value throw_error(Napi::Env env, const std::string& msg) {
  Napi::Error::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

void let_go(Napi::Env env, ResidentHandle* h) {
  h->res.reset();
  if (h->counted != 0) Napi::MemoryManagement::AdjustExternalMemory(env, -h->counted);
  h->counted = 0;
}

ResidentHandle* unwrap_handle(Napi::Env env, Napi::Value v, const std::string& what) {
  if (v.IsEmpty() || !v.IsExternal() || !v.As<Napi::External<ResidentHandle>>().CheckTypeTag(&kResidentTag)) {
    Napi::TypeError::New(env, what + " must be a resident buffer handle").ThrowAsJavaScriptException();
    return nullptr;
  }
  return v.As<Napi::External<ResidentHandle>>().Data();
}

// The live resident of a handle; nullptr with a pending error when v is none or was freed.
std::shared_ptr<Resident> resident_arg(Napi::Env env, Napi::Value v, const std::string& what) {
  ResidentHandle* h = unwrap_handle(env, v, what);
  if (h == nullptr) return nullptr;
  if (h->res == nullptr) {
    throw_error(env, what + ": the resident buffer was freed");
    return nullptr;
  }
  return h->res;
}

// A non-negative integer byte count or offset (≤ 2^46).
bool bytes_arg(Napi::Env env, Napi::Value v, const std::string& what, size_t* out) {
  if (v.IsEmpty() || !v.IsNumber()) {
    Napi::TypeError::New(env, what + " must be a number").ThrowAsJavaScriptException();
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= static_cast<double>(kMaxResidentBytes)) || d != static_cast<double>(static_cast<int64_t>(d))) {
    throw_error(env, what + " = " + std::to_string(d) + " must be an integer in [0, 2^46]");
    return false;
  }
  *out = static_cast<size_t>(d);
  return true;
}

// The bytes of a TypedArray.
bool host_bytes(Napi::Env env, Napi::Value v, const std::string& what, void** data, size_t* bytes) {
  if (v.IsEmpty() || !v.IsTypedArray()) {
    Napi::TypeError::New(env, what + " must be a TypedArray").ThrowAsJavaScriptException();
    return false;
  }
  Napi::TypedArray t = v.As<Napi::TypedArray>();
  *data = static_cast<uint8_t*>(t.ArrayBuffer().Data()) + t.ByteOffset();
  *bytes = t.ByteLength();
  return true;
}

// residentFree(handle): the memory goes now unless a run holds it (then when the run ends). Freeing twice is a no-op.
Napi::Value ResidentFree(const Napi::CallbackInfo& info) {
  ResidentHandle* h = unwrap_handle(info.Env(), info[0], "residentFree: handle");
  if (h != nullptr) let_go(info.Env(), h);
  return info.Env().Undefined();
}

// residentCopy(src, dst, spans: Float64Array of (src offset, dst offset, bytes) triples); see resident.h.
Napi::Value ResidentCopy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Resident> src = resident_arg(env, info[0], "residentCopy: src");
  if (src == nullptr) return env.Undefined();
  std::shared_ptr<Resident> dst = resident_arg(env, info[1], "residentCopy: dst");
  if (dst == nullptr) return env.Undefined();
  if (src->owner != dst->owner) return throw_error(env, "residentCopy: src and dst belong to different plans");
  if (info[2].IsEmpty() || !info[2].IsTypedArray() || info[2].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) {
    Napi::TypeError::New(env, "residentCopy: spans must be a Float64Array").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Float64Array words = info[2].As<Napi::Float64Array>();
  std::vector<CopySpan> spans;
  std::string e = check_spans(words.Data(), words.ElementLength(), *src, *dst, &spans);
  if (e.empty() && !spans.empty()) e = src->ops->copy(*src, *dst, spans);
  if (!e.empty()) return throw_error(env, "residentCopy: " + e);
  return env.Undefined();
}

// The resident, offset and host bytes of residentWrite/residentRead, range-checked.
bool host_transfer_args(const Napi::CallbackInfo& info, const char* fn, std::shared_ptr<Resident>* r, size_t* offset, void** data, size_t* bytes) {
  Napi::Env env = info.Env();
  const std::string f = fn;
  *r = resident_arg(env, info[0], f + ": handle");
  if (*r == nullptr || !bytes_arg(env, info[1], f + ": offset", offset) || !host_bytes(env, info[2], f + ": data", data, bytes)) return false;
  if (*offset > (*r)->bytes || *bytes > (*r)->bytes - *offset) {
    throw_error(env, f + ": [" + std::to_string(*offset) + ", " + std::to_string(*offset + *bytes) + ") is outside the resident buffer of " + std::to_string((*r)->bytes) + " bytes");
    return false;
  }
  return true;
}

// residentWrite(handle, offset, data): data's bytes into the resident at offset.
Napi::Value ResidentWrite(const Napi::CallbackInfo& info) {
  std::shared_ptr<Resident> r;
  size_t offset = 0, bytes = 0;
  void* data = nullptr;
  if (!host_transfer_args(info, "residentWrite", &r, &offset, &data, &bytes)) return info.Env().Undefined();
  std::string e = r->ops->write(*r, offset, data, bytes);
  if (!e.empty()) return throw_error(info.Env(), "residentWrite: " + e);
  return info.Env().Undefined();
}

// residentRead(handle, offset, out): the resident's bytes at offset into out (its whole length).
Napi::Value ResidentRead(const Napi::CallbackInfo& info) {
  std::shared_ptr<Resident> r;
  size_t offset = 0, bytes = 0;
  void* data = nullptr;
  if (!host_transfer_args(info, "residentRead", &r, &offset, &data, &bytes)) return info.Env().Undefined();
  std::string e = r->ops->read(*r, offset, data, bytes);
  if (!e.empty()) return throw_error(info.Env(), "residentRead: " + e);
  return info.Env().Undefined();
}

}  // namespace

Napi::Value resident_handle(Napi::Env env, std::shared_ptr<Resident> r) {
  auto* h = new ResidentHandle{std::move(r), 0};
  h->counted = static_cast<int64_t>(h->res->bytes);
  Napi::MemoryManagement::AdjustExternalMemory(env, h->counted);
  auto ext = Napi::External<ResidentHandle>::New(env, h, [](Napi::Env e, ResidentHandle* x) {
    let_go(e, x);
    delete x;
  });
  ext.TypeTag(&kResidentTag);
  return ext;
}

bool run_views(Napi::Env env, Napi::Value v, const std::string& what, RunViews* out) {
  *out = RunViews{};
  if (v.IsEmpty() || v.IsUndefined()) return true;
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) {
    Napi::TypeError::New(env, what + " must be a Float64Array of (offset, bytes) pairs").ThrowAsJavaScriptException();
    return false;
  }
  Napi::Float64Array words = v.As<Napi::Float64Array>();
  out->words = words.Data();
  out->n = words.ElementLength();
  return true;
}

bool is_resident_arg(Napi::Value v) { return !v.IsEmpty() && v.IsExternal(); }

// A view word as a byte count or offset (an integer in [0, 2^46]).
static bool view_word(double w, size_t* out) {
  if (!(w >= 0 && w <= static_cast<double>(kMaxResidentBytes)) || w != static_cast<double>(static_cast<int64_t>(w))) return false;
  *out = static_cast<size_t>(w);
  return true;
}

bool resident_view(Napi::Env env, Napi::Value v, const RunViews& views, size_t pos, const std::string& what, const void* owner, ResidentView* out) {
  out->res = resident_arg(env, v, what);
  if (out->res == nullptr) return false;
  if (2 * pos + 1 >= views.n) {
    throw_error(env, what + ": a resident buffer without its (offset, bytes) in views (" + std::to_string(views.n) + " words)");
    return false;
  }
  if (!view_word(views.words[2 * pos], &out->offset) || !view_word(views.words[2 * pos + 1], &out->bytes)) {
    throw_error(env, what + ": offset " + std::to_string(views.words[2 * pos]) + " and bytes " + std::to_string(views.words[2 * pos + 1]) + " must be integers in [0, 2^46]");
    return false;
  }
  if (out->res->owner != owner) {
    throw_error(env, what + ": the resident buffer belongs to another plan");
    return false;
  }
  if (out->offset > out->res->bytes || out->bytes > out->res->bytes - out->offset) {
    throw_error(env, what + ": [" + std::to_string(out->offset) + ", " + std::to_string(out->offset + out->bytes) +
                         ") is outside the resident buffer of " + std::to_string(out->res->bytes) + " bytes");
    return false;
  }
  return true;
}

void register_resident_bindings(Napi::Env env, Napi::Object exports) {
  exports.Set("residentFree", Napi::Function::New(env, ResidentFree, "residentFree"));
  exports.Set("residentCopy", Napi::Function::New(env, ResidentCopy, "residentCopy"));
  exports.Set("residentWrite", Napi::Function::New(env, ResidentWrite, "residentWrite"));
  exports.Set("residentRead", Napi::Function::New(env, ResidentRead, "residentRead"));
}

}  // namespace planc
