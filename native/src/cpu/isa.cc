// CPU feature detection and the PLANC_ISA cap, in one place (isa.h).
#include "isa.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace planc {

namespace {

constexpr const char* kNames[kIsaCount] = {"baseline", "avx2", "avx512", "avx512vnni", "amx"};
constexpr int kFeatures = static_cast<int>(CpuFeature::kCount);

Isa level_of(CpuFeature f) {
  switch (f) {
    case CpuFeature::kAvx: case CpuFeature::kF16c: case CpuFeature::kAvx2: case CpuFeature::kFma:
    case CpuFeature::kAvxvnni:
      return Isa::kAvx2;
    case CpuFeature::kAvx512f: case CpuFeature::kAvx512bw: case CpuFeature::kAvx512vl: case CpuFeature::kAvx512dq:
      return Isa::kAvx512;
    case CpuFeature::kAvx512vnni: return Isa::kAvx512vnni;
    default: return Isa::kAmx;
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PLANC_ISA_X86 1
// AMX as the CPU and OS offer it: CPUID leaf 7 EDX bits 24 (AMX-TILE) and 25 (AMX-INT8); OSXSAVE and XCR0 bits 17-18
// (XTILECFG, XTILEDATA). Linux's per-process permission is asked by the AMX path itself (qgemm_amx.cc).
bool amx_offered() {
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
  if (a < 7) return false;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  if (!((d >> 24) & 1) || !((d >> 25) & 1)) return false;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
  if (!((c >> 27) & 1)) return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((lo >> 17) & 3) == 3;
}
#endif

struct Detected {
  bool has[kFeatures] = {};
  bool v3 = false, v4 = false;  // the whole x86-64-v3 / -v4 sets (the hot loops' copies are compiled for them)
  IsaState state{};
  std::string cap_why, error;
};

Detected detect() {
  Detected d;
#ifdef PLANC_ISA_X86
  __builtin_cpu_init();
  auto set = [&](CpuFeature f, bool v) { d.has[static_cast<int>(f)] = v; };
  set(CpuFeature::kAvx, __builtin_cpu_supports("avx"));
  set(CpuFeature::kF16c, __builtin_cpu_supports("f16c"));
  set(CpuFeature::kAvx2, __builtin_cpu_supports("avx2"));
  set(CpuFeature::kFma, __builtin_cpu_supports("fma"));
  set(CpuFeature::kAvxvnni, __builtin_cpu_supports("avxvnni"));
  set(CpuFeature::kAvx512f, __builtin_cpu_supports("avx512f"));
  set(CpuFeature::kAvx512bw, __builtin_cpu_supports("avx512bw"));
  set(CpuFeature::kAvx512vl, __builtin_cpu_supports("avx512vl"));
  set(CpuFeature::kAvx512dq, __builtin_cpu_supports("avx512dq"));
  set(CpuFeature::kAvx512vnni, __builtin_cpu_supports("avx512vnni"));
  set(CpuFeature::kAmx, amx_offered());
#if !defined(__clang__) && __GNUC__ >= 12
  d.v3 = __builtin_cpu_supports("x86-64-v3");
  d.v4 = __builtin_cpu_supports("x86-64-v4");
#else
  d.v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
         __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  d.v4 = d.v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd");
#endif
#endif
  auto all = [&](std::initializer_list<CpuFeature> fs) {
    for (CpuFeature f : fs)
      if (!d.has[static_cast<int>(f)]) return false;
    return true;
  };
  using F = CpuFeature;
  Isa machine = Isa::kBaseline;
  if (all({F::kAvx, F::kF16c, F::kAvx2, F::kFma})) {
    machine = Isa::kAvx2;
    if (all({F::kAvx512f, F::kAvx512bw, F::kAvx512vl, F::kAvx512dq})) {
      machine = Isa::kAvx512;
      if (all({F::kAvx512vnni})) {
        machine = Isa::kAvx512vnni;
        if (all({F::kAmx})) machine = Isa::kAmx;
      }
    }
  }
  d.state.machine = machine;
  d.state.cap = Isa::kAmx;
  const char* env = std::getenv("PLANC_ISA");
  if (env != nullptr && *env != '\0') {
    int found = -1;
    for (int i = 0; i < kIsaCount; i++)
      if (std::strcmp(env, kNames[i]) == 0) found = i;
    if (found < 0) {
      d.error = std::string("PLANC_ISA=") + env + " is not an instruction-set level: use one of baseline, avx2, " +
                "avx512, avx512vnni, amx (or leave it unset for this machine's own, " +
                kNames[static_cast<int>(machine)] + ")";
      d.state.cap = Isa::kBaseline;
    } else {
      d.state.cap = static_cast<Isa>(found);
      d.state.capped = true;
      d.cap_why = std::string("PLANC_ISA=") + env + " caps the kernels at " + env + " (this CPU has " +
                  kNames[static_cast<int>(machine)] + ")";
    }
  }
  d.state.effective = static_cast<int>(d.state.cap) < static_cast<int>(machine) ? d.state.cap : machine;
  return d;
}

const Detected& detected() {
  static const Detected d = [] {
    Detected r = detect();
    r.state.error = r.error.empty() ? nullptr : r.error.c_str();
    r.state.cap_why = r.cap_why.empty() ? nullptr : r.cap_why.c_str();
    return r;
  }();
  return d;
}

}  // namespace

const char* isa_name(Isa level) {
  const int i = static_cast<int>(level);
  return i >= 0 && i < kIsaCount ? kNames[i] : "unknown";
}

const IsaState& isa_state() { return detected().state; }

bool cpu_has(std::initializer_list<CpuFeature> fs) { return cpu_unavailable(fs, "") == nullptr; }

const char* cpu_unavailable(std::initializer_list<CpuFeature> fs, const char* lacks) {
  const Detected& d = detected();
  for (CpuFeature f : fs)
    if (!d.has[static_cast<int>(f)]) return lacks;
  for (CpuFeature f : fs) {
    if (static_cast<int>(level_of(f)) > static_cast<int>(d.state.cap))
      return d.state.cap_why != nullptr ? d.state.cap_why : (d.state.error != nullptr ? d.state.error : lacks);
  }
  return nullptr;
}

int detect_hot_level() {
  const Detected& d = detected();
  const int cap = static_cast<int>(d.state.cap);
  if (d.v4 && cap >= static_cast<int>(Isa::kAvx512)) return 2;
  if (d.v3 && cap >= static_cast<int>(Isa::kAvx2)) return 1;
  return 0;
}

}  // namespace planc
