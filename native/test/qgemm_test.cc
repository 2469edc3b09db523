// Standalone test of the quantized products (qmatmul, qproject_topk): every variant this CPU runs against ref (bit-identical
// for int8 and int16 inputs, close for float32), ref against the quantization rule, the error bound against the float32
// product, the shape and dtype checks; `bench` times the paths.
// Run: native/build-tests/qgemm_test [bench]
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace planc {
KernelList qgemm_kernels();
KernelList quantize_rows_kernels();
KernelList qproject_topk_kernels();
KernelList gemm_kernels();
KernelList project_topk_kernels();
}  // namespace planc

using test::Tensor;
using test::f32;

namespace {

namespace v = planc::qmatmul_args;
namespace pv = planc::qproject_topk_args;

planc::KernelFn k_qmatmul, k_qtopk, k_qrows;
planc::VariantCheck g_unavailable = nullptr;
std::vector<int64_t> g_variants;  // the variants this machine runs (auto, ref, ...)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The int16 limit for K values, written out again: the largest L ≤ 32767 with K · L² ≤ 2^31 − 1.
int64_t lim16(int64_t k) {
  int64_t l = 32767;
  while (l > 1 && k * l * l > 2147483647) l--;
  return l;
}

// ---------- packing (the layout of compiler/kernel-schema.ts qmatmul.w, written independently of compiler/quant) ----------

// W [K, N] float → per output channel symmetric int8 (or int16 on [-L, L], L = int16_limit(K)), packed; scale and sum per channel.
struct Packed {
  Tensor w, scale, sum;
  std::vector<int32_t> q;  // Wq(k, n) at [k * N + n], unpacked, for the checks
};

Packed pack(const float* w, int64_t k, int64_t n, bool i16) {
  Packed p;
  const int64_t blocks = ceil_div(n, 16), kp = i16 ? ceil_div(k, 2) * 2 : ceil_div(k, 4) * 4, per = i16 ? 2 : 4;
  p.w = Tensor(i16 ? planc::kInt16 : planc::kInt8, {blocks, kp / per, 16, per});
  p.scale = f32({n});
  p.sum = Tensor(planc::kInt32, {n});
  p.q.assign(static_cast<size_t>(k * n), 0);
  for (int64_t c = 0; c < n; c++) {
    float amax = 0;
    for (int64_t i = 0; i < k; i++) amax = std::max(amax, std::fabs(w[i * n + c]));
    const float lim = i16 ? static_cast<float>(lim16(k)) : 127.0f;
    const float s = amax == 0 ? 1.0f : amax / lim;
    p.scale.data<float>()[c] = s;
    int32_t sum = 0;
    for (int64_t i = 0; i < k; i++) {
      const float r = std::min(lim, std::max(-lim, std::nearbyint(w[i * n + c] / s)));
      const int32_t q = static_cast<int32_t>(r);
      p.q[static_cast<size_t>(i * n + c)] = q;
      sum += q;
      const int64_t at = ((c / 16) * (kp / per) + i / per) * 16 * per + (c % 16) * per + i % per;
      if (i16) reinterpret_cast<int16_t*>(p.w.data())[at] = static_cast<int16_t>(q);
      else reinterpret_cast<int8_t*>(p.w.data())[at] = static_cast<int8_t>(q);
    }
    p.sum.data<int32_t>()[c] = sum;
  }
  return p;
}

// The quantization rule of an A row (compiler/kernel-enums.ts QUANT_INPUTS), written out again: q and the scale.
float quant_row(const float* x, int64_t k, int64_t input, std::vector<int32_t>& q) {
  q.assign(static_cast<size_t>(k), 0);
  float amax = 0;
  for (int64_t i = 0; i < k; i++) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) return 0.0f;
  const float lim = input == planc::kQuantInInt16 ? static_cast<float>(lim16(k)) : 127.0f;
  const float s = amax / lim;
  for (int64_t i = 0; i < k; i++) q[i] = static_cast<int32_t>(std::min(lim, std::max(-lim, std::nearbyint(x[i] / s))));
  return s;
}

// ---------- qmatmul ----------

struct Case {
  int64_t m, k, n, input, act;
  bool bias, res, wsum;
};

const char* run_q(int64_t variant, Tensor& a, Packed& p, Tensor* bias, Tensor* res, bool wsum, Tensor& y, const Case& c, planc::ThreadPool* pool) {
  planc::TensorView none;
  return test::call(
      k_qmatmul, {a.view, p.w.view, p.scale.view, wsum ? p.sum.view : none, bias ? bias->view : none, res ? res->view : none},
      {y.view}, test::qmatmul_call().activation(planc::Activation(c.act)).input(planc::QuantInput(c.input)).n(c.n).k(c.k), pool,
      variant);
}

// A quantized by quantize_rows (int8: uint8 q + 128, int16: int16, [m, kp]) and its scales [m].
struct QRows {
  Tensor q, scale;
};
QRows run_qrows(Tensor& a, int64_t m, int64_t k, int64_t input, planc::ThreadPool* pool) {
  const bool i16 = input == planc::kQuantInInt16;
  const int64_t kp = i16 ? ceil_div(k, 2) * 2 : ceil_div(k, 4) * 4;
  QRows r{Tensor(i16 ? planc::kInt16 : planc::kUint8, {m, kp}), f32({m})};
  test::expect_ok(test::call(k_qrows, {a.view}, {r.q.view, r.scale.view}, test::quantize_rows_call().input(planc::QuantInput(input)).k(k), pool),
                  "quantize_rows");
  return r;
}

const char* run_q_rows(int64_t variant, QRows& a, Packed& p, Tensor* bias, Tensor* res, bool wsum, Tensor& y, const Case& c,
                       planc::ThreadPool* pool) {
  planc::TensorView none;
  return test::call(
      k_qmatmul,
      {a.q.view, p.w.view, p.scale.view, wsum ? p.sum.view : none, bias ? bias->view : none, res ? res->view : none, a.scale.view},
      {y.view}, test::qmatmul_call().activation(planc::Activation(c.act)).input(planc::QuantInput(c.input)).n(c.n).k(c.k), pool,
      variant);
}

std::string describe(const Case& c, int64_t variant) {
  char s[200];
  std::snprintf(s, sizeof s, "qmatmul %s m=%lld k=%lld n=%lld input=%lld act=%lld bias=%d res=%d wsum=%d", v::kVariantNames[variant],
                (long long)c.m, (long long)c.k, (long long)c.n, (long long)c.input, (long long)c.act, c.bias, c.res, c.wsum);
  return s;
}

// Every variant against ref (bitwise for int8 / int16, within float rounding for float32); ref against the rule; with
// act none and no bias/residual, |y - A·W| within the quantization bound.
void check_case(const Case& c, planc::ThreadPool* pool) {
  Tensor a = f32({c.m, c.k}), w = f32({c.k, c.n}), bias = f32({c.n}), res = f32({c.m, c.n});
  test::fill_random(a, -2.0f, 2.0f);
  test::fill_random(w, -0.5f, 0.5f);
  test::fill_random(bias);
  test::fill_random(res);
  if (c.m > 2) std::fill(a.data<float>() + c.k, a.data<float>() + 2 * c.k, 0.0f);  // row 1 all zero: s = 0
  Packed p = pack(w.data<float>(), c.k, c.n, c.input == planc::kQuantInInt16);
  Tensor want = f32({c.m, c.n});
  test::expect_ok(run_q(v::kVariantRef, a, p, c.bias ? &bias : nullptr, c.res ? &res : nullptr, c.wsum, want, c, pool), describe(c, v::kVariantRef).c_str());
  // ref against the rule, written out here (act none / relu: no libm in between).
  if (c.input != planc::kQuantInFloat32 && c.act <= planc::kActRelu) {
    int bad = 0;
    std::vector<int32_t> q;
    for (int64_t i = 0; i < c.m; i++) {
      const float sa = quant_row(a.data<float>() + i * c.k, c.k, c.input, q);
      for (int64_t j = 0; j < c.n; j++) {
        int64_t acc = 0;
        for (int64_t t = 0; t < c.k; t++) acc += int64_t(q[t]) * p.q[t * c.n + j];
        float y = static_cast<float>(acc) * (sa * p.scale.data<float>()[j]);
        if (c.bias) y += bias.data<float>()[j];
        if (c.act == planc::kActRelu) y = y > 0 ? y : 0.0f;
        if (c.res) y += res.data<float>()[i * c.n + j];
        if (std::memcmp(&y, want.data<float>() + i * c.n + j, 4) != 0 && bad++ < 3)
          std::printf("  rule: [%lld, %lld] got %.9g want %.9g\n", (long long)i, (long long)j, want.data<float>()[i * c.n + j], y);
      }
    }
    CHECK_MSG(bad == 0, "%s: ref differs from the quantization rule at %d outputs", describe(c, 1).c_str(), bad);
  }
  // the bound against the float32 product (act none, no bias / residual)
  if (!c.bias && !c.res && c.act == planc::kActNone) {
    int bad = 0;
    for (int64_t i = 0; i < c.m; i++) {
      const float* x = a.data<float>() + i * c.k;
      float amax = 0;
      for (int64_t t = 0; t < c.k; t++) amax = std::max(amax, std::fabs(x[t]));
      const double sa = c.input == planc::kQuantInInt8 ? amax / 127.0 : c.input == planc::kQuantInInt16 ? amax / lim16(c.k) : 0.0;
      for (int64_t j = 0; j < c.n; j++) {
        const double sw = p.scale.data<float>()[j];
        double exact = 0, sx = 0, sq = 0, sabs = 0;
        for (int64_t t = 0; t < c.k; t++) {
          const double xv = x[t], wv = w.data<float>()[t * c.n + j];
          exact += xv * wv;
          sx += std::fabs(xv);
          sq += std::abs(p.q[t * c.n + j]);
          sabs += std::fabs(xv * wv);
        }
        // x·w − xq·wq = x·(w − wq) + (x − xq)·wq with |w − wq| ≤ sw/2, |x − xq| ≤ sa/2, |wq| = sw·|q|; plus float32
        // rounding of the sums and the epilogue (a few ulps of Σ|x·w|).
        const double bound = sw / 2 * sx + sa / 2 * sw * sq + 1e-5 * (sabs + std::fabs(exact)) + 1e-30;
        const double err = std::fabs(double(want.data<float>()[i * c.n + j]) - exact);
        if (!(err <= bound) && bad++ < 3) std::printf("  bound: [%lld, %lld] err %.3g > bound %.3g\n", (long long)i, (long long)j, err, bound);
      }
    }
    CHECK_MSG(bad == 0, "%s: %d outputs beyond the quantization bound", describe(c, 1).c_str(), bad);
  }
  // quantize_rows: the rule's q (+ 128 for int8) and scales, padding 128 / 0; then every variant (ref included) over
  // those rows gives ref's bits from float32 A.
  if (c.input != planc::kQuantInFloat32) {
    QRows rows = run_qrows(a, c.m, c.k, c.input, pool);
    const bool i16 = c.input == planc::kQuantInInt16;
    const int64_t kp = rows.q.view.dims[1];
    int bad = 0;
    std::vector<int32_t> q;
    for (int64_t i = 0; i < c.m; i++) {
      const float sa = quant_row(a.data<float>() + i * c.k, c.k, c.input, q);
      if (std::memcmp(&sa, rows.scale.data<float>() + i, 4) != 0 && bad++ < 3)
        std::printf("  quantize_rows: scale[%lld] %.9g, want %.9g\n", (long long)i, rows.scale.data<float>()[i], sa);
      for (int64_t t = 0; t < kp; t++) {
        const int32_t want_q = t < c.k ? q[t] + (i16 ? 0 : 128) : (i16 ? 0 : 128);
        const int32_t got_q = i16 ? reinterpret_cast<int16_t*>(rows.q.data())[i * kp + t] : reinterpret_cast<uint8_t*>(rows.q.data())[i * kp + t];
        if (got_q != want_q && bad++ < 3) std::printf("  quantize_rows: q[%lld][%lld] %d, want %d\n", (long long)i, (long long)t, got_q, want_q);
      }
    }
    CHECK_MSG(bad == 0, "%s: quantize_rows differs from the rule at %d values", describe(c, 1).c_str(), bad);
    for (int64_t variant : g_variants) {
      Tensor got = f32({c.m, c.n});
      test::expect_ok(run_q_rows(variant, rows, p, c.bias ? &bias : nullptr, c.res ? &res : nullptr, c.wsum, got, c, pool),
                      (describe(c, variant) + " quantized A").c_str());
      int64_t diff = 0;
      for (int64_t i = 0; i < got.numel(); i++) diff += std::memcmp(got.data<float>() + i, want.data<float>() + i, 4) != 0;
      CHECK_MSG(diff == 0, "%s quantized A: %lld outputs differ from float32 A on ref", describe(c, variant).c_str(), (long long)diff);
    }
  }
  for (int64_t variant : g_variants) {
    if (variant == v::kVariantRef) continue;
    Tensor got = f32({c.m, c.n});
    test::expect_ok(run_q(variant, a, p, c.bias ? &bias : nullptr, c.res ? &res : nullptr, c.wsum, got, c, pool), describe(c, variant).c_str());
    if (c.input == planc::kQuantInFloat32) {
      std::vector<double> wd(want.data<float>(), want.data<float>() + want.numel());
      test::close(got.data<float>(), wd.data(), got.numel(), 1e-5, 1e-5 * std::sqrt(double(c.k)), describe(c, variant).c_str());
    } else {
      int64_t bad = 0, first = -1;
      for (int64_t i = 0; i < got.numel(); i++)
        if (std::memcmp(got.data<float>() + i, want.data<float>() + i, 4) != 0 && bad++ == 0) first = i;
      CHECK_MSG(bad == 0, "%s: %lld outputs differ from ref (first [%lld]: %.9g vs %.9g)", describe(c, variant).c_str(), (long long)bad,
               (long long)first, first >= 0 ? got.data<float>()[first] : 0.0f, first >= 0 ? want.data<float>()[first] : 0.0f);
    }
  }
}

void qmatmul_tests(planc::ThreadPool* pool) {
  const int64_t inputs[] = {planc::kQuantInInt8, planc::kQuantInInt16, planc::kQuantInFloat32};
  for (int64_t input : inputs)
    for (int64_t m : {1, 5, 12, 16, 17, 64, 130})  // amx: delegated rows, partial, full, full + partial tiles, pairs
      for (int64_t k : {7, 33, 64, 513})       // amx: a partial k-tile, one full one, eight plus a tail
        for (int64_t n : {1, 17, 50}) {
          check_case({m, k, n, input, planc::kActNone, false, false, true}, pool);
          check_case({m, k, n, input, planc::kActNone, false, false, false}, pool);
        }
  // every activation with bias and residual, and the optional inputs one at a time
  for (int64_t input : inputs)
    for (int64_t act = planc::kActNone; act < planc::kActCount; act++) {
      check_case({5, 33, 50, input, act, true, true, true}, pool);
      check_case({64, 513, 17, input, act, true, false, false}, pool);
      check_case({130, 7, 1, input, act, false, true, false}, pool);
    }
  // a wider product: several block groups and row chunks across the pool
  for (int64_t input : inputs) check_case({67, 256, 300, input, planc::kActRelu, true, true, false}, pool);
}

// The epilogue over odd tiles: M 1..20, N not a multiple of 16, every activation, with and without bias / residual /
// w_sum; every variant against ref bit for bit (int8, int16; ref takes the scalar epilogue, the others the widest this
// CPU runs within PLANC_ISA: qgemm_epilogue_test checks each code on its own, float sums too).
void qmatmul_epilogue_tiles() {
  for (int64_t input : {planc::kQuantInInt8, planc::kQuantInInt16})
    for (int64_t m = 1; m <= 20; m++)
      for (int64_t n : {3, 17, 47})
        for (int64_t act = planc::kActNone; act < planc::kActCount; act++)
          for (int opt = 0; opt < 4; opt++)
            check_case({m, m % 2 ? 7 : 40, n, input, act, (opt & 1) != 0, (opt & 2) != 0, (m + opt) % 2 == 0}, nullptr);
}

// K = 0: the output is the epilogue of 0; a NaN row gives NaN.
void qmatmul_edges() {
  Case c{3, 0, 5, planc::kQuantInInt8, planc::kActNone, true, false, true};
  Tensor a = f32({3, 0}), bias = f32({5}, {1, 2, 3, 4, 5}), y = f32({3, 5});
  Packed p = pack(nullptr, 0, 5, false);
  for (int64_t variant : g_variants) {
    test::expect_ok(run_q(variant, a, p, &bias, nullptr, true, y, c, nullptr), "qmatmul K = 0");
    CHECK_MSG(y.data<float>()[7] == 3.0f, "qmatmul K = 0: y[1][2] = %g, want the bias 3", y.data<float>()[7]);
  }
  Case d{2, 4, 3, planc::kQuantInInt8, planc::kActNone, false, false, true};
  Tensor a2 = f32({2, 4}, {1, std::numeric_limits<float>::quiet_NaN(), 0, 0, 1, 2, 3, 4}), w2 = f32({4, 3}), y2 = f32({2, 3});
  test::fill_random(w2);
  Packed p2 = pack(w2.data<float>(), 4, 3, false);
  for (int64_t variant : g_variants) {
    test::expect_ok(run_q(variant, a2, p2, nullptr, nullptr, true, y2, d, nullptr), "qmatmul NaN row");
    CHECK_MSG(std::isnan(y2.data<float>()[0]) && std::isfinite(y2.data<float>()[3]), "qmatmul %s: a NaN row gives NaN, the next row finite", v::kVariantNames[variant]);
  }
}

// int16 at its worst case: every product at ±L² over a large odd K sums to K · L² without wrapping int32 (exact), on
// every path.
void qmatmul_int16_extremes() {
  const int64_t k = 8191, n = 17;
  Case c{2, k, n, planc::kQuantInInt16, planc::kActNone, false, false, true};
  Tensor a = f32({2, k}), w = f32({k, n}), y = f32({2, n});
  for (int64_t i = 0; i < k; i++) a.data<float>()[i] = 1.0f, a.data<float>()[k + i] = -2.0f;
  for (int64_t i = 0; i < k * n; i++) w.data<float>()[i] = 0.5f;
  Packed p = pack(w.data<float>(), k, n, true);
  const int64_t lim = lim16(k);
  CHECK_MSG(k * lim * lim <= 2147483647 && k * (lim + 1) * (lim + 1) > 2147483647, "int16 limit %lld for K %lld", (long long)lim, (long long)k);
  for (int64_t variant : g_variants) {
    test::expect_ok(run_q(variant, a, p, nullptr, nullptr, true, y, c, nullptr), "qmatmul int16 extremes");
    for (int64_t j = 0; j < n; j++) {
      CHECK_MSG(std::fabs(y.data<float>()[j] - 0.5 * k) <= 1e-5 * k && std::fabs(y.data<float>()[n + j] + 1.0 * k) <= 1e-5 * k,
               "qmatmul %s int16 K %lld: y = %g, %g, want %g, %g (a wrapped sum?)", v::kVariantNames[variant], (long long)k,
               y.data<float>()[j], y.data<float>()[n + j], 0.5 * k, -1.0 * k);
    }
  }
}

void qmatmul_errors() {
  Tensor a = f32({2, 8}), w = f32({8, 20}), y = f32({2, 20});
  Packed p = pack(w.data<float>(), 8, 20, false), p16 = pack(w.data<float>(), 8, 20, true);
  planc::TensorView none;
  auto go = [&](std::vector<planc::TensorView> in, std::vector<planc::TensorView> out, const test::qmatmul_call& args,
                int64_t variant = 0) { return test::call(k_qmatmul, std::move(in), std::move(out), args, nullptr, variant); };
  const test::qmatmul_call ia = test::qmatmul_call().activation(planc::kActNone).input(planc::kQuantInInt8).n(20).k(8);
  test::expect_ok(go({a.view, p.w.view, p.scale.view, p.sum.view, none, none}, {y.view}, ia), "qmatmul ok");
  test::expect_error(go({a.view, p16.w.view, p.scale.view, p.sum.view, none, none}, {y.view}, ia), "w must be int8", "int16 w, int8 input");
  test::expect_error(
      go({a.view, p.w.view, p.scale.view, none, none, none}, {y.view}, test::qmatmul_call(ia).input(planc::kQuantInInt16)),
      "w must be int16", "int8 w, int16 input");
  Tensor wbad(planc::kInt8, {2, 3, 16, 4});
  test::expect_error(go({a.view, wbad.view, p.scale.view, none, none, none}, {y.view}, ia), "w must be int8 [2, 2, 16, 4]", "w dims");
  test::expect_error(go({a.view, p.w.view, p.scale.view, none, none, none}, {y.view}, test::qmatmul_call(ia).k(9)),
                     "must end in K", "K");
  Tensor s19 = f32({19});
  test::expect_error(go({a.view, p.w.view, s19.view, none, none, none}, {y.view}, ia), "w_scale must be [20]", "scale dims");
  Tensor sum_f = f32({20});
  test::expect_error(go({a.view, p.w.view, p.scale.view, sum_f.view, none, none}, {y.view}, ia), "w_sum must be int32", "w_sum dtype");
  Tensor b19 = f32({19});
  test::expect_error(go({a.view, p.w.view, p.scale.view, none, b19.view, none}, {y.view}, ia), "bias must be float32 [20]", "bias dims");
  Tensor r3 = f32({3, 20});
  test::expect_error(go({a.view, p.w.view, p.scale.view, none, none, r3.view}, {y.view}, ia), "residual must be", "residual dims");
  Tensor y21 = f32({2, 21});
  test::expect_error(go({a.view, p.w.view, p.scale.view, none, none, none}, {y21.view}, ia), "leading dims", "y dims");
  Tensor a64(planc::kFloat64, {2, 8});
  test::expect_error(go({a64.view, p.w.view, p.scale.view, none, none, none}, {y.view}, ia), "must be float32", "A dtype");
  test::expect_error(
      go({a.view, p.w.view, p.scale.view, none, none, none}, {y.view}, test::qmatmul_call(ia).activation(planc::kActCount)),
      "unknown activation", "activation");
  test::expect_error(
      go({a.view, p.w.view, p.scale.view, none, none, none}, {y.view}, test::qmatmul_call(ia).input(planc::kQuantInCount)),
      "unknown input", "input kind");
  test::expect_error(go({a.view, p.w.view, p.scale.view, none, none, none}, {y.view}, ia, 42), "unknown variant", "variant code");
  test::expect_error(go({a.view, p.w.view}, {y.view}, ia), "qmatmul", "arity");
  for (int64_t code = 0; code < v::kVariantCount; code++)
    if (g_unavailable(code))
      test::expect_error(go({a.view, p.w.view, p.scale.view, none, none, none}, {y.view}, ia, code), "cannot run here", v::kVariantNames[code]);
}

// quantize_rows over 3-D A feeding qmatmul (ref's bits from float32 A), and both kernels' checks of quantized rows.
void qrows_tests(planc::ThreadPool* pool) {
  Tensor a = f32({2, 3, 10}), w = f32({10, 20}), want = f32({2, 3, 20}), got = f32({2, 3, 20});
  test::fill_random(a, -2.0f, 2.0f);
  test::fill_random(w);
  planc::TensorView none;
  for (int64_t input : {planc::kQuantInInt8, planc::kQuantInInt16}) {
    const bool i16 = input == planc::kQuantInInt16;
    const int64_t kp = i16 ? 10 : 12;
    Packed p = pack(w.data<float>(), 10, 20, i16);
    const test::qmatmul_call args = test::qmatmul_call().activation(planc::kActNone).input(planc::QuantInput(input)).n(20).k(10);
    Tensor q(i16 ? planc::kInt16 : planc::kUint8, {2, 3, kp}), sc = f32({2, 3});
    const test::quantize_rows_call qa = test::quantize_rows_call().input(planc::QuantInput(input)).k(10);
    test::expect_ok(test::call(k_qrows, {a.view}, {q.view, sc.view}, qa, pool), "quantize_rows 3-D");
    for (int64_t variant : g_variants) {
      test::expect_ok(test::call(k_qmatmul, {a.view, p.w.view, p.scale.view, p.sum.view, none, none}, {want.view}, args, pool, v::kVariantRef),
                      "qmatmul 3-D float32 A");
      test::expect_ok(test::call(k_qmatmul, {q.view, p.w.view, p.scale.view, p.sum.view, none, none, sc.view}, {got.view}, args, pool, variant),
                      "qmatmul 3-D quantized A");
      CHECK_MSG(std::memcmp(got.data(), want.data(), static_cast<size_t>(want.numel()) * 4) == 0,
               "qmatmul %s 3-D quantized A (input %lld) differs from float32 A on ref", v::kVariantNames[variant], (long long)input);
    }
    // quantize_rows' checks
    Tensor q_bad(i16 ? planc::kUint8 : planc::kInt16, {2, 3, kp}), q_short(q.view.dtype, {2, 3, kp - 2}), sc_bad = f32({3, 2});
    test::expect_error(test::call(k_qrows, {a.view}, {q_bad.view, sc.view}, qa), "and q", "quantize_rows q dtype");
    test::expect_error(test::call(k_qrows, {a.view}, {q_short.view, sc.view}, qa), "leading dims", "quantize_rows q dims");
    test::expect_error(test::call(k_qrows, {a.view}, {q.view, sc_bad.view}, qa), "leading dims", "quantize_rows scale dims");
    test::expect_error(test::call(k_qrows, {a.view}, {q.view, sc.view}, test::quantize_rows_call(qa).k(9)), "must end in K", "quantize_rows K");
    test::expect_error(test::call(k_qrows, {a.view}, {q.view, sc.view}, test::quantize_rows_call(qa).input(planc::kQuantInFloat32)),
                       "must be int8 or int16", "quantize_rows float32 input");
    // qmatmul's checks of quantized rows
    test::expect_error(test::call(k_qmatmul, {q.view, p.w.view, p.scale.view, p.sum.view, none, none}, {got.view}, args), "needs a_scale",
                       "quantized A without a_scale");
    test::expect_error(test::call(k_qmatmul, {q.view, p.w.view, p.scale.view, p.sum.view, none, none, sc_bad.view}, {got.view}, args),
                       "needs a_scale", "a_scale dims");
    test::expect_error(test::call(k_qmatmul, {a.view, p.w.view, p.scale.view, p.sum.view, none, none, sc.view}, {got.view}, args),
                       "a_scale is given only", "a_scale with float32 A");
    test::expect_error(test::call(k_qmatmul, {q_short.view, p.w.view, p.scale.view, p.sum.view, none, none, sc.view}, {got.view}, args),
                       "must end in kp", "quantized A dims");
    test::expect_error(test::call(k_qmatmul, {q_bad.view, p.w.view, p.scale.view, p.sum.view, none, none, sc.view}, {got.view}, args),
                       "A must be float32 or", "quantized A dtype");
  }
  // int8 rows with float32 (weight-only) input: refused
  Packed p8 = pack(w.data<float>(), 10, 20, false);
  Tensor q8(planc::kUint8, {2, 3, 12}), sc = f32({2, 3});
  test::expect_error(test::call(k_qmatmul, {q8.view, p8.w.view, p8.scale.view, p8.sum.view, none, none, sc.view}, {got.view},
                                test::qmatmul_call().activation(planc::kActNone).input(planc::kQuantInFloat32).n(20).k(10)),
                     "A must be float32", "quantized A with float32 input");
}

// ---------- bench ----------

// The fastest of reps runs of fn, in microseconds (min: the machine is shared; the TS bench reports medians).
template <class F> double best_us(int reps, F fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < reps; i++) {
    const double t0 = test::now_ms();
    fn();
    best = std::min(best, test::now_ms() - t0);
  }
  return best * 1e3;
}

// qmatmul per variant and input kind against fused_matmul float32 (auto), one thread and the pool.
void bench(planc::ThreadPool* pool) {
  const planc::KernelList g = planc::gemm_kernels();
  const planc::KernelFn fused = test::find_kernel({g}, "fused_matmul");
  struct Shape { int64_t m, k, n; };
  for (planc::ThreadPool* pl : {static_cast<planc::ThreadPool*>(nullptr), pool})
    for (Shape s : {Shape{1, 512, 2048}, Shape{1, 2048, 512}, Shape{1, 512, 512}, Shape{32, 512, 2048}, Shape{32, 2048, 512}, Shape{32, 512, 512}}) {
      Tensor a = f32({s.m, s.k}), w = f32({s.k, s.n}), y = f32({s.m, s.n});
      test::fill_random(a);
      test::fill_random(w);
      planc::TensorView none;
      const int reps = s.m == 1 ? 400 : 60;
      const double f = best_us(reps, [&] {
        test::call(fused, {a.view, w.view, none, none}, {y.view}, test::fused_matmul_call().activation(planc::kActNone), pl, 0);
      });
      std::printf("%s m=%lld k=%lld n=%lld: fp32 %.1fus\n", pl ? "pool" : "1 thread", (long long)s.m, (long long)s.k, (long long)s.n, f);
      for (int64_t input : {planc::kQuantInInt8, planc::kQuantInFloat32, planc::kQuantInInt16}) {
        Packed p = pack(w.data<float>(), s.k, s.n, input == planc::kQuantInInt16);
        Case c{s.m, s.k, s.n, input, planc::kActNone, false, false, true};
        std::printf("  input %lld:", (long long)input);
        for (int64_t variant : g_variants) {
          if (variant == v::kVariantRef) continue;
          const double t = best_us(reps, [&] { run_q(variant, a, p, nullptr, nullptr, true, y, c, pl); });
          std::printf(" %s %.1fus (%.2fx)", v::kVariantNames[variant], t, f / t);
        }
        std::printf("\n");
      }
    }
}

void bench_topk(planc::ThreadPool* pool);

}  // namespace

void qproject_topk_tests(planc::ThreadPool* pool);

int main(int argc, char** argv) {
  const planc::KernelList q = planc::qgemm_kernels(), t = planc::qproject_topk_kernels();
  k_qmatmul = test::find_kernel({q}, "qmatmul");
  k_qtopk = test::find_kernel({t}, "qproject_topk");
  k_qrows = test::find_kernel({planc::quantize_rows_kernels()}, "quantize_rows");
  if (!k_qmatmul || !k_qtopk || !k_qrows) return 1;
  g_unavailable = q.defs[0].variant_unavailable;
  for (int64_t code = 0; code < v::kVariantCount; code++)
    if (!g_unavailable(code)) g_variants.push_back(code);
  std::printf("qgemm_test: variants run here:");
  for (int64_t code : g_variants) std::printf(" %s", v::kVariantNames[code]);
  std::printf("\n");
  for (int64_t code = 0; code < v::kVariantCount; code++)
    if (const char* why = g_unavailable(code)) test::skip(std::string("qmatmul variant ") + v::kVariantNames[code], why);
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    bench(&pool);
    bench_topk(&pool);
    return 0;
  }
  qmatmul_tests(nullptr);
  qmatmul_tests(&pool);
  qmatmul_epilogue_tiles();
  qmatmul_edges();
  qmatmul_int16_extremes();
  qmatmul_errors();
  qrows_tests(&pool);
  qproject_topk_tests(&pool);
  return test::finish("qgemm_test");
}

// ---------- qproject_topk ----------

namespace {

// W [V, D] float → int8 rows [V, Dp] (per row symmetric), scale and sum per row.
struct PackedRows {
  Tensor w, scale, sum;
};

PackedRows pack_rows(const float* w, int64_t nv, int64_t d) {
  const int64_t dp = ceil_div(d, 64) * 64;
  PackedRows p{Tensor(planc::kInt8, {nv, dp}), f32({nv}), Tensor(planc::kInt32, {nv})};
  int8_t* q = reinterpret_cast<int8_t*>(p.w.data());
  for (int64_t r = 0; r < nv; r++) {
    float amax = 0;
    for (int64_t i = 0; i < d; i++) amax = std::max(amax, std::fabs(w[r * d + i]));
    const float s = amax == 0 ? 1.0f : amax / 127.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < d; i++) {
      q[r * dp + i] = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, std::nearbyint(w[r * d + i] / s))));
      sum += q[r * dp + i];
    }
    p.scale.data<float>()[r] = s;
    p.sum.data<int32_t>()[r] = sum;
  }
  return p;
}

struct TopkCase {
  int64_t rows, nv, d, k, input;
  bool bias;
  int active;  // 0: none; 1: about a third of the ids; 2: fewer than k ids
};

std::string describe_topk(const TopkCase& c, int64_t variant) {
  char s[200];
  std::snprintf(s, sizeof s, "qproject_topk %s rows=%lld V=%lld D=%lld k=%lld input=%lld bias=%d active=%d", v::kVariantNames[variant],
                (long long)c.rows, (long long)c.nv, (long long)c.d, (long long)c.k, (long long)c.input, c.bias, c.active);
  return s;
}

void check_topk(const TopkCase& c, planc::ThreadPool* pool) {
  Tensor x = f32({c.rows, c.d}), w = f32({c.nv, c.d}), bias = f32({c.nv}), act(planc::kUint8, {c.nv});
  test::fill_random(x, -2.0f, 2.0f);
  test::fill_random(w, -0.3f, 0.3f);
  test::fill_random(bias);
  for (int64_t i = 0; i < c.nv; i++) act.data<uint8_t>()[i] = c.active == 1 ? (i % 3 == 1) : c.active == 2 ? (i == 5 || i == c.nv - 1) : 1;
  PackedRows p = pack_rows(w.data<float>(), c.nv, c.d);
  planc::TensorView none;
  auto run = [&](int64_t variant, Tensor& vals, Tensor& ids) {
    return test::call(
        k_qtopk, {x.view, p.w.view, p.scale.view, p.sum.view, c.bias ? bias.view : none, c.active ? act.view : none},
        {vals.view, ids.view}, test::qproject_topk_call().k(c.k).input(planc::QuantInput(c.input)).d(c.d), pool, variant);
  };
  Tensor want_v = f32({c.rows, c.k}), want_i(planc::kInt64, {c.rows, c.k});
  test::expect_ok(run(v::kVariantRef, want_v, want_i), describe_topk(c, v::kVariantRef).c_str());
  // ref against the logit formula written out here, log-softmax in double, the best k
  {
    int bad = 0;
    const int64_t dp = ceil_div(c.d, 64) * 64;
    const int8_t* q = reinterpret_cast<const int8_t*>(p.w.data());
    std::vector<int32_t> qa;
    for (int64_t r = 0; r < c.rows; r++) {
      const float* xr = x.data<float>() + r * c.d;
      const float sa = c.input == planc::kQuantInInt8 ? quant_row(xr, c.d, c.input, qa) : 1.0f;
      std::vector<std::pair<float, int64_t>> l;
      double mx = -INFINITY;
      for (int64_t id = 0; id < c.nv; id++) {
        if (!act.data<uint8_t>()[id]) continue;
        float logit;
        if (c.input == planc::kQuantInInt8) {
          int64_t acc = 0;
          for (int64_t t = 0; t < c.d; t++) acc += int64_t(qa[t]) * q[id * dp + t];
          logit = static_cast<float>(acc) * (sa * p.scale.data<float>()[id]);
        } else {
          double acc = 0;
          for (int64_t t = 0; t < c.d; t++) acc += double(xr[t]) * q[id * dp + t];
          logit = static_cast<float>(acc) * p.scale.data<float>()[id];
        }
        if (c.bias) logit += bias.data<float>()[id];
        l.push_back({logit, id});
        mx = std::max(mx, double(logit));
      }
      double se = 0;
      for (auto& e : l) se += std::exp(double(e.first) - mx);
      const double lse = mx + std::log(se);
      std::stable_sort(l.begin(), l.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      for (int64_t t = 0; t < c.k; t++) {
        const bool pad = t >= static_cast<int64_t>(l.size());
        const double wv = pad ? -INFINITY : double(l[t].first) - lse;
        const int64_t wi = pad ? 0 : l[t].second;
        const float gv = want_v.data<float>()[r * c.k + t];
        const int64_t gi = want_i.data<int64_t>()[r * c.k + t];
        const bool ok = gi == wi && (pad ? gv == -INFINITY : std::fabs(gv - wv) <= 1e-4 * (1 + std::fabs(wv)));
        if (!ok && bad++ < 3) std::printf("  topk rule: row %lld slot %lld got %g #%lld want %g #%lld\n", (long long)r, (long long)t, gv, (long long)gi, wv, (long long)wi);
      }
    }
    CHECK_MSG(bad == 0, "%s: ref differs from the logit formula at %d slots", describe_topk(c, v::kVariantRef).c_str(), bad);
  }
  for (int64_t variant : g_variants) {
    if (variant == v::kVariantRef) continue;
    Tensor got_v = f32({c.rows, c.k}), got_i(planc::kInt64, {c.rows, c.k});
    test::expect_ok(run(variant, got_v, got_i), describe_topk(c, variant).c_str());
    int64_t bad = 0;
    for (int64_t i = 0; i < got_v.numel(); i++) {
      const bool same_v = c.input == planc::kQuantInInt8 ? std::memcmp(got_v.data<float>() + i, want_v.data<float>() + i, 4) == 0
                                                         : (got_v.data<float>()[i] == want_v.data<float>()[i] || std::fabs(got_v.data<float>()[i] - want_v.data<float>()[i]) <= 1e-4f);
      if (!same_v || got_i.data<int64_t>()[i] != want_i.data<int64_t>()[i]) bad++;
    }
    CHECK_MSG(bad == 0, "%s: %lld slots differ from ref", describe_topk(c, variant).c_str(), (long long)bad);
  }
}

void qproject_topk_errors() {
  Tensor x = f32({2, 40}), w = f32({50, 40}), vals = f32({2, 8}), ids(planc::kInt64, {2, 8});
  test::fill_random(x);
  test::fill_random(w);
  PackedRows p = pack_rows(w.data<float>(), 50, 40);
  planc::TensorView none;
  auto go = [&](std::vector<planc::TensorView> in, const test::qproject_topk_call& args, int64_t variant = 0) {
    return test::call(k_qtopk, std::move(in), {vals.view, ids.view}, args, nullptr, variant);
  };
  const test::qproject_topk_call ia = test::qproject_topk_call().k(8).input(planc::kQuantInInt8).d(40);
  test::expect_ok(go({x.view, p.w.view, p.scale.view, p.sum.view, none, none}, ia), "qproject_topk ok");
  test::expect_error(
      go({x.view, p.w.view, p.scale.view, p.sum.view, none, none}, test::qproject_topk_call(ia).input(planc::kQuantInInt16)),
      "input must be int8", "int16 input");
  Tensor w40(planc::kInt8, {50, 40});
  test::expect_error(go({x.view, w40.view, p.scale.view, p.sum.view, none, none}, ia), "w must be int8 [V, 64]", "Dp");
  test::expect_error(go({x.view, p.w.view, p.scale.view, p.sum.view, none, none}, test::qproject_topk_call(ia).d(41)),
                     "X must be float32", "D");
  Tensor s49 = f32({49});
  test::expect_error(go({x.view, p.w.view, s49.view, p.sum.view, none, none}, ia), "w_scale must be", "scale");
  test::expect_error(go({x.view, p.w.view, p.scale.view, none, none, none}, ia), "w_sum", "missing w_sum");
  Tensor act(planc::kInt32, {50});
  test::expect_error(go({x.view, p.w.view, p.scale.view, p.sum.view, none, act.view}, ia), "active must be", "active dtype");
  test::expect_error(go({x.view, p.w.view, p.scale.view, p.sum.view, none, none}, test::qproject_topk_call(ia).k(51)),
                     "out of range", "k");
  test::expect_error(go({x.view, p.w.view, p.scale.view, p.sum.view, none, none}, ia, 9), "unknown variant", "variant");
}

// qproject_topk per variant (int8 and float32 rows) against project_topk (W [V, D], transposed), k = 8.
void bench_topk(planc::ThreadPool* pool) {
  const planc::KernelFn ptk = test::find_kernel({planc::project_topk_kernels()}, "project_topk");
  for (planc::ThreadPool* pl : {static_cast<planc::ThreadPool*>(nullptr), pool})
    for (int64_t nv : {32000, 58101})
      for (int64_t rows : {1, 32}) {
        const int64_t d = nv == 32000 ? 256 : 512, k = 8;
        Tensor x = f32({rows, d}), w = f32({nv, d}), vals = f32({rows, k}), ids(planc::kInt64, {rows, k});
        test::fill_random(x);
        test::fill_random(w, -0.1f, 0.1f);
        PackedRows p = pack_rows(w.data<float>(), nv, d);
        planc::TensorView none;
        const int reps = rows == 1 ? 40 : 8;
        const double f = best_us(reps, [&] {
          test::call(ptk, {x.view, w.view, none, none}, {vals.view, ids.view}, test::project_topk_call().k(k).transposed(1), pl,
                     0);
        });
        std::printf("%s topk V=%lld D=%lld rows=%lld: fp32 %.1fus\n", pl ? "pool" : "1 thread", (long long)nv, (long long)d, (long long)rows, f);
        for (int64_t input : {planc::kQuantInInt8, planc::kQuantInFloat32}) {
          std::printf("  input %lld:", (long long)input);
          for (int64_t variant : g_variants) {
            if (variant == v::kVariantRef) continue;
            const double t = best_us(reps, [&] {
              test::call(k_qtopk, {x.view, p.w.view, p.scale.view, p.sum.view, none, none}, {vals.view, ids.view},
                         test::qproject_topk_call().k(k).input(planc::QuantInput(input)).d(d), pl, variant);
            });
            std::printf(" %s %.1fus (%.2fx)", v::kVariantNames[variant], t, f / t);
          }
          std::printf("\n");
        }
      }
}

}  // namespace

void qproject_topk_tests(planc::ThreadPool* pool) {
  for (planc::ThreadPool* pl : {static_cast<planc::ThreadPool*>(nullptr), pool})
    for (int64_t input : {planc::kQuantInInt8, planc::kQuantInFloat32})
      for (int64_t rows : {1, 16, 70})
        for (int active : {0, 1, 2})
          for (bool bias : {false, true}) {
            check_topk({rows, 1000, 100, 8, input, bias, active}, pl);
            if (rows == 16) check_topk({rows, 37, 33, 1, input, bias, active}, pl);
          }
  check_topk({3, 5000, 512, 8, planc::kQuantInInt8, true, 0}, pool);
  // Every row count of amx's tiles (delegated, one and two row tiles, full and partial; vocabulary tiles of 32 and a
  // partial one), each logit compared (k = V) with and without active ids.
  for (int64_t rows = 1; rows <= 33; rows++)
    for (int active : {0, 1}) check_topk({rows, 100, 128, 100, planc::kQuantInInt8, rows % 2 == 1, active}, pool);
  qproject_topk_errors();
}
