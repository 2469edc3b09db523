// Standalone test of the gemm family (matmul, gemm, fused_matmul) against a float64 reference on every variant this
// machine runs (KernelArgs::variant); `bench` and `gflops` time the variants.
// Build: g++ -O3 -march=x86-64-v2 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc
//   native/src/kernel_schema.cc native/src/cpu/isa.cc native/src/threadpool.cc native/src/cpu/gemm.cc
//   native/src/cpu/gemm_avx512.cc native/test/gemm_test.cc [-DPLANC_HAVE_OPENBLAS
//   -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas] -o /tmp/gemm_test
// Run: /tmp/gemm_test [bench | gflops]
#include <algorithm>
#include <cstdlib>
#include <thread>
#include <utility>

#include "cpu/gemm_avx512.h"
#include "test_util.h"

#ifdef PLANC_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace planc {
KernelList gemm_kernels();
}  // namespace planc

using test::Tensor;
using test::f32;

namespace {

namespace v = planc::matmul_args;  // the variant codes matmul, gemm and fused_matmul share

planc::KernelFn k_matmul, k_gemm, k_fused;
planc::VariantCheck g_unavailable = nullptr;  // the family's KernelDef::variant_unavailable
std::vector<int64_t> g_variants;               // the variants this machine runs, auto first

// Whether this machine runs variant `code` (as program_new decides).
bool runs(int64_t code) { return g_unavailable == nullptr || g_unavailable(code) == nullptr; }

// test::call with the call's variant.
const char* call(int64_t variant, planc::KernelFn fn, std::vector<planc::TensorView> in, std::vector<planc::TensorView> out,
                 const kernel_call::Args& args = {}, planc::ThreadPool* pool = nullptr) {
  return test::call(fn, std::move(in), std::move(out), args, pool, variant);
}

// Naive batched matmul in double with numpy broadcasting of the batch dims (ranks >= 2); scale (when given) gets
// sum |a| |b| per output element, the size of float32's rounding error bound.
std::vector<double> ref_matmul(const Tensor& a, const Tensor& b, const std::vector<int64_t>& ydims,
                               std::vector<double>* scale = nullptr) {
  int ra = a.dims.size(), rb = b.dims.size(), ry = ydims.size();
  int64_t m = a.dims[ra - 2], k = a.dims[ra - 1], n = b.dims[rb - 1];
  int64_t nb = 1;
  for (int d = 0; d < ry - 2; d++) nb *= ydims[d];
  std::vector<double> y(nb * m * n, 0.0);
  if (scale) scale->assign(nb * m * n, 0.0);
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  for (int64_t t = 0; t < nb; t++) {
    int64_t rem = t, ao = 0, bo = 0, as = m * k, bs = k * n;
    for (int d = ry - 3; d >= 0; d--) {
      int64_t c = rem % ydims[d];
      rem /= ydims[d];
      int ai = ra - 2 - (ry - 2 - d), bi = rb - 2 - (ry - 2 - d);
      int64_t ad = ai >= 0 ? a.dims[ai] : 1, bd = bi >= 0 ? b.dims[bi] : 1;
      if (ad != 1) ao += c * as;
      if (bd != 1) bo += c * bs;
      as *= ad;
      bs *= bd;
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0, sa = 0;
        for (int64_t p = 0; p < k; p++) {
          double x = (double)ap[ao + i * k + p] * bp[bo + p * n + j];
          s += x;
          sa += std::fabs(x);
        }
        y[t * m * n + i * n + j] = s;
        if (scale) (*scale)[t * m * n + i * n + j] = sa;
      }
  }
  return y;
}

void check_matmul(std::vector<int64_t> ad, std::vector<int64_t> bd, std::vector<int64_t> yd, planc::ThreadPool* pool) {
  Tensor a = f32(ad), b = f32(bd);
  test::fill_random(a);
  test::fill_random(b);
  std::vector<double> want = ref_matmul(a, b, yd);
  for (int64_t variant : g_variants) {
    Tensor y = f32(yd);
    test::fill_random(y, 1e6f, 1e7f);  // garbage that must be overwritten
    const char* err = call(variant, k_matmul, {a.view, b.view}, {y.view}, {}, pool);
    char what[160];
    std::snprintf(what, sizeof what, "matmul A[%lld..%lld] B[..%lld] variant %s rank %zu", (long long)ad[0],
                  (long long)ad.back(), (long long)bd.back(), v::kVariantNames[variant], yd.size());
    test::expect_ok(err, what);
    if (!err) test::close(y.data<float>(), want.data(), y.numel(), 1e-4, 1e-5, what);
  }
}

// Gemm reference: alpha op(A) op(B) + beta C (C broadcast), in double.
// Random A [m,k] (or [k,m] when ta), B [k,n] (or [n,k] when tb) and C of dims cdims: a gemm check's operands.
struct GemmOperands {
  Tensor a, b, c;
};
GemmOperands random_operands(int64_t m, int64_t n, int64_t k, bool ta, bool tb, const std::vector<int64_t>& cdims) {
  GemmOperands o{f32(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}),
                 f32(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}), f32(cdims)};
  test::fill_random(o.a);
  test::fill_random(o.b);
  test::fill_random(o.c);
  return o;
}

void check_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb_, float alpha, float beta,
                std::vector<int64_t> cdims, bool has_c, planc::ThreadPool* pool) {
  auto [a, b, c] = random_operands(m, n, k, ta, tb_, cdims);
  int64_t cm = cdims.size() == 2 ? cdims[0] : 1, cn = cdims.empty() ? 1 : cdims.back();
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double s = 0;
      for (int64_t p = 0; p < k; p++) {
        double av = ta ? a.data<float>()[p * m + i] : a.data<float>()[i * k + p];
        double bv = tb_ ? b.data<float>()[j * k + p] : b.data<float>()[p * n + j];
        s += av * bv;
      }
      s *= alpha;
      if (has_c && beta != 0) s += beta * (double)c.data<float>()[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
      want[i * n + j] = s;
    }
  for (int64_t variant : g_variants) {
    Tensor y = f32({m, n});
    test::fill_random(y, 1e6f, 1e7f);
    std::vector<planc::TensorView> in = {a.view, b.view};
    if (has_c) in.push_back(c.view);
    const char* err =
        call(variant, k_gemm, in, {y.view}, test::gemm_call().trans_a(ta).trans_b(tb_).alpha(alpha).beta(beta), pool);
    char what[160];
    std::snprintf(what, sizeof what, "gemm %lldx%lldx%lld tA%d tB%d a%g b%g C rank %zu variant %s", (long long)m,
                  (long long)n, (long long)k, ta, tb_, alpha, beta, cdims.size(), v::kVariantNames[variant]);
    test::expect_ok(err, what);
    if (!err) test::close(y.data<float>(), want.data(), y.numel(), 1e-4, 1e-5, what);
  }
}

void hand_computed() {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  for (int64_t variant : g_variants) {
    Tensor y = f32({2, 2});
    test::expect_ok(call(variant, k_matmul, {a.view, b.view}, {y.view}), "hand matmul");
    double want[] = {58, 64, 139, 154};
    test::close(y.data<float>(), want, 4, 0, 1e-6, "hand matmul values");
    // Gemm with transA (A^T is [3,2] x ... ): A^T [3,2] x A [2,3]? use B^T: [2,3] x [2,3]^T = [2,2]
    Tensor c = f32({2}, {1, -1});
    Tensor y2 = f32({2, 2});
    test::expect_ok(
        call(variant, k_gemm, {a.view, a.view, c.view}, {y2.view}, test::gemm_call().trans_a(0).trans_b(1).alpha(2.0).beta(0.5)),
        "hand gemm");
    double want2[] = {2 * 14 + 0.5, 2 * 32 - 0.5, 2 * 32 + 0.5, 2 * 77 - 0.5};
    test::close(y2.data<float>(), want2, 4, 0, 1e-5, "hand gemm values");
  }
}

void errors() {
  Tensor a = f32({2, 3}), b = f32({4, 2}), y = f32({2, 2});
  test::expect_error(test::call(k_matmul, {a.view, b.view}, {y.view}, {}, nullptr), "inner dims differ", "matmul inner");
  Tensor b2 = f32({3, 2}), y3 = f32({2, 3});
  test::expect_error(test::call(k_matmul, {a.view, b2.view}, {y3.view}, {}, nullptr), "Y is", "matmul Y dims");
  Tensor ai = Tensor(planc::kInt32, {2, 3});
  test::expect_error(test::call(k_matmul, {ai.view, b2.view}, {y.view}, {}, nullptr), "float32 only", "matmul dtype");
  Tensor a1 = f32({3});
  test::expect_error(test::call(k_matmul, {a1.view, b2.view}, {y.view}, {}, nullptr), "rank >= 2", "matmul rank 1");
  Tensor ab = f32({2, 2, 3}), bb = f32({3, 3, 2}), yb = f32({3, 2, 2});
  test::expect_error(test::call(k_matmul, {ab.view, bb.view}, {yb.view}, {}, nullptr), "batch dim 0", "matmul batch");
  Tensor yr = f32({1, 2, 2});
  test::expect_error(test::call(k_matmul, {a.view, b2.view}, {yr.view}, {}, nullptr), "Y rank", "matmul Y rank");
  Tensor c = f32({3, 2});
  test::expect_error(test::call(k_gemm, {a.view, b2.view, c.view}, {y.view},
                                test::gemm_call().trans_a(0).trans_b(0).alpha(1.0).beta(1.0), nullptr),
                     "does not broadcast", "gemm C");
  test::expect_error(
      test::call(k_gemm, {a.view, b2.view}, {y.view}, test::gemm_call().trans_a(1).trans_b(0).alpha(1.0).beta(1.0), nullptr),
      "inner dims differ", "gemm trans");
  // positional on purpose: one iarg short
  test::expect_error(test::call_positional(k_gemm, {a.view, b2.view}, {y.view}, {0}, {1.0, 1.0}, nullptr), "needs", "gemm iargs");
  // beta 0 ignores a mismatched C? No: C is ignored entirely when beta is 0 (as the reference does).
  test::expect_ok(test::call(k_gemm, {a.view, b2.view, c.view}, {y.view},
                             test::gemm_call().trans_a(0).trans_b(0).alpha(1.0).beta(0.0), nullptr),
                  "gemm beta 0 ignores C");
  // Variant codes: outside the list, or one this machine cannot run, are errors (never a silent fallback).
  test::expect_error(call(v::kVariantCount, k_matmul, {a.view, b2.view}, {y.view}), "matmul: unknown variant code 5", "matmul variant 5");
  test::expect_error(call(-1, k_gemm, {a.view, b2.view}, {y.view}, test::gemm_call().trans_a(0).trans_b(0).alpha(1.0).beta(0.0)),
                     "gemm: unknown variant code -1", "gemm variant -1");
  Tensor bias = f32({2});
  test::expect_error(
      call(7, k_fused, {a.view, b2.view, bias.view, {}}, {y.view}, test::fused_matmul_call().activation(planc::kActNone)),
      "fused_matmul: unknown variant code 7", "fused variant 7");
  for (int64_t code = 0; code < v::kVariantCount; code++) {
    if (runs(code)) continue;
    test::expect_error(call(code, k_matmul, {a.view, b2.view}, {y.view}), "cannot run here", v::kVariantNames[code]);
  }
}

// fused_matmul on every variant: act(A x W + bias) + residual against the float64 reference (M 1, 2, 5, 40).
void fused_variants(planc::ThreadPool* pool) {
  for (int64_t m : {1, 2, 5, 40}) {
    Tensor a = f32({m, 48}), w = f32({48, 70}), bias = f32({70}), res = f32({m, 70});
    test::fill_random(a);
    test::fill_random(w);
    test::fill_random(bias);
    test::fill_random(res);
    std::vector<double> want = ref_matmul(a, w, {m, 70});
    for (int64_t i = 0; i < m * 70; i++) want[i] = std::max(0.0, want[i] + bias.data<float>()[i % 70]) + res.data<float>()[i];
    for (int64_t variant : g_variants) {
      Tensor y = f32({m, 70});
      test::fill_random(y, 1e6f, 1e7f);
      const char* err = call(variant, k_fused, {a.view, w.view, bias.view, res.view}, {y.view},
                             test::fused_matmul_call().activation(planc::kActRelu), pool);
      char what[96];
      std::snprintf(what, sizeof what, "fused_matmul relu M%lld variant %s", (long long)m, v::kVariantNames[variant]);
      test::expect_ok(err, what);
      if (!err) test::close(y.data<float>(), want.data(), y.numel(), 1e-4, 1e-5, what);
    }
  }
}

void special_values() {
  // K = 0: zeros; M = 0: nothing to do.
  Tensor a = f32({3, 0}), b = f32({0, 4}), y = f32({3, 4});
  test::fill_random(y);
  test::expect_ok(test::call(k_matmul, {a.view, b.view}, {y.view}, {}, nullptr), "matmul K=0");
  std::vector<double> zeros(12, 0.0);
  test::close(y.data<float>(), zeros.data(), 12, 0, 0, "matmul K=0 zeros");
  Tensor a0 = f32({0, 5}), b0 = f32({5, 4}), y0 = f32({0, 4});
  test::expect_ok(test::call(k_matmul, {a0.view, b0.view}, {y0.view}, {}, nullptr), "matmul M=0");
  Tensor ab = f32({0, 2, 5}), yb = f32({0, 2, 4});
  test::expect_ok(test::call(k_matmul, {ab.view, b0.view}, {yb.view}, {}, nullptr), "matmul batch 0");
}

// ---------- random shapes against the float64 reference ----------

const int64_t kSizes[] = {1, 3, 7, 16, 17, 31, 33, 100, 257, 512, 1000};

// Checks |got - want| <= 1e-4 |want| + 1e-6 scale elementwise (scale: sum |a| |b|, see ref_matmul).
void close_scaled(const float* got, const std::vector<double>& want, const std::vector<double>& scale, const char* what) {
  test::g_checks++;
  for (size_t i = 0; i < want.size(); i++) {
    double err = std::fabs((double)got[i] - want[i]);
    if (!(err <= 1e-4 * std::fabs(want[i]) + 1e-6 * scale[i] + 1e-30)) {
      test::g_failures++;
      std::printf("FAIL %s: element %zu got %.9g want %.9g (scale %.3g)\n", what, i, (double)got[i], want[i], scale[i]);
      return;
    }
  }
}

int64_t pick_size(std::mt19937& g, int64_t limit = 1000) {
  int64_t v;
  do v = kSizes[g() % (sizeof kSizes / sizeof kSizes[0])];
  while (v > limit);
  return v;
}

// One gemm on random data against the float64 reference (op(A), op(B) copied to plain layouts), on every path.
void scaled_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tbb, float alpha, float beta,
                 const std::vector<int64_t>& cd, planc::ThreadPool* pool) {
  auto [a, b, cc] = random_operands(m, n, k, ta, tbb, cd);
  Tensor an = f32({m, k}), bn = f32({k, n});
  for (int64_t i = 0; i < m; i++)
    for (int64_t p = 0; p < k; p++) an.data<float>()[i * k + p] = ta ? a.data<float>()[p * m + i] : a.data<float>()[i * k + p];
  for (int64_t p = 0; p < k; p++)
    for (int64_t j = 0; j < n; j++) bn.data<float>()[p * n + j] = tbb ? b.data<float>()[j * k + p] : b.data<float>()[p * n + j];
  std::vector<double> scale;
  std::vector<double> want = ref_matmul(an, bn, {m, n}, &scale);
  const int64_t cm = cd.size() == 2 ? cd[0] : 1, cn = cd.empty() ? 1 : cd.back();
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double& w = want[i * n + j];
      w *= alpha;
      scale[i * n + j] *= std::fabs(alpha);
      if (beta != 0) {
        double cv = beta * (double)cc.data<float>()[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
        w += cv;
        scale[i * n + j] += std::fabs(cv);
      }
    }
  for (int64_t variant : g_variants) {
    Tensor y = f32({m, n});
    test::fill_random(y, 1e6f, 1e7f);
    const char* err = call(variant, k_gemm, {a.view, b.view, cc.view}, {y.view},
                           test::gemm_call().trans_a(ta).trans_b(tbb).alpha(alpha).beta(beta), pool);
    char what[160];
    std::snprintf(what, sizeof what, "scaled gemm M%lld N%lld K%lld tA%d tB%d a%g b%g C rank %zu variant %s",
                  (long long)m, (long long)n, (long long)k, ta, tbb, alpha, beta, cd.size(), v::kVariantNames[variant]);
    test::expect_ok(err, what);
    if (!err) close_scaled(y.data<float>(), want, scale, what);
  }
}

// Gemm on random shapes from kSizes, every transpose combination, alpha/beta, C broadcast shapes.
void random_gemm(planc::ThreadPool* pool, int cases) {
  std::mt19937 g(2024);
  const float alphas[] = {1.0f, 0.5f, -2.0f}, betas[] = {0.0f, 1.0f, 0.25f};
  for (int c = 0; c < cases; c++) {
    int64_t m, n, k;
    do {
      m = pick_size(g), n = pick_size(g), k = pick_size(g);
    } while (m * n * k > 4e7);
    const bool ta = g() % 2, tbb = g() % 2;
    const float alpha = alphas[g() % 3], beta = betas[g() % 3];
    const std::vector<int64_t> cshapes[] = {{}, {n}, {m, 1}, {1, n}, {m, n}};
    scaled_gemm(m, n, k, ta, tbb, alpha, beta, cshapes[g() % 5], pool);
  }
}

// Matmul on random shapes from kSizes with 0-2 random batch dims (each broadcast or not on either side).
void random_matmul(planc::ThreadPool* pool, int cases) {
  std::mt19937 g(99);
  for (int c = 0; c < cases; c++) {
    const int extra = g() % 3;
    std::vector<int64_t> ad, bd, yd;
    int64_t batch = 1;
    for (int d = 0; d < extra; d++) {
      const int64_t y = 1 + g() % 3, da = g() % 3 == 0 ? 1 : y, db = g() % 3 == 0 ? 1 : y;
      ad.push_back(da);
      bd.push_back(db);
      yd.push_back(std::max(da, db));
      batch *= yd.back();
    }
    if (extra > 0 && g() % 2) {  // B of lower rank: Y's leading batch dim is A's
      bd.erase(bd.begin());
      batch = batch / yd[0] * ad[0];
      yd[0] = ad[0];
    }
    int64_t m, n, k;
    do {
      m = pick_size(g), n = pick_size(g), k = pick_size(g);
    } while (batch * m * n * k > 2e7);
    ad.push_back(m), ad.push_back(k);
    bd.push_back(k), bd.push_back(n);
    yd.push_back(m), yd.push_back(n);
    Tensor a = f32(ad), b = f32(bd);
    test::fill_random(a);
    test::fill_random(b);
    std::vector<double> scale;
    std::vector<double> want = ref_matmul(a, b, yd, &scale);
    for (int64_t variant : g_variants) {
      Tensor y = f32(yd);
      test::fill_random(y, 1e6f, 1e7f);
      const char* err = call(variant, k_matmul, {a.view, b.view}, {y.view}, {}, pool);
      char what[160];
      std::snprintf(what, sizeof what, "random matmul batch %lld (rank %zu/%zu) M%lld N%lld K%lld variant %s",
                    (long long)batch, ad.size(), bd.size(), (long long)m, (long long)n, (long long)k, v::kVariantNames[variant]);
      test::expect_ok(err, what);
      if (!err) close_scaled(y.data<float>(), want, scale, what);
    }
  }
}

// Products that cross the AVX-512 path's K blocks and row chunks (packed A is capped at 2^21 floats per chunk).
void large_products(planc::ThreadPool* pool) {
  const int64_t shapes[][3] = {{600, 4096, 17}, {30, 769, 1025}, {515, 300, 65}};
  for (auto& s : shapes) {
    for (int t = 0; t < 4; t++) scaled_gemm(s[0], s[2], s[1], t & 1, t >> 1, 1.0f, 1.0f, {s[2]}, pool);
  }
}

void run_tests(planc::ThreadPool* pool) {
  hand_computed();
  errors();
  special_values();
  fused_variants(pool);
  // 2-D shapes, odd sizes, both small-M and large.
  int64_t ms[] = {1, 2, 4, 7, 16, 17, 33, 100};
  for (int64_t m : ms) {
    check_matmul({m, 37}, {37, 53}, {m, 53}, pool);
    check_matmul({m, 256}, {256, 1000}, {m, 1000}, pool);
  }
  check_matmul({300, 300}, {300, 301}, {300, 301}, pool);
  check_matmul({5, 1}, {1, 9}, {5, 9}, pool);
  check_matmul({1, 1}, {1, 1}, {1, 1}, pool);
  // Batch folding (shared 2-D weight), broadcast batches, batched B.
  check_matmul({2, 3, 5, 64}, {64, 70}, {2, 3, 5, 70}, pool);
  check_matmul({4, 1, 64}, {1, 64, 33}, {4, 1, 33}, pool);
  check_matmul({2, 1, 5, 8}, {3, 8, 6}, {2, 3, 5, 6}, pool);
  check_matmul({7, 9}, {4, 9, 11}, {4, 7, 11}, pool);
  check_matmul({8, 1, 64}, {8, 64, 40}, {8, 1, 40}, pool);
  check_matmul({16, 20, 64}, {16, 64, 20}, {16, 20, 20}, pool);
  check_matmul({2, 8, 30, 30}, {2, 8, 30, 64}, {2, 8, 30, 64}, pool);
  check_matmul({3, 1, 1, 2, 4}, {1, 2, 1, 4, 3}, {3, 2, 1, 2, 3}, pool);
  // Gemm: every transpose combination, alpha/beta, C shapes.
  for (int ta = 0; ta < 2; ta++)
    for (int tbb = 0; tbb < 2; tbb++) {
      check_gemm(3, 5, 7, ta, tbb, 1.0f, 1.0f, {5}, true, pool);
      check_gemm(1, 200, 64, ta, tbb, 0.5f, 2.0f, {1, 200}, true, pool);
      check_gemm(16, 70, 130, ta, tbb, 1.0f, 1.0f, {16, 1}, true, pool);
      check_gemm(40, 90, 300, ta, tbb, -1.5f, 0.25f, {40, 90}, true, pool);
      check_gemm(20, 30, 10, ta, tbb, 1.0f, 1.0f, {}, true, pool);
      check_gemm(9, 10, 11, ta, tbb, 2.0f, 0.0f, {9, 10}, true, pool);
      check_gemm(9, 10, 11, ta, tbb, 1.0f, 1.0f, {9, 10}, false, pool);
    }
  random_gemm(pool, 150);
  random_matmul(pool, 100);
  large_products(pool);
}

// ---------- benchmark ----------

double time_ms(const std::function<void()>& f, int min_reps = 5) {
  f();
  double best = 1e30;
  double start = test::now_ms();
  for (int r = 0; r < min_reps || test::now_ms() - start < 300; r++) {
    double t0 = test::now_ms();
    f();
    best = std::min(best, test::now_ms() - t0);
    if (r > 1000) break;
  }
  return best;
}

// One timed call in ms.
double once(const std::function<void()>& f) {
  double t0 = test::now_ms();
  f();
  return test::now_ms() - t0;
}

// Best time of each variant over interleaved rounds (the machine may be shared: the minimum is the signal).
std::vector<double> best_of(const std::vector<std::function<void()>>& variants, int rounds) {
  std::vector<double> best(variants.size(), 1e30);
  for (auto& v : variants) v();
  for (int r = 0; r < rounds; r++)
    for (size_t i = 0; i < variants.size(); i++) best[i] = std::min(best[i], once(variants[i]));
  return best;
}

void bench(planc::ThreadPool* pool) {
  int64_t shapes[][2] = {{256, 32000}, {256, 256}, {256, 1024}, {512, 58101}, {512, 512}};
  int64_t ms[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
  const char* names[] = {"GEMV", "GEMV nt", "BLAS", "BLAS nt", "AVX-512", "AVX-512 nt", "built-in blocked", "auto", "auto nt"};
  std::printf("| M | K | N |");
  for (auto* n : names) std::printf(" %s ms |", n);
  std::printf("\n| --- | --- | --- |");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) std::printf(" --- |");
  std::printf("\n");
  for (auto& s : shapes) {
    int64_t k = s[0], n = s[1];
    Tensor b = f32({k, n}), bt = f32({n, k});
    test::fill_random(b);
    test::fill_random(bt);
    for (int64_t m : ms) {
      Tensor a = f32({m, k}), y = f32({m, n});
      test::fill_random(a);
      auto nn = [&](int64_t variant) {
        return [&, variant] { call(variant, k_matmul, {a.view, b.view}, {y.view}, {}, pool); };
      };
      auto nt = [&](int64_t variant) {
        return [&, variant] {
          call(variant, k_gemm, {a.view, bt.view}, {y.view}, test::gemm_call().trans_a(0).trans_b(1).alpha(1.0).beta(0.0), pool);
        };
      };
      const int64_t order[] = {v::kVariantGemv, v::kVariantGemv, v::kVariantBlas, v::kVariantBlas, v::kVariantAvx512,
                               v::kVariantAvx512, v::kVariantBlocked, v::kVariantAuto, v::kVariantAuto};
      std::vector<std::function<void()>> fns = {nn(order[0]), nt(order[1]), nn(order[2]), nt(order[3]), nn(order[4]),
                                                nt(order[5]), nn(order[6]), nn(order[7]), nt(order[8])};
      int rounds = k * n > 1000000 ? 15 : 300;
      std::vector<double> r = best_of(fns, rounds);
      std::printf("| %lld | %lld | %lld |", (long long)m, (long long)k, (long long)n);
      for (size_t i = 0; i < r.size(); i++) {
        if (runs(order[i])) std::printf(" %.4f |", r[i]);
        else std::printf(" - |");
      }
      std::printf("\n");
    }
  }
  // Large GEMMs: built-in vs BLAS vs AVX-512.
  int64_t big[][3] = {{256, 512, 512}, {512, 512, 2048}, {1024, 1024, 1024}, {64, 512, 58101}};
  std::printf("\n| M | K | N | built-in ms | GFLOP/s | BLAS ms | GFLOP/s | AVX-512 ms | GFLOP/s |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto& s : big) {
    int64_t m = s[0], k = s[1], n = s[2];
    Tensor a = f32({m, k}), b = f32({k, n}), y = f32({m, n});
    test::fill_random(a);
    test::fill_random(b);
    double t[3] = {-1, -1, -1};
    const int64_t variants[3] = {v::kVariantBlocked, v::kVariantBlas, v::kVariantAvx512};
    for (int i = 0; i < 3; i++) {
      if (!runs(variants[i])) continue;
      t[i] = time_ms([&] { call(variants[i], k_matmul, {a.view, b.view}, {y.view}, {}, pool); }, 3);
    }
    double gf = 2.0 * m * n * k / 1e6;
    std::printf("| %lld | %lld | %lld |", (long long)m, (long long)k, (long long)n);
    for (double ti : t) std::printf(" %.2f | %.1f |", ti, ti > 0 ? gf / ti : 0.0);
    std::printf("\n");
  }
  // Attention-like batched products.
  std::printf("\n| batched | auto ms | BLAS ms | AVX-512 ms |\n| --- | --- | --- | --- |\n");
  struct Case { std::vector<int64_t> a, b, y; const char* name; } cases[] = {
      {{40, 1, 64}, {40, 64, 50}, {40, 1, 50}, "decode QK [40,1,64]x[40,64,50]"},
      {{40, 1, 50}, {40, 50, 64}, {40, 1, 64}, "decode AV [40,1,50]x[40,50,64]"},
      {{8, 50, 64}, {8, 64, 50}, {8, 50, 50}, "prefill QK [8,50,64]x[8,64,50]"},
      {{128, 32, 64}, {128, 64, 32}, {128, 32, 32}, "encoder QK [128,32,64]x[128,64,32]"},
      {{128, 32, 32}, {128, 32, 64}, {128, 32, 64}, "encoder AV [128,32,32]x[128,32,64]"},
  };
  for (auto& c : cases) {
    Tensor a = f32(c.a), b = f32(c.b), y = f32(c.y);
    test::fill_random(a);
    test::fill_random(b);
    auto run = [&](int64_t variant) {
      return [&, variant] { call(variant, k_matmul, {a.view, b.view}, {y.view}, {}, pool); };
    };
    std::vector<double> t = best_of({run(v::kVariantAuto), run(v::kVariantBlas), run(v::kVariantAvx512)}, 500);
    std::printf("| %s | %.4f | %.4f | %.4f |\n", c.name, t[0], runs(v::kVariantBlas) ? t[1] : -1.0,
                runs(v::kVariantAvx512) ? t[2] : -1.0);
  }
}

// GFLOP/s of the AVX-512 path against cblas_sgemm (OpenBLAS's own threads, and split over the pool as planc calls it)
// on the encoder shapes; row "nt" is B stored [N, K] (Gemm transB=1). Interleaved rounds, best time of each.
void gflops(planc::ThreadPool* pool) {
  const int64_t shapes[][3] = {{512, 256, 1024}, {512, 1024, 256}, {512, 256, 256}, {32, 512, 512},
                               {512, 512, 2048}, {512, 2048, 512}, {16, 512, 58101}};
  const int threads = pool->threads();
  std::printf("%d threads; OPENBLAS_CORETYPE=%s\n", threads, std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "");
  std::printf("| M | K | N | B | cblas_sgemm GF/s | BLAS in pool GF/s | AVX-512 GF/s | GEMV GF/s | auto GF/s | AVX-512 / best BLAS |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (auto& s : shapes) {
    for (int nt = 0; nt < 2; nt++) {
      const int64_t m = s[0], k = s[1], n = s[2];
      Tensor a = f32({m, k}), b = f32(nt ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}), y = f32({m, n});
      test::fill_random(a);
      test::fill_random(b);
      auto via = [&](int64_t variant) {
        return [&, variant] {
          call(variant, k_gemm, {a.view, b.view}, {y.view}, test::gemm_call().trans_a(0).trans_b(nt).alpha(1.0).beta(0.0), pool);
        };
      };
      std::vector<std::function<void()>> fns = {via(v::kVariantBlas), via(v::kVariantAvx512), via(v::kVariantGemv),
                                                via(v::kVariantAuto)};
      const double gf = 2.0 * m * n * k / 1e6;
      std::vector<double> t = best_of(fns, gf > 500 ? 30 : 200);
      // OpenBLAS's own threads spin for a while after a call: time them last, then let them go to sleep.
      double raw = 1e30;
#ifdef PLANC_HAVE_OPENBLAS
      openblas_set_num_threads(threads);
      auto blas = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, nt ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a.data<float>(),
                    (int)k, b.data<float>(), nt ? (int)k : (int)n, 0.0f, y.data<float>(), (int)n);
      };
      raw = best_of({blas}, gf > 500 ? 30 : 200)[0];
      openblas_set_num_threads(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
#endif
      t.insert(t.begin(), raw);
      std::printf("| %lld | %lld | %lld | %s |", (long long)m, (long long)k, (long long)n, nt ? "[N,K]" : "[K,N]");
      for (size_t i = 0; i < t.size(); i++) {
        if (i == 3 && m > 16) std::printf(" - |");
        else std::printf(" %.1f |", gf / t[i]);
      }
      std::printf(" %.2fx |\n", std::min(t[0], t[1]) / t[2]);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const planc::KernelList family = planc::gemm_kernels();
  k_matmul = test::find_kernel({family}, "matmul");
  k_gemm = test::find_kernel({family}, "gemm");
  k_fused = test::find_kernel({family}, "fused_matmul");
  if (!k_matmul || !k_gemm || !k_fused) return 1;
  g_unavailable = family.defs[0].variant_unavailable;
  for (size_t i = 0; i < family.count; i++) {
    if (family.defs[i].variant_unavailable != g_unavailable) {
      std::printf("FAIL: matmul, gemm and fused_matmul check their variants differently\n");
      return 1;
    }
  }
  for (int64_t code = 0; code < v::kVariantCount; code++) {
    if (runs(code)) g_variants.push_back(code);
    else test::skip(std::string("gemm family variant ") + v::kVariantNames[code], g_unavailable(code));
  }
  std::printf("gemm_test: variants run here:");
  for (int64_t code : g_variants) std::printf(" %s", v::kVariantNames[code]);
  std::printf("\n");
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    bench(&pool);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "gflops") {
    gflops(&pool);
    return 0;
  }
  run_tests(nullptr);
  run_tests(&pool);
  return test::finish("gemm_test");
}
