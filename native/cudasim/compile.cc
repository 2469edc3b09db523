// Turns CUDA source into a CPU module (compile.h): refusal of unmodelled constructs, the dynamic shared memory
// rewrite, and a g++ build cached by hash.
#include "compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>

#ifndef CUDASIM_DIR
#define CUDASIM_DIR "."
#endif

namespace cudasim {

// Constructs with no meaning on the emulated device, with why.
struct Refusal {
  const char* pattern;  // ECMAScript regex over the source without comments and strings
  const char* name;
  const char* why;
};
static const Refusal kRefusals[] = {
    {R"(\basm\b|\b__asm__\b|\b__asm\b)", "asm", "inline PTX is not modelled"},
    {R"(\b__nanosleep\b)", "__nanosleep", "sleeping threads are not modelled"},
    {R"(\b__match_(any|all)_sync\b)", "__match_any_sync/__match_all_sync", "not modelled"},
    {R"(\b__reduce_\w+_sync\b)", "__reduce_*_sync", "not modelled"},
    {R"(\bcooperative_groups\b)", "cooperative_groups", "grid-wide groups are not modelled"},
    {R"(\b__pipeline_\w+|\bmemcpy_async\b|\bcp\.async\b)", "asynchronous copies", "cp.async pipelines are not modelled"},
    {R"(\btex[123]D\w*|\btex1Dfetch\b|\bsurf[123]D\w*)", "textures/surfaces", "not modelled"},
    {R"(\bclock(64)?\s*\(\s*\)|\bglobaltimer\b)", "clock()/clock64()", "device clocks are not modelled"},
    {R"(\b__shfl(_up|_down|_xor)?\s*\()", "__shfl without _sync", "pre-Volta warp intrinsics are not modelled"},
    {R"(\b__(any|all|ballot)\s*\()", "__any/__all/__ballot without _sync", "pre-Volta warp intrinsics are not modelled"},
    {R"(<<<)", "<<< >>> (dynamic parallelism)", "device-side launches are not modelled"},
    {R"(\bwmma::(experimental|bmma_sync)\b)", "wmma sub-byte / binary fragments", "not modelled"},
};

// The source with comments and string/char literals blanked (newlines kept, so line numbers hold).
static std::string code_only(const std::string& s) {
  std::string o = s;
  size_t i = 0;
  while (i < o.size()) {
    if (o[i] == '/' && i + 1 < o.size() && o[i + 1] == '/') {
      while (i < o.size() && o[i] != '\n') o[i++] = ' ';
    } else if (o[i] == '/' && i + 1 < o.size() && o[i + 1] == '*') {
      size_t e = o.find("*/", i + 2);
      e = e == std::string::npos ? o.size() : e + 2;
      for (; i < e; i++)
        if (o[i] != '\n') o[i] = ' ';
    } else if (o[i] == '"' || o[i] == '\'') {
      const char q = o[i++];
      while (i < o.size() && o[i] != q && o[i] != '\n') {
        if (o[i] == '\\' && i + 1 < o.size()) o[i++] = ' ';
        o[i++] = ' ';
      }
      i++;
    } else {
      i++;
    }
  }
  // #include lines name headers, not constructs.
  return std::regex_replace(o, std::regex(R"(#\s*include[^\n]*)"), "");
}

static int line_of(const std::string& s, size_t pos) {
  int line = 1;
  for (size_t i = 0; i < pos && i < s.size(); i++) line += s[i] == '\n';
  return line;
}

bool prepare_source(const std::string& cu, std::string* out, std::string* err) {
  const std::string code = code_only(cu);
  for (const Refusal& r : kRefusals) {
    std::smatch m;
    if (std::regex_search(code, m, std::regex(r.pattern))) {
      *err = std::string("cudasim cannot model `") + r.name + "` (line " + std::to_string(line_of(code, m.position(0))) +
             ": " + r.why + ")";
      return false;
    }
  }
  // extern __shared__ [__align__(n)] T name[];  →  T* const name = ::cudasim::dynamic_shared<T>();
  static const std::regex dyn(R"(extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_][\w:<>\s\*]*?)\s*(?:__align__\s*\(\s*\d+\s*\)\s*)?\b([A-Za-z_]\w*)\s*\[\s*\]\s*;)");
  *out = std::regex_replace(cu, dyn, "$1* const $2 = ::cudasim::dynamic_shared<$1>();");
  return true;
}

std::string emulator_dir() {
  const char* e = getenv("PLANC_CUDASIM_DIR");
  return e != nullptr && *e != 0 ? std::string(e) : std::string(CUDASIM_DIR);
}

static bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

static uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

static std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

bool build_module(const std::string& cu, std::string* so, std::string* err) {
  std::string src;
  if (!prepare_source(cu, &src, err)) return false;
  const std::string dir = emulator_dir();
  const std::string flags = "-std=c++17 -O2 -g0 -fPIC -shared -fvisibility=hidden -fno-gnu-unique -fno-strict-aliasing -w -DPLANC_CUDASIM";
  uint64_t h = fnv1a(src + flags);
  for (const char* f : {"cudasim.h", "fibers.h", "include/cuda_fp16.h", "include/cuda_bf16.h", "include/mma.h"}) {
    std::string text;
    if (!read_file(dir + "/" + f, &text)) {
      *err = "cudasim: cannot read " + dir + "/" + f + " (set PLANC_CUDASIM_DIR to native/cudasim)";
      return false;
    }
    h = fnv1a(text, h);
  }
  const char* c = getenv("PLANC_CUDASIM_CACHE");
  const std::string cache = c != nullptr && *c != 0 ? std::string(c) : dir + "/build/modules";
  if (system(("mkdir -p " + shell_quote(cache)).c_str()) != 0) {
    *err = "cudasim: cannot create the module cache " + cache;
    return false;
  }
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  *so = cache + "/" + hex + ".so";
  struct stat st;
  if (stat(so->c_str(), &st) == 0) return true;
  const std::string tag = std::to_string(getpid());
  const std::string cc = cache + "/" + hex + "." + tag + ".cc", tmp = *so + "." + tag, log = cache + "/" + hex + "." + tag + ".log";
  {
    std::ofstream f(cc, std::ios::binary);
    f << src;
    if (!f) {
      *err = "cudasim: cannot write " + cc;
      return false;
    }
  }
  const char* gxx = getenv("PLANC_CUDASIM_CXX");
  const std::string cmd = std::string(gxx != nullptr && *gxx != 0 ? gxx : "g++") + " " + flags + " -I" + shell_quote(dir + "/include") +
                          " -I" + shell_quote(dir) + " -include cudasim.h -x c++ " + shell_quote(cc) + " -o " + shell_quote(tmp) +
                          " > " + shell_quote(log) + " 2>&1";
  const int rc = system(cmd.c_str());
  if (rc != 0) {
    std::string text;
    read_file(log, &text);
    if (text.size() > 4000) text = text.substr(0, 4000) + "\n...";
    *err = "cudasim: g++ failed on the module (" + cc + "):\n" + text;
    return false;
  }
  unlink(log.c_str());
  unlink(cc.c_str());
  if (rename(tmp.c_str(), so->c_str()) != 0) {
    *err = "cudasim: cannot move the module to " + *so;
    return false;
  }
  return true;
}

}  // namespace cudasim
