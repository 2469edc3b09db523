// The CPU's instruction-set level and the cap PLANC_ISA puts on it: every run-time dispatch of the CPU kernels (a
// variant's availability, the auto choices, the hot loops' AVX2 / AVX-512 copies) asks here, so one cap covers them.
#pragma once
#include <cstdint>
#include <initializer_list>

namespace planc {

// The levels, each including the ones before it. baseline: the build's x86-64-v2 (SSE4.2), no run-time paths; avx2:
// AVX2, FMA, F16C (and AVX-VNNI where the CPU has it); avx512: AVX-512 F/BW/VL/DQ; avx512vnni: AVX-512 VNNI; amx:
// AMX-TILE and AMX-INT8 (with the OS's tile state).
enum class Isa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2, kAvx512vnni = 3, kAmx = 4 };
constexpr int kIsaCount = 5;
const char* isa_name(Isa level);  // "baseline", "avx2", "avx512", "avx512vnni", "amx"

// The CPU features the kernels dispatch on; each belongs to one level (isa.cc).
enum class CpuFeature : int {
  kAvx, kF16c, kAvx2, kFma, kAvxvnni,           // avx2
  kAvx512f, kAvx512bw, kAvx512vl, kAvx512dq,    // avx512
  kAvx512vnni,                                  // avx512vnni
  kAmx,  // amx: AMX-TILE, AMX-INT8 and the XCR0 tile state (not the per-process permission, which qgemm_amx.cc asks)
  kCount
};

struct IsaState {
  Isa machine;          // the highest level whose features this CPU (and OS) all has
  Isa cap;              // PLANC_ISA, or amx when it is unset or empty
  Isa effective;        // the lower of the two: what the kernels dispatch to
  bool capped;          // PLANC_ISA is set (to a known level)
  const char* error;    // nullptr, or why PLANC_ISA's value was refused (effective is then baseline; the addon
                        // refuses to load)
  const char* cap_why;  // "PLANC_ISA=<cap> caps ..." (the reason a variant above the cap gives), or nullptr
};

// Read once (CPUID and the environment variable PLANC_ISA), on first use.
const IsaState& isa_state();

// Whether the kernels may use every feature of `fs`: the CPU has them and PLANC_ISA allows their levels.
bool cpu_has(std::initializer_list<CpuFeature> fs);

// nullptr when cpu_has(fs); else `lacks` where the CPU misses one of them, or the cap's reason where PLANC_ISA forbids
// one the CPU has (for KernelDef::variant_unavailable).
const char* cpu_unavailable(std::initializer_list<CpuFeature> fs, const char* lacks);

// The hot loops' copy (PLANC_HOT_DISPATCH below): 0 the baseline, 1 the AVX2+FMA one (x86-64-v3), 2 the AVX-512 one
// (x86-64-v4, PLANC_HOT16_DISPATCH loops only); the CPU's within PLANC_ISA's cap, read once.
int detect_hot_level();
inline int hot_level() {
  static const int level = detect_hot_level();
  return level;
}

}  // namespace planc

// Hot loops compiled more than once with GCC on x86-64: the body, `PLANC_HOT_BODY ret name_body(params) {...}`, is
// inlined into an x86-64-v3 (AVX2+FMA) copy and a baseline one, and PLANC_HOT16_DISPATCH (16-lane loops) adds an
// x86-64-v4 (AVX-512) copy; `name(params)` calls the copy hot_level() picks. The copies are opaque to the callers
// (noipa: no constants propagated into them, as through the ifunc of GCC's target_clones, which picked the copy at load
// time from the CPU alone, out of PLANC_ISA's reach). Elsewhere name just runs the body.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define PLANC_HOT_BODY __attribute__((always_inline)) inline
#define PLANC_HOT_DISPATCH(ret, name, params, args)                                                   \
  __attribute__((target("arch=x86-64-v3"), noipa)) ret name##_v3 params { return name##_body args; } \
  __attribute__((noipa)) ret name##_base params { return name##_body args; }                          \
  inline ret name params { return ::planc::hot_level() >= 1 ? name##_v3 args : name##_base args; }
#define PLANC_HOT16_DISPATCH(ret, name, params, args)                                                 \
  __attribute__((target("arch=x86-64-v4"), noipa)) ret name##_v4 params { return name##_body args; } \
  __attribute__((target("arch=x86-64-v3"), noipa)) ret name##_v3 params { return name##_body args; } \
  __attribute__((noipa)) ret name##_base params { return name##_body args; }                          \
  inline ret name params {                                                                            \
    const int level = ::planc::hot_level();                                                           \
    return level >= 2 ? name##_v4 args : level >= 1 ? name##_v3 args : name##_base args;              \
  }
#else
#define PLANC_HOT_BODY inline
#define PLANC_HOT_DISPATCH(ret, name, params, args) \
  inline ret name params { return name##_body args; }
#define PLANC_HOT16_DISPATCH(ret, name, params, args) PLANC_HOT_DISPATCH(ret, name, params, args)
#endif
