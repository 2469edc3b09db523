// Standalone test of layer_norm and rms_norm against a float64 reference with numpy-broadcast scale and bias.
// Build: g++ -O3 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc native/src/threadpool.cc
//   native/src/cpu/isa.cc native/src/cpu/norm.cc native/test/norm_test.cc -o /tmp/norm_test && /tmp/norm_test [bench]
#include <algorithm>

#include "test_util_b.h"

namespace planc {
KernelList norm_kernels();
}

using tb::Buf;
using tb::f32;

namespace {

planc::KernelFn k_layer, k_rms;

// Value of a parameter p (dims pd, right-aligned broadcast) at flat index i of x (dims xd).
double param_at(const Buf* p, const std::vector<int64_t>& xd, int64_t i) {
  if (!p) return 0.0;
  int off = xd.size() - p->dims.size();
  auto xs = tb::strides(xd);
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
std::vector<double> ref_norm(const Buf& x, const Buf* scale, const Buf* bias, int axis, double eps, bool rms) {
  int64_t rows = 1, cols = 1;
  for (size_t d = 0; d < x.dims.size(); d++) ((int)d < axis ? rows : cols) *= x.dims[d];
  const float* xv = reinterpret_cast<const float*>(x.store.data());
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
  Buf x = f32(xd), s = f32(sd), b = f32(bd), y = f32(xd);
  tb::fill_random(x, offset - spread, offset + spread);
  tb::fill_random(s, 0.5f, 2.0f);
  tb::fill_random(b);
  const double eps = 1e-5;
  int a = axis < 0 ? axis + static_cast<int>(xd.size()) : axis;
  std::vector<double> want = ref_norm(x, &s, has_bias && !rms ? &b : nullptr, a, eps, rms);
  std::vector<planc::TensorView> in = {x.v(), s.v()};
  if (has_bias && !rms) in.push_back(b.v());
  const char* err = tb::call(rms ? k_rms : k_layer, in, {y.v()}, {axis}, {eps}, pool);
  char what[200];
  std::snprintf(what, sizeof what, "%s X rank %zu [..%lld] axis %d scale rank %zu bias %d offset %g", rms ? "rms_norm" : "layer_norm",
                xd.size(), (long long)xd.back(), axis, sd.size(), has_bias, offset);
  tb::expect_ok(err, what);
  if (!err) tb::close(y.f(), want.data(), y.n(), 1e-5, 1e-6, what);
}

void hand_computed() {
  Buf x = f32({4}, {1, 2, 3, 4}), s = f32({4}, {1, 1, 1, 1}), b = f32({4}, {0, 0, 0, 10}), y = f32({4});
  tb::expect_ok(tb::call(k_layer, {x.v(), s.v(), b.v()}, {y.v()}, {0}, {0.0}), "hand layer_norm");
  double r = 1 / std::sqrt(1.25);
  double want[] = {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r + 10};
  tb::close(y.f(), want, 4, 1e-6, 0, "hand layer_norm values");
  tb::expect_ok(tb::call(k_rms, {x.v(), s.v()}, {y.v()}, {-1}, {0.0}), "hand rms_norm");
  double q = 1 / std::sqrt(7.5);
  double want2[] = {q, 2 * q, 3 * q, 4 * q};
  tb::close(y.f(), want2, 4, 1e-6, 0, "hand rms_norm values");
}

void errors() {
  Buf x = f32({2, 3}), s = f32({3}), y = f32({2, 3}), s4 = f32({4}), y2 = f32({3, 2});
  tb::expect_error(tb::call(k_layer, {x.v(), s4.v()}, {y.v()}, {-1}, {1e-5}), "does not broadcast", "scale dims");
  tb::expect_error(tb::call(k_layer, {x.v(), s.v(), s4.v()}, {y.v()}, {-1}, {1e-5}), "bias dim", "bias dims");
  tb::expect_error(tb::call(k_layer, {x.v(), s.v()}, {y.v()}, {2}, {1e-5}), "out of range", "axis");
  tb::expect_error(tb::call(k_rms, {x.v(), s.v()}, {y.v()}, {-3}, {1e-5}), "out of range", "rms axis");
  tb::expect_error(tb::call(k_layer, {x.v(), s.v()}, {y2.v()}, {-1}, {1e-5}), "Y dim", "Y dims");
  Buf big = f32({1, 2, 3});
  tb::expect_error(tb::call(k_layer, {x.v(), big.v()}, {y.v()}, {-1}, {1e-5}), "above X's rank", "scale rank");
  Buf sd = Buf(planc::kFloat64, {3});
  tb::expect_error(tb::call(k_rms, {x.v(), sd.v()}, {y.v()}, {-1}, {1e-5}), "float32", "scale dtype");
  tb::expect_error(tb::call(k_rms, {x.v(), s.v()}, {y.v()}, {-1}, {}), "needs", "fargs");
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
  Buf x = f32({3, 2, 5}), sc = f32({2, 5}), y = f32({3, 2, 5}), mean = f32({3, 1, 1}), inv = f32({3, 1, 1});
  tb::fill_random(x, -2, 2);
  tb::fill_random(sc);
  tb::expect_ok(tb::call(k_layer, {x.v(), sc.v()}, {y.v(), mean.v(), inv.v()}, {1}, {1e-3}, pool), "layer_norm stats");
  std::vector<double> want_mean(3), want_inv(3);
  for (int r = 0; r < 3; r++) {
    double m = 0, q = 0;
    for (int j = 0; j < 10; j++) m += x.f()[r * 10 + j];
    m /= 10;
    for (int j = 0; j < 10; j++) q += (x.f()[r * 10 + j] - m) * (x.f()[r * 10 + j] - m);
    want_mean[r] = m;
    want_inv[r] = 1 / std::sqrt(q / 10 + 1e-3);
  }
  tb::close(mean.f(), want_mean.data(), 3, 1e-6, 1e-7, "layer_norm mean output");
  tb::close(inv.f(), want_inv.data(), 3, 1e-6, 1e-7, "layer_norm inv std output");
  Buf bad = f32({2});
  tb::expect_error(tb::call(k_layer, {x.v(), sc.v()}, {y.v(), bad.v()}, {1}, {1e-3}, pool), "one per row", "stats dims");
  Buf e = f32({0, 4}), s = f32({4}), ey = f32({0, 4});
  tb::expect_ok(tb::call(k_layer, {e.v(), s.v()}, {ey.v()}, {1}, {1e-5}, pool), "empty layer_norm");
}

void bench(planc::ThreadPool* pool) {
  std::printf("| shape | layer_norm ms | rms_norm ms |\n| --- | --- | --- |\n");
  for (auto dims : {std::vector<int64_t>{5, 512}, std::vector<int64_t>{400, 512}, std::vector<int64_t>{4000, 1024}}) {
    Buf x = f32(dims), s = f32({dims[1]}), b = f32({dims[1]}), y = f32(dims);
    tb::fill_random(x);
    tb::fill_random(s);
    tb::fill_random(b);
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 200; r++) {
      double t0 = tb::now_ms();
      tb::call(k_layer, {x.v(), s.v(), b.v()}, {y.v()}, {-1}, {1e-5}, pool);
      double t1 = tb::now_ms();
      tb::call(k_rms, {x.v(), s.v()}, {y.v()}, {-1}, {1e-5}, pool);
      double t2 = tb::now_ms();
      best[0] = std::min(best[0], t1 - t0);
      best[1] = std::min(best[1], t2 - t1);
    }
    std::printf("| [%lld, %lld] | %.4f | %.4f |\n", (long long)dims[0], (long long)dims[1], best[0], best[1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  k_layer = tb::find(planc::norm_kernels(), "layer_norm");
  k_rms = tb::find(planc::norm_kernels(), "rms_norm");
  if (!k_layer || !k_rms) return 1;
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    bench(&pool);
    return 0;
  }
  run_tests(nullptr);
  run_tests(&pool);
  return tb::finish("norm_test");
}
