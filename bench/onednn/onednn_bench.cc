// `npm run bench -- onednn` (bench/onednn.ts) runs this once per thread count: oneDNN's int8 and float32 matmul on the
// shapes it is given, next to planc's qmatmul (variant auto) and its row quantizer (qgemm::quantize_rows, what qmatmul
// does to A before its products) called in the same process on the same rows, from planc's kernel library (the one
// native/test builds). One JSON object per line on stdout. Hot: one weight, called again and again; medians per call.
//
// What oneDNN computes (v2.6 attributes): dst_f32[m, n] = output_scale[n] · Σ_k (a[m, k] − zp) · w[k, n] with w int8
// per output channel (w_scale as output_scale, mask 1 << 1), then dst[m, :] *= sa[m] in a pass of this program (2.x has
// no per-row source scale; see row_pass), a either s8 (zp = 0: planc's symmetric rows as they are) or u8 = q + 128 with
// a source zero point of 128 (the form planc's vpdpbusd/AMX paths read). A arrives already quantized (planc's quantizer
// is timed on its own: planc-quantize). Weights reordered once, outside the timing, into
// the layout the primitive asks for (format any), as a load-time integration would. One primitive per M (M known when
// it is created: oneDNN's best case; a runtime M would need DNNL_RUNTIME_DIM_VAL or a primitive cache).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cpu/qgemm.h"
#include "generated/kernel_args.h"
#include "kernel.h"
#include "threadpool.h"

namespace planc {
KernelList qgemm_kernels();
}

namespace {

using namespace planc;
using clk = std::chrono::steady_clock;

// 64-byte aligned vectors, as a plan's weights and arena are (and oneDNN's own buffers): no split cache lines.
template <class T>
struct Aligned {
  using value_type = T;
  Aligned() = default;
  template <class U>
  Aligned(const Aligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  bool operator==(const Aligned&) const { return true; }
  bool operator!=(const Aligned&) const { return false; }
};
template <class T>
using vec = std::vector<T, Aligned<T>>;

struct Timing {
  double med, min;
  int calls, rounds;
};

double since_us(clk::time_point t0) { return std::chrono::duration<double, std::micro>(clk::now() - t0).count(); }

// Median and fastest time of one call of f over rounds of `calls` calls: about 2 ms a round, about budget_us in all
// (at least 7 rounds), after a warm-up that brings the weights into cache.
Timing time_calls(const std::function<void()>& f, double budget_us) {
  for (int i = 0; i < 3; i++) f();
  auto t0 = clk::now();
  f();
  const double one = std::max(0.05, since_us(t0));
  const int calls = std::clamp(static_cast<int>(std::ceil(2000.0 / one)), 1, 256);
  const int rounds = std::clamp(static_cast<int>(budget_us / (one * calls)), 7, 101);
  for (int i = 0; i < calls; i++) f();
  std::vector<double> t;
  for (int r = 0; r < rounds; r++) {
    t0 = clk::now();
    for (int i = 0; i < calls; i++) f();
    t.push_back(since_us(t0) / calls);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[0], calls, rounds};
}

// Deterministic values on [-scale, scale].
vec<float> values(size_t n, uint64_t seed, float scale) {
  vec<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = static_cast<float>((static_cast<double>(s >> 11) / 9007199254740992.0 * 2 - 1) * scale);
  }
  return v;
}

// Per output channel, symmetric, the rule of compiler/quant/pack.ts quantizeChannels: s = max|W[:, n]| / 127,
// q = round-half-even(W / s). Plain [K, N] (oneDNN's input) and planc's packed [N/16][K/4][16][4] with the sums.
struct QWeights {
  vec<int8_t> plain, packed;
  vec<float> scale;
  vec<int32_t> sum;
};
QWeights quantize_weights(const vec<float>& w, int64_t k, int64_t n) {
  QWeights q;
  const int64_t nb = (n + 15) / 16, kg = (k + 3) / 4;
  q.plain.assign(static_cast<size_t>(k * n), 0);
  q.packed.assign(static_cast<size_t>(nb * kg * 64), 0);
  q.scale.assign(static_cast<size_t>(n), 1.0f);
  q.sum.assign(static_cast<size_t>(n), 0);
  for (int64_t c = 0; c < n; c++) {
    float mx = 0;
    for (int64_t r = 0; r < k; r++) mx = std::max(mx, std::fabs(w[r * n + c]));
    const float s = mx > 0 ? mx / 127.0f : 1.0f;
    q.scale[c] = s;
    for (int64_t r = 0; r < k; r++) {
      const float v = std::min(127.0f, std::max(-127.0f, std::nearbyint(w[r * n + c] / s)));
      const int8_t b = static_cast<int8_t>(v);
      q.plain[r * n + c] = b;
      q.packed[(((c / 16) * kg + r / 4) * 16 + c % 16) * 4 + r % 4] = b;
      q.sum[c] += b;
    }
  }
  return q;
}

// Rows of A quantized per row as qmatmul does (s = max|row| / 127, round half to even): s8, u8 = q + 128, scales.
struct QRows {
  vec<int8_t> s8;
  vec<uint8_t> u8;
  vec<float> scale;
};
QRows quantize_a(const vec<float>& a, int64_t m, int64_t k) {
  QRows q;
  q.s8.resize(static_cast<size_t>(m * k));
  q.u8.resize(static_cast<size_t>(m * k));
  q.scale.resize(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; r++) {
    float mx = 0;
    for (int64_t i = 0; i < k; i++) mx = std::max(mx, std::fabs(a[r * k + i]));
    const float s = mx > 0 ? mx / 127.0f : 0.0f;
    q.scale[r] = s;
    for (int64_t i = 0; i < k; i++) {
      const float v = s > 0 ? std::min(127.0f, std::max(-127.0f, std::nearbyint(a[r * k + i] / s))) : 0.0f;
      q.s8[r * k + i] = static_cast<int8_t>(v);
      q.u8[r * k + i] = static_cast<uint8_t>(static_cast<int>(v) + 128);
    }
  }
  return q;
}

TensorView view(int32_t dtype, std::initializer_list<int64_t> dims, const void* data) {
  TensorView t;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(dims.size());
  t.numel = 1;
  int i = 0;
  for (int64_t d : dims) t.dims[i++] = d, t.numel *= d;
  t.data = const_cast<void*>(data);
  return t;
}

KernelFn kernel(const char* name) {
  const KernelList l = qgemm_kernels();
  for (size_t i = 0; i < l.count; i++)
    if (!std::strcmp(l.defs[i].name, name)) return l.defs[i].fn;
  std::fprintf(stderr, "onednn_bench: no planc kernel %s\n", name);
  std::exit(1);
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

void emit(const char* measure, int64_t m, int64_t k, int64_t n, int threads, const Timing& t, const std::string& extra = "") {
  std::printf("{\"measure\":\"%s\",\"m\":%lld,\"k\":%lld,\"n\":%lld,\"threads\":%d,\"us\":%.4f,\"minUs\":%.4f,\"calls\":%d,\"rounds\":%d%s}\n",
              measure, (long long)m, (long long)k, (long long)n, threads, t.med, t.min, t.calls, t.rounds, extra.c_str());
  std::fflush(stdout);
}

// Let the other library's idle workers (OpenMP's, or planc's pool) stop spinning before the next measurement.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

struct Options {
  int threads = 1;
  double budget_us = 150000;
  std::vector<int64_t> rows;
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (K, N)
};

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    char* end;
    v.push_back(std::strtoll(p, &end, 10));
    p = *end ? end + 1 : end;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--threads") o.threads = std::atoi(argv[i + 1]);
    else if (f == "--budget-ms") o.budget_us = std::atof(argv[i + 1]) * 1000;
    else if (f == "--rows") o.rows = parse_list(argv[i + 1]);
    else if (f == "--shapes") {  // K:N,K:N,...
      const std::vector<int64_t> v = parse_list(argv[i + 1]);
      for (size_t j = 0; j + 1 < v.size(); j += 2) o.shapes.push_back({v[j], v[j + 1]});
    } else {
      std::fprintf(stderr, "usage: onednn_bench --threads N --rows 1,8 --shapes 256:256,256:1024 [--budget-ms 150]\n");
      return 2;
    }
  }
  if (o.rows.empty() || o.shapes.empty()) {
    std::fprintf(stderr, "onednn_bench: --rows and --shapes are required\n");
    return 2;
  }
  // oneDNN's threads are OpenMP's (OMP_NUM_THREADS, set by the driver); planc's are this pool.
  ThreadPool pool(o.threads);
  const dnnl_version_t* ver = dnnl_version();
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  std::printf("{\"info\":true,\"onednn\":\"%d.%d.%d\",\"cpuRuntime\":%s,\"isa\":\"%s\",\"threads\":%d}\n", ver->major, ver->minor,
              ver->patch, ver->cpu_runtime == DNNL_RUNTIME_OMP ? "\"omp\"" : "\"other\"", isa_name(dnnl::get_effective_cpu_isa()),
              o.threads);

  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const KernelFn qmatmul = kernel("qmatmul");
  const qgemm::Path& path = *qgemm::path_for(qmatmul_args::kVariantAuto);

  for (auto [k, n] : o.shapes) {
    const vec<float> wf = values(static_cast<size_t>(k * n), 2, 0.1f);
    const QWeights qw = quantize_weights(wf, k, n);
    const int64_t kp = (k + 3) / 4 * 4;
    for (int64_t m : o.rows) {
      const vec<float> a = values(static_cast<size_t>(m * k), 1, 1.0f);
      const QRows qa = quantize_a(a, m, k);
      vec<float> y_onednn(static_cast<size_t>(m * n)), y_planc(static_cast<size_t>(m * n));

      // ---- oneDNN int8: s8 rows (zp 0) and u8 rows (zp 128); w_scale as per-N output scales, sa by a row pass
      for (const bool u8 : {false, true}) {
        dnnl::memory::desc src_md({m, k}, u8 ? dt::u8 : dt::s8, tag::ab);
        dnnl::memory::desc wei_any({k, n}, dt::s8, tag::any);
        dnnl::memory::desc dst_md({m, n}, dt::f32, tag::ab);
        dnnl::primitive_attr attr;
        attr.set_output_scales(1 << 1, std::vector<float>(qw.scale.begin(), qw.scale.end()));
        if (u8) attr.set_zero_points(DNNL_ARG_SRC, 0, {128});
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), attr, eng);
        // The weight reorder: once, untimed (a load-time step in a real integration).
        dnnl::memory w_user({{k, n}, dt::s8, tag::ab}, eng, const_cast<int8_t*>(qw.plain.data()));
        dnnl::memory w_mem(pd.weights_desc(), eng);
        dnnl::reorder(w_user, w_mem).execute(strm, w_user, w_mem);
        strm.wait();
        dnnl::memory src_mem(src_md, eng, u8 ? static_cast<void*>(const_cast<uint8_t*>(qa.u8.data())) : static_cast<void*>(const_cast<int8_t*>(qa.s8.data())));
        dnnl::memory dst_mem(dst_md, eng, y_onednn.data());
        dnnl::matmul prim(pd);
        const std::unordered_map<int, dnnl::memory> margs = {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, dst_mem}};
        // dst[m, :] *= sa[m]: oneDNN 2.6 has no per-row source scale, and a [M, 1] binary post-op sends M > 1 to its
        // reference kernel (ref_int8, ~1000x slower), so the row scales are a pass over dst on OpenMP's threads.
        float* y = y_onednn.data();
        const float* sa = qa.scale.data();
        auto row_pass = [&] {
#pragma omp parallel for schedule(static) if (m * n >= (1 << 16))
          for (int64_t r = 0; r < m; r++) {
            const float s = sa[r];
            float* yr = y + r * n;
            for (int64_t c = 0; c < n; c++) yr[c] *= s;
          }
        };
        settle();
        const Timing tp = time_calls([&] { prim.execute(strm, margs); strm.wait(); }, o.budget_us);
        settle();
        const Timing t = time_calls([&] { prim.execute(strm, margs); strm.wait(); row_pass(); }, o.budget_us);
        char extra[200];
        std::snprintf(extra, sizeof extra, ",\"primUs\":%.4f,\"primMinUs\":%.4f,\"impl\":%s", tp.med, tp.min, json_str(pd.impl_info_str()).c_str());
        emit(u8 ? "onednn-u8" : "onednn-s8", m, k, n, o.threads, t, extra);
      }

      // ---- oneDNN float32
      {
        dnnl::memory::desc src_md({m, k}, dt::f32, tag::ab), wei_any({k, n}, dt::f32, tag::any), dst_md({m, n}, dt::f32, tag::ab);
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_any, dst_md), eng);
        dnnl::memory w_user({{k, n}, dt::f32, tag::ab}, eng, const_cast<float*>(wf.data()));
        dnnl::memory w_mem(pd.weights_desc(), eng);
        dnnl::reorder(w_user, w_mem).execute(strm, w_user, w_mem);
        strm.wait();
        vec<float> y(static_cast<size_t>(m * n));
        dnnl::memory src_mem(src_md, eng, const_cast<float*>(a.data())), dst_mem(dst_md, eng, y.data());
        dnnl::matmul prim(pd);
        const std::unordered_map<int, dnnl::memory> margs = {{DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, w_mem}, {DNNL_ARG_DST, dst_mem}};
        settle();
        const Timing t = time_calls([&] { prim.execute(strm, margs); strm.wait(); }, o.budget_us);
        emit("onednn-f32", m, k, n, o.threads, t, ",\"impl\":" + json_str(pd.impl_info_str()));
      }

      // ---- planc: qmatmul int8 (variant auto) and its row quantizer alone, on the same rows and pool
      KernelArgs args;
      args.pool = &pool;
      args.variant = qmatmul_args::kVariantAuto;
      qgemm::RowBuffers buf;
      settle();
      const Timing tq = time_calls([&] { qgemm::quantize_rows(args, a.data(), m, k, kp, kQuantInInt8, path, buf); }, o.budget_us);
      emit("planc-quantize", m, k, n, o.threads, tq, ",\"path\":" + json_str(path.name));

      const TensorView ins[6] = {view(kFloat32, {m, k}, a.data()),
                                 view(kInt8, {(n + 15) / 16, kp / 4, 16, 4}, qw.packed.data()),
                                 view(kFloat32, {n}, qw.scale.data()),
                                 view(kInt32, {n}, qw.sum.data()),
                                 TensorView(),
                                 TensorView()};
      TensorView outs[1] = {view(kFloat32, {m, n}, y_planc.data())};
      const int64_t iargs[4] = {kActNone, kQuantInInt8, n, k};
      KernelArgs qa_args;
      qa_args.in = ins;
      qa_args.n_in = 6;
      qa_args.out = outs;
      qa_args.n_out = 1;
      qa_args.iargs = iargs;
      qa_args.n_iargs = 4;
      qa_args.pool = &pool;
      qa_args.variant = qmatmul_args::kVariantAuto;
      if (const char* err = qmatmul(qa_args)) {
        std::fprintf(stderr, "onednn_bench: qmatmul: %s\n", err);
        return 1;
      }
      const Timing tm = time_calls([&] { qmatmul(qa_args); }, o.budget_us);
      // The same int8 product both ways: the largest difference relative to the largest |Y| (float rounding only).
      double diff = 0, ymax = 0;
      for (size_t i = 0; i < y_planc.size(); i++) {
        diff = std::max(diff, std::fabs(double(y_planc[i]) - double(y_onednn[i])));
        ymax = std::max(ymax, std::fabs(double(y_planc[i])));
      }
      char extra[160];
      std::snprintf(extra, sizeof extra, ",\"path\":%s,\"vsOnednnRelDiff\":%.3g", json_str(path.name).c_str(), ymax > 0 ? diff / ymax : diff);
      emit("planc-qmatmul", m, k, n, o.threads, tm, extra);
    }
  }
  return 0;
}
