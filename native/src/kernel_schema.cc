// Kernel call counts checked against the schema (generated/kernel_args.h, from compiler/kernel-schema.ts).
#include <cstring>
#include <string>

#include "kernel.h"

namespace planc {

namespace {

// "3-4 inputs", "1 output", "at least 1 input", "any number of iargs".
std::string count_text(int lo, int hi, const char* noun) {
  std::string s = hi >= kUnbounded ? (lo == 0 ? std::string("any number of") : "at least " + std::to_string(lo))
                  : lo == hi     ? std::to_string(lo)
                                 : std::to_string(lo) + "-" + std::to_string(hi);
  return s + " " + noun + (lo == 1 && hi == 1 ? "" : "s");
}

bool in_range(int64_t n, int lo, int hi) { return n >= lo && n <= hi; }

const char* counts_error(const char* name, int64_t n_in, int64_t n_out, int64_t n_iargs, int64_t n_fargs, const KernelArity& a) {
  if (in_range(n_in, a.min_in, a.max_in) && in_range(n_out, a.min_out, a.max_out) && in_range(n_iargs, a.min_iargs, a.max_iargs) &&
      in_range(n_fargs, a.min_fargs, a.max_fargs)) {
    return nullptr;
  }
  return kernel_error("%s: needs %s, %s, %s and %s; got %lld, %lld, %lld and %lld", name,
                      count_text(a.min_in, a.max_in, "input").c_str(), count_text(a.min_out, a.max_out, "output").c_str(),
                      count_text(a.min_iargs, a.max_iargs, "iarg").c_str(), count_text(a.min_fargs, a.max_fargs, "farg").c_str(),
                      (long long)n_in, (long long)n_out, (long long)n_iargs, (long long)n_fargs);
}

}  // namespace

const char* check_arity(const char* name, const KernelArgs& args, const KernelArity& arity) {
  return counts_error(name, args.n_in, args.n_out, args.n_iargs, args.n_fargs, arity);
}

const char* check_kernel_call(const char* name, int64_t n_in, int64_t n_out, int64_t n_iargs, int64_t n_fargs) {
  for (const KernelSchemaEntry& e : kKernelSchema) {
    if (std::strcmp(e.name, name) == 0) return counts_error(name, n_in, n_out, n_iargs, n_fargs, e.arity);
  }
  return kernel_error("kernel %s has no schema entry (compiler/kernel-schema.ts)", name);
}

}  // namespace planc
