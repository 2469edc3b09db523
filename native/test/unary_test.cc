// Standalone test of the unary elementwise kernels against hand values and double-precision reference formulas.
#include <functional>
#include <limits>

#include "test_util.h"

using namespace test;

namespace {

KernelFn K(const char* name) { return find_kernel({unary_kernels()}, name); }

const float kNan = std::numeric_limits<float>::quiet_NaN();

// The reference's formula in double, rounded once to float32.
void check_f32(const char* name, const std::function<double(double)>& f, double lo, double hi,
               const kernel_call::Args& args = {}) {
  Rng rng;
  for (int64_t n : {1, 7, 1000, 100003}) {
    Tensor x(kFloat32, {n}), y(kFloat32, {n}), want(kFloat32, {n});
    for (int64_t i = 0; i < n; i++) x.data<float>()[i] = float(rng.uniform(lo, hi));
    x.data<float>()[0] = 0.0f;
    if (n > 2) x.data<float>()[1] = -0.0f;
    if (n > 3) x.data<float>()[2] = kNan;
    for (int64_t i = 0; i < n; i++) want.data<float>()[i] = float(f(double(x.at<float>(i))));
    EXPECT_OK(call(K(name), {x.view}, {y.view}, args));
    std::string what = std::string(name) + " f32 n=" + std::to_string(n);
    compare(y.data<float>(), want.data<float>(), n, what.c_str());
  }
  // float64 too
  Tensor x(kFloat64, {3, 5}), y(kFloat64, {3, 5});
  for (int64_t i = 0; i < 15; i++) x.data<double>()[i] = rng.uniform(lo, hi);
  EXPECT_OK(call(K(name), {x.view}, {y.view}, args));
  Tensor want(kFloat64, {3, 5});
  for (int64_t i = 0; i < 15; i++) want.data<double>()[i] = f(x.at<double>(i));
  std::string what = std::string(name) + " f64";
  compare(y.data<double>(), want.data<double>(), 15, what.c_str());
}

double sigmoid_ref(double v) { return v >= 0 ? 1 / (1 + std::exp(-v)) : std::exp(v) / (1 + std::exp(v)); }

void test_float_ops() {
  check_f32("exp", [](double v) { return std::exp(v); }, -90, 90);
  check_f32("log", [](double v) { return std::log(v); }, -1, 100);
  check_f32("sqrt", [](double v) { return std::sqrt(v); }, -1, 100);
  check_f32("reciprocal", [](double v) { return 1 / v; }, -10, 10);
  check_f32("tanh", [](double v) { return std::tanh(v); }, -10, 10);
  check_f32("sigmoid", sigmoid_ref, -50, 50);
  check_f32("erf", [](double v) { return std::erf(v); }, -4, 4);
  check_f32("floor", [](double v) { return std::floor(v); }, -10, 10);
  check_f32("ceil", [](double v) { return std::ceil(v); }, -10, 10);
  check_f32("sin", [](double v) { return std::sin(v); }, -10, 10);
  check_f32("cos", [](double v) { return std::cos(v); }, -10, 10);
  check_f32("softplus", [](double v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); }, -30, 30);
  check_f32("relu", [](double v) { return v > 0 ? v : 0; }, -10, 10);
  check_f32("neg", [](double v) { return -v; }, -10, 10);
  check_f32("abs", [](double v) { return std::fabs(v); }, -10, 10);
  check_f32("sign", [](double v) { return v > 0 ? 1 : v < 0 ? -1 : v; }, -10, 10);
  check_f32(
      "gelu", [](double v) { return 0.5 * v * (1 + std::erf(v * std::sqrt(0.5))); }, -6, 6, gelu_call().approximate(kGeluNone));
  check_f32("gelu", [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  }, -6, 6, gelu_call().approximate(kGeluTanh));
  double alpha = double(0.1f);
  check_f32("leaky_relu", [=](double v) { return v > 0 ? v : v * alpha; }, -10, 10, leaky_relu_call().alpha(alpha));
  check_f32("elu", [](double v) { return v < 0 ? 2.0 * std::expm1(v) : v; }, -10, 10, elu_call().alpha(2.0));
  check_f32(
      "hard_sigmoid", [](double v) { return std::max(0.0, std::min(1.0, 0.2 * v + 0.5)); }, -10, 10,
      hard_sigmoid_call().alpha(0.2).beta(0.5));
}

void test_hand_values() {
  // round: half to even
  Tensor x = make<float>(kFloat32, {8}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f, 3.5f});
  Tensor y(kFloat32, {8});
  EXPECT_OK(call(K("round"), {x.view}, {y.view}));
  float want[] = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, 2.0f, -3.0f, 4.0f};
  compare(y.data<float>(), want, 8, "round");
  // relu of NaN is 0 (x > 0 ? x : 0), sign keeps NaN and -0
  Tensor n = make<float>(kFloat32, {3}, {kNan, -0.0f, -3.0f});
  Tensor ny(kFloat32, {3});
  EXPECT_OK(call(K("relu"), {n.view}, {ny.view}));
  CHECK(ny.at<float>(0) == 0.0f && ny.at<float>(1) == 0.0f && ny.at<float>(2) == 0.0f);
  EXPECT_OK(call(K("sign"), {n.view}, {ny.view}));
  CHECK(std::isnan(ny.at<float>(0)) && ny.at<float>(1) == 0.0f && std::signbit(ny.at<float>(1)) && ny.at<float>(2) == -1.0f);
  // exp matches the correctly rounded float32 of the double result
  Tensor e = make<float>(kFloat32, {3}, {1.0f, 88.0f, -104.0f});
  Tensor ey(kFloat32, {3});
  EXPECT_OK(call(K("exp"), {e.view}, {ey.view}));
  CHECK(ey.at<float>(0) == 2.7182817f && ey.at<float>(1) == float(std::exp(88.0)) && ey.at<float>(2) == float(std::exp(-104.0)));
  // integer neg/abs/sign/relu
  Tensor i = make<int64_t>(kInt64, {4}, {-5, 0, 7, INT64_MIN});
  Tensor iy(kInt64, {4});
  EXPECT_OK(call(K("neg"), {i.view}, {iy.view}));
  int64_t neg_w[] = {5, 0, -7, INT64_MIN};
  compare(iy.data<int64_t>(), neg_w, 4, "neg int64");
  EXPECT_OK(call(K("abs"), {i.view}, {iy.view}));
  int64_t abs_w[] = {5, 0, 7, INT64_MIN};
  compare(iy.data<int64_t>(), abs_w, 4, "abs int64");
  EXPECT_OK(call(K("sign"), {i.view}, {iy.view}));
  int64_t sign_w[] = {-1, 0, 1, -1};
  compare(iy.data<int64_t>(), sign_w, 4, "sign int64");
  Tensor i32 = make<int32_t>(kInt32, {3}, {-5, 0, 7});
  Tensor i32y(kInt32, {3});
  EXPECT_OK(call(K("relu"), {i32.view}, {i32y.view}));
  int32_t relu_w[] = {0, 0, 7};
  compare(i32y.data<int32_t>(), relu_w, 3, "relu int32");
  // not
  Tensor b = make<uint8_t>(kBool, {3}, {0, 1, 0});
  Tensor by(kBool, {3});
  EXPECT_OK(call(K("not"), {b.view}, {by.view}));
  uint8_t not_w[] = {1, 0, 1};
  compare(by.data<uint8_t>(), not_w, 3, "not");
}

void test_clip() {
  Tensor x = make<float>(kFloat32, {6}, {-3.0f, -1.0f, 0.0f, 1.0f, 3.0f, kNan});
  Tensor lo = make<float>(kFloat32, {}, {-1.5f});
  Tensor hi = make<float>(kFloat32, {1}, {2.0f});
  Tensor y(kFloat32, {6});
  EXPECT_OK(call(K("clip"), {x.view, lo.view, hi.view}, {y.view}));
  float both[] = {-1.5f, -1.0f, 0.0f, 1.0f, 2.0f, kNan};
  compare(y.data<float>(), both, 6, "clip both");
  EXPECT_OK(call(K("clip"), {x.view, TensorView(), hi.view}, {y.view}));
  float max_only[] = {-3.0f, -1.0f, 0.0f, 1.0f, 2.0f, kNan};
  compare(y.data<float>(), max_only, 6, "clip max only");
  EXPECT_OK(call(K("clip"), {x.view, lo.view}, {y.view}));
  float min_only[] = {-1.5f, -1.0f, 0.0f, 1.0f, 3.0f, kNan};
  compare(y.data<float>(), min_only, 6, "clip min only");
  EXPECT_OK(call(K("clip"), {x.view}, {y.view}));
  compare(y.data<float>(), x.data<float>(), 6, "clip none");
  // lo > hi: hi wins
  Tensor lo2 = make<float>(kFloat32, {}, {5.0f});
  EXPECT_OK(call(K("clip"), {x.view, lo2.view, hi.view}, {y.view}));
  CHECK(y.at<float>(0) == 2.0f && y.at<float>(4) == 2.0f);
  // int64
  Tensor xi = make<int64_t>(kInt64, {4}, {-10, 0, 5, 100});
  Tensor loi = make<int64_t>(kInt64, {}, {-2});
  Tensor hii = make<int64_t>(kInt64, {}, {50});
  Tensor yi(kInt64, {4});
  EXPECT_OK(call(K("clip"), {xi.view, loi.view, hii.view}, {yi.view}));
  int64_t wi[] = {-2, 0, 5, 50};
  compare(yi.data<int64_t>(), wi, 4, "clip int64");
  // errors
  Tensor vec = make<float>(kFloat32, {2}, {0.0f, 1.0f});
  EXPECT_ERROR(call(K("clip"), {x.view, vec.view}, {y.view}), "clip: min must be a scalar");
  EXPECT_ERROR(call(K("clip"), {x.view, loi.view}, {y.view}), "clip: min dtype int64 differs");
}

void test_errors() {
  Tensor x(kFloat32, {3, 4}), y(kFloat32, {4, 3}), yi(kInt32, {3, 4}), xi(kInt32, {3, 4});
  EXPECT_ERROR(call(K("exp"), {x.view}, {y.view}), "exp: output dims [4,3] differ from input dims [3,4]");
  EXPECT_ERROR(call(K("exp"), {x.view}, {yi.view}), "output dtype int32 differs");
  EXPECT_ERROR(call(K("exp"), {xi.view}, {yi.view}), "exp: unsupported dtype int32");
  EXPECT_ERROR(call(K("gelu"), {x.view}, {x.view}, gelu_call().approximate(planc::kGeluCount)), "approx must be 0");
  EXPECT_ERROR(call(K("gelu"), {x.view}, {x.view}), "gelu: needs 1 input, 1 output, 1 iarg and 0 fargs");
  EXPECT_ERROR(call(K("leaky_relu"), {x.view}, {x.view}), "leaky_relu: needs 1 input, 1 output, 0 iargs and 1 farg");
  EXPECT_ERROR(call(K("not"), {x.view}, {x.view}), "not: input must be bool");
  EXPECT_ERROR(call(K("relu"), {TensorView()}, {x.view}), "input X is missing");
}

void bench() {
  const int64_t n = 1 << 22;
  Tensor x(kFloat32, {n}), y(kFloat32, {n});
  Rng rng;
  for (int64_t i = 0; i < n; i++) x.data<float>()[i] = float(rng.uniform(-5, 5));
  for (const char* name : {"relu", "exp", "tanh", "sigmoid", "erf"}) {
    for (int threaded = 0; threaded < 2; threaded++) {
      call(K(name), {x.view}, {y.view}, {}, threads(threaded));
      double t0 = now_ms();
      call(K(name), {x.view}, {y.view}, {}, threads(threaded));
      std::printf("bench %-8s 4M f32, %s: %.2f ms\n", name, threaded ? "2 threads" : "1 thread ", now_ms() - t0);
    }
  }
  for (int threaded = 0; threaded < 2; threaded++) {
    call(K("gelu"), {x.view}, {y.view}, gelu_call().approximate(planc::kGeluNone), threads(threaded));
    double t0 = now_ms();
    call(K("gelu"), {x.view}, {y.view}, gelu_call().approximate(planc::kGeluNone), threads(threaded));
    std::printf("bench gelu     4M f32, %s: %.2f ms\n", threaded ? "2 threads" : "1 thread ", now_ms() - t0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {  // timings only on request, never in the test run
    bench();
    return 0;
  }
  test_float_ops();
  test_hand_values();
  test_clip();
  test_errors();
  return finish("unary_test");
}
