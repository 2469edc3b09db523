// Standalone test of the softmax kernel (softmax and log-softmax on any axis) against a float64 reference; `bench` times it.
// Build: g++ -O3 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc native/src/threadpool.cc
//   native/src/cpu/isa.cc native/src/cpu/softmax.cc native/test/softmax_test.cc -o /tmp/softmax_test &&
//   /tmp/softmax_test [bench]
#include <algorithm>
#include <limits>

#include "test_util.h"

namespace planc {
KernelList softmax_kernels();
}

using test::Tensor;
using test::f32;

namespace {

planc::KernelFn k_softmax;
const double kInf = std::numeric_limits<double>::infinity();

// The reference evaluator's algorithm (model/ops/math-softmax.ts) in double.
std::vector<double> ref_softmax(const float* x, const std::vector<int64_t>& dims, int axis, bool log) {
  int64_t outer = 1, len = dims[axis], inner = 1;
  for (int d = 0; d < axis; d++) outer *= dims[d];
  for (size_t d = axis + 1; d < dims.size(); d++) inner *= dims[d];
  std::vector<double> out(outer * len * inner);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t q = 0; q < inner; q++) {
      int64_t base = o * len * inner + q;
      double max = -kInf;
      for (int64_t i = 0; i < len; i++) {
        double v = x[base + i * inner];
        if (v > max || (v != v && max == max)) max = v;
      }
      double sum = 0;
      for (int64_t i = 0; i < len; i++) {
        double e = std::exp(x[base + i * inner] - max);
        if (!log) out[base + i * inner] = e;
        sum += e;
      }
      for (int64_t i = 0; i < len; i++) {
        if (!log) out[base + i * inner] *= 1 / sum;
        else out[base + i * inner] = x[base + i * inner] - (max + std::log(sum));
      }
    }
  return out;
}

void check(Tensor& x, int axis, bool log, planc::ThreadPool* pool, const char* what, bool in_place = false) {
  int rank = x.dims.size();
  int a = axis < 0 ? axis + rank : axis;
  std::vector<double> want = ref_softmax(x.data<float>(), x.dims, a, log);
  Tensor y = f32(x.dims);
  Tensor xc = x;
  Tensor& out = in_place ? xc : y;
  const char* err = test::call(k_softmax, {xc.view}, {out.view}, test::softmax_call().axis(axis).log(log ? 1 : 0), pool);
  char name[200];
  std::snprintf(name, sizeof name, "%s axis %d log %d%s", what, axis, log, in_place ? " in place" : "");
  test::expect_ok(err, name);
  if (!err) test::close(out.data<float>(), want.data(), out.numel(), 2e-5, 1e-6, name);
}

void check_both(Tensor& x, int axis, planc::ThreadPool* pool, const char* what) {
  check(x, axis, false, pool, what);
  check(x, axis, true, pool, what);
}

void hand_computed() {
  Tensor x = f32({3}, {1, 2, 3});
  Tensor y = f32({3});
  test::expect_ok(test::call(k_softmax, {x.view}, {y.view}, test::softmax_call().axis(0).log(0), nullptr), "hand softmax");
  double want[] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748219};
  test::close(y.data<float>(), want, 3, 1e-6, 0, "hand softmax values");
  test::expect_ok(test::call(k_softmax, {x.view}, {y.view}, test::softmax_call().axis(-1).log(1), nullptr), "hand log-softmax");
  double want_log[] = {-2.4076059644443806, -1.4076059644443806, -0.4076059644443806};
  test::close(y.data<float>(), want_log, 3, 1e-6, 0, "hand log-softmax values");
}

void specials(planc::ThreadPool* pool) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {5, 40, 3000}) {
    Tensor x = f32({4, n});
    test::fill_random(x, -3, 3);
    for (int64_t i = 0; i < n; i++) x.data<float>()[i] = -inf;                                  // row 0: all -inf
    for (int64_t i = 0; i < n; i += 2) x.data<float>()[n + i] = -inf;                          // row 1: half -inf
    x.data<float>()[2 * n + n / 2] = nan;                                                      // row 2: one NaN
    x.data<float>()[3 * n + n - 1] = inf;                                                      // row 3: +inf at the end
    check_both(x, 1, pool, "specials rows");
    Tensor xt = f32({n, 4});  // the same on the strided path
    for (int64_t i = 0; i < n; i++)
      for (int r = 0; r < 4; r++) xt.data<float>()[i * 4 + r] = x.data<float>()[r * n + i];
    check_both(xt, 0, pool, "specials columns");
  }
  // Leading blocks all -inf, then finite values (the one-pass scan starts with nothing to scale).
  Tensor x = f32({1, 5000});
  test::fill_random(x, -3, 3);
  for (int i = 0; i < 2500; i++) x.data<float>()[i] = -inf;
  check_both(x, -1, pool, "leading -inf blocks");
  // Rising values so the running max grows in every block; large magnitudes must not overflow.
  Tensor r = f32({3, 7000});
  for (int64_t i = 0; i < r.numel(); i++) r.data<float>()[i] = (i % 7000) * 0.01f + (i / 7000) * 1e4f;
  check_both(r, 1, pool, "rising rows");
  Tensor big = f32({2, 100});
  test::fill_random(big, -1e4f, 1e4f);
  check_both(big, 1, pool, "large magnitudes");
}

void errors() {
  Tensor x = f32({2, 3}), y = f32({2, 3}), y2 = f32({3, 2});
  test::expect_error(test::call(k_softmax, {x.view}, {y.view}, test::softmax_call().axis(2).log(0), nullptr), "out of range",
                     "softmax axis 2");
  test::expect_error(test::call(k_softmax, {x.view}, {y.view}, test::softmax_call().axis(-3).log(0), nullptr), "out of range",
                     "softmax axis -3");
  test::expect_error(test::call(k_softmax, {x.view}, {y2.view}, test::softmax_call().axis(1).log(0), nullptr), "Y dim 0",
                     "softmax Y dims");
  Tensor xd = Tensor(planc::kFloat64, {2, 3});
  test::expect_error(test::call(k_softmax, {xd.view}, {y.view}, test::softmax_call().axis(1).log(0), nullptr), "float32 only",
                     "softmax dtype");
  // positional on purpose: log left off
  test::expect_error(test::call_positional(k_softmax, {x.view}, {y.view}, {1}, {}, nullptr), "needs", "softmax iargs");
}

void run_tests(planc::ThreadPool* pool) {
  hand_computed();
  specials(pool);
  errors();
  Tensor a = f32({7});
  test::fill_random(a, -5, 5);
  check_both(a, 0, pool, "[7]");
  Tensor b = f32({3, 1000});
  test::fill_random(b, -5, 5);
  check_both(b, 1, pool, "[3,1000]");
  Tensor c = f32({2, 3, 4, 5});
  test::fill_random(c, -5, 5);
  for (int ax = -4; ax < 4; ax++) check_both(c, ax, pool, "[2,3,4,5]");
  Tensor d = f32({2, 300, 257});
  test::fill_random(d, -5, 5);
  check_both(d, 1, pool, "[2,300,257]");
  check_both(d, 2, pool, "[2,300,257]");
  Tensor e = f32({2000, 50});
  test::fill_random(e, -5, 5);
  check_both(e, 1, pool, "[2000,50]");
  check_both(e, 0, pool, "[2000,50]");
  Tensor f = f32({4, 32000});
  test::fill_random(f, -10, 10);
  check_both(f, 1, pool, "[4,32000]");
  check(f, 1, false, pool, "[4,32000]", true);
  check(f, 1, true, pool, "[4,32000]", true);
  check(d, 1, false, pool, "[2,300,257]", true);
  check(d, 1, true, pool, "[2,300,257]", true);
  Tensor one = f32({5, 1});
  test::fill_random(one);
  check_both(one, 1, pool, "[5,1]");
  Tensor empty = f32({0, 4}), ey = f32({0, 4});
  test::expect_ok(test::call(k_softmax, {empty.view}, {ey.view}, test::softmax_call().axis(1).log(0), pool), "empty");
}

void bench(planc::ThreadPool* pool) {
  struct Case { std::vector<int64_t> dims; int axis; const char* name; } cases[] = {
      {{5, 58101}, 1, "[5,58101] axis -1"},
      {{64, 32000}, 1, "[64,32000] axis -1"},
      {{320, 50}, 1, "[320,50] axis -1 (attention decode)"},
      {{8, 8, 50, 50}, 3, "[8,8,50,50] axis -1"},
      {{8, 512, 64}, 1, "[8,512,64] axis 1 (strided)"},
  };
  std::printf("| shape | softmax ms | log-softmax ms | GB/s (softmax, read+write) |\n| --- | --- | --- | --- |\n");
  for (auto& c : cases) {
    Tensor x = f32(c.dims), y = f32(c.dims);
    test::fill_random(x, -10, 10);
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 200; r++)
      for (int log = 0; log < 2; log++) {
        double t0 = test::now_ms();
        test::call(k_softmax, {x.view}, {y.view}, test::softmax_call().axis(c.axis).log(log), pool);
        best[log] = std::min(best[log], test::now_ms() - t0);
      }
    std::printf("| %s | %.4f | %.4f | %.1f |\n", c.name, best[0], best[1], 8.0 * x.numel() / best[0] / 1e6);
  }
}

}  // namespace

int main(int argc, char** argv) {
  k_softmax = test::find_kernel({planc::softmax_kernels()}, "softmax");
  if (!k_softmax) return 1;
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    bench(&pool);
    return 0;
  }
  run_tests(nullptr);
  run_tests(&pool);
  return test::finish("softmax_test");
}
