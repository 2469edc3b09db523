// Standalone test of project_topk (fused logits + log-softmax + top-k) against a float64 reference; `bench` times it.
// Build: g++ -O3 -march=x86-64-v2 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc native/src/threadpool.cc native/src/cpu/gemm.cc native/src/cpu/gemm_avx512.cc native/src/cpu/project_topk.cc native/test/project_topk_test.cc [-DPLANC_HAVE_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas] -o /tmp/project_topk_test && /tmp/project_topk_test [bench]
#include <algorithm>
#include <limits>
#include <numeric>

#include "test_util.h"

namespace planc {
KernelList project_topk_kernels();
KernelList gemm_kernels();
}  // namespace planc

using namespace test;

namespace {

KernelFn k_topk, k_fused_matmul;
const double kInf = std::numeric_limits<double>::infinity();

struct Case {
  std::vector<int64_t> xdims;  // [..., D]
  int64_t v, k;
  bool transposed, bias, threaded;
};

// Reference: logits in float64 from the float inputs, log-softmax, the k best (value desc, lower id first).
void reference(const Tensor& x, const Tensor& w, const Tensor* b, int64_t rows, int64_t d, int64_t v, int64_t k, bool tr,
               std::vector<double>& logp, std::vector<double>& vals, std::vector<int64_t>& ids) {
  logp.assign(rows * v, 0);
  vals.assign(rows * k, 0);
  ids.assign(rows * k, 0);
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  for (int64_t r = 0; r < rows; r++) {
    double* l = logp.data() + r * v;
    double m = -kInf;
    for (int64_t j = 0; j < v; j++) {
      double s = b ? b->at<float>(j) : 0.0;
      for (int64_t p = 0; p < d; p++) s += double(xp[r * d + p]) * double(tr ? wp[j * d + p] : wp[p * v + j]);
      l[j] = s;
      m = std::max(m, s);
    }
    double sum = 0;
    for (int64_t j = 0; j < v; j++) sum += std::exp(l[j] - m);
    const double lse = m + std::log(sum);
    for (int64_t j = 0; j < v; j++) l[j] -= lse;
    std::vector<int64_t> order(v);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return l[a] > l[c]; });
    for (int64_t t = 0; t < k; t++) {
      vals[r * k + t] = l[order[t]];
      ids[r * k + t] = order[t];
    }
  }
}

// Runs one case on random data; values within 1e-5 (absolute, scaled for -inf-free rows), ids equal except at near-ties.
void run_case(const Case& c, Rng& rng) {
  const int64_t d = c.xdims.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < c.xdims.size(); i++) rows *= c.xdims[i];
  Tensor x(kFloat32, c.xdims);
  Tensor w(kFloat32, c.transposed ? std::vector<int64_t>{c.v, d} : std::vector<int64_t>{d, c.v});
  Tensor b(kFloat32, {c.v});
  for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = float(rng.uniform(-1, 1));
  for (int64_t i = 0; i < w.numel(); i++) w.data<float>()[i] = float(rng.uniform(-1, 1) / std::sqrt(double(std::max<int64_t>(d, 1))) * 4);
  for (int64_t i = 0; i < c.v; i++) b.data<float>()[i] = float(rng.uniform(-2, 2));
  std::vector<int64_t> odims = c.xdims;
  odims.back() = c.k;
  Tensor vals(kFloat32, odims), ids(kInt64, odims);
  EXPECT_OK(call(k_topk, {&x, &w, c.bias ? &b : nullptr}, {&vals, &ids}, {c.k, c.transposed ? 1 : 0}, {}, c.threaded));
  std::vector<double> logp, rv;
  std::vector<int64_t> ri;
  reference(x, w, c.bias ? &b : nullptr, rows, d, c.v, c.k, c.transposed, logp, rv, ri);
  int bad = 0;
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t t = 0; t < c.k; t++) {
      const int64_t i = r * c.k + t;
      const float gv = vals.at<float>(i);
      const int64_t gi = ids.at<int64_t>(i);
      bool ok = std::fabs(gv - rv[i]) <= 1e-5 && gi >= 0 && gi < c.v;
      // A different id is fine only at a near-tie: the reference's value for it must match too.
      if (ok && gi != ri[i]) ok = std::fabs(logp[r * c.v + gi] - rv[i]) <= 2e-6;
      if (!ok && bad++ < 5)
        std::fprintf(stderr, "rows %lld D %lld V %lld k %lld tr %d bias %d: [%lld][%lld] got (%.8g, %lld) want (%.8g, %lld)\n",
                     (long long)rows, (long long)d, (long long)c.v, (long long)c.k, c.transposed, c.bias, (long long)r,
                     (long long)t, gv, (long long)gi, rv[i], (long long)ri[i]);
    }
  }
  g_checks++;
  if (bad) g_failures++;
}

void test_hand_values() {
  // X [1, 2] = [1, 2]; W [2, 3] = [[1, 0, 1], [0, 1, 1]]; bias [0, 0, -1] → logits [1, 2, 2]: a tie at 2 (ids 1, 2).
  Tensor x = make<float>(kFloat32, {1, 2}, {1, 2});
  Tensor w = make<float>(kFloat32, {2, 3}, {1, 0, 1, 0, 1, 1});
  Tensor b = make<float>(kFloat32, {3}, {0, 0, -1});
  Tensor vals(kFloat32, {1, 2}), ids(kInt64, {1, 2});
  EXPECT_OK(call(k_topk, {&x, &w, &b}, {&vals, &ids}, {2, 0}));
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(2.0));
  CHECK(ids.at<int64_t>(0) == 1);
  CHECK(std::fabs(vals.at<float>(0) - (2 - lse)) < 1e-6);
  CHECK(ids.at<int64_t>(1) == 0 || ids.at<int64_t>(1) == 2);
  // Without the bias: logits [1, 2, 3].
  EXPECT_OK(call(k_topk, {&x, &w, nullptr}, {&vals, &ids}, {2, 0}));
  const double lse2 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(ids.at<int64_t>(0) == 2 && ids.at<int64_t>(1) == 1);
  CHECK(std::fabs(vals.at<float>(0) - (3 - lse2)) < 1e-6 && std::fabs(vals.at<float>(1) - (2 - lse2)) < 1e-6);
  // Transposed: E [3, 2] holds W's columns as rows.
  Tensor e = make<float>(kFloat32, {3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_OK(call(k_topk, {&x, &e, nullptr}, {&vals, &ids}, {2, 1}));
  CHECK(ids.at<int64_t>(0) == 2 && ids.at<int64_t>(1) == 1);
}

// Exact ties across tiles and parts: a zero weight makes logits = bias, whose values repeat; lower ids come first.
void test_ties() {
  const int64_t v = 20000, k = 8;
  Tensor x(kFloat32, {3, 1, 16});
  for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = float(i % 7);
  Tensor w(kFloat32, {16, v});  // zeros
  Tensor b(kFloat32, {v});
  for (int64_t j = 0; j < v; j++) b.data<float>()[j] = float(j % 5);  // the best value 4 at ids 4, 9, 14, ...
  Tensor vals(kFloat32, {3, 1, k}), ids(kInt64, {3, 1, k});
  EXPECT_OK(call(k_topk, {&x, &w, &b}, {&vals, &ids}, {k, 0}));
  const double lse = 4 + std::log(4000 * (1 + std::exp(-1.0) + std::exp(-2.0) + std::exp(-3.0) + std::exp(-4.0)));
  for (int64_t r = 0; r < 3; r++)
    for (int64_t t = 0; t < k; t++) {
      CHECK(ids.at<int64_t>(r * k + t) == 4 + 5 * t);
      CHECK(std::fabs(vals.at<float>(r * k + t) - (4 - lse)) < 1e-5);
    }
}

// -inf in the bias: those ids come last (k = V), with -inf log-probs; the rest still sum to one.
void test_neg_inf() {
  const int64_t v = 40;
  Tensor x = make<float>(kFloat32, {1, 1}, {1});
  Tensor w(kFloat32, {1, v});
  Tensor b(kFloat32, {v});
  for (int64_t j = 0; j < v; j++) b.data<float>()[j] = j % 2 ? -std::numeric_limits<float>::infinity() : float(j) * 0.01f;
  Tensor vals(kFloat32, {1, v}), ids(kInt64, {1, v});
  EXPECT_OK(call(k_topk, {&x, &w, &b}, {&vals, &ids}, {v, 0}));
  double total = 0;
  for (int64_t t = 0; t < v / 2; t++) {
    CHECK(ids.at<int64_t>(t) == 38 - 2 * t);
    total += std::exp(double(vals.at<float>(t)));
  }
  CHECK(std::fabs(total - 1) < 1e-5);
  for (int64_t t = v / 2; t < v; t++) {
    CHECK(ids.at<int64_t>(t) == 1 + 2 * (t - v / 2));
    CHECK(vals.at<float>(t) == -std::numeric_limits<float>::infinity());
  }
}

// A NaN logit makes the row's log-probs NaN (ids stay in range); other rows are unaffected.
void test_nan() {
  const int64_t v = 3000, k = 4;
  Tensor x(kFloat32, {2, 1});
  x.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  x.data<float>()[1] = 1;
  Tensor w(kFloat32, {1, v});
  for (int64_t j = 0; j < v; j++) w.data<float>()[j] = float(j % 11);
  Tensor vals(kFloat32, {2, k}), ids(kInt64, {2, k});
  EXPECT_OK(call(k_topk, {&x, &w, nullptr}, {&vals, &ids}, {k, 0}));
  for (int64_t t = 0; t < k; t++) {
    CHECK(vals.at<float>(t) != vals.at<float>(t));
    CHECK(ids.at<int64_t>(t) >= 0 && ids.at<int64_t>(t) < v);
    CHECK(ids.at<int64_t>(k + t) == 10 + 11 * t);
  }
}

void test_errors() {
  Tensor x(kFloat32, {2, 4}), w(kFloat32, {4, 10}), wt(kFloat32, {10, 4}), b(kFloat32, {10}), b9(kFloat32, {9});
  Tensor vals(kFloat32, {2, 3}), ids(kInt64, {2, 3});
  EXPECT_OK(call(k_topk, {&x, &w, &b}, {&vals, &ids}, {3, 0}));
  EXPECT_OK(call(k_topk, {&x, &wt, &b}, {&vals, &ids}, {3, 1}));
  EXPECT_ERROR(call(k_topk, {&x, &wt, &b}, {&vals, &ids}, {3, 0}), "disagree on D");
  EXPECT_ERROR(call(k_topk, {&x, &w, &b9}, {&vals, &ids}, {3, 0}), "bias must be float32 [10]");
  EXPECT_ERROR(call(k_topk, {&x, &w, &b}, {&vals, &ids}, {0, 0}), "k = 0 is out of range");
  Tensor v11(kFloat32, {2, 11}), i11(kInt64, {2, 11});
  EXPECT_ERROR(call(k_topk, {&x, &w, &b}, {&v11, &i11}, {11, 0}), "k = 11 is out of range");
  EXPECT_ERROR(call(k_topk, {&x, &w, &b}, {&vals, &ids}, {4, 0}), "output [2,3] must be");
  EXPECT_ERROR(call(k_topk, {&x, &w, &b}, {&vals, &ids}, {3, 2}), "transposed must be 0 or 1");
  Tensor ids32(kInt32, {2, 3});
  EXPECT_ERROR(call(k_topk, {&x, &w, &b}, {&vals, &ids32}, {3, 0}), "outputs must be float32 and int64");
  Tensor x1(kFloat32, {4});
  EXPECT_ERROR(call(k_topk, {&x1, &w, &b}, {&vals, &ids}, {3, 0}), "rank >= 2");
  Tensor xd(kFloat64, {2, 4});
  EXPECT_ERROR(call(k_topk, {&xd, &w, &b}, {&vals, &ids}, {3, 0}), "must be float32");
  EXPECT_ERROR(call(k_topk, {&x, &w}, {&vals, &ids}, {3, 0}), "needs 3 inputs");
  Tensor vals3(kFloat32, {3, 3}), ids3(kInt64, {3, 3});
  EXPECT_ERROR(call(k_topk, {&x, &w, &b}, {&vals3, &ids3}, {3, 0}), "must be X's leading dims");
}

void test_random() {
  Rng rng;
  const std::vector<Case> cases = {
      {{1, 1}, 1, 1, false, false, true},      {{1, 7}, 10, 4, false, true, true},
      {{2, 3, 7}, 10, 10, true, true, true},   {{1, 1, 64}, 1000, 8, false, true, true},
      {{1, 1, 64}, 1000, 8, true, true, true}, {{2, 1, 64}, 5000, 1, false, false, true},
      {{3, 1, 33}, 5000, 16, true, false, true}, {{4, 1, 256}, 3001, 8, false, true, true},
      {{5, 1, 256}, 3001, 8, true, true, false}, {{8, 1, 256}, 4000, 8, false, true, true},
      {{33, 1, 256}, 4000, 8, false, true, true}, {{33, 1, 256}, 4000, 5, true, true, true},
      {{70, 256}, 2100, 3, false, true, true}, {{70, 100}, 2100, 3, true, true, false},
      {{1, 1, 256}, 32000, 8, false, true, true}, {{32, 1, 256}, 32000, 8, false, true, true},
      {{2, 0}, 50, 5, false, true, true},      {{0, 1, 16}, 50, 5, false, true, true},
  };
  for (const Case& c : cases) run_case(c, rng);
}

// Times project_topk against fused_matmul alone (the logits it replaces) at the es-en output layer's shape.
void bench() {
  Rng rng;
  const int64_t d = 256, v = 32000, k = 8;
  Tensor w(kFloat32, {d, v}), b(kFloat32, {v});
  for (int64_t i = 0; i < w.numel(); i++) w.data<float>()[i] = float(rng.uniform(-0.1, 0.1));
  for (int64_t rows : {1, 4, 8, 32}) {
    Tensor x(kFloat32, {rows, 1, d});
    for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = float(rng.uniform(-1, 1));
    Tensor vals(kFloat32, {rows, 1, k}), ids(kInt64, {rows, 1, k}), logits(kFloat32, {rows, 1, v});
    // The best of 15 rounds of 5 calls (the machine is shared: the minimum is the steadiest figure).
    auto time = [&](auto fn) {
      double best = 1e30;
      for (int round = 0; round < 15; round++) {
        const double t0 = now_ms();
        for (int i = 0; i < 5; i++) fn();
        best = std::min(best, (now_ms() - t0) / 5);
      }
      return best;
    };
    const double t_fused = time([&] { call(k_topk, {&x, &w, &b}, {&vals, &ids}, {k, 0}); });
    const double t_mm = time([&] { call(k_fused_matmul, {&x, &w, &b, nullptr}, {&logits}, {0}); });
    std::printf("rows %3lld: project_topk %.3f ms, fused_matmul (logits only) %.3f ms\n", (long long)rows, t_fused, t_mm);
  }
}

}  // namespace

int main(int argc, char** argv) {
  k_topk = find_kernel({project_topk_kernels()}, "project_topk");
  k_fused_matmul = find_kernel({gemm_kernels()}, "fused_matmul");
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {
    bench();
    return 0;
  }
  test_hand_values();
  test_ties();
  test_neg_inf();
  test_nan();
  test_errors();
  test_random();
  return finish("project_topk_test");
}
