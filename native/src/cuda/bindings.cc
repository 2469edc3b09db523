// N-API bindings of the CUDA executor: cudaPlanNew/Free/Device, cudaResidentNew, cudaProgramNew/Free/Run (runs are
// synchronous).
#include "bindings.h"

#include <memory>
#include <string>
#include <vector>

#include "../resident_js.h"
#include "launch.h"

namespace planc {
namespace {

struct CudaPlanHandle {
  std::shared_ptr<CudaPlan> plan;
};
struct CudaProgramHandle {
  std::shared_ptr<CudaProgram> program;
};
const napi_type_tag kCudaPlanTag = {0x706c616e632d6375ULL, 0x6461706c616e6868ULL};
const napi_type_tag kCudaProgramTag = {0x706c616e632d6375ULL, 0x646170726f676868ULL};

Napi::Value throw_error(Napi::Env env, const std::string& msg) {
  Napi::Error::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

// The bytes of a TypedArray; false (with a pending TypeError) when v is none.
bool bytes_of(Napi::Env env, Napi::Value v, const std::string& what, void** data, size_t* bytes, napi_typedarray_type* type = nullptr) {
  bool is = false;
  if (v.IsEmpty() || napi_is_typedarray(env, v, &is) != napi_ok || !is) {
    Napi::TypeError::New(env, what + " must be a TypedArray").ThrowAsJavaScriptException();
    return false;
  }
  napi_typedarray_type t;
  size_t length = 0, offset = 0;
  napi_value buffer;
  if (napi_get_typedarray_info(env, v, &t, &length, data, &buffer, &offset) != napi_ok) {
    Napi::TypeError::New(env, what + ": cannot read the TypedArray").ThrowAsJavaScriptException();
    return false;
  }
  size_t size = 1;
  switch (t) {
    case napi_int16_array: case napi_uint16_array: size = 2; break;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: size = 4; break;
    case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: size = 8; break;
    default: size = 1;
  }
  *bytes = length * size;
  if (type != nullptr) *type = t;
  return true;
}

bool words_of(Napi::Env env, Napi::Value v, const std::string& what, const int64_t** words, size_t* n) {
  void* data = nullptr;
  size_t bytes = 0;
  napi_typedarray_type t;
  if (!bytes_of(env, v, what, &data, &bytes, &t)) return false;
  if (t != napi_bigint64_array) {
    Napi::TypeError::New(env, what + " must be a BigInt64Array").ThrowAsJavaScriptException();
    return false;
  }
  *words = static_cast<const int64_t*>(data);
  *n = bytes / 8;
  return true;
}

bool strings_of(Napi::Env env, Napi::Value v, const std::string& what, std::vector<std::string>* out) {
  if (v.IsEmpty() || !v.IsArray()) {
    Napi::TypeError::New(env, what + " must be an array of strings").ThrowAsJavaScriptException();
    return false;
  }
  Napi::Array a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value e = a.Get(i);
    if (env.IsExceptionPending()) return false;
    if (!e.IsString()) {
      Napi::TypeError::New(env, what + "[" + std::to_string(i) + "] must be a string").ThrowAsJavaScriptException();
      return false;
    }
    out->push_back(e.As<Napi::String>().Utf8Value());
  }
  return true;
}

bool arrays_of(Napi::Env env, Napi::Value v, const std::string& what, std::vector<Napi::Value>* out) {
  if (v.IsEmpty() || !v.IsArray()) {
    Napi::TypeError::New(env, what + " must be an array of TypedArrays").ThrowAsJavaScriptException();
    return false;
  }
  Napi::Array a = v.As<Napi::Array>();
  for (uint32_t i = 0; i < a.Length(); i++) {
    out->push_back(a.Get(i));
    if (env.IsExceptionPending()) return false;
  }
  return true;
}

bool size_arg(Napi::Env env, Napi::Value v, const std::string& what, int64_t* out) {
  if (v.IsEmpty() || !v.IsNumber()) {
    Napi::TypeError::New(env, what + " must be a number").ThrowAsJavaScriptException();
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= 9007199254740991.0) || d != static_cast<double>(static_cast<int64_t>(d))) {
    Napi::Error::New(env, what + " must be a non-negative integer").ThrowAsJavaScriptException();
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

template <typename H>
H* unwrap(Napi::Env env, Napi::Value v, const napi_type_tag* tag, const char* what) {
  if (v.IsEmpty() || !v.IsExternal() || !v.As<Napi::External<H>>().CheckTypeTag(tag)) {
    Napi::TypeError::New(env, std::string("expected a ") + what + " handle").ThrowAsJavaScriptException();
    return nullptr;
  }
  return v.As<Napi::External<H>>().Data();
}

// cudaPlanNew(blob, weights [offset, length] pairs, arenaBytes, fatbin, scratchBytes)
Napi::Value CudaPlanNew(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  void *blob = nullptr, *fatbin = nullptr;
  size_t blob_bytes = 0, fatbin_bytes = 0, n_words = 0;
  const int64_t* pairs = nullptr;
  int64_t arena = 0, scratch = 0;
  if (!bytes_of(env, info[0], "cudaPlanNew: blob", &blob, &blob_bytes) || !words_of(env, info[1], "cudaPlanNew: weights", &pairs, &n_words) ||
      !size_arg(env, info[2], "cudaPlanNew: arenaBytes", &arena) || !bytes_of(env, info[3], "cudaPlanNew: fatbin", &fatbin, &fatbin_bytes) ||
      !size_arg(env, info[4], "cudaPlanNew: scratchBytes", &scratch)) {
    return env.Undefined();
  }
  if (n_words % 2 != 0) return throw_error(env, "cudaPlanNew: weights must hold [offset, length] pairs");
  std::string err;
  CudaPlan* p = cuda_plan_new(static_cast<const uint8_t*>(blob), blob_bytes, pairs, n_words / 2, arena,
                              static_cast<const uint8_t*>(fatbin), fatbin_bytes, scratch, &err);
  if (p == nullptr) return throw_error(env, "cudaPlanNew: " + err);
  auto* h = new CudaPlanHandle{std::shared_ptr<CudaPlan>(p, cuda_plan_free)};
  auto ext = Napi::External<CudaPlanHandle>::New(env, h, [](Napi::Env, CudaPlanHandle* x) { delete x; });
  ext.TypeTag(&kCudaPlanTag);
  return ext;
}

Napi::Value CudaPlanFree(const Napi::CallbackInfo& info) {
  CudaPlanHandle* h = unwrap<CudaPlanHandle>(info.Env(), info[0], &kCudaPlanTag, "CUDA plan");
  if (h != nullptr) h->plan.reset();
  return info.Env().Undefined();
}

Napi::Value CudaPlanDevice(const Napi::CallbackInfo& info) {
  CudaPlanHandle* h = unwrap<CudaPlanHandle>(info.Env(), info[0], &kCudaPlanTag, "CUDA plan");
  if (h == nullptr) return info.Env().Undefined();
  if (h->plan == nullptr) return throw_error(info.Env(), "the CUDA plan handle was freed");
  return Napi::String::New(info.Env(), cuda_plan_device(h->plan.get()));
}

// cudaResidentNew(plan, bytes): zeroed device memory owned by the plan (../resident.h).
Napi::Value CudaResidentNew(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CudaPlanHandle* h = unwrap<CudaPlanHandle>(env, info[0], &kCudaPlanTag, "CUDA plan");
  if (h == nullptr) return env.Undefined();
  if (h->plan == nullptr) return throw_error(env, "the CUDA plan handle was freed");
  int64_t bytes = 0;
  if (!size_arg(env, info[1], "cudaResidentNew: bytes", &bytes)) return env.Undefined();
  std::string err;
  std::shared_ptr<Resident> r = cuda_resident_new(h->plan, bytes, &err);
  if (r == nullptr) return throw_error(env, "cudaResidentNew: " + err);
  return resident_handle(env, std::move(r));
}

// cudaProgramNew(plan, code, launches, entries, nodes)
Napi::Value CudaProgramNew(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CudaPlanHandle* h = unwrap<CudaPlanHandle>(env, info[0], &kCudaPlanTag, "CUDA plan");
  if (h == nullptr) return env.Undefined();
  if (h->plan == nullptr) return throw_error(env, "the CUDA plan handle was freed");
  const int64_t *code = nullptr, *launches = nullptr;
  size_t n_code = 0, n_launch = 0;
  std::vector<std::string> entries, nodes;
  if (!words_of(env, info[1], "cudaProgramNew: code", &code, &n_code) || !words_of(env, info[2], "cudaProgramNew: launches", &launches, &n_launch) ||
      !strings_of(env, info[3], "cudaProgramNew: entries", &entries) || !strings_of(env, info[4], "cudaProgramNew: nodes", &nodes)) {
    return env.Undefined();
  }
  std::string err;
  CudaProgram* p = cuda_program_new(h->plan, code, n_code, launches, n_launch, entries, nodes, &err);
  if (p == nullptr) return throw_error(env, "cudaProgramNew: " + err);
  auto* ph = new CudaProgramHandle{std::shared_ptr<CudaProgram>(p, cuda_program_free)};
  auto ext = Napi::External<CudaProgramHandle>::New(env, ph, [](Napi::Env, CudaProgramHandle* x) { delete x; });
  ext.TypeTag(&kCudaProgramTag);
  return ext;
}

Napi::Value CudaProgramFree(const Napi::CallbackInfo& info) {
  CudaProgramHandle* h = unwrap<CudaProgramHandle>(info.Env(), info[0], &kCudaProgramTag, "CUDA program");
  if (h != nullptr) h->program.reset();
  return info.Env().Undefined();
}

// cudaProgramRun(program, symbols, feeds, outputs, views?, graph?): feeds and outputs are TypedArrays or resident
// handles, views the (offset, bytes) of each resident one (../resident_js.h).
Napi::Value CudaProgramRun(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  CudaProgramHandle* h = unwrap<CudaProgramHandle>(env, info[0], &kCudaProgramTag, "CUDA program");
  if (h == nullptr) return env.Undefined();
  if (h->program == nullptr) return throw_error(env, "the CUDA program handle was freed");
  std::vector<Napi::Value> feed_values, out_values;
  if (!arrays_of(env, info[2], "cudaProgramRun: feeds", &feed_values) || !arrays_of(env, info[3], "cudaProgramRun: outputs", &out_values)) {
    return env.Undefined();
  }
  // no JS runs from here on: the pointers read below stay valid for the run
  const void* owner = cuda_program_plan(h->program.get());
  RunViews views;
  if (!run_views(env, info[4], "cudaProgramRun: views", &views)) return env.Undefined();
  std::vector<ResidentView> feed_res(feed_values.size()), out_res(out_values.size());
  for (size_t i = 0; i < feed_values.size(); i++) {
    if (is_resident_arg(feed_values[i]) && !resident_view(env, feed_values[i], views, i, "cudaProgramRun: feeds[" + std::to_string(i) + "]", owner, &feed_res[i])) return env.Undefined();
  }
  for (size_t i = 0; i < out_values.size(); i++) {
    if (is_resident_arg(out_values[i]) &&
        !resident_view(env, out_values[i], views, feed_values.size() + i, "cudaProgramRun: outputs[" + std::to_string(i) + "]", owner, &out_res[i])) {
      return env.Undefined();
    }
  }
  const int64_t* syms = nullptr;
  size_t n_syms = 0;
  if (!words_of(env, info[1], "cudaProgramRun: symbols", &syms, &n_syms)) return env.Undefined();
  std::vector<FeedView> feeds;
  for (size_t i = 0; i < feed_values.size(); i++) {
    if (feed_res[i].res != nullptr) {
      feeds.push_back(FeedView{feed_res[i].data(), feed_res[i].bytes, true});
      continue;
    }
    void* d = nullptr;
    size_t b = 0;
    if (!bytes_of(env, feed_values[i], "cudaProgramRun: feeds[" + std::to_string(i) + "]", &d, &b)) return env.Undefined();
    feeds.push_back(FeedView{d, b});
  }
  std::vector<OutputView> outs;
  for (size_t i = 0; i < out_values.size(); i++) {
    if (out_res[i].res != nullptr) {
      outs.push_back(OutputView{out_res[i].data(), out_res[i].bytes, true});
      continue;
    }
    void* d = nullptr;
    size_t b = 0;
    if (!bytes_of(env, out_values[i], "cudaProgramRun: outputs[" + std::to_string(i) + "]", &d, &b)) return env.Undefined();
    outs.push_back(OutputView{d, b});
  }
  cuda_program_set_graph(h->program.get(), info.Length() > 5 && info[5].IsBoolean() && info[5].As<Napi::Boolean>().Value());
  const char* e = cuda_program_run(h->program.get(), syms, n_syms, feeds.data(), feeds.size(), outs.data(), outs.size());
  if (e != nullptr) return throw_error(env, e);
  return env.Undefined();
}

}  // namespace

void register_cuda_bindings(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaPlanNew", Napi::Function::New(env, CudaPlanNew, "cudaPlanNew"));
  exports.Set("cudaPlanFree", Napi::Function::New(env, CudaPlanFree, "cudaPlanFree"));
  exports.Set("cudaPlanDevice", Napi::Function::New(env, CudaPlanDevice, "cudaPlanDevice"));
  exports.Set("cudaResidentNew", Napi::Function::New(env, CudaResidentNew, "cudaResidentNew"));
  exports.Set("cudaProgramNew", Napi::Function::New(env, CudaProgramNew, "cudaProgramNew"));
  exports.Set("cudaProgramFree", Napi::Function::New(env, CudaProgramFree, "cudaProgramFree"));
  exports.Set("cudaProgramRun", Napi::Function::New(env, CudaProgramRun, "cudaProgramRun"));
}

}  // namespace planc
