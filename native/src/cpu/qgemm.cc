// qmatmul: Y = act(float(Σ quant(A) · Wq) · (sa · w_scale) + bias) + residual over packed int8/int16 weights; the rows
// of A quantized by quantize_rows.cc (per call, or once by the quantize_rows kernel), the dot products on the path of
// the call's variant (qgemm.h), the epilogue shared by all paths (qgemm_epilogue.cc).
#include "qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "../threadpool.h"
#include "isa.h"

namespace planc {
namespace qgemm {

// ---------- variants ----------

namespace v = qmatmul_args;
static_assert(qproject_topk_args::kVariantCount == v::kVariantCount && qproject_topk_args::kVariantAvx512vnni == v::kVariantAvx512vnni,
              "qmatmul and qproject_topk share QGEMM_VARIANTS");

namespace {
using F = CpuFeature;
// What each vector path needs (isa.h: the CPU's features within PLANC_ISA's cap), or nullptr.
const char* avx512_unavailable() {
  return cpu_unavailable({F::kAvx512f, F::kAvx512bw, F::kAvx512vl, F::kAvx512dq, F::kFma},
                         "this CPU lacks AVX-512 F/BW/VL/DQ with FMA");
}
const char* avx512vnni_unavailable() {
  return cpu_unavailable({F::kAvx512f, F::kAvx512bw, F::kAvx512vl, F::kAvx512dq, F::kFma, F::kAvx512vnni},
                         "this CPU lacks AVX-512 VNNI (or AVX-512 F/BW/VL/DQ with FMA)");
}
}  // namespace

const char* variant_unavailable(int64_t code) {
  switch (code) {
    case v::kVariantAvx2:
      if (!avx2_path()) return "this build has no x86-64 vector paths";
      return cpu_unavailable({F::kAvx2, F::kFma}, "this CPU lacks AVX2 with FMA");
    case v::kVariantAvx512bw:
      if (!avx512bw_path()) return "this build has no x86-64 vector paths";
      return avx512_unavailable();
    case v::kVariantAvxvnni:
      if (!avxvnni_path()) return "this build has no x86-64 vector paths";
      return cpu_unavailable({F::kAvx2, F::kFma, F::kAvxvnni}, "this CPU lacks AVX-VNNI (or AVX2 with FMA)");
    case v::kVariantAvx512vnni:
      if (!avx512vnni_path()) return "this build has no x86-64 vector paths";
      return avx512vnni_unavailable();
    case v::kVariantAmx:
      if (!amx_path()) return amx_unavailable();
      if (const char* why = amx_unavailable()) return why;
      if (avx512vnni_unavailable() != nullptr)
        return kernel_error("%s, which amx also uses", avx512vnni_unavailable());
      return nullptr;
    default: return nullptr;
  }
}

const Path* path_for(int64_t code) {
  switch (code) {
    case v::kVariantRef: return ref_path();
    case v::kVariantAvx2: return avx2_path();
    case v::kVariantAvx512bw: return avx512bw_path();
    case v::kVariantAvxvnni: return avxvnni_path();
    case v::kVariantAvx512vnni: return avx512vnni_path();
    case v::kVariantAmx: return amx_path();
    default: break;
  }
  // auto: amx > avx512vnni > avxvnni > avx512bw > avx2 > ref (compiler/kernel-schema.ts QGEMM_VARIANTS), chosen once
  static const Path* const best = [] {
    for (int64_t c : {v::kVariantAmx, v::kVariantAvx512vnni, v::kVariantAvxvnni, v::kVariantAvx512bw, v::kVariantAvx2})
      if (variant_unavailable(c) == nullptr) return path_for(c);
    return ref_path();
  }();
  return best;
}

const char* check_variant(const char* name, int64_t code) {
  if (code < 0 || code >= v::kVariantCount)
    return kernel_error("%s: unknown variant code %lld (0..%d)", name, static_cast<long long>(code), v::kVariantCount - 1);
  if (const char* why = variant_unavailable(code))
    return kernel_error("%s: variant %s cannot run here: %s", name, v::kVariantNames[code], why);
  return nullptr;
}

int64_t int16_limit(int64_t k) {
  constexpr int64_t kMax = 2147483647;  // INT32_MAX
  if (k < 1) k = 1;
  int64_t l = std::min<int64_t>(32767, static_cast<int64_t>(std::sqrt(static_cast<double>(kMax / k))));
  while (l > 1 && k * l * l > kMax) l--;
  while (l < 32767 && k * (l + 1) * (l + 1) <= kMax) l++;
  return l;
}

// ---------- qmatmul ----------

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The call's operands, checked.
struct Call {
  const void* a;        // float32 [m, k], or rows quantized by quantize_rows [m, kp] (a_scale set)
  const float* a_scale;  // [m] or null
  int64_t m, n, k, kp, act, input;
  Weights w;
  const float* scale;
  const int32_t* wsum;
  const float* bias;
  const float* res;
  float* y;
};

bool dims_are(const TensorView& t, std::initializer_list<int64_t> d) {
  if (t.rank != static_cast<int32_t>(d.size())) return false;
  int i = 0;
  for (int64_t x : d)
    if (t.dims[i++] != x) return false;
  return true;
}

const char* check_qmatmul(const KernelArgs& args, Call* c) {
  if (const char* err = check_arity("qmatmul", args, v::kArity)) return err;
  if (const char* err = check_variant("qmatmul", args.variant)) return err;
  const int64_t act = args.iargs[v::kActivation], input = args.iargs[v::kInput], n = args.iargs[v::kN], k = args.iargs[v::kK];
  if (act < 0 || act >= kActCount) return kernel_error("qmatmul: unknown activation %lld", (long long)act);
  if (input < 0 || input >= kQuantInCount) return kernel_error("qmatmul: unknown input kind %lld", (long long)input);
  if (n < 0 || k < 0 || n > (int64_t(1) << 31) || k > (int64_t(1) << 31))
    return kernel_error("qmatmul: N = %lld and K = %lld out of range", (long long)n, (long long)k);
  const TensorView &a = args.in[0], &w = args.in[1], &ws = args.in[2], &sum = args.in[3], &bias = args.in[4], &res = args.in[5];
  TensorView none;
  const TensorView& as = args.n_in > 6 ? args.in[6] : none;
  const TensorView& y = args.out[0];
  for (const TensorView* t : {&a, &w, &ws, &y})
    if (!view_ok(*t)) return "qmatmul: a malformed input or output view";
  if (y.dtype != kFloat32 || ws.dtype != kFloat32)
    return kernel_error("qmatmul: w_scale and Y must be float32, got %s, %s", dtype_name(ws.dtype), dtype_name(y.dtype));
  const bool i16 = input == kQuantInInt16;
  const int64_t kp = i16 ? ceil_div(k, 2) * 2 : ceil_div(k, 4) * 4;
  // A quantized by quantize_rows: its form for the input kind, rows padded to kp, with their scales.
  const bool pre = a.dtype != kFloat32;
  if (pre) {
    const int32_t adt = input == kQuantInInt8 ? kUint8 : input == kQuantInInt16 ? kInt16 : kFloat32;
    if (a.dtype != adt)
      return kernel_error("qmatmul: A must be float32%s, got %s", adt == kFloat32 ? "" : adt == kUint8 ? " or uint8 (int8 rows)" : " or int16 (int16 rows)",
                          dtype_name(a.dtype));
    if (a.rank < 1 || a.dims[a.rank - 1] != kp)
      return kernel_error("qmatmul: quantized A %s must end in kp = %lld (K = %lld)", dims_str(a).c_str(), (long long)kp, (long long)k);
    bool s_ok = as.data && view_ok(as) && as.dtype == kFloat32 && as.rank == a.rank - 1;
    for (int i = 0; s_ok && i < a.rank - 1; i++) s_ok = as.dims[i] == a.dims[i];
    if (!s_ok) return kernel_error("qmatmul: a quantized A %s needs a_scale float32 of its leading dims, got %s %s", dims_str(a).c_str(),
                                   as.data ? dtype_name(as.dtype) : "none", as.data ? dims_str(as).c_str() : "");
  } else {
    if (as.data) return "qmatmul: a_scale is given only with a quantized A (uint8 or int16)";
    if (a.rank < 1 || a.dims[a.rank - 1] != k) return kernel_error("qmatmul: A %s must end in K = %lld", dims_str(a).c_str(), (long long)k);
  }
  const int64_t blocks = ceil_div(n, kBlock);
  const int32_t wdt = i16 ? kInt16 : kInt8;
  if (w.dtype != wdt || !dims_are(w, {blocks, i16 ? kp / 2 : kp / 4, kBlock, i16 ? 2 : 4}))
    return kernel_error("qmatmul: w must be %s [%lld, %lld, 16, %d] for N = %lld, K = %lld and %s input, got %s %s", dtype_name(wdt),
                        (long long)blocks, (long long)(i16 ? kp / 2 : kp / 4), i16 ? 2 : 4, (long long)n, (long long)k,
                        i16 ? "int16" : input == kQuantInInt8 ? "int8" : "float32", dtype_name(w.dtype), dims_str(w).c_str());
  if (!dims_are(ws, {n})) return kernel_error("qmatmul: w_scale must be [%lld], got %s", (long long)n, dims_str(ws).c_str());
  if (sum.data && (!view_ok(sum) || sum.dtype != kInt32 || !dims_are(sum, {n})))
    return kernel_error("qmatmul: w_sum must be int32 [%lld], got %s %s", (long long)n, dtype_name(sum.dtype), dims_str(sum).c_str());
  if (bias.data && (!view_ok(bias) || bias.dtype != kFloat32 || !dims_are(bias, {n})))
    return kernel_error("qmatmul: bias must be float32 [%lld], got %s %s", (long long)n, dtype_name(bias.dtype), dims_str(bias).c_str());
  bool y_ok = y.rank == a.rank && y.dims[y.rank - 1] == n;
  for (int i = 0; y_ok && i < a.rank - 1; i++) y_ok = y.dims[i] == a.dims[i];
  if (!y_ok) return kernel_error("qmatmul: Y %s must be A's leading dims + [%lld] (A %s)", dims_str(y).c_str(), (long long)n, dims_str(a).c_str());
  if (res.data && (!view_ok(res) || res.dtype != kFloat32 || !same_dims(res, y)))
    return kernel_error("qmatmul: residual must be float32 %s (Y's dims), got %s %s", dims_str(y).c_str(), dtype_name(res.dtype), dims_str(res).c_str());
  int64_t m = 1;
  for (int i = 0; i < a.rank - 1; i++) m *= a.dims[i];
  if (m > 0 && n > 0 && (!a.data || !y.data || !ws.data || (w.numel > 0 && !w.data) || (pre && kp > 0 && !as.data)))
    return "qmatmul: missing input or output data";
  Weights wt;
  wt.w8 = i16 ? nullptr : w.as<int8_t>();
  wt.w16 = i16 ? w.as<int16_t>() : nullptr;
  wt.blocks = blocks;
  wt.kgroups = i16 ? kp / 2 : kp / 4;
  *c = Call{a.data, pre ? as.as<float>() : nullptr, m, n, k, kp, act, input, wt, ws.as<float>(), sum.data ? sum.as<int32_t>() : nullptr,
            bias.data ? bias.as<float>() : nullptr, res.data ? res.as<float>() : nullptr, y.as<float>()};
  return nullptr;
}

// Σ_k Wq(k, c) of nb blocks from b0 (the vpdpbusd offset when the call has no w_sum): sums[16 b + c].
void block_sums(const Weights& w, int64_t b0, int64_t nb, int32_t* sums) {
  for (int64_t b = 0; b < nb; b++) {
    int32_t s[kBlock] = {0};
    const int8_t* p = w.w8 + (b0 + b) * w.kgroups * 64;
    for (int64_t g = 0; g < w.kgroups; g++, p += 64)
      for (int c = 0; c < kBlock; c++) s[c] += p[4 * c] + p[4 * c + 1] + p[4 * c + 2] + p[4 * c + 3];
    std::memcpy(sums + b * kBlock, s, sizeof s);
  }
}

// The product and epilogue over tasks of (a group of the path's blocks) × (a chunk of rows).
void run_product(const KernelArgs& args, const Call& c, const Path& path, const Rows& rows, const float* sa) {
  const bool f32 = c.input == kQuantInFloat32, i16 = c.input == kQuantInInt16;
  const int64_t R = f32 ? path.f32_rows : path.rows, G = f32 ? path.f32_blocks : path.blocks;
  const int64_t groups = ceil_div(c.w.blocks, G);
  const int64_t threads = args.pool ? args.pool->threads() : 1;
  // Rows per task: all of them unless there are too few groups to keep every thread busy.
  int64_t chunk = c.m;
  if (groups < 4 * threads && c.m > R) {
    const int64_t parts = std::min(ceil_div(4 * threads, groups), ceil_div(c.m, R));
    chunk = ceil_div(ceil_div(c.m, parts), R) * R;
  }
  const int64_t chunks = ceil_div(c.m, chunk);
  const bool offset = !f32 && !i16 && path.unsigned_a;
  const Epilogue e{c.act, sa, c.scale, c.bias, c.res, c.y, c.n, &path == ref_path() ? EpilogueCode::kScalar : best_epilogue()};
  auto run = [&](int64_t t0, int64_t t1) {
    static thread_local std::vector<int32_t> acc_i, sums;
    static thread_local std::vector<float> acc_f;
    acc_i.resize(static_cast<size_t>(R * G * kBlock));
    acc_f.resize(static_cast<size_t>(R * G * kBlock));
    sums.resize(static_cast<size_t>(G * kBlock));
    int64_t sums_group = -1;
    for (int64_t t = t0; t < t1; t++) {
      const int64_t grp = t / chunks, rc = t % chunks;
      const int64_t b0 = grp * G, nb = std::min(G, c.w.blocks - b0), c0 = b0 * kBlock, nc = std::min(nb * kBlock, c.n - c0);
      const int64_t ld = nb * kBlock;
      const int32_t* wsum = c.wsum ? c.wsum + c0 : nullptr;
      if (offset && !c.wsum) {
        if (sums_group != grp) block_sums(c.w, b0, nb, sums.data());
        sums_group = grp;
        wsum = sums.data();
      }
      for (int64_t r0 = rc * chunk; r0 < std::min(c.m, (rc + 1) * chunk); r0 += R) {
        const int64_t nr = std::min(R, c.m - r0);
        prefetch_epilogue(e, r0, nr, c0, nc);
        if (f32) {
          path.dots_f32(rows, c.w, r0, nr, b0, nb, acc_f.data());
          apply_epilogue(e, acc_f.data(), ld, r0, nr, c0, nc);
          continue;
        }
        (i16 ? path.dots_i16 : path.dots_i8)(rows, c.w, r0, nr, b0, nb, acc_i.data());
        apply_epilogue(e, acc_i.data(), ld, offset ? wsum : nullptr, r0, nr, c0, nc);  // less 128 · w_sum for u8 A
      }
    }
  };
  const int64_t tasks = groups * chunks;
  // The pool only from about half a million multiply-adds: below that one thread takes a few microseconds (int8 at
  // M = 1: ~80 GB/s of weights from cache), less than waking the others.
  if (args.pool && threads > 1 && c.m * c.kp * c.n >= (int64_t(1) << 19)) run_parallel(args, tasks, 1, run);
  else run(0, tasks);
}

// Inputs A [..., K] float32 (or quantize_rows' rows [..., kp]), w (int8 / int16 packed), w_scale [N], w_sum? [N] int32,
// bias? [N], residual? (Y's dims), a_scale? (A's leading dims, with quantized rows); output Y [..., N]; iargs
// activation, input (QuantInput), n, k.
const char* qmatmul(const KernelArgs& args) {
  Call c{};
  if (const char* err = check_qmatmul(args, &c)) return err;
  if (c.m == 0 || c.n == 0) return nullptr;
  const Path& path = *path_for(args.variant);
  static thread_local RowBuffers buf;
  if (c.a_scale) {
    run_product(args, c, path, quantized_rows(c.a, c.m, c.kp, c.input, path, buf), c.a_scale);
    return nullptr;
  }
  const Rows rows = quantize_rows(args, static_cast<const float*>(c.a), c.m, c.k, c.kp, c.input, path, buf);
  run_product(args, c, path, rows, buf.scale.data());
  return nullptr;
}

const KernelDef kDefs[] = {
    {"qmatmul", qmatmul, variant_unavailable},
};

}  // namespace
}  // namespace qgemm

KernelList qgemm_kernels() { return {qgemm::kDefs, sizeof qgemm::kDefs / sizeof qgemm::kDefs[0]}; }

}  // namespace planc
