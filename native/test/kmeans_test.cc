// Standalone test of kmeans_assign (cpu/kmeans.cc) against a float64 reference; `bench [n d r]` times it.
// Build: g++ -O3 -march=x86-64-v2 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc native/src/threadpool.cc
//   native/src/cpu/isa.cc native/src/cpu/gemm.cc native/src/cpu/gemm_avx512.cc native/src/cpu/kmeans.cc
//   native/test/kmeans_test.cc [-DPLANC_HAVE_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas] -o
//   /tmp/kmeans_test
// Run: /tmp/kmeans_test [bench [n d r]]
#include <cstdlib>
#include <string>

#include "test_util.h"

namespace planc {
const char* kmeans_assign(const float* x, int64_t n, int64_t d, const float* c, int64_t r, const float* cnorm,
                          int32_t* out_assign, float* out_dist, ThreadPool* pool);
}  // namespace planc

namespace {

std::vector<float> random_matrix(int64_t rows, int64_t cols) {
  test::Tensor b = test::f32({rows, cols});
  test::fill_random(b);
  return std::vector<float>(b.data<float>(), b.data<float>() + rows * cols);
}

double dist2(const float* a, const float* b, int64_t d) {
  double s = 0;
  for (int64_t k = 0; k < d; k++) s += (double(a[k]) - b[k]) * (double(a[k]) - b[k]);
  return s;
}

std::vector<float> norms(const std::vector<float>& c, int64_t r, int64_t d) {
  std::vector<float> out(r);
  for (int64_t j = 0; j < r; j++) out[j] = static_cast<float>(dist2(c.data() + j * d, std::vector<float>(d).data(), d));
  return out;
}

// Every row's pick is a nearest centroid (within float32 rounding of the GEMM) and its distance is right.
void check_assign(int64_t n, int64_t d, int64_t r, planc::ThreadPool* pool, bool pass_norms) {
  std::vector<float> x = random_matrix(n, d), c = random_matrix(r, d), cn = norms(c, r, d);
  std::vector<int32_t> got(n, -1);
  std::vector<float> dist(n, -1.0f);
  const char* err = planc::kmeans_assign(x.data(), n, d, c.data(), r, pass_norms ? cn.data() : nullptr, got.data(),
                                         dist.data(), pool);
  CHECK_MSG(err == nullptr, "n=%lld d=%lld r=%lld: %s", (long long)n, (long long)d, (long long)r, err ? err : "");
  if (err) return;
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    double best = 1e300;
    for (int64_t j = 0; j < r; j++) best = std::min(best, dist2(x.data() + i * d, c.data() + j * d, d));
    const int32_t j = got[i];
    const bool in_range = j >= 0 && j < r;
    const double mine = in_range ? dist2(x.data() + i * d, c.data() + j * d, d) : 1e300;
    const double tol = 1e-4 * (1.0 + best) + 1e-5 * d;
    if (!in_range || mine > best + tol || std::fabs(dist[i] - mine) > tol) bad++;
  }
  CHECK_MSG(bad == 0, "n=%lld d=%lld r=%lld: %d rows off", (long long)n, (long long)d, (long long)r, bad);
}

// Identical centroids: the first one wins; a centroid equal to the row gives distance 0.
void check_ties(planc::ThreadPool* pool) {
  const int64_t d = 5, r = 4;
  std::vector<float> x = random_matrix(3, d), c(r * d, 0.0f);
  for (int64_t j = 0; j < r; j++) std::copy(x.begin(), x.begin() + d, c.begin() + j * d);
  std::vector<int32_t> got(3, -1);
  std::vector<float> dist(3, -1.0f);
  CHECK_MSG(planc::kmeans_assign(x.data(), 3, d, c.data(), r, nullptr, got.data(), dist.data(), pool) == nullptr,
           "ties: error");
  CHECK_MSG(got[0] == 0, "ties: row 0 got %d", got[0]);
  CHECK_MSG(dist[0] < 1e-5f, "ties: row 0 distance %g", dist[0]);
}

void check_errors() {
  std::vector<float> x(4, 1.0f), c(4, 1.0f);
  std::vector<int32_t> a(2);
  CHECK_MSG(planc::kmeans_assign(x.data(), 2, 2, c.data(), 0, nullptr, a.data(), nullptr, nullptr) != nullptr,
           "r = 0 must fail");
  CHECK_MSG(planc::kmeans_assign(x.data(), -1, 2, c.data(), 2, nullptr, a.data(), nullptr, nullptr) != nullptr,
           "n < 0 must fail");
  CHECK_MSG(planc::kmeans_assign(x.data(), 0, 2, c.data(), 2, nullptr, a.data(), nullptr, nullptr) == nullptr,
           "n = 0 is a no-op");
  CHECK_MSG(planc::kmeans_assign(x.data(), 2, 2, c.data(), 2, nullptr, a.data(), nullptr, nullptr) == nullptr,
           "no out_dist is fine");
}

void run_tests(planc::ThreadPool* pool) {
  check_assign(1, 3, 1, pool, true);
  check_assign(17, 8, 5, pool, false);
  check_assign(300, 64, 37, pool, true);
  check_assign(5000, 33, 100, pool, true);   // one row block
  check_assign(70000, 16, 100, pool, true);  // blocks of 41943 rows: two
  check_assign(2000, 8, 5000, pool, false);  // blocks of 838 rows: three
  check_assign(300, 64, 4, pool, true);      // r <= 4: scores computed transposed, C · xᵀ
  check_assign(70000, 16, 3, pool, false);   // transposed in blocks of 65536 rows: two
  check_assign(50, 0, 3, pool, true);        // d = 0: every distance is 0, the first centroid wins
  check_ties(pool);
}

// Times assignment passes of n × d rows against r centroids (at least 3, at least 0.5 s in all).
void bench(planc::ThreadPool* pool, int64_t n, int64_t d, int64_t r) {
  std::vector<float> x = random_matrix(n, d), c = random_matrix(r, d), cn = norms(c, r, d);
  std::vector<int32_t> a(n);
  std::vector<float> dist(n);
  planc::kmeans_assign(x.data(), std::min<int64_t>(n, 4096), d, c.data(), r, cn.data(), a.data(), dist.data(), pool);
  const char* err = nullptr;
  int reps = 0;
  auto t0 = std::chrono::steady_clock::now();
  double s = 0;
  while (!err && (reps < 3 || s < 0.5)) {
    err = planc::kmeans_assign(x.data(), n, d, c.data(), r, cn.data(), a.data(), dist.data(), pool);
    reps++;
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  s /= reps;
  std::printf("kmeans_assign n=%lld d=%lld r=%lld threads=%d: %.4f s per pass (%d), %.1f GFLOP/s%s%s\n", (long long)n,
              (long long)d, (long long)r, pool->threads(), s, reps, 2.0 * n * d * r / s / 1e9, err ? " error: " : "",
              err ? err : "");
}

}  // namespace

int main(int argc, char** argv) {
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    const int64_t n = argc > 2 ? std::atoll(argv[2]) : 100000, d = argc > 3 ? std::atoll(argv[3]) : 512,
                  r = argc > 4 ? std::atoll(argv[4]) : 1000;
    bench(&pool, n, d, r);
    return 0;
  }
  check_errors();
  run_tests(nullptr);
  run_tests(&pool);
  return test::finish("kmeans_test");
}
