// N-API bindings of the native runtime: plans, programs and runs as opaque handles, every error a JS Error.
#include <napi.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cpu/isa.h"
#include "cuda/bindings.h"
#include "cuda/driver.h"
#include "kernel.h"
#include "plan_state.h"
#include "program.h"
#include "resident_js.h"
#include "threadpool.h"

#ifdef PLANC_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace planc {

// cpu/kmeans.cc: the k-means assignment step on the project's GEMM.
const char* kmeans_assign(const float* x, int64_t n, int64_t d, const float* c, int64_t r, const float* cnorm,
                          int32_t* out_assign, float* out_dist, ThreadPool* pool);

namespace {

// ---- the process-wide runtime: one thread pool, used by one run at a time ----

struct Runtime {
  std::mutex exec_mu;  // held while kernels run (the pool serves one parallel_for caller at a time) and by setThreads
  std::unique_ptr<ThreadPool> pool;
  std::atomic<int> threads{1};  // readable without waiting for a run to end
};

Runtime& runtime() {
  static Runtime* rt = [] {
    auto* r = new Runtime;  // never destroyed: async runs may still hold it while the process exits
    unsigned hw = std::thread::hardware_concurrency();
    r->threads = hw == 0 ? 1 : static_cast<int>(hw);
    r->pool.reset(new ThreadPool(r->threads));
    return r;
  }();
  return *rt;
}

void set_blas_threads(int n) {
#ifdef PLANC_HAVE_OPENBLAS
  openblas_set_num_threads(n);
#else
  (void)n;
#endif
}

// ---- handles ----

struct PlanHandle {
  std::shared_ptr<PlanState> plan;
};

struct ProgramHandle {
  std::shared_ptr<Program> program;  // holds its plan alive too
};

const napi_type_tag kPlanTag = {0x706c616e632d706cULL, 0x616e2d68616e646cULL};
const napi_type_tag kProgramTag = {0x706c616e632d7072ULL, 0x6f672d68616e646cULL};

// ---- errors and argument helpers (every failure leaves a pending JS exception and returns false/null) ----

Napi::Value throw_error(Napi::Env env, const std::string& msg) {
  Napi::Error::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value throw_type_error(Napi::Env env, const std::string& msg) {
  Napi::TypeError::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

size_t element_bytes(napi_typedarray_type type) {
  switch (type) {
    case napi_int8_array: case napi_uint8_array: case napi_uint8_clamped_array: return 1;
    case napi_int16_array: case napi_uint16_array: return 2;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: return 4;
    case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: return 8;
    default: return 0;
  }
}

struct Bytes {
  void* data = nullptr;
  size_t bytes = 0;
  napi_typedarray_type type = napi_uint8_array;
};

// The memory of a TypedArray (no JS runs here, so pointers stay valid until JS runs again).
bool typed_array(Napi::Env env, Napi::Value v, const std::string& what, Bytes* out) {
  bool is = false;
  if (v.IsEmpty() || napi_is_typedarray(env, v, &is) != napi_ok || !is) {
    throw_type_error(env, what + " must be a TypedArray");
    return false;
  }
  size_t length = 0;
  napi_value buffer;
  size_t offset = 0;
  if (napi_get_typedarray_info(env, v, &out->type, &length, &out->data, &buffer, &offset) != napi_ok) {
    throw_type_error(env, what + ": cannot read the TypedArray");
    return false;
  }
  size_t size = element_bytes(out->type);
  if (size == 0) {
    throw_type_error(env, what + ": unsupported TypedArray type");
    return false;
  }
  out->bytes = length * size;
  return true;
}

bool bigint64_array(Napi::Env env, Napi::Value v, const std::string& what, const int64_t** data, size_t* count) {
  Bytes b;
  if (!typed_array(env, v, what, &b)) return false;
  if (b.type != napi_bigint64_array) {
    throw_type_error(env, what + " must be a BigInt64Array");
    return false;
  }
  *data = static_cast<const int64_t*>(b.data);
  *count = b.bytes / 8;
  return true;
}

// The elements of a JS array, all fetched before any is inspected (getters may run JS).
bool array_values(Napi::Env env, Napi::Value v, const std::string& what, std::vector<Napi::Value>* out) {
  if (v.IsEmpty() || !v.IsArray()) {
    throw_type_error(env, what + " must be an array of TypedArrays");
    return false;
  }
  Napi::Array arr = v.As<Napi::Array>();
  uint32_t n = arr.Length();
  if (env.IsExceptionPending()) return false;
  out->reserve(n);
  for (uint32_t i = 0; i < n; i++) {
    Napi::Value e = arr.Get(i);
    if (e.IsEmpty() || env.IsExceptionPending()) return false;
    out->push_back(e);
  }
  return true;
}

bool number_arg(Napi::Env env, Napi::Value v, const std::string& what, double lo, double hi, int64_t* out) {
  if (v.IsEmpty() || !v.IsNumber()) {
    throw_type_error(env, what + " must be a number");
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= lo && d <= hi) || d != static_cast<double>(static_cast<int64_t>(d))) {
    throw_error(env, what + " must be an integer in [" + std::to_string(static_cast<int64_t>(lo)) + ", " +
                         std::to_string(static_cast<int64_t>(hi)) + "]");
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

template <typename Holder>
Holder* unwrap(Napi::Env env, Napi::Value v, const napi_type_tag* tag, const char* what) {
  if (v.IsEmpty() || !v.IsExternal() || !v.As<Napi::External<Holder>>().CheckTypeTag(tag)) {
    throw_type_error(env, std::string("expected a ") + what + " handle");
    return nullptr;
  }
  return v.As<Napi::External<Holder>>().Data();
}

std::shared_ptr<PlanState> plan_arg(Napi::Env env, Napi::Value v) {
  PlanHandle* h = unwrap<PlanHandle>(env, v, &kPlanTag, "plan");
  if (h == nullptr) return nullptr;
  if (h->plan == nullptr) throw_error(env, "the plan handle was freed");
  return h->plan;
}

std::shared_ptr<Program> program_arg(Napi::Env env, Napi::Value v) {
  ProgramHandle* h = unwrap<ProgramHandle>(env, v, &kProgramTag, "program");
  if (h == nullptr) return nullptr;
  if (h->program == nullptr) throw_error(env, "the program handle was freed");
  return h->program;
}

// ---- info ----

std::string simd_string() {
  std::string s = "build ";
#if defined(__AVX512F__)
  s += "avx512f";
#elif defined(__AVX2__)
  s += "avx2";
#elif defined(__SSE4_2__)
  s += "sse4.2";
#elif defined(__SSE2__)
  s += "sse2";
#elif defined(__ARM_NEON)
  s += "neon";
#else
  s += "scalar";
#endif
#if defined(__x86_64__) && defined(__GNUC__)
  s += "; cpu";
  if (__builtin_cpu_supports("sse4.2")) s += " sse4.2";
  if (__builtin_cpu_supports("avx2")) s += " avx2";
  if (__builtin_cpu_supports("fma")) s += " fma";
  if (__builtin_cpu_supports("avx512f")) s += " avx512f";
#endif
  // a cap changes what the kernels run (and so the tuner's device: optimize/tune-device.ts keys entries by this string)
  if (isa_state().capped) s += std::string("; PLANC_ISA ") + isa_name(isa_state().cap);
  return s;
}

// The instruction-set levels (cpu/isa.h): { machine, cap (null: PLANC_ISA unset), effective }.
Napi::Object isa_object(Napi::Env env) {
  const IsaState& s = isa_state();
  Napi::Object o = Napi::Object::New(env);
  o.Set("machine", Napi::String::New(env, isa_name(s.machine)));
  o.Set("cap", s.capped ? Napi::Value(Napi::String::New(env, isa_name(s.cap))) : env.Null());
  o.Set("effective", Napi::String::New(env, isa_name(s.effective)));
  return o;
}

// Per kernel with variants (the schema's names), the variants this machine runs and why it runs no others: each
// KernelDef's variant_unavailable, as program_new's decode_variant asks it.
void variant_objects(Napi::Env env, Napi::Object* runs, Napi::Object* refused) {
  size_t n = 0;
  const KernelDef* table = kernel_table(&n);
  *runs = Napi::Object::New(env);
  *refused = Napi::Object::New(env);
  for (size_t i = 0; i < n; i++) {
    const KernelSchemaEntry* schema = nullptr;
    for (const KernelSchemaEntry& e : kKernelSchema)
      if (std::strcmp(e.name, table[i].name) == 0) schema = &e;
    if (schema == nullptr || schema->variant_count <= 0) continue;
    Napi::Array ok = Napi::Array::New(env);
    Napi::Object no = Napi::Object::New(env);
    uint32_t k = 0;
    for (int code = 0; code < schema->variant_count; code++) {
      const char* why = table[i].variant_unavailable != nullptr ? table[i].variant_unavailable(code) : nullptr;
      if (why == nullptr) ok.Set(k++, Napi::String::New(env, schema->variant_names[code]));
      else no.Set(schema->variant_names[code], Napi::String::New(env, why));
    }
    runs->Set(table[i].name, ok);
    refused->Set(table[i].name, no);
  }
}

Napi::Value KernelNames(const Napi::CallbackInfo& info) {
  size_t n = 0;
  const KernelDef* table = kernel_table(&n);
  Napi::Array names = Napi::Array::New(info.Env(), n);
  for (size_t i = 0; i < n; i++) names.Set(static_cast<uint32_t>(i), Napi::String::New(info.Env(), table[i].name));
  return names;
}

Napi::Value Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("threads", Napi::Number::New(env, runtime().threads.load()));
#ifdef PLANC_HAVE_OPENBLAS
  o.Set("blas", Napi::String::New(env, "openblas"));
#else
  o.Set("blas", Napi::String::New(env, "builtin"));
#endif
  o.Set("simd", Napi::String::New(env, simd_string()));
  o.Set("isa", isa_object(env));
  Napi::Object runs, refused;
  variant_objects(env, &runs, &refused);
  o.Set("variants", runs);
  o.Set("variantsUnavailable", refused);
  return o;
}

Napi::Value CudaStatusJs(const Napi::CallbackInfo& info) {
  CudaStatus s = cuda_status();
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("available", Napi::Boolean::New(info.Env(), s.available));
  o.Set("reason", Napi::String::New(info.Env(), s.reason));
  return o;
}

Napi::Value SetThreads(const Napi::CallbackInfo& info) {
  int64_t n = 0;
  if (!number_arg(info.Env(), info[0], "setThreads: n", 1, 1024, &n)) return info.Env().Undefined();
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.exec_mu);
  rt.pool.reset();  // join the old workers before starting new ones
  rt.pool.reset(new ThreadPool(static_cast<int>(n)));
  rt.threads = static_cast<int>(n);
  set_blas_threads(static_cast<int>(n));
  return info.Env().Undefined();
}

// ---- plans and programs ----

Napi::Value PlanNew(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Bytes blob;
  const int64_t* pairs = nullptr;
  size_t n_words = 0;
  int64_t arena = 0;
  if (!number_arg(env, info[2], "planNew: arenaBytes", 0, 9007199254740991.0, &arena)) return env.Undefined();
  if (!typed_array(env, info[0], "planNew: blob", &blob)) return env.Undefined();
  if (!bigint64_array(env, info[1], "planNew: weights", &pairs, &n_words)) return env.Undefined();
  if (n_words % 2 != 0) return throw_error(env, "planNew: weights must hold [offset, length] pairs (odd length " + std::to_string(n_words) + ")");
  std::string err;
  PlanState* plan = plan_new(static_cast<const uint8_t*>(blob.data), blob.bytes, pairs, n_words / 2, arena, &err);
  if (plan == nullptr) return throw_error(env, "planNew: " + err);
  auto* holder = new PlanHandle{std::shared_ptr<PlanState>(plan, plan_free)};
  auto ext = Napi::External<PlanHandle>::New(env, holder, [](Napi::Env, PlanHandle* h) { delete h; });
  ext.TypeTag(&kPlanTag);
  return ext;
}

Napi::Value PlanFree(const Napi::CallbackInfo& info) {
  PlanHandle* h = unwrap<PlanHandle>(info.Env(), info[0], &kPlanTag, "plan");
  if (h != nullptr) h->plan.reset();  // the memory goes when its last program (and run) lets go of it
  return info.Env().Undefined();
}

Napi::Value ProgramNew(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<PlanState> plan = plan_arg(env, info[0]);
  if (plan == nullptr) return env.Undefined();
  const int64_t* code = nullptr;
  size_t n = 0;
  if (!bigint64_array(env, info[1], "programNew: code", &code, &n)) return env.Undefined();
  std::string err;
  Program* p = program_new(plan, code, n, &err);
  if (p == nullptr) return throw_error(env, "programNew: " + err);
  auto* holder = new ProgramHandle{std::shared_ptr<Program>(p, program_free)};
  auto ext = Napi::External<ProgramHandle>::New(env, holder, [](Napi::Env, ProgramHandle* h) { delete h; });
  ext.TypeTag(&kProgramTag);
  return ext;
}

Napi::Value ProgramFree(const Napi::CallbackInfo& info) {
  ProgramHandle* h = unwrap<ProgramHandle>(info.Env(), info[0], &kProgramTag, "program");
  if (h != nullptr) h->program.reset();
  return info.Env().Undefined();
}

Napi::Value ProgramInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Program> p = program_arg(env, info[0]);
  if (p == nullptr) return env.Undefined();
  Napi::Object o = Napi::Object::New(env);
  o.Set("symbols", Napi::Number::New(env, static_cast<double>(program_n_syms(p.get()))));
  o.Set("inputs", Napi::Number::New(env, static_cast<double>(program_n_inputs(p.get()))));
  o.Set("outputs", Napi::Number::New(env, static_cast<double>(program_n_outputs(p.get()))));
  o.Set("kernels", Napi::Number::New(env, static_cast<double>(program_n_kernels(p.get()))));
  return o;
}

// programProfile(program, on?): turns per-kernel timing on/off when `on` is given; returns the sums so far (ns).
Napi::Value ProgramProfile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<Program> p = program_arg(env, info[0]);
  if (p == nullptr) return env.Undefined();
  if (info.Length() > 1 && info[1].IsBoolean()) {
    Runtime& rt = runtime();
    std::lock_guard<std::mutex> lock(rt.exec_mu);
    program_set_profiling(p.get(), info[1].As<Napi::Boolean>().Value());
  }
  const std::vector<double>& ns = program_profile(p.get());
  Napi::Float64Array out = Napi::Float64Array::New(env, ns.size());
  for (size_t i = 0; i < ns.size(); i++) out[i] = ns[i];
  return out;
}

// ---- runs ----

// One feed or output of a run: a TypedArray's memory, or a view of a resident buffer of the program's plan.
struct RunBuffer {
  Bytes host;
  ResidentView res;  // res.res set: a resident view
  bool resident() const { return res.res != nullptr; }
  void* data() const { return resident() ? static_cast<void*>(res.data()) : host.data; }
  size_t bytes() const { return resident() ? res.bytes : host.bytes; }
};

// The arguments of a run, read from JS: symbols, feeds and outputs as raw memory.
struct RunArgs {
  std::shared_ptr<Program> program;
  std::vector<int64_t> syms;
  std::vector<RunBuffer> feeds;
  std::vector<RunBuffer> outs;
  std::vector<Napi::Value> feed_values;
  std::vector<Napi::Value> out_values;
};

// Reads each value as a resident handle (its range at run position first + i of views) or a TypedArray.
bool read_buffers(Napi::Env env, const std::vector<Napi::Value>& values, const RunViews& views, size_t first, const std::string& what, const void* owner,
                  std::vector<RunBuffer>* out) {
  out->resize(values.size());
  for (size_t i = 0; i < values.size(); i++) {
    const std::string name = what + "[" + std::to_string(i) + "]";
    if (is_resident_arg(values[i]) ? !resident_view(env, values[i], views, first + i, name, owner, &(*out)[i].res) : !typed_array(env, values[i], name, &(*out)[i].host)) return false;
  }
  return true;
}

bool read_run_args(const Napi::CallbackInfo& info, const char* fn, RunArgs* a) {
  Napi::Env env = info.Env();
  std::string f = fn;
  a->program = program_arg(env, info[0]);
  if (a->program == nullptr) return false;
  std::vector<Napi::Value>& feed_values = a->feed_values;
  if (!array_values(env, info[2], f + ": feeds", &feed_values)) return false;
  if (!array_values(env, info[3], f + ": outputs", &a->out_values)) return false;
  // No JS runs from here on, so the pointers read below stay valid for a synchronous run.
  const void* owner = program_plan(a->program.get());
  RunViews views;
  if (!run_views(env, info[4], f + ": views", &views)) return false;
  if (!read_buffers(env, feed_values, views, 0, f + ": feeds", owner, &a->feeds) ||
      !read_buffers(env, a->out_values, views, feed_values.size(), f + ": outputs", owner, &a->outs)) {
    return false;
  }
  const int64_t* syms = nullptr;
  size_t n_syms = 0;
  if (!bigint64_array(env, info[1], f + ": symbols", &syms, &n_syms)) return false;
  a->syms.assign(syms, syms + n_syms);
  return true;
}

std::vector<OutputView> output_views(const std::vector<RunBuffer>& outs) {
  std::vector<OutputView> v;
  v.reserve(outs.size());
  for (const RunBuffer& b : outs) v.push_back(OutputView{b.data(), b.bytes()});
  return v;
}

// Releases the plan when a run ends, whichever way.
struct PlanGuard {
  PlanState* plan;
  ~PlanGuard() {
    if (plan != nullptr) plan_release(plan);
  }
};

const char* exec_locked(Program* p) {
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.exec_mu);
  return program_exec(p, rt.pool.get());
}

const char kBusy[] = "the plan is busy: another run of one of its programs is in progress (runs of one plan share its arena)";

Napi::Value ProgramRun(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  RunArgs a;
  if (!read_run_args(info, "programRun", &a)) return env.Undefined();
  Program* p = a.program.get();
  if (!plan_acquire(program_plan(p))) return throw_error(env, kBusy);
  PlanGuard guard{program_plan(p)};
  std::vector<FeedView> feeds;
  feeds.reserve(a.feeds.size());
  for (const RunBuffer& b : a.feeds) feeds.push_back(FeedView{b.data(), b.bytes()});
  std::vector<OutputView> outs = output_views(a.outs);
  const char* e = program_bind(p, a.syms.data(), a.syms.size(), feeds.data(), feeds.size());
  if (e == nullptr) e = program_check_outputs(p, outs.data(), outs.size());
  if (e == nullptr) e = exec_locked(p);
  if (e == nullptr) e = program_copy_outputs(p, outs.data(), outs.size());
  if (e != nullptr) return throw_error(env, e);
  return env.Undefined();
}

// An asynchronous run: bound on the main thread (TypedArray feeds copied, so JS may touch its arrays meanwhile; resident
// feeds used in place, held alive, and guarded by the busy plan), kernels on a worker thread, outputs copied back on
// the main thread.
class RunWorker : public Napi::AsyncWorker {
 public:
  RunWorker(Napi::Env env, std::shared_ptr<Program> program, Napi::Promise::Deferred deferred)
      : Napi::AsyncWorker(env, "planc.programRunAsync"), program_(std::move(program)), deferred_(deferred) {}

  // Takes the plan, copies the feeds and binds; false (nothing queued, plan released) with *err on failure.
  bool Start(RunArgs& a, std::string* err) {
    Program* p = program_.get();
    if (!plan_acquire(program_plan(p))) {
      *err = kBusy;
      return false;
    }
    acquired_ = true;
    feed_copies_.resize(a.feeds.size());
    std::vector<FeedView> feeds;
    for (size_t i = 0; i < a.feeds.size(); i++) {
      if (a.feeds[i].resident()) {
        feeds.push_back(FeedView{a.feeds[i].data(), a.feeds[i].bytes()});
        continue;
      }
      const uint8_t* src = static_cast<const uint8_t*>(a.feeds[i].host.data);
      feed_copies_[i].assign(src, src + a.feeds[i].host.bytes);  // operator new memory: aligned for any dtype
      feeds.push_back(FeedView{feed_copies_[i].data(), a.feeds[i].host.bytes});
    }
    std::vector<OutputView> outs = output_views(a.outs);
    const char* e = program_bind(p, a.syms.data(), a.syms.size(), feeds.data(), feeds.size());
    if (e == nullptr) e = program_check_outputs(p, outs.data(), outs.size());
    if (e != nullptr) {
      *err = e;
      return false;
    }
    // resident feeds and outputs stay alive until the run ends; TypedArray outputs are read again in OnOK
    for (const RunBuffer& b : a.feeds) {
      if (b.resident()) held_.push_back(b.res.res);
    }
    out_residents_.resize(a.outs.size());
    for (size_t i = 0; i < a.outs.size(); i++) {
      if (a.outs[i].resident()) out_residents_[i] = a.outs[i].res;
      out_refs_.push_back(a.outs[i].resident() ? Napi::ObjectReference() : Napi::Persistent(a.out_values[i].As<Napi::Object>()));
    }
    // STATE feeds (in-place caches) are written by the run: copies of TypedArray ones go back to the caller's arrays in
    // OnOK (resident ones were written in place)
    for (size_t i = 0; i < a.feed_values.size(); i++) {
      if (program_input_kind(p, i) == kState && !a.feeds[i].resident()) state_refs_.emplace_back(i, Napi::Persistent(a.feed_values[i].As<Napi::Object>()));
    }
    return true;
  }

  ~RunWorker() override { Release(); }

  void Execute() override {
    const char* e = exec_locked(program_.get());
    if (e != nullptr) SetError(e);
  }

  void OnOK() override {
    Napi::Env env = Env();
    std::string err = CopyOutputs(env);
    if (err.empty()) err = CopyStateBack(env);
    Release();
    if (err.empty()) {
      deferred_.Resolve(env.Undefined());
    } else {
      deferred_.Reject(Napi::Error::New(env, err).Value());
    }
  }

  void OnError(const Napi::Error& e) override {
    Release();
    deferred_.Reject(e.Value());
  }

 private:
  // The output buffers are read again here: JS ran meanwhile and may have detached or replaced them.
  std::string CopyOutputs(Napi::Env env) {
    std::vector<OutputView> outs;
    for (size_t i = 0; i < out_refs_.size(); i++) {
      if (out_residents_[i].res != nullptr) {
        outs.push_back(OutputView{out_residents_[i].data(), out_residents_[i].bytes});
        continue;
      }
      Bytes b;
      if (!typed_array(env, out_refs_[i].Value(), "programRunAsync: outputs[" + std::to_string(i) + "]", &b)) {
        env.GetAndClearPendingException();
        return "programRunAsync: outputs[" + std::to_string(i) + "] is no longer a readable TypedArray";
      }
      outs.push_back(OutputView{b.data, b.bytes});
    }
    const char* e = program_copy_outputs(program_.get(), outs.data(), outs.size());
    return e == nullptr ? std::string() : std::string("programRunAsync: ") + e;
  }

  // The run wrote the copies of the STATE feeds; the caller's arrays get their new contents (same size required).
  std::string CopyStateBack(Napi::Env env) {
    for (auto& [i, ref] : state_refs_) {
      const std::string what = "programRunAsync: feeds[" + std::to_string(i) + "]";
      Bytes b;
      if (!typed_array(env, ref.Value(), what, &b)) {
        env.GetAndClearPendingException();
        return what + " (a cache written in place) is no longer a readable TypedArray";
      }
      if (b.bytes != feed_copies_[i].size()) return what + " (a cache written in place) changed size during the run";
      std::memcpy(b.data, feed_copies_[i].data(), b.bytes);
    }
    return std::string();
  }

  void Release() {
    if (acquired_) plan_release(program_plan(program_.get()));
    acquired_ = false;
  }

  std::shared_ptr<Program> program_;
  Napi::Promise::Deferred deferred_;
  std::vector<std::vector<uint8_t>> feed_copies_;
  std::vector<std::shared_ptr<Resident>> held_;
  std::vector<ResidentView> out_residents_;  // res null: a TypedArray output (out_refs_)
  std::vector<Napi::ObjectReference> out_refs_;
  std::vector<std::pair<size_t, Napi::ObjectReference>> state_refs_;
  bool acquired_ = false;
};

Napi::Value ProgramRunAsync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Promise::Deferred deferred = Napi::Promise::Deferred::New(env);
  RunArgs a;
  if (!read_run_args(info, "programRunAsync", &a)) {
    Napi::Error e = env.GetAndClearPendingException();
    deferred.Reject(e.Value());
    return deferred.Promise();
  }
  auto* worker = new RunWorker(env, a.program, deferred);
  std::string err;
  if (!worker->Start(a, &err)) {
    delete worker;
    deferred.Reject(Napi::Error::New(env, err).Value());
    return deferred.Promise();
  }
  worker->Queue();
  return deferred.Promise();
}

// residentNew(plan, bytes): a zeroed, 64-byte aligned host buffer owned by the plan (resident.h).
Napi::Value ResidentNew(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::shared_ptr<PlanState> plan = plan_arg(env, info[0]);
  if (plan == nullptr) return env.Undefined();
  int64_t bytes = 0;
  if (!number_arg(env, info[1], "residentNew: bytes", 0, static_cast<double>(kMaxResidentBytes), &bytes)) return env.Undefined();
  std::string err;
  std::shared_ptr<Resident> r = host_resident_new(plan, bytes, &err);
  if (r == nullptr) return throw_error(env, "residentNew: " + err);
  return resident_handle(env, std::move(r));
}

// ---- k-means ----

// A TypedArray of one type holding at least `need` elements (null/undefined allowed when `nullable`: *data = nullptr).
bool sized_array(Napi::Env env, Napi::Value v, const std::string& what, napi_typedarray_type type, const char* type_name,
                 int64_t need, bool nullable, void** data) {
  *data = nullptr;
  if (nullable && (v.IsNull() || v.IsUndefined())) return true;
  Bytes b;
  if (!typed_array(env, v, what, &b)) return false;
  if (b.type != type) {
    throw_type_error(env, what + " must be a " + type_name + (nullable ? " or null" : ""));
    return false;
  }
  const size_t length = b.bytes / element_bytes(type);
  if (static_cast<uint64_t>(need) > length) {
    throw_error(env, what + " has " + std::to_string(length) + " elements, needs " + std::to_string(need));
    return false;
  }
  *data = b.data;
  return true;
}

// kmeansAssign(x, n, d, c, r, cnorm | null, outAssign, outDist | null): for x [n, d] and centroids c [r, d]
// (row-major Float32Arrays), outAssign[i] = argmin_j ‖c_j‖² − 2 x_i·c_j (ties: lowest j) and outDist[i] = the squared
// distance (≥ 0); cnorm [r] = ‖c_j‖² (null: computed). Arrays may be longer than needed. Runs on the kernel pool.
Napi::Value KmeansAssign(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const double kMaxDim = 2147483647.0;
  int64_t n = 0, d = 0, r = 0;
  if (!number_arg(env, info[1], "kmeansAssign: n", 0, kMaxDim, &n)) return env.Undefined();
  if (!number_arg(env, info[2], "kmeansAssign: d", 0, kMaxDim, &d)) return env.Undefined();
  if (!number_arg(env, info[4], "kmeansAssign: r", 0, kMaxDim, &r)) return env.Undefined();
  // No JS runs from here on, so the pointers read below stay valid for the call.
  void *x = nullptr, *c = nullptr, *cnorm = nullptr, *assign = nullptr, *dist = nullptr;
  if (!sized_array(env, info[0], "kmeansAssign: x", napi_float32_array, "Float32Array", n * d, false, &x) ||
      !sized_array(env, info[3], "kmeansAssign: c", napi_float32_array, "Float32Array", r * d, false, &c) ||
      !sized_array(env, info[5], "kmeansAssign: cnorm", napi_float32_array, "Float32Array", r, true, &cnorm) ||
      !sized_array(env, info[6], "kmeansAssign: outAssign", napi_int32_array, "Int32Array", n, false, &assign) ||
      !sized_array(env, info[7], "kmeansAssign: outDist", napi_float32_array, "Float32Array", n, true, &dist))
    return env.Undefined();
  Runtime& rt = runtime();
  const char* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(rt.exec_mu);
    e = kmeans_assign(static_cast<const float*>(x), n, d, static_cast<const float*>(c), r,
                      static_cast<const float*>(cnorm), static_cast<int32_t*>(assign), static_cast<float*>(dist),
                      rt.pool.get());
  }
  if (e != nullptr) return throw_error(env, std::string("kmeansAssign: ") + e);
  return env.Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  // PLANC_ISA with a value that is not a level: no kernel runs under a cap the user did not mean (the error names the
  // variable and the levels; runtime/native.ts passes it on).
  if (const char* e = isa_state().error) {
    Napi::Error::New(env, e).ThrowAsJavaScriptException();
    return exports;
  }
  exports.Set("kernelNames", Napi::Function::New(env, KernelNames, "kernelNames"));
  exports.Set("info", Napi::Function::New(env, Info, "info"));
  exports.Set("cudaStatus", Napi::Function::New(env, CudaStatusJs, "cudaStatus"));
  exports.Set("setThreads", Napi::Function::New(env, SetThreads, "setThreads"));
  exports.Set("planNew", Napi::Function::New(env, PlanNew, "planNew"));
  exports.Set("planFree", Napi::Function::New(env, PlanFree, "planFree"));
  exports.Set("programNew", Napi::Function::New(env, ProgramNew, "programNew"));
  exports.Set("programFree", Napi::Function::New(env, ProgramFree, "programFree"));
  exports.Set("programInfo", Napi::Function::New(env, ProgramInfo, "programInfo"));
  exports.Set("programProfile", Napi::Function::New(env, ProgramProfile, "programProfile"));
  exports.Set("programRun", Napi::Function::New(env, ProgramRun, "programRun"));
  exports.Set("programRunAsync", Napi::Function::New(env, ProgramRunAsync, "programRunAsync"));
  exports.Set("kmeansAssign", Napi::Function::New(env, KmeansAssign, "kmeansAssign"));
  exports.Set("residentNew", Napi::Function::New(env, ResidentNew, "residentNew"));
  register_resident_bindings(env, exports);
  register_cuda_bindings(env, exports);
  set_blas_threads(runtime().threads.load());
  return exports;
}

}  // namespace
}  // namespace planc

static Napi::Object InitPlanc(Napi::Env env, Napi::Object exports) { return planc::Init(env, exports); }

NODE_API_MODULE(planc_native, InitPlanc)
