// Test-only kernels (built with -DPLANC_TEST_KERNELS=ON): byte copy, a kernel that always fails, iarg/farg echo.
#include <cstring>

#include "../src/kernel.h"

namespace planc {

// test_copy: Y = X byte for byte (same byte size).
static const char* test_copy(const KernelArgs& a) {
  if (a.n_in != 1 || a.n_out != 1) return kernel_error("test_copy: expected 1 input and 1 output, got %d and %d", a.n_in, a.n_out);
  if (a.in[0].data == nullptr) return kernel_error("test_copy: input is omitted");
  if (a.in[0].bytes() != a.out[0].bytes()) return kernel_error("test_copy: %zu bytes in, %zu out", a.in[0].bytes(), a.out[0].bytes());
  if (a.out[0].bytes() > 0) std::memmove(a.out[0].data, a.in[0].data, a.out[0].bytes());
  return nullptr;
}

// test_fail: always an error, to test how errors surface.
static const char* test_fail(const KernelArgs& a) { return kernel_error("test_fail: failed on purpose (%d inputs)", a.n_in); }

// test_echo: writes its iargs, then its fargs (as int64 bit patterns), into an int64 output of exactly that many.
static const char* test_echo(const KernelArgs& a) {
  if (a.n_out != 1 || a.out[0].dtype != kInt64) return kernel_error("test_echo: expected one int64 output");
  if (a.out[0].numel != a.n_iargs + a.n_fargs) return kernel_error("test_echo: output has %lld elements, want %d", (long long)a.out[0].numel, a.n_iargs + a.n_fargs);
  int64_t* y = a.out[0].as<int64_t>();
  for (int i = 0; i < a.n_iargs; i++) y[i] = a.iargs[i];
  if (a.n_fargs > 0) std::memcpy(y + a.n_iargs, a.fargs, sizeof(double) * a.n_fargs);
  return nullptr;
}

static const KernelDef kDefs[] = {
    {"test_copy", test_copy},
    {"test_fail", test_fail},
    {"test_echo", test_echo},
};

KernelList test_kernels() { return KernelList{kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
