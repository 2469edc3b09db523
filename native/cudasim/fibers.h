// cudasim's execution model: a grid runs block by block, the threads of a block as cooperative fibers that switch
// only at barriers and warp collectives (header-only: each compiled module carries its own scheduler).
#pragma once
#include <dlfcn.h>
#include <elf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

extern "C" void cudasim_ctx_switch(void** save_sp, void* new_sp);
extern "C" void cudasim_fiber_entry();

#if defined(__x86_64__)
// Saves the callee-saved registers, MXCSR and the x87 control word on the current stack, stores the stack pointer in
// *save_sp (rdi) and continues on new_sp (rsi). A new fiber's stack returns into cudasim_fiber_entry with r12 = fiber.
__asm__(R"(
  .text
  .weak cudasim_ctx_switch
  .hidden cudasim_ctx_switch
  .type cudasim_ctx_switch,@function
cudasim_ctx_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cudasim_ctx_switch, .-cudasim_ctx_switch
  .weak cudasim_fiber_entry
  .hidden cudasim_fiber_entry
  .type cudasim_fiber_entry,@function
cudasim_fiber_entry:
  movq %r12, %rdi
  call cudasim_fiber_main
  ud2
  .size cudasim_fiber_entry, .-cudasim_fiber_entry
)");
#else
#error "cudasim's fiber switch is written for x86-64"
#endif

namespace cudasim {

enum class Wait : uint8_t { kRun, kBarrier, kWarp, kDone };
struct Fiber;
// Completes a warp collective once every lane of the mask has arrived: fills each lane's result.
using Completer = void (*)(Fiber** lanes, int n);

struct Fiber {
  void* sp = nullptr;
  unsigned char* stack = nullptr;  // usable stack above one guard page
  uint3 tid{0, 0, 0};
  int linear = 0, lane = 0, warp = 0;
  Wait wait = Wait::kDone;
  bool started = false;
  // The warp collective this lane waits at.
  Completer op = nullptr;
  unsigned mask = 0;
  uint64_t val = 0, arg = 0, result = 0;
  int bar_val = 0;  // __syncthreads_count/and/or
};

using KernelFn = void (*)(void** params);

// One module's scheduler state (these are inline variables: one set per compiled module or test program).
inline uint3 g_block_idx{0, 0, 0};
inline dim3 g_block_dim{1, 1, 1}, g_grid_dim{1, 1, 1};
inline Fiber* g_fiber = nullptr;
inline std::vector<Fiber> g_fibers;
inline void* g_sched_sp = nullptr;
inline KernelFn g_kernel = nullptr;
inline void** g_params = nullptr;
inline const char* g_kernel_name = "";
inline std::string g_error;
inline uint64_t g_rng = 0;
inline unsigned char* g_dyn_smem = nullptr;
inline size_t g_dyn_smem_bytes = 0;
inline int g_bar_count = 0, g_bar_arrived = 0;  // the last barrier: threads with a true value, threads arrived
inline bool g_poison_blocks = false;          // poison shared memory before every block (else once per launch)
constexpr size_t kStackBytes = 128 * 1024, kPage = 4096;

inline uint64_t rng_next() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

inline void fail(const std::string& what) {
  if (g_error.empty()) {
    char where[160];
    snprintf(where, sizeof where, " (kernel %s, block (%u,%u,%u), thread (%u,%u,%u))", g_kernel_name, g_block_idx.x,
             g_block_idx.y, g_block_idx.z, g_fiber ? g_fiber->tid.x : 0, g_fiber ? g_fiber->tid.y : 0,
             g_fiber ? g_fiber->tid.z : 0);
    g_error = what + where;
  }
}

// Back to the scheduler (from a fiber).
inline void yield() {
  Fiber* f = g_fiber;
  cudasim_ctx_switch(&f->sp, g_sched_sp);
  g_fiber = f;
}

// A fiber that hit an error stops here for good: the scheduler abandons the block.
[[noreturn]] inline void abort_fiber() {
  g_fiber->wait = Wait::kDone;
  for (;;) yield();
}

extern "C" __attribute__((used, visibility("hidden"))) inline void cudasim_fiber_main(Fiber* f) {
  g_fiber = f;
  g_kernel(g_params);
  f->wait = Wait::kDone;
  for (;;) yield();
}

inline void* stack_alloc() {
  void* p = mmap(nullptr, kStackBytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  mprotect(p, kPage, PROT_NONE);  // stack overflow faults instead of corrupting the next fiber
  return static_cast<unsigned char*>(p) + kPage;
}

inline void fiber_start(Fiber& f) {
  // Stack (downwards): [pad][entry][rbp rbx r12 r13 r14 r15][mxcsr|fpucw]; after `ret` into the entry rsp is 16-aligned.
  uintptr_t top = (reinterpret_cast<uintptr_t>(f.stack) + kStackBytes) & ~uintptr_t{15};
  uint64_t* s = reinterpret_cast<uint64_t*>(top - 24);
  s[0] = reinterpret_cast<uint64_t>(&cudasim_fiber_entry);
  s[-1] = 0;                                   // rbp
  s[-2] = 0;                                   // rbx
  s[-3] = reinterpret_cast<uint64_t>(&f);      // r12
  s[-4] = s[-5] = s[-6] = 0;                   // r13 r14 r15
  s[-7] = 0x1F80ull | (0x037Full << 32);       // mxcsr, x87 control word
  f.sp = &s[-7];
  f.wait = Wait::kRun;
  f.started = true;
}

// ---- warp collectives and barriers (called from fibers) ----

// Arrives at a collective of the lanes in `mask`; the last lane to arrive completes it for all. Returns the result.
inline uint64_t warp_collective(Completer op, unsigned mask, uint64_t val, uint64_t arg, const char* name) {
  Fiber* f = g_fiber;
  if (!(mask >> f->lane & 1u)) {
    fail(std::string(name) + ": the calling lane is not in the mask");
    abort_fiber();
  }
  f->op = op;
  f->mask = mask;
  f->val = val;
  f->arg = arg;
  f->wait = Wait::kWarp;
  const int base = f->warp * 32;
  const int nthreads = static_cast<int>(g_fibers.size());
  Fiber* lanes[32] = {};
  bool all = true;
  for (int l = 0; l < 32; l++) {
    if (!(mask >> l & 1u)) continue;
    if (base + l >= nthreads) {
      fail(std::string(name) + ": the mask names lane " + std::to_string(l) + ", past the block's last thread");
      abort_fiber();
    }
    Fiber* o = &g_fibers[base + l];
    if (o->wait == Wait::kDone) {
      fail(std::string(name) + ": lane " + std::to_string(l) + " of the mask has exited");
      abort_fiber();
    }
    if (o->wait != Wait::kWarp) all = false;
    lanes[l] = o;
  }
  if (!all) {
    yield();
    return f->result;
  }
  for (int l = 0; l < 32; l++) {
    Fiber* o = lanes[l];
    if (o == nullptr) continue;
    if (o->op != op || o->mask != mask) {
      fail(std::string(name) + ": lanes of one warp meet at different collectives or masks (divergent warp code)");
      abort_fiber();
    }
  }
  op(lanes, 32);
  for (int l = 0; l < 32; l++)
    if (lanes[l] != nullptr) lanes[l]->wait = Wait::kRun;
  return f->result;
}

// __syncthreads: waits until every thread of the block that has not exited arrives.
inline int block_barrier(int v) {
  Fiber* f = g_fiber;
  f->bar_val = v;
  f->wait = Wait::kBarrier;
  yield();
  return g_bar_count;
}

}  // namespace cudasim

// Static __shared__ variables live in this section; it is poisoned (0xff bytes: NaN floats) before blocks run.
extern "C" char __start_cudasim_shm[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_cudasim_shm[] __attribute__((weak, visibility("hidden")));

namespace cudasim {

struct Range {
  void* p;
  size_t n;
};

// The static __shared__ variables of template functions (g++ ignores section attributes there): in a module (a shared
// object), the function-local statics (_ZZ...) its .dynsym exports from writable sections, less the emulator's and the
// standard library's own. Device code has no other writable statics. The address is the one the dynamic linker
// resolved for this module (modules are built with -fno-gnu-unique, so each has its own).
inline std::vector<Range> template_shared() {
  std::vector<Range> out;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&template_shared), &info) == 0 || info.dli_fname == nullptr) return out;
  FILE* f = fopen(info.dli_fname, "rb");
  if (f == nullptr) return out;
  std::vector<unsigned char> elf;
  unsigned char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) elf.insert(elf.end(), buf, buf + n);
  fclose(f);
  if (elf.size() < sizeof(Elf64_Ehdr) || memcmp(elf.data(), ELFMAG, SELFMAG) != 0) return out;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(elf.data());
  if (eh->e_type != ET_DYN || eh->e_shoff + uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr) > elf.size()) return out;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(elf.data() + eh->e_shoff);
  void* self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strs = sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > elf.size() || strs.sh_offset + strs.sh_size > elf.size()) break;
    const auto* sym = reinterpret_cast<const Elf64_Sym*>(elf.data() + sh[i].sh_offset);
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++) {
      const Elf64_Sym& y = sym[k];
      if (ELF64_ST_TYPE(y.st_info) != STT_OBJECT || y.st_size == 0 || y.st_shndx == SHN_UNDEF || y.st_shndx >= eh->e_shnum) continue;
      if (!(sh[y.st_shndx].sh_flags & SHF_WRITE) || y.st_name >= strs.sh_size) continue;
      const char* name = reinterpret_cast<const char*>(elf.data() + strs.sh_offset + y.st_name);
      if (strncmp(name, "_ZZ", 3) != 0) continue;
      // not the statics of the emulator's own or the standard library's functions (exported in a test executable)
      bool host = false;
      for (const char* prefix : {"_ZZN7cudasim", "_ZZN7harness", "_ZZNSt", "_ZZSt", "_ZZNKSt", "_ZZN9__gnu_cxx", "_ZZN6nvcuda"})
        host |= strncmp(name, prefix, strlen(prefix)) == 0;
      if (host) continue;
      void* p = self != nullptr ? dlsym(self, name) : nullptr;
      if (p == nullptr) p = static_cast<char*>(info.dli_fbase) + y.st_value;
      out.push_back(Range{p, y.st_size});
    }
  }
  if (self != nullptr) dlclose(self);
  return out;
}

inline void poison_shared() {
  static const std::vector<Range> templates = template_shared();
  for (const Range& r : templates) memset(r.p, 0xff, r.n);
  if (__start_cudasim_shm != nullptr && __stop_cudasim_shm > __start_cudasim_shm)
    memset(__start_cudasim_shm, 0xff, static_cast<size_t>(__stop_cudasim_shm - __start_cudasim_shm));
  if (g_dyn_smem != nullptr) memset(g_dyn_smem, 0xff, g_dyn_smem_bytes);
}

// Runs the threads of block g_block_idx to completion; false with g_error set on a fault of the model.
inline bool run_block(std::vector<int>& order, bool shuffle) {
  const int n = static_cast<int>(g_fibers.size());
  for (Fiber& f : g_fibers) fiber_start(f);
  for (;;) {
    if (shuffle)
      for (int i = n - 1; i > 0; i--) {
        const int j = static_cast<int>(rng_next() % static_cast<uint64_t>(i + 1));
        const int t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
    bool ran = false;
    for (int idx : order) {
      Fiber& f = g_fibers[idx];
      if (f.wait != Wait::kRun) continue;
      g_fiber = &f;
      cudasim_ctx_switch(&g_sched_sp, f.sp);
      g_fiber = nullptr;
      ran = true;
      if (!g_error.empty()) return false;
    }
    if (ran) continue;
    int live = 0, at_bar = 0, count = 0, at_warp = 0;
    for (Fiber& f : g_fibers) {
      if (f.wait == Wait::kDone) continue;
      live++;
      if (f.wait == Wait::kBarrier) {
        at_bar++;
        count += f.bar_val != 0;
      } else if (f.wait == Wait::kWarp) {
        at_warp++;
      }
    }
    if (live == 0) return true;
    if (at_bar == live) {
      g_bar_count = count;
      g_bar_arrived = live;
      for (Fiber& f : g_fibers)
        if (f.wait == Wait::kBarrier) f.wait = Wait::kRun;
      continue;
    }
    char msg[200];
    snprintf(msg, sizeof msg,
             "deadlock: %d threads wait at __syncthreads while %d wait at warp collectives whose lanes never all "
             "arrive (a barrier or collective in divergent code)",
             at_bar, at_warp);
    g_fiber = nullptr;
    fail(msg);
    return false;
  }
}

// Runs every block of the grid (block order and thread order shuffled when seed != 0). False with g_error set when a
// thread broke the model (divergent barrier, bad collective); memory faults are the caller's (guard pages).
inline bool run_grid(KernelFn fn, void** params, dim3 grid, dim3 block, size_t dyn_smem, const char* name, uint64_t seed) {
  g_error.clear();
  g_kernel = fn;
  g_params = params;
  g_kernel_name = name;
  g_grid_dim = grid;
  g_block_dim = block;
  g_rng = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  const uint64_t nthreads = uint64_t{block.x} * block.y * block.z;
  if (nthreads == 0 || nthreads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    g_error = std::string("launch of ") + name + ": bad grid or block size";
    return false;
  }
  static std::vector<unsigned char*> stacks;
  while (stacks.size() < nthreads) {
    void* s = stack_alloc();
    if (s == nullptr) {
      g_error = "cannot map fiber stacks";
      return false;
    }
    stacks.push_back(static_cast<unsigned char*>(s));
  }
  g_fibers.assign(nthreads, Fiber{});
  for (uint64_t i = 0; i < nthreads; i++) {
    Fiber& f = g_fibers[i];
    f.stack = stacks[i];
    f.linear = static_cast<int>(i);
    f.lane = static_cast<int>(i % 32);
    f.warp = static_cast<int>(i / 32);
    f.tid = uint3{static_cast<unsigned>(i % block.x), static_cast<unsigned>(i / block.x % block.y),
                  static_cast<unsigned>(i / (uint64_t{block.x} * block.y))};
  }
  static std::vector<unsigned char> dyn;
  if (dyn.size() < dyn_smem + 16) dyn.resize(dyn_smem + 16);
  g_dyn_smem = dyn_smem > 0 ? dyn.data() : nullptr;
  g_dyn_smem_bytes = dyn_smem;
  std::vector<int> order(nthreads);
  for (uint64_t i = 0; i < nthreads; i++) order[i] = static_cast<int>(i);
  const uint64_t nblocks = uint64_t{grid.x} * grid.y * grid.z;
  std::vector<uint64_t> blocks;
  if (seed != 0) {
    blocks.resize(nblocks);
    for (uint64_t i = 0; i < nblocks; i++) blocks[i] = i;
    for (uint64_t i = nblocks; i > 1; i--) {
      const uint64_t j = rng_next() % i, t = blocks[i - 1];
      blocks[i - 1] = blocks[j];
      blocks[j] = t;
    }
  }
  poison_shared();
  for (uint64_t b = 0; b < nblocks; b++) {
    const uint64_t lin = seed != 0 ? blocks[b] : b;
    g_block_idx = uint3{static_cast<unsigned>(lin % grid.x), static_cast<unsigned>(lin / grid.x % grid.y),
                        static_cast<unsigned>(lin / (uint64_t{grid.x} * grid.y))};
    if (g_poison_blocks && b > 0) poison_shared();
    if (!run_block(order, seed != 0)) return false;
  }
  return true;
}

}  // namespace cudasim
