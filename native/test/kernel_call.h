// A kernel call as a program makes it, for the standalone kernel tests: arguments over views, a variant's prepared operand.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
