// Device allocations flush against a PROT_NONE page (an access past the end faults), and running a kernel with memory
// faults caught and described: which allocation, how far past its end, in which kernel, block and thread.
#pragma once
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include <map>
#include <mutex>
#include <string>

namespace cudasim {

struct Allocation {
  uintptr_t map;  // the mapping: [map, map + map_bytes), the last page PROT_NONE
  size_t map_bytes;
  size_t bytes;   // what was asked for; the block starts at end_page - round_up(bytes, 16)
};

inline std::mutex& alloc_mutex() { static std::mutex m; return m; }
inline std::map<uintptr_t, Allocation>& allocations() { static std::map<uintptr_t, Allocation> a; return a; }

// bytes (≥ 1), 16-byte aligned (what vector loads need; cuMemAlloc's 256 would leave up to 255 bytes unguarded), its
// rounded end against a guard page (and one guard page below the mapping).
inline void* guarded_alloc(size_t bytes) {
  const size_t page = 4096, rounded = (bytes + 15) / 16 * 16, body = (rounded + page - 1) / page * page;
  const size_t map_bytes = body + 2 * page;
  void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t map = reinterpret_cast<uintptr_t>(m);
  mprotect(m, page, PROT_NONE);
  mprotect(reinterpret_cast<void*>(map + page + body), page, PROT_NONE);
  const uintptr_t p = map + page + body - rounded;
  std::lock_guard<std::mutex> lock(alloc_mutex());
  allocations()[p] = Allocation{map, map_bytes, bytes};
  return reinterpret_cast<void*>(p);
}

// False when p is not a live allocation.
inline bool guarded_free(void* p) {
  std::lock_guard<std::mutex> lock(alloc_mutex());
  auto it = allocations().find(reinterpret_cast<uintptr_t>(p));
  if (it == allocations().end()) return false;
  munmap(reinterpret_cast<void*>(it->second.map), it->second.map_bytes);
  allocations().erase(it);
  return true;
}

// The allocation holding [p, p + n), or nullptr.
inline const Allocation* allocation_of(uintptr_t p, size_t n, uintptr_t* base) {
  auto& a = allocations();
  auto it = a.upper_bound(p);
  if (it == a.begin()) return nullptr;
  --it;
  if (p + n > it->first + it->second.bytes) return nullptr;
  *base = it->first;
  return &it->second;
}

// What a faulting address is, in allocation terms.
inline std::string describe_address(uintptr_t addr) {
  char buf[200];
  for (auto& [base, al] : allocations()) {
    if (addr >= al.map && addr < al.map + al.map_bytes) {
      if (addr >= base + al.bytes)
        snprintf(buf, sizeof buf, "out-of-bounds access at %#lx: %lu bytes past the end of a %lu-byte device allocation",
                 (unsigned long)addr, (unsigned long)(addr - base - al.bytes), (unsigned long)al.bytes);
      else
        snprintf(buf, sizeof buf, "out-of-bounds access at %#lx: %lu bytes before a %lu-byte device allocation",
                 (unsigned long)addr, (unsigned long)(base - addr), (unsigned long)al.bytes);
      return buf;
    }
  }
  snprintf(buf, sizeof buf, "invalid address %#lx (in no device allocation; a fiber stack overflow or a wild pointer)",
           (unsigned long)addr);
  return buf;
}

struct FaultTrap {
  sigjmp_buf jump;
  uintptr_t addr = 0;
  bool armed = false;
};
inline FaultTrap& fault_trap() { static FaultTrap t; return t; }

inline void on_fault(int, siginfo_t* info, void*) {
  FaultTrap& t = fault_trap();
  if (!t.armed) {  // not ours: default action
    signal(SIGSEGV, SIG_DFL);
    signal(SIGBUS, SIG_DFL);
    return;
  }
  t.addr = reinterpret_cast<uintptr_t>(info->si_addr);
  t.armed = false;
  siglongjmp(t.jump, 1);
}

// Runs fn(ctx) with SIGSEGV/SIGBUS caught (on an alternate stack); a fault returns false with *what describing the
// address and where(): the kernel, block and thread. The previous handlers are restored after.
inline bool run_guarded(void (*fn)(void*), void* ctx, void (*where)(char*, unsigned long), std::string* what) {
  static char alt[64 * 1024];
  stack_t ss{}, old_ss{};
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  sigaltstack(&ss, &old_ss);
  struct sigaction sa{}, old_segv{}, old_bus{};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
  FaultTrap& t = fault_trap();
  bool ok = true;
  if (sigsetjmp(t.jump, 1) == 0) {
    t.armed = true;
    fn(ctx);
    t.armed = false;
  } else {
    char w[256] = "";
    if (where != nullptr) where(w, sizeof w);
    *what = describe_address(t.addr) + " (" + w + ")";
    ok = false;
  }
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
  sigaltstack(old_ss.ss_flags & SS_DISABLE ? nullptr : &old_ss, nullptr);
  if (old_ss.ss_flags & SS_DISABLE) {
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
  }
  return ok;
}

}  // namespace cudasim
