// Program decoding (every word checked) and runs: expressions, tensor resolution, kernels, output copies.
#include "program.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <vector>

#include "expr.h"
#include "kernel.h"

namespace planc {


// Sane limits: far above any real model, low enough that a corrupt count cannot ask for absurd allocations.
constexpr int64_t kMaxWords = int64_t(1) << 28;
constexpr int64_t kMaxSyms = 4096;
constexpr int64_t kMaxFactors = 64;
constexpr int64_t kMaxKernelRefs = 1 << 16;  // inputs, outputs, iargs or fargs of one kernel
constexpr int64_t kHeaderWords = 10;

struct TensorRec {
  int32_t kind;
  int32_t dtype;
  int32_t rank;
  int32_t root;  // the tensor whose storage this one uses (itself unless an alias)
  int64_t a;
  int64_t b;
  uint32_t dims[kMaxRank];  // expression indices
};

struct KernelRec {
  KernelFn fn;
  const char* name;
  int64_t variant;              // KernelArgs::variant (checked: the kernel has it and this machine runs it)
  uint32_t in_begin, n_in;      // into in_refs / in_views
  uint32_t out_begin, n_out;    // into out_refs / out_views
  uint32_t iarg_begin, n_iargs; // into iarg_refs / iarg_vals
  uint32_t farg_begin, n_fargs; // into fargs
  const KernelDef* def;
  int prepared_input;           // the input its variant reads prepared (-1: none)
  const void* prepared;         // that operand, as the last bind found or built it
};

struct Program {
  std::shared_ptr<PlanState> plan;
  int64_t n_syms = 0;
  int64_t arena_bytes = 0;
  int64_t n_weights = 0;
  ExprTable exprs;
  std::vector<TensorRec> tensors;
  std::vector<KernelRec> kernels;
  std::vector<int32_t> in_refs, out_refs;  // tensor indices (-1: omitted input)
  std::vector<uint32_t> iarg_refs;         // expression indices
  std::vector<double> fargs;
  std::vector<int32_t> inputs, outputs;    // tensor indices
  // Scratch of a run, allocated once here so a run allocates nothing.
  std::vector<int64_t> expr_vals;
  std::vector<TensorView> views;
  std::vector<TensorView> in_views, out_views;
  std::vector<int64_t> iarg_vals;
  std::string err;
  // Per-kernel wall time summed over runs while profiling is on (for `planc` profiles and the tuner).
  bool profiling = false;
  std::vector<double> profile_ns;
};

// ---- decoding ----

// Reads words one at a time; every failure names the word's position.
struct Decoder {
  const int64_t* words;
  size_t n;
  size_t pos = 0;
  std::string* err;

  size_t left() const { return n - pos; }

  bool fail(const char* fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    *err = "program code word " + std::to_string(pos > 0 ? pos - 1 : 0) + ": " + buf;
    return false;
  }

  bool word(int64_t* v, const char* what) {
    if (pos >= n) {
      pos = n + 1;
      return fail("the code ends while reading %s (%zu words)", what, n);
    }
    *v = words[pos++];
    return true;
  }

  // A value in [lo, hi].
  bool ranged(int64_t* v, int64_t lo, int64_t hi, const char* what) {
    if (!word(v, what)) return false;
    if (*v < lo || *v > hi) return fail("%s = %lld is outside [%lld, %lld]", what, (long long)*v, (long long)lo, (long long)hi);
    return true;
  }

  // A count of items taking at least `per_item` words each: must fit in what is left of the code.
  bool count(int64_t* v, int64_t limit, int64_t per_item, const char* what) {
    if (!word(v, what)) return false;
    int64_t room = static_cast<int64_t>(left()) / per_item;
    if (*v < 0 || *v > limit || *v > room) {
      return fail("%s = %lld is negative, over %lld, or more than the %lld words left can hold", what, (long long)*v,
                  (long long)limit, (long long)left());
    }
    return true;
  }
};

static bool decode_header(Decoder& d, Program& p, int64_t* counts) {
  int64_t magic = 0, reserved = 0;
  if (!d.word(&magic, "the magic")) return false;
  if (magic != kProgramMagic) return d.fail("bad magic 0x%llx: not program code (PLCPROG1)", (unsigned long long)magic);
  const char* names[6] = {"n_syms", "n_exprs", "n_tensors", "n_kernels", "n_inputs", "n_outputs"};
  for (int i = 0; i < 6; i++) {
    if (!d.ranged(&counts[i], 0, kMaxWords, names[i])) return false;
  }
  if (counts[0] > kMaxSyms) return d.fail("n_syms = %lld is over %lld", (long long)counts[0], (long long)kMaxSyms);
  int64_t plan_arena = static_cast<int64_t>(p.plan->arena_bytes);
  int64_t plan_weights = static_cast<int64_t>(p.plan->weights.size());
  if (!d.ranged(&p.arena_bytes, 0, plan_arena, "arena_bytes (within the plan's arena)")) return false;
  if (!d.ranged(&p.n_weights, 0, plan_weights, "n_weights (within the plan's weights)")) return false;
  if (!d.word(&reserved, "the reserved word")) return false;
  if (reserved != 0) return d.fail("reserved word is %lld, not 0", (long long)reserved);
  // Minimum sizes: an expr 1 word, a tensor 5, a kernel 6, an input or output 1.
  int64_t need = counts[1] + 5 * counts[2] + 6 * counts[3] + counts[4] + counts[5];
  if (need > static_cast<int64_t>(d.left())) {
    return d.fail("the header's counts need at least %lld more words but the code has %zu", (long long)need, d.left());
  }
  p.n_syms = counts[0];
  return true;
}

static bool decode_exprs(Decoder& d, Program& p, int64_t n_exprs) {
  ExprTable& t = p.exprs;
  t.term_begin.reserve(static_cast<size_t>(n_exprs) + 1);
  t.term_begin.push_back(0);
  for (int64_t e = 0; e < n_exprs; e++) {
    int64_t n_terms = 0;
    if (!d.count(&n_terms, kMaxWords, 2, "an expression's n_terms")) return false;
    for (int64_t i = 0; i < n_terms; i++) {
      int64_t coeff = 0, n_factors = 0;
      if (!d.ranged(&coeff, -kExprLimit, kExprLimit, "a term's coefficient")) return false;
      if (!d.count(&n_factors, kMaxFactors, 1, "a term's n_factors")) return false;
      t.terms.push_back(ExprTerm{coeff, static_cast<uint32_t>(t.factors.size()), static_cast<uint32_t>(n_factors)});
      for (int64_t f = 0; f < n_factors; f++) {
        int64_t sym = 0;
        if (!d.ranged(&sym, 0, p.n_syms - 1, "a factor's symbol index")) return false;
        t.factors.push_back(static_cast<uint32_t>(sym));
      }
    }
    t.term_begin.push_back(static_cast<uint32_t>(t.terms.size()));
  }
  return true;
}

// The storage reference (a, b) of one tensor, checked by kind.
static bool decode_storage(Decoder& d, Program& p, TensorRec& r, int64_t index, int64_t n_inputs) {
  if (!d.word(&r.a, "a tensor's a") || !d.word(&r.b, "a tensor's b")) return false;
  r.root = static_cast<int32_t>(index);
  if (r.kind == kArena) {
    if (r.a < 0 || r.a > p.arena_bytes || r.b < 0 || r.b > p.arena_bytes - r.a) {
      return d.fail("tensor #%lld: arena slot [offset %lld, %lld bytes] is outside the program's arena of %lld bytes",
                    (long long)index, (long long)r.a, (long long)r.b, (long long)p.arena_bytes);
    }
    return true;
  }
  if (r.b != 0) return d.fail("tensor #%lld: b = %lld must be 0 for kind %d", (long long)index, (long long)r.b, r.kind);
  int64_t limit = r.kind == kWeight ? p.n_weights : (r.kind == kInput || r.kind == kState) ? n_inputs : index;
  if (r.a < 0 || r.a >= limit) {
    static const char* what[] = {"", "weight index", "input index", "alias target (an earlier tensor)", "input index"};
    return d.fail("tensor #%lld: %s %lld is outside [0, %lld)", (long long)index, what[r.kind], (long long)r.a,
                  (long long)limit);
  }
  if (r.kind == kAlias) r.root = p.tensors[static_cast<size_t>(r.a)].root;
  return true;
}

static bool decode_tensors(Decoder& d, Program& p, int64_t n_tensors, int64_t n_inputs) {
  p.tensors.reserve(static_cast<size_t>(n_tensors));
  int64_t n_exprs = static_cast<int64_t>(p.exprs.size());
  for (int64_t t = 0; t < n_tensors; t++) {
    int64_t kind = 0, dtype = 0, rank = 0;
    if (!d.ranged(&kind, 0, 4, "a tensor's kind")) return false;
    if (!d.ranged(&dtype, 0, 64, "a tensor's dtype")) return false;
    if (dtype_size(static_cast<int32_t>(dtype)) == 0) return d.fail("tensor #%lld: unsupported dtype %lld", (long long)t, (long long)dtype);
    if (!d.ranged(&rank, 0, kMaxRank, "a tensor's rank")) return false;
    TensorRec r{};
    r.kind = static_cast<int32_t>(kind);
    r.dtype = static_cast<int32_t>(dtype);
    r.rank = static_cast<int32_t>(rank);
    if (!decode_storage(d, p, r, t, n_inputs)) return false;
    for (int64_t i = 0; i < rank; i++) {
      int64_t e = 0;
      if (!d.ranged(&e, 0, n_exprs - 1, "a tensor's dim expression index")) return false;
      r.dims[i] = static_cast<uint32_t>(e);
    }
    p.tensors.push_back(r);
  }
  return true;
}

// Reads n tensor references into refs; inputs may be -1 (omitted), outputs must be stored in the arena.
static bool decode_refs(Decoder& d, Program& p, int64_t n, bool outputs, std::vector<int32_t>& refs) {
  int64_t n_tensors = static_cast<int64_t>(p.tensors.size());
  for (int64_t i = 0; i < n; i++) {
    int64_t t = 0;
    if (!d.ranged(&t, outputs ? 0 : -1, n_tensors - 1, outputs ? "a kernel output's tensor" : "a kernel input's tensor")) return false;
    int32_t root_kind = outputs ? p.tensors[static_cast<size_t>(p.tensors[static_cast<size_t>(t)].root)].kind : kArena;
    if (root_kind != kArena && root_kind != kState) {
      return d.fail("kernel output tensor #%lld is not an arena or state tensor or an alias of one (weights and inputs are read only)", (long long)t);
    }
    refs.push_back(static_cast<int32_t>(t));
  }
  return true;
}

// A call's variant code: one of the kernel's schema variants (0 when it has none) that this machine can run.
static bool decode_variant(Decoder& d, const KernelDef& def, int64_t* variant) {
  if (!d.word(variant, "a kernel's variant")) return false;
  const KernelSchemaEntry* schema = nullptr;
  for (const KernelSchemaEntry& e : kKernelSchema) {
    if (std::strcmp(e.name, def.name) == 0) schema = &e;
  }
  const int64_t count = schema != nullptr && schema->variant_count > 0 ? schema->variant_count : 1;
  if (*variant < 0 || *variant >= count) {
    std::string names;
    for (int i = 0; schema != nullptr && i < schema->variant_count; i++) names += (i ? ", " : "") + std::to_string(i) + " " + schema->variant_names[i];
    return d.fail("kernel %s has no variant %lld (%s)", def.name, (long long)*variant,
                  names.empty() ? "it has one implementation: 0" : ("its variants: " + names).c_str());
  }
  const char* why = def.variant_unavailable != nullptr ? def.variant_unavailable(*variant) : nullptr;
  if (why != nullptr) {
    const char* name = schema != nullptr && schema->variant_count > 0 ? schema->variant_names[*variant] : "0";
    return d.fail("kernel %s variant %s cannot run on this machine: %s", def.name, name, why);
  }
  return true;
}

static bool decode_kernel(Decoder& d, Program& p, const KernelDef* table, size_t table_size) {
  int64_t id = 0, variant = 0, n_in = 0, n_out = 0, n_iargs = 0, n_fargs = 0;
  if (!d.ranged(&id, 0, static_cast<int64_t>(table_size) - 1, "a kernel id (within the kernel table)")) return false;
  if (!decode_variant(d, table[id], &variant)) return false;
  if (!d.count(&n_in, kMaxKernelRefs, 1, "a kernel's n_in") || !d.count(&n_out, kMaxKernelRefs, 1, "a kernel's n_out") ||
      !d.count(&n_iargs, kMaxKernelRefs, 1, "a kernel's n_iargs") || !d.count(&n_fargs, kMaxKernelRefs, 1, "a kernel's n_fargs")) {
    return false;
  }
  if (const char* e = check_kernel_call(table[id].name, n_in, n_out, n_iargs, n_fargs)) return d.fail("%s", e);  // kernel_schema.cc
  KernelRec k{table[id].fn, table[id].name, variant,
              static_cast<uint32_t>(p.in_refs.size()), static_cast<uint32_t>(n_in),
              static_cast<uint32_t>(p.out_refs.size()), static_cast<uint32_t>(n_out),
              static_cast<uint32_t>(p.iarg_refs.size()), static_cast<uint32_t>(n_iargs),
              static_cast<uint32_t>(p.fargs.size()), static_cast<uint32_t>(n_fargs), &table[id], -1, nullptr};
  if (table[id].prepared_input != nullptr) {
    k.prepared_input = table[id].prepared_input(variant);
    if (k.prepared_input >= n_in) return d.fail("kernel %s: its variant reads input %d prepared, but the call has %lld inputs", table[id].name, k.prepared_input, (long long)n_in);
  }
  if (!decode_refs(d, p, n_in, false, p.in_refs) || !decode_refs(d, p, n_out, true, p.out_refs)) return false;
  for (int64_t i = 0; i < n_iargs; i++) {
    int64_t e = 0;
    if (!d.ranged(&e, 0, static_cast<int64_t>(p.exprs.size()) - 1, "a kernel's iarg expression index")) return false;
    p.iarg_refs.push_back(static_cast<uint32_t>(e));
  }
  for (int64_t i = 0; i < n_fargs; i++) {
    int64_t bits = 0;
    if (!d.word(&bits, "a kernel's farg")) return false;
    double v;
    std::memcpy(&v, &bits, sizeof v);
    p.fargs.push_back(v);
  }
  p.kernels.push_back(k);
  return true;
}

static bool decode_io(Decoder& d, Program& p, int64_t n_inputs, int64_t n_outputs) {
  int64_t n_tensors = static_cast<int64_t>(p.tensors.size());
  for (int64_t i = 0; i < n_inputs; i++) {
    int64_t t = 0;
    if (!d.ranged(&t, 0, n_tensors - 1, "a graph input's tensor")) return false;
    const TensorRec& r = p.tensors[static_cast<size_t>(t)];
    if ((r.kind != kInput && r.kind != kState) || r.a != i) return d.fail("graph input %lld names tensor #%lld, which is not INPUT or STATE %lld", (long long)i, (long long)t, (long long)i);
    p.inputs.push_back(static_cast<int32_t>(t));
  }
  for (int64_t i = 0; i < n_outputs; i++) {
    int64_t t = 0;
    if (!d.ranged(&t, 0, n_tensors - 1, "a graph output's tensor")) return false;
    p.outputs.push_back(static_cast<int32_t>(t));
  }
  return true;
}

static void alloc_scratch(Program& p) {
  p.expr_vals.assign(p.exprs.size(), 0);
  p.views.assign(p.tensors.size(), TensorView{});
  p.in_views.assign(p.in_refs.size(), TensorView{});
  p.out_views.assign(p.out_refs.size(), TensorView{});
  p.iarg_vals.assign(p.iarg_refs.size(), 0);
}

static bool decode(Decoder& d, Program& p) {
  int64_t c[6];  // n_syms n_exprs n_tensors n_kernels n_inputs n_outputs
  if (!decode_header(d, p, c) || !decode_exprs(d, p, c[1]) || !decode_tensors(d, p, c[2], c[4])) return false;
  size_t table_size = 0;
  const KernelDef* table = kernel_table(&table_size);
  p.kernels.reserve(static_cast<size_t>(c[3]));
  for (int64_t k = 0; k < c[3]; k++) {
    if (!decode_kernel(d, p, table, table_size)) return false;
  }
  if (!decode_io(d, p, c[4], c[5])) return false;
  if (d.pos != d.n) return d.fail("%zu words are left over after the outputs", d.n - d.pos);
  alloc_scratch(p);
  return true;
}

Program* program_new(std::shared_ptr<PlanState> plan, const int64_t* code, size_t n_words, std::string* err) {
  if (plan == nullptr) {
    *err = "program_new: no plan";
    return nullptr;
  }
  if (n_words < static_cast<size_t>(kHeaderWords) || n_words > static_cast<size_t>(kMaxWords)) {
    *err = "program code has " + std::to_string(n_words) + " words: not between the 10-word header and 2^28";
    return nullptr;
  }
  Program* p = new Program;
  p->plan = std::move(plan);
  Decoder d{code, n_words, 0, err};
  if (!decode(d, *p)) {
    delete p;
    return nullptr;
  }
  return p;
}

void program_free(Program* program) { delete program; }

PlanState* program_plan(const Program* program) { return program->plan.get(); }
size_t program_n_syms(const Program* program) { return static_cast<size_t>(program->n_syms); }
size_t program_n_inputs(const Program* program) { return program->inputs.size(); }
size_t program_n_outputs(const Program* program) { return program->outputs.size(); }
size_t program_n_kernels(const Program* program) { return program->kernels.size(); }

// ---- running ----

static std::string describe(const TensorView& v, size_t index) {
  std::string s = "tensor #" + std::to_string(index) + " (" + dtype_name(v.dtype) + " [";
  for (int i = 0; i < v.rank; i++) s += (i ? ", " : "") + std::to_string(v.dims[i]);
  return s + "])";
}

static const char* fail(Program& p, std::string msg) {
  p.err = std::move(msg);
  return p.err.c_str();
}

// Dims, element count and byte size of one tensor from the evaluated expressions.
static const char* resolve_shape(Program& p, size_t t, int64_t* bytes) {
  const TensorRec& r = p.tensors[t];
  TensorView& v = p.views[t];
  v.dtype = r.dtype;
  v.rank = r.rank;
  int64_t numel = 1;
  for (int i = 0; i < r.rank; i++) {
    int64_t dim = p.expr_vals[r.dims[i]];
    v.dims[i] = dim;
    if (dim < 0) return fail(p, describe(v, t) + ": dim " + std::to_string(i) + " = " + std::to_string(dim) + " is negative");
    if (__builtin_mul_overflow(numel, dim, &numel) || numel > kExprLimit) return fail(p, describe(v, t) + ": element count overflows");
  }
  v.numel = numel;
  int64_t size = static_cast<int64_t>(dtype_size(r.dtype));
  if (__builtin_mul_overflow(numel, size, bytes) || *bytes > kExprLimit) return fail(p, describe(v, t) + ": byte size overflows");
  return nullptr;
}

alignas(64) static uint8_t g_empty_feed[64];  // stands in for the data of empty feeds, so present tensors are never null

// Storage of one tensor, its size checked against what backs it.
static const char* resolve_storage(Program& p, size_t t, int64_t bytes, const FeedView* feeds) {
  const TensorRec& r = p.tensors[t];
  TensorView& v = p.views[t];
  int64_t have = 0;
  const char* what = "";
  if (r.kind == kArena) {
    v.data = p.plan->arena + r.a;
    if (bytes > r.b) return fail(p, describe(v, t) + " needs " + std::to_string(bytes) + " bytes but its arena slot holds " + std::to_string(r.b));
    have = bytes;
  } else if (r.kind == kWeight) {
    const WeightSpan& w = p.plan->weights[static_cast<size_t>(r.a)];
    v.data = const_cast<uint8_t*>(w.data);
    have = static_cast<int64_t>(w.bytes);
    what = "its weight";
  } else if (r.kind == kInput || r.kind == kState) {
    const FeedView& f = feeds[r.a];
    v.data = f.data != nullptr ? const_cast<void*>(f.data) : g_empty_feed;
    have = static_cast<int64_t>(f.bytes);
    what = "its feed";
  } else {
    const TensorView& target = p.views[static_cast<size_t>(r.a)];
    v.data = target.data;
    have = static_cast<int64_t>(target.bytes());
    what = "its alias target";
  }
  if (bytes != have) return fail(p, describe(v, t) + " has " + std::to_string(bytes) + " bytes but " + what + " has " + std::to_string(have));
  if (reinterpret_cast<uintptr_t>(v.data) % dtype_size(r.dtype) != 0) return fail(p, describe(v, t) + ": data is not aligned to its element size");
  return nullptr;
}

// Copies the resolved views and iarg values into each kernel's argument arrays.
static void fill_kernel_args(Program& p) {
  for (size_t i = 0; i < p.in_refs.size(); i++) {
    int32_t t = p.in_refs[i];
    p.in_views[i] = t < 0 ? TensorView{} : p.views[static_cast<size_t>(t)];
  }
  for (size_t i = 0; i < p.out_refs.size(); i++) p.out_views[i] = p.views[static_cast<size_t>(p.out_refs[i])];
  for (size_t i = 0; i < p.iarg_refs.size(); i++) p.iarg_vals[i] = p.expr_vals[p.iarg_refs[i]];
}

// The operand of call k that its variant reads prepared: the plan's entry for that weight, kernel, variant and iargs,
// built now when no program of the plan has built it yet. Only a plan weight can be prepared (it never changes).
static const char* prepare_operand(Program& p, size_t k) {
  KernelRec& r = p.kernels[k];
  const int32_t t = p.in_refs[r.in_begin + static_cast<uint32_t>(r.prepared_input)];
  auto call = [&] { return "kernel #" + std::to_string(k) + " (" + r.name + ")"; };
  if (t < 0 || p.tensors[static_cast<size_t>(t)].kind != kWeight)
    return fail(p, call() + ": its variant reads input " + std::to_string(r.prepared_input) + " reordered once, which needs a plan weight there; " +
                       (t < 0 ? std::string("the input is omitted") : "tensor #" + std::to_string(t) + " is not one"));
  const size_t weight = static_cast<size_t>(p.tensors[static_cast<size_t>(t)].a);
  const int64_t* iargs = p.iarg_vals.data() + r.iarg_begin;  // every bind: compared in place, copied only when built
  for (const PreparedEntry& e : p.plan->prepared) {
    if (e.weight == weight && e.kernel == r.name && e.variant == r.variant && e.iargs.size() == r.n_iargs &&
        std::equal(e.iargs.begin(), e.iargs.end(), iargs)) {
      r.prepared = e.op.data;
      return nullptr;
    }
  }
  KernelArgs args = program_kernel_args(&p, k);
  PreparedEntry& e = p.plan->prepared.emplace_back(
      PreparedEntry{weight, r.name, r.variant, std::vector<int64_t>(iargs, iargs + r.n_iargs), PreparedOperand{}});
  if (const char* err = r.def->prepare(args, &e.op)) {
    p.plan->prepared.pop_back();
    return fail(p, call() + ": preparing input " + std::to_string(r.prepared_input) + ": " + err);
  }
  r.prepared = e.op.data;
  return nullptr;
}

const char* program_bind(Program* program, const int64_t* syms, size_t n_syms, const FeedView* feeds, size_t n_feeds) {
  Program& p = *program;
  if (n_syms != static_cast<size_t>(p.n_syms)) return fail(p, "expected " + std::to_string(p.n_syms) + " symbol values, got " + std::to_string(n_syms));
  if (n_feeds != p.inputs.size()) return fail(p, "expected " + std::to_string(p.inputs.size()) + " feeds, got " + std::to_string(n_feeds));
  if (!eval_exprs(p.exprs, syms, p.expr_vals.data(), &p.err)) return p.err.c_str();
  for (size_t t = 0; t < p.tensors.size(); t++) {
    int64_t bytes = 0;
    const char* e = resolve_shape(p, t, &bytes);
    if (e == nullptr) e = resolve_storage(p, t, bytes, feeds);
    if (e != nullptr) return e;
  }
  fill_kernel_args(p);
  for (size_t k = 0; k < p.kernels.size(); k++) {
    if (p.kernels[k].prepared_input < 0) continue;  // found again every bind: its iargs may differ
    if (const char* e = prepare_operand(p, k)) return e;
  }
  return nullptr;
}

const char* program_exec(Program* program, ThreadPool* pool) {
  Program& p = *program;
  TensorView* in = p.in_views.data();
  TensorView* out = p.out_views.data();
  const int64_t* iargs = p.iarg_vals.data();
  const double* fargs = p.fargs.data();
  for (size_t k = 0; k < p.kernels.size(); k++) {
    const KernelRec& r = p.kernels[k];
    KernelArgs args;
    args.in = in + r.in_begin;
    args.n_in = static_cast<int>(r.n_in);
    args.out = out + r.out_begin;
    args.n_out = static_cast<int>(r.n_out);
    args.iargs = iargs + r.iarg_begin;
    args.n_iargs = static_cast<int>(r.n_iargs);
    args.fargs = fargs + r.farg_begin;
    args.n_fargs = static_cast<int>(r.n_fargs);
    args.pool = pool;
    args.variant = r.variant;
    args.prepared = r.prepared;
    const auto t0 = p.profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    const char* e = r.fn(args);
    if (e != nullptr) return fail(p, "kernel #" + std::to_string(k) + " (" + r.name + "): " + e);
    if (p.profiling) p.profile_ns[k] += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  }
  return nullptr;
}

void program_set_profiling(Program* program, bool on) {
  if (on) program->profile_ns.assign(program->kernels.size(), 0.0);
  program->profiling = on;
}

const std::vector<double>& program_profile(const Program* program) { return program->profile_ns; }

const char* program_check_outputs(Program* program, const OutputView* outs, size_t n_outs) {
  Program& p = *program;
  if (n_outs != p.outputs.size()) return fail(p, "expected " + std::to_string(p.outputs.size()) + " output buffers, got " + std::to_string(n_outs));
  for (size_t i = 0; i < n_outs; i++) {
    size_t t = static_cast<size_t>(p.outputs[i]);
    size_t bytes = p.views[t].bytes();
    if (outs[i].bytes != bytes) {
      return fail(p, "output " + std::to_string(i) + ": " + describe(p.views[t], t) + " has " + std::to_string(bytes) +
                         " bytes but its buffer has " + std::to_string(outs[i].bytes));
    }
  }
  return nullptr;
}

const char* program_copy_outputs(Program* program, const OutputView* outs, size_t n_outs) {
  const char* e = program_check_outputs(program, outs, n_outs);
  if (e != nullptr) return e;
  for (size_t i = 0; i < n_outs; i++) {
    const TensorView& v = program->views[static_cast<size_t>(program->outputs[i])];
    if (outs[i].bytes > 0) std::memmove(outs[i].data, v.data, outs[i].bytes);
  }
  return nullptr;
}

// ---- accessors for other executors ----

KernelArgs program_kernel_args(const Program* program, size_t k) {
  const Program& p = *program;
  const KernelRec& r = p.kernels[k];
  KernelArgs args;
  args.in = p.in_views.data() + r.in_begin;
  args.n_in = static_cast<int>(r.n_in);
  args.out = const_cast<TensorView*>(p.out_views.data()) + r.out_begin;
  args.n_out = static_cast<int>(r.n_out);
  args.iargs = p.iarg_vals.data() + r.iarg_begin;
  args.n_iargs = static_cast<int>(r.n_iargs);
  args.fargs = p.fargs.data() + r.farg_begin;
  args.n_fargs = static_cast<int>(r.n_fargs);
  args.variant = r.variant;
  args.prepared = r.prepared;
  return args;
}

const char* program_kernel_name(const Program* program, size_t k) { return program->kernels[k].name; }

int32_t program_input_kind(const Program* program, size_t i) {
  return program->tensors[static_cast<size_t>(program->inputs[i])].kind;
}

const TensorView& program_output_view(const Program* program, size_t i) {
  return program->views[static_cast<size_t>(program->outputs[i])];
}

}  // namespace planc
