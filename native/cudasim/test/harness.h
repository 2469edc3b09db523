// The emulator tests' harness: launches a kernel on cudasim (seed from PLANC_CUDASIM_SEED) with guarded memory, and a
// tiny check/report vocabulary. Each test program prints "ok NAME" / "FAIL NAME: why" lines and exits 1 on a failure.
#pragma once
#include <stdio.h>
#include <stdlib.h>

#include <string>
#include <utility>

#include "../guard.h"

namespace harness {

inline int g_failed = 0;
inline std::string g_last_error;

inline void check(bool ok, const char* name, const std::string& why = "") {
  if (ok) printf("ok %s\n", name);
  else {
    printf("FAIL %s: %s\n", name, why.c_str());
    g_failed++;
  }
}

inline uint64_t seed() {
  const char* s = getenv("PLANC_CUDASIM_SEED");
  return s != nullptr ? strtoull(s, nullptr, 10) : 0;
}

template <auto K>
void trampoline(void** p) {
  ::cudasim::call_unpacked(K, p, std::make_index_sequence<::cudasim::Arity<decltype(K)>::value>{});
}

struct Run {
  ::cudasim::KernelFn fn;
  void** params;
  dim3 grid, block;
  size_t smem;
  const char* name;
  bool ok;
};

// Launches K<<<grid, block, smem>>>(args...); false with g_last_error (the model's error or a memory fault).
template <auto K, class... A>
bool launch(const char* name, dim3 grid, dim3 block, size_t smem, A... args) {
  void* params[] = {static_cast<void*>(&args)..., nullptr};
  Run r{trampoline<K>, params, grid, block, smem, name, false};
  std::string fault;
  const bool no_fault = ::cudasim::run_guarded(
      [](void* c) {
        Run* r = static_cast<Run*>(c);
        r->ok = ::cudasim::run_grid(r->fn, r->params, r->grid, r->block, r->smem, r->name, seed());
      },
      &r, cudasim_module_where, &fault);
  g_last_error = !no_fault ? fault : r.ok ? "" : ::cudasim::g_error;
  return no_fault && r.ok;
}

template <class T>
T* alloc(size_t n) { return static_cast<T*>(::cudasim::guarded_alloc(n * sizeof(T))); }

}  // namespace harness
