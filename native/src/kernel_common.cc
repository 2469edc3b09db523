// Shared kernel helpers: dtype sizes and thread-local error messages.
#include <cstdarg>
#include <cstdio>

#include "kernel.h"

namespace planc {

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case kFloat32: case kInt32: return 4;
    case kInt64: case kFloat64: return 8;
    case kUint8: case kInt8: case kBool: return 1;
    case kFloat16: return 2;
    default: return 0;
  }
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
