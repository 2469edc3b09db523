// Shared kernel helpers: dtype sizes and names, dims text, view checks, run_parallel and thread-local error messages.
#include <cstdarg>
#include <cstdio>

#include "kernel.h"
#include "threadpool.h"

namespace planc {

std::string dims_str(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.rank; i++) s += (i ? "," : "") + std::to_string(t.dims[i]);
  return s + "]";
}

bool view_ok(const TensorView& t) {
  if (dtype_size(t.dtype) == 0 || t.rank < 0 || t.rank > kMaxRank) return false;
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++) {
    if (t.dims[i] < 0) return false;
    n *= t.dims[i];
  }
  return n == t.numel && (t.data != nullptr || n == 0);
}

bool same_dims(const TensorView& a, const TensorView& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; i++) {
    if (a.dims[i] != b.dims[i]) return false;
  }
  return true;
}

void run_parallel(const KernelArgs& args, int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (args.pool != nullptr) args.pool->parallel_for(n, min_chunk, fn);
  else if (n > 0) fn(0, n);
}

const char* kernel_error(const char* fmt, ...) {
  static thread_local char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace planc
