// A kernel call as a program makes it, for the standalone kernel tests: arguments over views, a variant's prepared operand.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cpu/isa.h"
#include "kernel.h"

namespace kernel_call {

// The tests run under the same PLANC_ISA cap as the addon (cpu/isa.h); a value that is not a level fails every program
// before its first check, as the addon refuses to load.
inline const bool isa_checked = [] {
  if (const char* e = planc::isa_state().error) {
    std::fprintf(stderr, "%s\n", e);
    std::exit(2);
  }
  return true;
}();

// One fixed (not variadic) int or float argument as compiler/kernel-schema.ts declares it (the builders' tables).
struct ArgDecl {
  const char* name;
  bool optional;
};

// A kernel call's int and float arguments, set by name through a builder of generated/kernel_calls.h
// (`test::gemm_call().trans_a(0).trans_b(1).alpha(1.0).beta(0.0)`), whose setters write the positions kernel_args.h
// gives each argument. Args() is a call without arguments.
class Args {
 public:
  Args() = default;

  // The kernel the arguments are for (nullptr: none named).
  const char* kernel() const { return kernel_; }

  // The iargs and fargs in the kernel's order: unset optional arguments at the end are left off, a variadic list
  // follows the fixed arguments. nullptr, or what is wrong: a required argument left unset, or an optional one left
  // unset before a set one (the text lives until the next call of resolve).
  const char* resolve(std::vector<int64_t>& iargs, std::vector<double>& fargs) const {
    static std::string error;
    error.clear();
    resolve_list(ints_, iargs, idecl_, i_variadic_, "iarg", error);
    resolve_list(floats_, fargs, fdecl_, f_variadic_, "farg", error);
    return error.empty() ? nullptr : error.c_str();
  }

 protected:
  Args(const char* kernel, const ArgDecl* idecl, int n_iargs, bool i_variadic, const ArgDecl* fdecl, int n_fargs,
       bool f_variadic)
      : kernel_(kernel), ints_(n_iargs), floats_(n_fargs), idecl_(idecl), fdecl_(fdecl), i_variadic_(i_variadic),
        f_variadic_(f_variadic) {}

  void set_int(int pos, int64_t v) { set(ints_, pos, v); }
  void set_float(int pos, double v) { set(floats_, pos, v); }
  // The variadic last argument, at position pos (the count of fixed ones).
  void set_ints(int pos, std::vector<int64_t> v) { set_tail(ints_, pos, std::move(v)); }
  void set_floats(int pos, std::vector<double> v) { set_tail(floats_, pos, std::move(v)); }

 private:
  template <class T> struct List {
    std::vector<T> fixed;
    std::vector<bool> given;
    std::vector<T> tail;
    bool tail_given = false;
    int bad_position = -1;
    List() = default;
    explicit List(int n) : fixed(n), given(n, false) {}
  };

  template <class T> static void set(List<T>& l, int pos, T v) {
    if (pos < 0 || pos >= static_cast<int>(l.fixed.size())) {
      l.bad_position = pos;
      return;
    }
    l.fixed[pos] = v;
    l.given[pos] = true;
  }
  template <class T> static void set_tail(List<T>& l, int pos, std::vector<T> v) {
    if (pos != static_cast<int>(l.fixed.size())) l.bad_position = pos;
    l.tail = std::move(v);
    l.tail_given = true;
  }

  template <class T>
  void resolve_list(const List<T>& l, std::vector<T>& out, const ArgDecl* decl, bool variadic, const char* what,
                    std::string& error) const {
    out.clear();
    auto fail = [&](const std::string& why) {
      if (error.empty()) error = std::string(kernel_ ? kernel_ : "?") + ": " + why;
    };
    if (l.bad_position >= 0) fail(std::string(what) + " position " + std::to_string(l.bad_position) + " is not declared");
    const int n = static_cast<int>(l.fixed.size());
    int last = -1;
    for (int i = 0; i < n; i++)
      if (l.given[i]) last = i;
    if (variadic) last = n - 1;  // a variadic list follows every fixed argument
    for (int i = 0; i < n; i++) {
      if (l.given[i]) continue;
      if (!decl[i].optional) fail(std::string("argument ") + decl[i].name + " is not set");
      else if (i < last) fail(std::string("optional argument ") + decl[i].name + " is not set but a later one is");
    }
    out.assign(l.fixed.begin(), l.fixed.begin() + (last + 1));
    out.insert(out.end(), l.tail.begin(), l.tail.end());
  }

  const char* kernel_ = nullptr;
  List<int64_t> ints_;
  List<double> floats_;
  const ArgDecl* idecl_ = nullptr;
  const ArgDecl* fdecl_ = nullptr;
  bool i_variadic_ = false;
  bool f_variadic_ = false;
};

// The call's arguments over the given vectors (they must outlive the call).
inline planc::KernelArgs args(std::vector<planc::TensorView>& in, std::vector<planc::TensorView>& out, std::vector<int64_t>& iargs,
                              std::vector<double>& fargs, planc::ThreadPool* pool, int64_t variant) {
  planc::KernelArgs a;
  a.in = in.data();
  a.n_in = static_cast<int>(in.size());
  a.out = out.data();
  a.n_out = static_cast<int>(out.size());
  a.iargs = iargs.data();
  a.n_iargs = static_cast<int>(iargs.size());
  a.fargs = fargs.data();
  a.n_fargs = static_cast<int>(fargs.size());
  a.pool = pool;
  a.variant = variant;
  return a;
}

// Runs def's kernel; when the call's variant reads an operand prepared (KernelDef::prepare), builds it first (a fresh
// one per call here; a plan keeps one per weight).
inline const char* run_prepared(const planc::KernelDef& def, planc::KernelArgs a) {
  planc::PreparedOperand prepared;
  if (def.prepared_input != nullptr && def.prepared_input(a.variant) >= 0) {
    if (const char* err = def.prepare(a, &prepared)) return err;
    a.prepared = prepared.data;
  }
  return def.fn(a);
}

}  // namespace kernel_call
