// Standalone test of the float16 / bfloat16 weights of matmul, fused_matmul and project_topk (compiler/kernel-schema.ts
// F32_OR_HALF: the other operand rounded to the weight's dtype, both widened to float32, products summed in float32)
// against a float64 reference of those semantics, on every GEMM variant this machine runs; and cast to and from
// bfloat16 (ties to even, NaN, ±inf, the double rounding of float64 sources) against a reference built differently.
// `bench` times the half paths against float32 ones.
#include <algorithm>
#include <cfloat>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "cpu/half.h"  // the conversions themselves, for the check of the vector paths against the scalar ones
#include "half_ref.h"
#include "test_util.h"

namespace planc {
KernelList gemm_kernels();
KernelList project_topk_kernels();
KernelList cast_kernels();
}  // namespace planc

using test::Tensor;

namespace {

namespace v = planc::matmul_args;

planc::KernelFn k_matmul, k_fused, k_gemm, k_topk, k_cast, k_fill, k_range;
const planc::KernelDef* k_topk_def = nullptr;
std::vector<int64_t> g_variants;  // the GEMM variants this machine runs, auto first
const double kInf = std::numeric_limits<double>::infinity();

// ---- references, written independently of native/src/cpu/half.h ----

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float float_of(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

using half_ref::bf16_bits;
using half_ref::bf16_value;
using half_ref::f16_bits;
using half_ref::f16_value;

// The value of x after rounding to dt and widening, as the kernels take it.
double rounded(int32_t dt, float x) {
  if (x != x) return x;
  return dt == planc::kFloat16 ? f16_value(f16_bits(x)) : bf16_value(bf16_bits(x));
}

double widened(int32_t dt, uint16_t b) { return dt == planc::kFloat16 ? f16_value(b) : bf16_value(b); }

const char* dt_name(int32_t dt) { return planc::dtype_name(dt); }

// A half tensor with random values of about unit size (bits of dtype dt), a few subnormals among them for float16.
Tensor random_half(int32_t dt, std::vector<int64_t> dims, float scale = 1.0f) {
  Tensor b(dt, std::move(dims));
  std::uniform_real_distribution<float> u(-scale, scale);
  uint16_t* p = b.data<uint16_t>();
  for (int64_t i = 0; i < b.numel(); i++) p[i] = dt == planc::kFloat16 ? f16_bits(u(test::random_engine())) : bf16_bits(u(test::random_engine()));
  if (dt == planc::kFloat16)
    for (int64_t i = 0; i < b.numel(); i += 97) p[i] = static_cast<uint16_t>(1 + i % 1023) | (i % 2 ? 0x8000 : 0);
  return b;
}

// Y = round(A) x widen(B) in double over rows [rows, K] of A and B [K, N]; scale gets sum |products| per element.
// rounded_a = false: A's values as they are (to check that the kernel did round them).
std::vector<double> ref_product(int32_t dt, const float* a, int64_t rows, int64_t k, const uint16_t* b, int64_t n,
                                std::vector<double>* scale, bool rounded_a = true) {
  std::vector<double> y(static_cast<size_t>(rows * n), 0.0);
  if (scale) scale->assign(y.size(), 0.0);
  std::vector<double> ar(static_cast<size_t>(rows * k)), bw(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < rows * k; i++) ar[i] = rounded_a ? rounded(dt, a[i]) : a[i];
  for (int64_t i = 0; i < k * n; i++) bw[i] = widened(dt, b[i]);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0, sa = 0;
      for (int64_t p = 0; p < k; p++) {
        const double x = ar[i * k + p] * bw[p * n + j];
        s += x;
        sa += std::fabs(x);
      }
      y[i * n + j] = s;
      if (scale) (*scale)[i * n + j] = sa;
    }
  return y;
}

double activate(double x, int64_t act) {
  switch (act) {
    case planc::kActRelu: return x > 0 ? x : 0;
    case planc::kActGelu: return 0.5 * x * (1.0 + std::erf(x * 0.70710678118654752440));
    case planc::kActGeluTanh: return 0.5 * x * (1.0 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    case planc::kActSilu: return x / (1.0 + std::exp(-x));
    default: return x;
  }
}

// got within the float32 summation bound of want: K products (exact) summed in any order, then the epilogue's roundings.
// Returns the number of elements outside it (printing the first).
int64_t outside(const float* got, const std::vector<double>& want, const std::vector<double>& bound, const char* what) {
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); i++) {
    const double g = got[i], e = want[i];
    const bool ok = (e != e) ? g != g : std::isinf(e) ? g == e : std::fabs(g - e) <= bound[i];
    if (!ok && bad++ == 0)
      std::printf("FAIL %s: element %zu got %.9g want %.9g (bound %.3g)\n", what, i, g, e, bound[i]);
  }
  test::g_checks++;
  if (bad) test::g_failures++;
  return bad;
}

// ---- matmul / fused_matmul ----

const char* call_v(int64_t variant, planc::KernelFn fn, std::vector<planc::TensorView> in, std::vector<planc::TensorView> out,
                   const kernel_call::Args& args, planc::ThreadPool* pool) {
  return test::call(fn, std::move(in), std::move(out), args, pool, variant);
}

// fused_matmul (and matmul, when plain) with A [batch..., M, K] and a half W [K, N] on every variant, against the
// reference; also that the kernel rounded A (its results are far closer to the rounded reference than to the plain one).
void check_fused(int32_t dt, std::vector<int64_t> adims, int64_t n, bool bias, int64_t act, bool residual,
                 planc::ThreadPool* pool) {
  const int64_t k = adims.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < adims.size(); i++) rows *= adims[i];
  std::vector<int64_t> ydims = adims;
  ydims.back() = n;
  Tensor a = test::f32(adims), w = random_half(dt, {k, n}), bb = test::f32({n}), res = test::f32(ydims);
  test::fill_random(a);
  test::fill_random(bb);
  test::fill_random(res);
  const uint16_t* wp = w.data<uint16_t>();
  std::vector<double> scale;
  std::vector<double> want = ref_product(dt, a.data<float>(), rows, k, wp, n, &scale);
  std::vector<double> plain = ref_product(dt, a.data<float>(), rows, k, wp, n, nullptr, false);
  std::vector<double> bound(want.size());
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < n; j++) {
      const size_t e = static_cast<size_t>(i * n + j);
      const double bj = bias ? bb.data<float>()[j] : 0.0, rj = residual ? res.data<float>()[e] : 0.0;
      // sum: (K + 2) u sum|x|; the bias add, the activation (slope <= 1.13, rounded once), the residual add: u each
      const double pre = want[e] + bj;
      const double sum_err = std::ldexp(double(k + 2), -24) * (scale[e] + std::fabs(bj)) + std::ldexp(std::fabs(pre), -24);
      want[e] = activate(pre, act) + rj;
      plain[e] = activate(plain[e] + bj, act) + rj;
      bound[e] = 1.2 * sum_err + std::ldexp(std::fabs(activate(pre, act)) + std::fabs(want[e]), -23) + 1e-30;
    }
  const bool plain_call = !bias && !residual && act == planc::kActNone;
  for (int64_t variant : g_variants) {
    for (int use_matmul = 0; use_matmul < (plain_call ? 2 : 1); use_matmul++) {
      Tensor y = test::f32(ydims);
      test::fill_random(y, 1e6f, 1e7f);  // garbage that must be overwritten
      planc::TensorView none;
      const char* err = use_matmul ? call_v(variant, k_matmul, {a.view, w.view}, {y.view}, {}, pool)
                                   : call_v(variant, k_fused, {a.view, w.view, bias ? bb.view : none, residual ? res.view : none},
                                            {y.view}, test::fused_matmul_call().activation(planc::Activation(act)), pool);
      char what[200];
      std::snprintf(what, sizeof what, "%s %s A [%lld rows, %lld] x W [%lld, %lld] bias %d act %lld residual %d variant %s %s",
                    use_matmul ? "matmul" : "fused_matmul", dt_name(dt), (long long)rows, (long long)k, (long long)k,
                    (long long)n, bias, (long long)act, residual, v::kVariantNames[variant], pool ? "threaded" : "one thread");
      test::expect_ok(err, what);
      if (err) continue;
      outside(y.data<float>(), want, bound, what);
      double d_rounded = 0, d_plain = 0;
      for (size_t i = 0; i < want.size(); i++) {
        d_rounded += std::fabs(y.data<float>()[i] - want[i]);
        d_plain += std::fabs(y.data<float>()[i] - plain[i]);
      }
      CHECK_MSG(want.empty() || d_rounded * 20 < d_plain, "%s: A not rounded to %s? distance to the rounded reference %.3g, to the plain one %.3g",
               what, dt_name(dt), d_rounded, d_plain);
    }
  }
}

void test_products(planc::ThreadPool* pool) {
  for (int32_t dt : {planc::kFloat16, planc::kBFloat16}) {
    for (planc::ThreadPool* p : {static_cast<planc::ThreadPool*>(nullptr), pool}) {
      for (int64_t m : {1, 3, 17, 64}) {
        check_fused(dt, {m, 37}, 45, false, planc::kActNone, false, p);
        check_fused(dt, {m, 301}, 333, true, planc::kActGelu, true, p);
        check_fused(dt, {m, 129}, 70, true, planc::kActRelu, false, p);
        check_fused(dt, {m, 65}, 31, false, planc::kActSilu, true, p);
      }
      check_fused(dt, {2, 3, 51}, 77, false, planc::kActNone, false, p);  // batch dims fold into the rows
      check_fused(dt, {1, 5, 33}, 17, true, planc::kActGeluTanh, true, p);
      check_fused(dt, {2, 0, 9}, 5, false, planc::kActNone, false, p);    // no rows
    }
    // more than one widened slab of W (K x N > 2^21 floats), threaded
    check_fused(dt, {5, 301}, 7000, true, planc::kActNone, false, pool);
    check_fused(dt, {40, 301}, 7000, false, planc::kActNone, true, pool);
  }
}

// Hand-made values: the rounding of A (ties to even, overflow, NaN), K = 0, and the refusals.
void test_product_edges(planc::ThreadPool* pool) {
  const float tie16 = 1.0f + 0x1p-11f, tie16b = 1.0f + 3 * 0x1p-11f;  // float16 ties: to 1 and to 1 + 2^-9
  const float tie_bf = 1.0f + 0x1p-8f, tie_bfb = 1.0f + 3 * 0x1p-8f;  // bfloat16 ties: to 1 and to 1 + 2^-6
  struct Case {
    int32_t dt;
    float a0, a1;
    double want;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Case cases[] = {
      {planc::kFloat16, tie16, 0, 1.0},
      {planc::kFloat16, tie16b, 0, 1.0 + 0x1p-9},
      {planc::kFloat16, 70000.0f, 1, kInf},     // overflow to inf
      {planc::kFloat16, -65520.0f, 1, -kInf},   // halfway to 2^16: inf
      {planc::kFloat16, 65519.0f, 1, 65505.0},  // below halfway: 65504
      {planc::kFloat16, 1e-8f, 1, 1.0},         // below half the smallest subnormal: 0
      {planc::kFloat16, std::numeric_limits<float>::quiet_NaN(), 1, nan},
      {planc::kBFloat16, tie_bf, 0, 1.0},
      {planc::kBFloat16, tie_bfb, 0, 1.0 + 0x1p-6},
      {planc::kBFloat16, 70000.0f, 1, 70144.0 + 1},  // bfloat16 does not overflow here
      {planc::kBFloat16, std::numeric_limits<float>::infinity(), 1, kInf},
      {planc::kBFloat16, std::numeric_limits<float>::quiet_NaN(), 1, nan},
  };
  for (const Case& c : cases) {
    for (int64_t variant : g_variants) {
      Tensor a = test::f32({1, 2}, {c.a0, c.a1}), w(c.dt, {2, 1}), y = test::f32({1, 1});
      w.data<uint16_t>()[0] = c.dt == planc::kFloat16 ? 0x3c00 : 0x3f80;  // 1
      w.data<uint16_t>()[1] = c.dt == planc::kFloat16 ? 0x3c00 : 0x3f80;
      const char* err = call_v(variant, k_matmul, {a.view, w.view}, {y.view}, {}, pool);
      test::expect_ok(err, "edge");
      const double g = y.data<float>()[0];
      CHECK_MSG(c.want != c.want ? g != g : g == c.want, "%s A [%.9g, %.9g] x [1, 1] variant %s: got %.9g want %.9g",
               dt_name(c.dt), c.a0, c.a1, v::kVariantNames[variant], g, c.want);
    }
  }
  // K = 0: zeros (the float32 paths' empty product)
  for (int32_t dt : {planc::kFloat16, planc::kBFloat16}) {
    Tensor a = test::f32({3, 0}), w(dt, {0, 4}), y = test::f32({3, 4});
    test::fill_random(y, 5, 6);
    test::expect_ok(test::call(k_matmul, {a.view, w.view}, {y.view}, {}, pool), "K = 0");
    bool zero = true;
    for (int i = 0; i < 12; i++) zero = zero && y.data<float>()[i] == 0.0f;
    CHECK_MSG(zero, "%s K = 0: Y not zero", dt_name(dt));
  }
  // refusals: a half B of rank 3 on matmul / fused_matmul, a half A, float64 B, a half B on gemm
  Tensor a3 = test::f32({2, 3, 4}), b3(planc::kFloat16, {2, 4, 5}), y3 = test::f32({2, 3, 5});
  test::expect_error(test::call(k_matmul, {a3.view, b3.view}, {y3.view}, {}, pool), "float16 B must be 2-D",
                     "matmul half B rank 3");
  Tensor b3b(planc::kBFloat16, {2, 4, 5});
  test::expect_error(test::call(k_matmul, {a3.view, b3b.view}, {y3.view}, {}, pool), "bfloat16 B must be 2-D",
                     "matmul bf16 B rank 3");
  planc::TensorView none;
  test::expect_error(
      test::call(k_fused, {a3.view, b3.view, none, none}, {y3.view}, test::fused_matmul_call().activation(planc::kActNone), pool),
      "must be 2-D", "fused_matmul half W rank 3");
  Tensor a2 = test::f32({3, 4}), b2(planc::kFloat16, {4, 5}), y2 = test::f32({3, 5}), ah(planc::kFloat16, {3, 4}), bd(planc::kFloat64, {4, 5});
  test::expect_error(test::call(k_matmul, {ah.view, b2.view}, {y2.view}, {}, pool), "float32 only", "matmul half A");
  test::expect_error(test::call(k_matmul, {a2.view, bd.view}, {y2.view}, {}, pool), "float32 only", "matmul float64 B");
  test::expect_error(
      test::call(k_gemm, {a2.view, b2.view, none}, {y2.view}, test::gemm_call().trans_a(0).trans_b(0).alpha(1.0).beta(0.0), pool),
      "float32 only", "gemm half B");
  Tensor bk(planc::kFloat16, {5, 5});
  test::expect_error(test::call(k_matmul, {a2.view, bk.view}, {y2.view}, {}, pool), "inner dims differ", "matmul half B dims");
}

// ---- project_topk ----

struct TopkCase {
  int32_t dt;
  int64_t rows, d, v, k;
  bool transposed, bias;
  double density;  // < 0: no mask
  int64_t variant = 0;  // project_topk_args::kVariant*
};

void run_topk(const TopkCase& c, planc::ThreadPool* pool) {
  Tensor x = test::f32({c.rows, c.d}), bias = test::f32({c.v}), mask(planc::kUint8, {c.v});
  test::fill_random(x, -1, 1);
  test::fill_random(bias, -2, 2);
  Tensor w = random_half(c.dt, c.transposed ? std::vector<int64_t>{c.v, c.d} : std::vector<int64_t>{c.d, c.v},
                      float(4 / std::sqrt(double(c.d))));
  const bool masked = c.density >= 0;
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t j = 0; j < c.v; j++) mask.data<uint8_t>()[j] = masked && u(test::random_engine()) < c.density ? 1 : 0;
  const uint16_t* wp = w.data<uint16_t>();
  // reference: logits of the rounded X and widened W in double
  std::vector<double> vals(static_cast<size_t>(c.rows * c.k));
  std::vector<int64_t> ids(vals.size());
  for (int64_t r = 0; r < c.rows; r++) {
    std::vector<double> l(static_cast<size_t>(c.v), -kInf);
    std::vector<int64_t> active;
    double m = -kInf;
    for (int64_t j = 0; j < c.v; j++) {
      if (masked && !mask.data<uint8_t>()[j]) continue;
      active.push_back(j);
      double s = c.bias ? bias.data<float>()[j] : 0.0;
      for (int64_t p = 0; p < c.d; p++)
        s += rounded(c.dt, x.data<float>()[r * c.d + p]) * widened(c.dt, c.transposed ? wp[j * c.d + p] : wp[p * c.v + j]);
      l[j] = s;
      m = std::max(m, s);
    }
    double sum = 0;
    for (int64_t j : active) sum += std::exp(l[j] - m);
    const double lse = m + std::log(sum);
    std::stable_sort(active.begin(), active.end(), [&](int64_t a, int64_t b) { return l[a] > l[b]; });
    for (int64_t t = 0; t < c.k; t++) {
      const bool have = t < static_cast<int64_t>(active.size());
      vals[r * c.k + t] = have ? l[active[t]] - lse : -kInf;
      ids[r * c.k + t] = have ? active[t] : 0;
    }
  }
  Tensor ov = test::f32({c.rows, c.k}), oi(planc::kInt64, {c.rows, c.k});
  planc::TensorView none;
  const char* err =
      test::call_variant(*k_topk_def, {x.view, w.view, c.bias ? bias.view : none, masked ? mask.view : none}, {ov.view, oi.view},
                         test::project_topk_call().k(c.k).transposed(c.transposed ? 1 : 0), pool, c.variant);
  char what[220];
  std::snprintf(what, sizeof what, "project_topk %s rows %lld D %lld V %lld k %lld transposed %d bias %d mask %.2f %s variant %s",
                dt_name(c.dt), (long long)c.rows, (long long)c.d, (long long)c.v, (long long)c.k, c.transposed, c.bias,
                c.density, pool ? "threaded" : "one thread", planc::project_topk_args::kVariantNames[c.variant]);
  test::expect_ok(err, what);
  if (err) return;
  test::close(ov.data<float>(), vals.data(), c.rows * c.k, 0, 1e-5, what);
  int64_t bad = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    if (oi.data<int64_t>()[i] != ids[i] && bad++ == 0)
      std::printf("FAIL %s: ids[%zu] = %lld, want %lld\n", what, i, (long long)oi.data<int64_t>()[i], (long long)ids[i]);
  }
  CHECK_MSG(bad == 0, "%s: %lld ids differ", what, (long long)bad);
}

void test_project_topk(planc::ThreadPool* pool) {
  // every variant this machine runs (packed: W widened and reordered once)
  std::vector<int64_t> variants = {planc::project_topk_args::kVariantAuto};
  if (k_topk_def->variant_unavailable(planc::project_topk_args::kVariantPacked) == nullptr) variants.push_back(planc::project_topk_args::kVariantPacked);
  else test::skip("project_topk variant packed on half weights", k_topk_def->variant_unavailable(planc::project_topk_args::kVariantPacked));
  for (int64_t variant : variants) {
    for (int32_t dt : {planc::kFloat16, planc::kBFloat16})
      for (int tr = 0; tr < 2; tr++)
        for (int b = 0; b < 2; b++)
          for (double density : {-1.0, 0.3})
            for (int64_t k : {1, 4})
              for (int64_t rows : {1, 9}) run_topk({dt, rows, 37, 1000, k, tr == 1, b == 1, density, variant}, rows == 9 ? pool : nullptr);
    // several tiles and parts in parallel, a second block of rows, few active ids
    for (int32_t dt : {planc::kFloat16, planc::kBFloat16})
      for (int tr = 0; tr < 2; tr++) {
        run_topk({dt, 1, 256, 5003, 4, tr == 1, true, -1, variant}, pool);
        run_topk({dt, 9, 256, 5003, 4, tr == 1, false, 0.5, variant}, pool);
        run_topk({dt, 70, 64, 3001, 3, tr == 1, true, -1, variant}, pool);
        run_topk({dt, 3, 32, 500, 4, tr == 1, true, 0.004, variant}, pool);  // about 2 active ids: padded slots
      }
  }
  // refusals
  Tensor x = test::f32({2, 8}), wd(planc::kFloat64, {8, 10}), ov = test::f32({2, 1}), oi(planc::kInt64, {2, 1});
  planc::TensorView none;
  test::expect_error(
      test::call(k_topk, {x.view, wd.view, none, none}, {ov.view, oi.view}, test::project_topk_call().k(1).transposed(0), pool),
      "W float32, float16 or bfloat16", "project_topk float64 W");
  Tensor xh(planc::kFloat16, {2, 8}), wh(planc::kFloat16, {8, 10});
  test::expect_error(
      test::call(k_topk, {xh.view, wh.view, none, none}, {ov.view, oi.view}, test::project_topk_call().k(1).transposed(0), pool),
      "X must be float32", "project_topk half X");
}

// ---- cast ----

Tensor cast_to(int32_t dt, Tensor& x) {
  Tensor y(dt, x.dims);
  test::expect_ok(test::call(k_cast, {x.view}, {y.view}, {}, nullptr), "cast");
  return y;
}

void test_cast_bf16() {
  // every bfloat16 to float32 (its bits, shifted) and float64, and back unchanged (NaNs: still NaN)
  Tensor h(planc::kBFloat16, {65536});
  uint16_t* hp = h.data<uint16_t>();
  for (int i = 0; i < 65536; i++) hp[i] = static_cast<uint16_t>(i);
  Tensor f = cast_to(planc::kFloat32, h), d = cast_to(planc::kFloat64, h);
  int64_t bad = 0;
  for (int i = 0; i < 65536; i++) {
    const uint32_t want = static_cast<uint32_t>(i) << 16;
    const bool nan = (want & 0x7fffffffu) > 0x7f800000u;
    const bool ok = nan ? (f.data<float>()[i] != f.data<float>()[i] && d.data<double>()[i] != d.data<double>()[i]) : (bits_of(f.data<float>()[i]) == want && d.data<double>()[i] == double(float_of(want)));
    if (!ok && bad++ == 0) std::printf("FAIL bf16 %04x → float32 %08x, float64 %.9g\n", i, bits_of(f.data<float>()[i]), d.data<double>()[i]);
  }
  CHECK_MSG(bad == 0, "bfloat16 → float32/float64: %lld wrong", (long long)bad);
  Tensor back = cast_to(planc::kBFloat16, f), back64 = cast_to(planc::kBFloat16, d);
  bad = 0;
  for (int i = 0; i < 65536; i++) {
    const uint16_t g = back.data<uint16_t>()[i], g64 = back64.data<uint16_t>()[i];
    const bool nan = (i & 0x7fff) > 0x7f80;
    const bool ok = nan ? ((g & 0x7fff) > 0x7f80 && (g & 0x0040) && (g & 0x8000) == (i & 0x8000) && (g64 & 0x7fff) > 0x7f80)
                        : (g == i && g64 == i);
    if (!ok && bad++ == 0) std::printf("FAIL bf16 %04x round trip: %04x (from float64 %04x)\n", i, g, g64);
  }
  CHECK_MSG(bad == 0, "bfloat16 round trips: %lld wrong", (long long)bad);

  // float32 → bfloat16: every finite bfloat16, its midpoint to the next and the floats either side, random floats,
  // and a sweep of float bit patterns; all against the reference (NaN: quiet, sign and upper payload kept)
  std::vector<float> fv;
  for (uint32_t b = 0; b < 0x7f80; b++) {
    const float lo = float_of(b << 16), hi = float_of((b + 1) << 16);
    const float mid = float_of((b << 16) | 0x8000);  // exactly halfway (9 significant bits)
    for (float s : {1.0f, -1.0f}) {
      fv.push_back(s * lo);
      fv.push_back(s * mid);
      fv.push_back(s * std::nextafter(mid, 0.0f));
      fv.push_back(s * std::nextafter(mid, hi));
    }
  }
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4099) fv.push_back(float_of(static_cast<uint32_t>(b)));
  for (float s : {1.0f, -1.0f}) {
    fv.push_back(s * FLT_MAX);
    fv.push_back(s * std::numeric_limits<float>::infinity());
    fv.push_back(s * FLT_MIN);
    fv.push_back(s * std::numeric_limits<float>::denorm_min());
  }
  fv.push_back(1.0f + 0x1p-8f);      // tie: to 1 (even)
  fv.push_back(1.0f + 3 * 0x1p-8f);  // tie: to 1 + 2^-6 (even)
  Tensor xf = test::f32({static_cast<int64_t>(fv.size())});
  std::copy(fv.begin(), fv.end(), xf.data<float>());
  Tensor yb = cast_to(planc::kBFloat16, xf), y16 = cast_to(planc::kFloat16, xf);
  bad = 0;
  int64_t bad16 = 0;
  for (size_t i = 0; i < fv.size(); i++) {
    const uint16_t g = yb.data<uint16_t>()[i];
    const uint32_t fb = bits_of(fv[i]);
    const bool nan = fv[i] != fv[i];
    const bool ok = nan ? g == static_cast<uint16_t>((fb >> 16) | 0x0040) : g == bf16_bits(fv[i]);
    if (!ok && bad++ < 3) std::printf("FAIL float32 %.9g (%08x) → bf16 %04x, want %04x\n", fv[i], fb, g, bf16_bits(fv[i]));
    const uint16_t g16 = y16.data<uint16_t>()[i];
    const bool ok16 = nan ? (g16 & 0x7fff) > 0x7c00 : g16 == f16_bits(fv[i]);
    if (!ok16 && bad16++ < 3) std::printf("FAIL float32 %.9g (%08x) → f16 %04x, want %04x\n", fv[i], fb, g16, f16_bits(fv[i]));
  }
  CHECK_MSG(bad == 0, "float32 → bfloat16: %lld of %zu wrong", (long long)bad, fv.size());
  CHECK_MSG(bad16 == 0, "float32 → float16: %lld of %zu wrong", (long long)bad16, fv.size());
  const uint16_t* ybp = yb.data<uint16_t>();
  const size_t n = fv.size();
  CHECK_MSG(ybp[n - 2] == 0x3f80 && ybp[n - 1] == 0x3f82, "bfloat16 ties: %04x %04x", ybp[n - 2], ybp[n - 1]);

  // float64 → bfloat16 rounds once: just above or below a midpoint (where float32 would round to the midpoint first)
  std::vector<double> dv;
  for (uint32_t b = 0; b < 0x7f80; b += 7) {
    const double mid = (bf16_value(static_cast<uint16_t>(b)) + bf16_value(static_cast<uint16_t>(b + 1))) / 2;
    for (double s : {1.0, -1.0}) {
      dv.push_back(s * mid);
      dv.push_back(s * std::nextafter(mid, 0.0));
      dv.push_back(s * std::nextafter(mid, 1e300));
    }
  }
  for (double e : {1e300, -1e300, 0x1.ffp127, 0x1.fefffffffffffp127, 1e-300, 0x1p-134, 0x1.0000000000001p-134, kInf})
    dv.push_back(e);
  Tensor xd(planc::kFloat64, {static_cast<int64_t>(dv.size())});
  std::copy(dv.begin(), dv.end(), xd.data<double>());
  Tensor yd = cast_to(planc::kBFloat16, xd);
  bad = 0;
  for (size_t i = 0; i < dv.size(); i++) {
    const uint16_t g = yd.data<uint16_t>()[i];
    if (g != bf16_bits(dv[i]) && bad++ < 3) std::printf("FAIL float64 %.17g → bf16 %04x, want %04x\n", dv[i], g, bf16_bits(dv[i]));
  }
  CHECK_MSG(bad == 0, "float64 → bfloat16: %lld of %zu wrong", (long long)bad, dv.size());

  // ints and bool to and from bfloat16, float16 ↔ bfloat16, fill and range
  Tensor xi = test::i64({6}, {0, 1, -3, 257, 1000001, -2147483648LL});
  Tensor bi = cast_to(planc::kBFloat16, xi), bi2 = cast_to(planc::kInt64, bi);
  const int64_t want_i[] = {0, 1, -3, 256, 999424, -2147483648LL};  // 257: tie to 256; 1000001 → 999424 (8 bits)
  bool ok = true;
  for (int i = 0; i < 6; i++) ok = ok && bi2.data<int64_t>()[i] == want_i[i];
  CHECK_MSG(ok, "int64 → bfloat16 → int64: %lld %lld %lld %lld %lld", (long long)bi2.data<int64_t>()[0], (long long)bi2.data<int64_t>()[1],
           (long long)bi2.data<int64_t>()[2], (long long)bi2.data<int64_t>()[3], (long long)bi2.data<int64_t>()[4]);
  Tensor h16(planc::kFloat16, {3});
  h16.data<uint16_t>()[0] = 0x3c01;  // 1 + 2^-10 → bf16 1
  h16.data<uint16_t>()[1] = 0x7c00;  // inf
  h16.data<uint16_t>()[2] = 0x0001;  // 2^-24
  Tensor hb = cast_to(planc::kBFloat16, h16);
  const uint16_t* hbp = hb.data<uint16_t>();
  CHECK_MSG(hbp[0] == 0x3f80 && hbp[1] == 0x7f80 && hbp[2] == 0x3380, "float16 → bfloat16: %04x %04x %04x", hbp[0], hbp[1], hbp[2]);
  Tensor big(planc::kBFloat16, {2});
  big.data<uint16_t>()[0] = 0x4780;  // 65536 → float16 inf
  big.data<uint16_t>()[1] = 0xff80;  // -inf
  Tensor bh = cast_to(planc::kFloat16, big);
  CHECK_MSG(bh.data<uint16_t>()[0] == 0x7c00 && bh.data<uint16_t>()[1] == 0xfc00,
           "bfloat16 → float16 overflow");
  Tensor fb(planc::kBFloat16, {3});
  test::expect_ok(test::call(k_fill, {}, {fb.view}, test::fill_call().value(0.1), nullptr), "fill bf16");
  CHECK_MSG(fb.data<uint16_t>()[2] == bf16_bits(0.1), "fill bf16 0.1: %04x", fb.data<uint16_t>()[2]);
  Tensor rb(planc::kBFloat16, {4});
  test::expect_ok(test::call(k_range, {}, {rb.view}, test::range_call().start(1.0).delta(0.5), nullptr), "range bf16");
  const uint16_t* rbp = rb.data<uint16_t>();
  CHECK_MSG(rbp[0] == 0x3f80 && rbp[1] == 0x3fc0 && rbp[2] == 0x4000 && rbp[3] == 0x4020, "range bf16: %04x %04x %04x %04x",
           rbp[0], rbp[1], rbp[2], rbp[3]);
}

// The run conversions of half.h (F16C where the CPU has it, else the bit loops) against the scalar ones and the
// references: every float16 and bfloat16 widened, a sweep of float32 bit patterns rounded.
void test_runs() {
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; i++) all[i] = static_cast<uint16_t>(i);
  std::vector<float> w16(65536), wbf(65536);
  planc::widen_run(planc::kFloat16, all.data(), 65536, w16.data());
  planc::widen_run(planc::kBFloat16, all.data(), 65536, wbf.data());
  int64_t bad = 0;
  for (int i = 0; i < 65536; i++) {
    const double want16 = f16_value(all[i]), wantbf = bf16_value(all[i]);
    const bool ok16 = want16 != want16 ? w16[i] != w16[i] && planc::half_to_float(all[i]) != planc::half_to_float(all[i])
                                       : w16[i] == want16 && planc::half_to_float(all[i]) == want16 &&
                                             std::signbit(w16[i]) == std::signbit(want16);
    const bool okbf = wantbf != wantbf ? wbf[i] != wbf[i] : bits_of(wbf[i]) == static_cast<uint32_t>(i) << 16;
    if (!(ok16 && okbf) && bad++ < 3) std::printf("FAIL widen %04x: float16 %.9g, bfloat16 %.9g\n", i, w16[i], wbf[i]);
  }
  CHECK_MSG(bad == 0, "widen_run / half_to_float: %lld wrong", (long long)bad);
  std::vector<float> xs;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 997) xs.push_back(float_of(static_cast<uint32_t>(b)));
  for (uint32_t b = 0; b < 0x7c00; b++) {  // every float16 midpoint and its neighbours
    const float mid = static_cast<float>((f16_value(static_cast<uint16_t>(b)) + f16_value(static_cast<uint16_t>(b + 1))) / 2);
    xs.push_back(mid);
    xs.push_back(-std::nextafter(mid, 0.0f));
    xs.push_back(std::nextafter(mid, 1e30f));
  }
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> r16(static_cast<size_t>(n)), rbf(static_cast<size_t>(n));
  planc::round_run(planc::kFloat16, xs.data(), n, r16.data());
  planc::round_run(planc::kBFloat16, xs.data(), n, rbf.data());
  bad = 0;
  for (int64_t i = 0; i < n; i++) {
    const float x = xs[i];
    if (x != x) {
      if (!(r16[i] != r16[i] && rbf[i] != rbf[i] && (planc::half_from_float(x) & 0x7fff) > 0x7c00) && bad++ < 3)
        std::printf("FAIL round NaN %08x\n", bits_of(x));
      continue;
    }
    const double want16 = f16_value(f16_bits(x)), wantbf = bf16_value(bf16_bits(x));
    const bool ok = r16[i] == want16 && std::signbit(r16[i]) == std::signbit(want16) && planc::half_from_float(x) == f16_bits(x) &&
                    rbf[i] == wantbf && std::signbit(rbf[i]) == std::signbit(wantbf);
    if (!ok && bad++ < 3)
      std::printf("FAIL round %.9g (%08x): float16 %.9g (scalar %04x) want %.9g, bfloat16 %.9g want %.9g\n", x, bits_of(x),
                  r16[i], planc::half_from_float(x), want16, rbf[i], wantbf);
  }
  CHECK_MSG(bad == 0, "round_run / half_from_float: %lld of %lld wrong", (long long)bad, (long long)n);
#ifdef PLANC_F16C
  std::printf("half_weights_test: float16 runs on F16C: %s\n", planc::f16c_available() ? "yes" : "no (bit loops)");
#endif
}

// ---- bench: the half paths against float32 (not part of the test run) ----

void bench(planc::ThreadPool* pool) {
  auto time = [](auto&& fn) {
    fn();
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
      const double t0 = test::now_ms();
      fn();
      best = std::min(best, test::now_ms() - t0);
    }
    return best;
  };
  planc::TensorView none;
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 512, 2048}, {8, 512, 2048}, {64, 512, 2048}, {256, 512, 512}, {1, 512, 32000}}) {
    Tensor a = test::f32({m, k}), w32 = test::f32({k, n}), y = test::f32({m, n});
    test::fill_random(a);
    test::fill_random(w32);
    Tensor w16 = random_half(planc::kFloat16, {k, n}), wbf = random_half(planc::kBFloat16, {k, n});
    const double t32 = time([&] {
      test::call(k_fused, {a.view, w32.view, none, none}, {y.view}, test::fused_matmul_call().activation(planc::kActNone), pool);
    });
    const double t16 = time([&] {
      test::call(k_fused, {a.view, w16.view, none, none}, {y.view}, test::fused_matmul_call().activation(planc::kActNone), pool);
    });
    const double tbf = time([&] {
      test::call(k_fused, {a.view, wbf.view, none, none}, {y.view}, test::fused_matmul_call().activation(planc::kActNone), pool);
    });
    std::printf("bench fused_matmul M %lld K %lld N %lld: float32 %.3f ms, float16 %.3f ms, bfloat16 %.3f ms\n", (long long)m,
                (long long)k, (long long)n, t32, t16, tbf);
  }
  for (auto [rows, tr] : {std::pair<int64_t, int>{1, 0}, {1, 1}, {5, 1}, {64, 1}}) {
    const int64_t d = 512, vv = 32000;
    Tensor x = test::f32({rows, d}), ov = test::f32({rows, 4}), oi(planc::kInt64, {rows, 4});
    test::fill_random(x);
    std::vector<int64_t> wd = tr ? std::vector<int64_t>{vv, d} : std::vector<int64_t>{d, vv};
    Tensor w32 = test::f32(wd);
    test::fill_random(w32, -0.1f, 0.1f);
    Tensor w16 = random_half(planc::kFloat16, wd, 0.1f), wbf = random_half(planc::kBFloat16, wd, 0.1f);
    auto run = [&](Tensor& w) {
      test::call(k_topk, {x.view, w.view, none, none}, {ov.view, oi.view}, test::project_topk_call().k(4).transposed(tr), pool);
    };
    const double t32 = time([&] { run(w32); }), t16 = time([&] { run(w16); }), tbf = time([&] { run(wbf); });
    std::printf("bench project_topk rows %lld W %s [%lld, %lld]: float32 %.3f ms, float16 %.3f ms, bfloat16 %.3f ms\n",
                (long long)rows, tr ? "transposed" : "", (long long)wd[0], (long long)wd[1], t32, t16, tbf);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const planc::KernelList gemm = planc::gemm_kernels(), topk = planc::project_topk_kernels(), cast = planc::cast_kernels();
  k_matmul = test::find_kernel({gemm}, "matmul");
  k_fused = test::find_kernel({gemm}, "fused_matmul");
  k_gemm = test::find_kernel({gemm}, "gemm");
  k_topk = test::find_kernel({topk}, "project_topk");
  k_topk_def = test::find_def({topk}, "project_topk");
  k_cast = test::find_kernel({cast}, "cast");
  k_fill = test::find_kernel({cast}, "fill");
  k_range = test::find_kernel({cast}, "range");
  const planc::VariantCheck unavailable = gemm.defs[0].variant_unavailable;
  for (int64_t code = 0; code < v::kVariantCount; code++) {
    if (!unavailable || !unavailable(code)) g_variants.push_back(code);
    else test::skip(std::string("gemm family variant ") + v::kVariantNames[code] + " on half weights", unavailable(code));
  }
  std::printf("half_weights_test: variants run here:");
  for (int64_t code : g_variants) std::printf(" %s", v::kVariantNames[code]);
  std::printf("\n");
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {  // timings only on request, never in the test run
    bench(&pool);
    return 0;
  }
  test_cast_bf16();
  test_runs();
  test_product_edges(&pool);
  test_products(&pool);
  test_project_topk(&pool);
  return test::finish("half_weights_test");
}
