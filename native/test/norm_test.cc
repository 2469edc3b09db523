// Standalone test of layer_norm and rms_norm against a float64 reference with numpy-broadcast scale and bias.
// Build: g++ -O3 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc native/src/threadpool.cc
//   native/src/cpu/isa.cc native/src/cpu/norm.cc native/test/norm_test.cc -o /tmp/norm_test && /tmp/norm_test [bench]
#include <algorithm>

#include "test_util.h"

namespace planc {
KernelList norm_kernels();
}

using test::Tensor;
using test::f32;

namespace {

planc::KernelFn k_layer, k_rms;

// Value of a parameter p (dims pd, right-aligned broadcast) at flat index i of x (dims xd).
double param_at(const Tensor* p, const std::vector<int64_t>& xd, int64_t i) {
  if (!p) return 0.0;
  int off = xd.size() - p->dims.size();
  auto xs = test::strides(xd);
  int64_t src = 0, st = 1;
  for (int d = static_cast<int>(xd.size()) - 1; d >= off; d--) {
    int64_t c = (i / xs[d]) % xd[d];
    int64_t pdim = p->dims[d - off];
    if (pdim != 1) src += c * st;
    st *= pdim;
  }
  return reinterpret_cast<const float*>(p->store.data())[src];
}

// The reference's LayerNormalization / RMSNormalization in double.
std::vector<double> ref_norm(const Tensor& x, const Tensor* scale, const Tensor* bias, int axis, double eps, bool rms) {
  int64_t rows = 1, cols = 1;
  for (size_t d = 0; d < x.dims.size(); d++) ((int)d < axis ? rows : cols) *= x.dims[d];
  const float* xv = x.data<float>();
  std::vector<double> y(rows * cols);
  for (int64_t r = 0; r < rows; r++) {
    const float* xr = xv + r * cols;
    double mean = 0, sq = 0;
    if (!rms) {
      for (int64_t j = 0; j < cols; j++) mean += xr[j];
      mean /= cols;
    }
    for (int64_t j = 0; j < cols; j++) sq += (xr[j] - mean) * (xr[j] - mean);
    double inv = 1 / std::sqrt(sq / cols + eps);
    for (int64_t j = 0; j < cols; j++) {
      int64_t i = r * cols + j;
      y[i] = (xr[j] - mean) * inv * param_at(scale, x.dims, i) + param_at(bias, x.dims, i);
    }
  }
  return y;
}

void check(std::vector<int64_t> xd, int axis, std::vector<int64_t> sd, std::vector<int64_t> bd, bool has_bias,
           bool rms, planc::ThreadPool* pool, float offset = 0.0f, float spread = 1.0f) {
  Tensor x = f32(xd), s = f32(sd), b = f32(bd), y = f32(xd);
  test::fill_random(x, offset - spread, offset + spread);
  test::fill_random(s, 0.5f, 2.0f);
  test::fill_random(b);
  const double eps = 1e-5;
  int a = axis < 0 ? axis + static_cast<int>(xd.size()) : axis;
  std::vector<double> want = ref_norm(x, &s, has_bias && !rms ? &b : nullptr, a, eps, rms);
  std::vector<planc::TensorView> in = {x.view, s.view};
  if (has_bias && !rms) in.push_back(b.view);
  const char* err = rms ? test::call(k_rms, in, {y.view}, test::rms_norm_call().axis(axis).epsilon(eps), pool)
                        : test::call(k_layer, in, {y.view}, test::layer_norm_call().axis(axis).epsilon(eps), pool);
  char what[200];
  std::snprintf(what, sizeof what, "%s X rank %zu [..%lld] axis %d scale rank %zu bias %d offset %g", rms ? "rms_norm" : "layer_norm",
                xd.size(), (long long)xd.back(), axis, sd.size(), has_bias, offset);
  test::expect_ok(err, what);
  if (!err) test::close(y.data<float>(), want.data(), y.numel(), 1e-5, 1e-6, what);
}

void hand_computed() {
  Tensor x = f32({4}, {1, 2, 3, 4}), s = f32({4}, {1, 1, 1, 1}), b = f32({4}, {0, 0, 0, 10}), y = f32({4});
  test::expect_ok(test::call(k_layer, {x.view, s.view, b.view}, {y.view}, test::layer_norm_call().axis(0).epsilon(0.0), nullptr),
                  "hand layer_norm");
  double r = 1 / std::sqrt(1.25);
  double want[] = {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r + 10};
  test::close(y.data<float>(), want, 4, 1e-6, 0, "hand layer_norm values");
  test::expect_ok(test::call(k_rms, {x.view, s.view}, {y.view}, test::rms_norm_call().axis(-1).epsilon(0.0), nullptr),
                  "hand rms_norm");
  double q = 1 / std::sqrt(7.5);
  double want2[] = {q, 2 * q, 3 * q, 4 * q};
  test::close(y.data<float>(), want2, 4, 1e-6, 0, "hand rms_norm values");
}

void errors() {
  Tensor x = f32({2, 3}), s = f32({3}), y = f32({2, 3}), s4 = f32({4}), y2 = f32({3, 2});
  test::expect_error(test::call(k_layer, {x.view, s4.view}, {y.view}, test::layer_norm_call().axis(-1).epsilon(1e-5), nullptr),
                     "does not broadcast", "scale dims");
  test::expect_error(
      test::call(k_layer, {x.view, s.view, s4.view}, {y.view}, test::layer_norm_call().axis(-1).epsilon(1e-5), nullptr),
      "bias dim", "bias dims");
  test::expect_error(test::call(k_layer, {x.view, s.view}, {y.view}, test::layer_norm_call().axis(2).epsilon(1e-5), nullptr),
                     "out of range", "axis");
  test::expect_error(test::call(k_rms, {x.view, s.view}, {y.view}, test::rms_norm_call().axis(-3).epsilon(1e-5), nullptr),
                     "out of range", "rms axis");
  test::expect_error(test::call(k_layer, {x.view, s.view}, {y2.view}, test::layer_norm_call().axis(-1).epsilon(1e-5), nullptr),
                     "Y dim", "Y dims");
  Tensor big = f32({1, 2, 3});
  test::expect_error(test::call(k_layer, {x.view, big.view}, {y.view}, test::layer_norm_call().axis(-1).epsilon(1e-5), nullptr),
                     "above X's rank", "scale rank");
  Tensor sd = Tensor(planc::kFloat64, {3});
  test::expect_error(test::call(k_rms, {x.view, sd.view}, {y.view}, test::rms_norm_call().axis(-1).epsilon(1e-5), nullptr),
                     "float32", "scale dtype");
  // positional on purpose: epsilon left off
  test::expect_error(test::call_positional(k_rms, {x.view, s.view}, {y.view}, {-1}, {}, nullptr), "needs", "fargs");
}

void run_tests(planc::ThreadPool* pool) {
  hand_computed();
  errors();
  for (int rms = 0; rms < 2; rms++) {
    check({3, 7}, 1, {7}, {7}, true, rms, pool);
    check({3, 7}, -1, {7}, {1, 7}, false, rms, pool);
    check({1}, 0, {1}, {1}, true, rms, pool);
    check({2, 3, 4}, 1, {3, 4}, {4}, true, rms, pool);
    check({2, 3, 4}, 1, {1, 4}, {3, 1}, true, rms, pool);
    check({2, 3, 4}, 1, {2, 1, 1}, {2, 3, 4}, true, rms, pool);  // per-row parameters
    check({2, 3, 4}, 0, {2, 3, 4}, {4}, true, rms, pool);
    check({2, 3, 4}, -1, {}, {1}, true, rms, pool);               // scalar scale
    check({2000, 512}, 1, {512}, {512}, true, rms, pool);         // crosses the threading threshold
    check({5, 40, 1000}, 2, {1000}, {1000}, true, rms, pool);
    check({64, 512}, -1, {512}, {512}, true, rms, pool, 1000.0f, 0.01f);  // |mean| >> spread
    check({16, 7, 33}, 1, {7, 33}, {7, 33}, true, rms, pool, -300.0f, 1.0f);
  }
  // Optional Mean and InvStdDev outputs.
  Tensor x = f32({3, 2, 5}), sc = f32({2, 5}), y = f32({3, 2, 5}), mean = f32({3, 1, 1}), inv = f32({3, 1, 1});
  test::fill_random(x, -2, 2);
  test::fill_random(sc);
  test::expect_ok(
      test::call(k_layer, {x.view, sc.view}, {y.view, mean.view, inv.view}, test::layer_norm_call().axis(1).epsilon(1e-3), pool),
      "layer_norm stats");
  std::vector<double> want_mean(3), want_inv(3);
  for (int r = 0; r < 3; r++) {
    double m = 0, q = 0;
    for (int j = 0; j < 10; j++) m += x.data<float>()[r * 10 + j];
    m /= 10;
    for (int j = 0; j < 10; j++) q += (x.data<float>()[r * 10 + j] - m) * (x.data<float>()[r * 10 + j] - m);
    want_mean[r] = m;
    want_inv[r] = 1 / std::sqrt(q / 10 + 1e-3);
  }
  test::close(mean.data<float>(), want_mean.data(), 3, 1e-6, 1e-7, "layer_norm mean output");
  test::close(inv.data<float>(), want_inv.data(), 3, 1e-6, 1e-7, "layer_norm inv std output");
  Tensor bad = f32({2});
  test::expect_error(
      test::call(k_layer, {x.view, sc.view}, {y.view, bad.view}, test::layer_norm_call().axis(1).epsilon(1e-3), pool),
      "one per row", "stats dims");
  Tensor e = f32({0, 4}), s = f32({4}), ey = f32({0, 4});
  test::expect_ok(test::call(k_layer, {e.view, s.view}, {ey.view}, test::layer_norm_call().axis(1).epsilon(1e-5), pool),
                  "empty layer_norm");
}

void bench(planc::ThreadPool* pool) {
  std::printf("| shape | layer_norm ms | rms_norm ms |\n| --- | --- | --- |\n");
  for (auto dims : {std::vector<int64_t>{5, 512}, std::vector<int64_t>{400, 512}, std::vector<int64_t>{4000, 1024}}) {
    Tensor x = f32(dims), s = f32({dims[1]}), b = f32({dims[1]}), y = f32(dims);
    test::fill_random(x);
    test::fill_random(s);
    test::fill_random(b);
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 200; r++) {
      double t0 = test::now_ms();
      test::call(k_layer, {x.view, s.view, b.view}, {y.view}, test::layer_norm_call().axis(-1).epsilon(1e-5), pool);
      double t1 = test::now_ms();
      test::call(k_rms, {x.view, s.view}, {y.view}, test::rms_norm_call().axis(-1).epsilon(1e-5), pool);
      double t2 = test::now_ms();
      best[0] = std::min(best[0], t1 - t0);
      best[1] = std::min(best[1], t2 - t1);
    }
    std::printf("| [%lld, %lld] | %.4f | %.4f |\n", (long long)dims[0], (long long)dims[1], best[0], best[1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  k_layer = test::find_kernel({planc::norm_kernels()}, "layer_norm");
  k_rms = test::find_kernel({planc::norm_kernels()}, "rms_norm");
  if (!k_layer || !k_rms) return 1;
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    bench(&pool);
    return 0;
  }
  run_tests(nullptr);
  run_tests(&pool);
  return test::finish("norm_test");
}
