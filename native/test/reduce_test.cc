// Standalone test of the reduction kernels, argmax/argmin and cumsum against naive loops and hand values.
#include <limits>

#include "test_util.h"

using namespace test;

namespace {

KernelFn K(const char* name) { return find_kernel({reduce_kernels()}, name); }

const char* kKinds[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
                        "reduce_sum_square", "reduce_l1", "reduce_l2", "reduce_log_sum_exp"};
// The reductions share one argument list (compiler/kernel-schema.ts reduce()): each kind's arguments are built as
// reduce_sum's.
static_assert(reduce_max_args::kAxes == reduce_sum_args::kAxes &&
                  reduce_mean_args::kAxes == reduce_sum_args::kAxes && reduce_min_args::kAxes == reduce_sum_args::kAxes &&
                  reduce_prod_args::kAxes == reduce_sum_args::kAxes && reduce_sum_square_args::kAxes == reduce_sum_args::kAxes &&
                  reduce_l1_args::kAxes == reduce_sum_args::kAxes && reduce_l2_args::kAxes == reduce_sum_args::kAxes &&
                  reduce_log_sum_exp_args::kAxes == reduce_sum_args::kAxes,
              "the reductions' axes argument");

// Output flat index of input flat index i when the masked axes are reduced (kept as 1).
int64_t out_index(const TensorView& x, uint64_t mask, int64_t i) {
  int64_t o = 0, stride = 1;
  for (int j = x.rank - 1; j >= 0; j--) {
    int64_t c = i % x.dims[j];
    i /= x.dims[j];
    if ((mask >> j) & 1) continue;
    o += c * stride;
    stride *= x.dims[j];
  }
  return o;
}

// The reference's algorithm: one double accumulator per output.
std::vector<double> naive(const std::vector<double>& x, const TensorView& xv, uint64_t mask, int kind, int64_t n_out) {
  double init = kind == 2 ? -INFINITY : kind == 3 ? INFINITY : kind == 4 ? 1 : 0;
  std::vector<double> out(n_out, init), mx(n_out, -INFINITY);
  for (int64_t i = 0; i < (int64_t)x.size(); i++) {
    int64_t o = out_index(xv, mask, i);
    double v = x[i];
    switch (kind) {
      case 0: case 1: out[o] += v; break;
      case 2: if (v > out[o] || v != v) out[o] = v; break;
      case 3: if (v < out[o] || v != v) out[o] = v; break;
      case 4: out[o] *= v; break;
      case 5: case 7: out[o] += v * v; break;
      case 6: out[o] += std::fabs(v); break;
      case 8: if (v > mx[o] || v != v) mx[o] = v; break;
    }
  }
  if (kind == 8) {
    for (int64_t i = 0; i < (int64_t)x.size(); i++) {
      int64_t o = out_index(xv, mask, i);
      double m = mx[o];
      out[o] += std::exp(std::isinf(m) ? x[i] : x[i] - m);
    }
    for (int64_t o = 0; o < n_out; o++) out[o] = (std::isinf(mx[o]) ? 0 : mx[o]) + std::log(out[o]);
  }
  int64_t count = n_out ? (int64_t)x.size() / n_out : 0;
  for (int64_t o = 0; o < n_out; o++) {
    if (kind == 1) out[o] /= count;
    if (kind == 7) out[o] = std::sqrt(out[o]);
  }
  return out;
}

struct Case {
  std::vector<int64_t> dims;
  uint64_t mask;
};

const std::vector<Case> kCases = {
    {{}, 0},          {{7}, 1},           {{7}, 0},           {{1}, 1},           {{3, 4}, 1},
    {{3, 4}, 2},      {{3, 4}, 3},        {{2, 3, 4}, 5},     {{2, 3, 4}, 2},     {{2, 3, 4, 5}, 10},
    {{2, 3, 4, 5}, 5}, {{2, 1, 4, 1}, 15}, {{1000, 37}, 2},   {{1000, 37}, 1},    {{300000}, 1},
    {{3, 200000}, 2}, {{200000, 3}, 1},   {{4, 0, 3}, 2},     {{4, 0, 3}, 1},     {{5, 6, 7, 8, 9}, 21},
};

template <class T>
void check_kind(int kind, int32_t dt) {
  Rng rng;
  for (const Case& c : kCases) {
    Tensor x(dt, c.dims);
    std::vector<int64_t> ydims = c.dims;
    for (size_t j = 0; j < ydims.size(); j++) if ((c.mask >> j) & 1) ydims[j] = 1;
    Tensor y(dt, ydims);
    std::vector<double> xs(x.numel());
    for (int64_t i = 0; i < x.numel(); i++) {
      double v;
      if constexpr (std::is_floating_point<T>::value) v = T(rng.uniform(kind == 4 ? 0.9 : -3, kind == 4 ? 1.1 : 3));
      else if (kind == 4) v = (rng.next() & 1) ? 1.0 : x.numel() < 1000 && (rng.next() & 1) ? 2.0 : -1.0;
      else v = double(rng.integer(-5, 5));
      x.data<T>()[i] = T(v);
      xs[i] = v;
    }
    EXPECT_OK(call(K(kKinds[kind]), {x.view}, {y.view}, reduce_sum_call().axes(int64_t(c.mask))));
    std::vector<double> want = naive(xs, x.view, c.mask, kind, y.numel());
    int bad = 0;
    for (int64_t o = 0; o < y.numel(); o++) {
      double got = double(y.at<T>(o));
      double w = std::is_same<T, float>::value ? double(float(want[o])) : want[o];
      bool ok;
      if constexpr (std::is_floating_point<T>::value) {
        double tol = std::is_same<T, float>::value ? 2e-7 : 1e-12;
        ok = (got != got && w != w) || got == w || std::fabs(got - w) <= tol * std::fabs(w) + (kind == 0 ? 1e-9 : 0);
      } else {
        double wt = std::isfinite(w) ? std::trunc(w) : 0;
        if (kind == 2 || kind == 3) wt = w;
        ok = got == wt || (std::isinf(w) && (kind == 2 || kind == 3));
      }
      if (!ok && bad++ < 3) {
        std::fprintf(stderr, "%s dt=%d case #%d out %lld: got %.17g want %.17g\n", kKinds[kind], dt,
                     int(&c - kCases.data()), (long long)o, got, w);
      }
    }
    CHECK(bad == 0);
  }
}

void test_reduce_hand() {
  // empty fibers: sum 0, prod 1, max -inf, mean NaN, lse -inf
  Tensor x(kFloat32, {2, 0}), y(kFloat32, {2, 1});
  EXPECT_OK(call(K("reduce_sum"), {x.view}, {y.view}, reduce_sum_call().axes(2)));
  CHECK(y.at<float>(0) == 0 && y.at<float>(1) == 0);
  EXPECT_OK(call(K("reduce_prod"), {x.view}, {y.view}, reduce_prod_call().axes(2)));
  CHECK(y.at<float>(0) == 1);
  EXPECT_OK(call(K("reduce_max"), {x.view}, {y.view}, reduce_max_call().axes(2)));
  CHECK(y.at<float>(0) == -INFINITY);
  EXPECT_OK(call(K("reduce_log_sum_exp"), {x.view}, {y.view}, reduce_log_sum_exp_call().axes(2)));
  CHECK(y.at<float>(0) == -INFINITY);
  EXPECT_OK(call(K("reduce_mean"), {x.view}, {y.view}, reduce_mean_call().axes(2)));
  CHECK(std::isnan(y.at<float>(0)));
  // NaN propagates through max
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = make<float>(kFloat32, {2, 3}, {1, nan, 3, 4, 5, 6});
  Tensor ny(kFloat32, {2, 1});
  EXPECT_OK(call(K("reduce_max"), {n.view}, {ny.view}, reduce_max_call().axes(2)));
  CHECK(std::isnan(ny.at<float>(0)) && ny.at<float>(1) == 6);
  // large logsumexp stays finite
  Tensor l = make<float>(kFloat32, {2}, {1000, 1000});
  Tensor ly(kFloat32, {1});
  EXPECT_OK(call(K("reduce_log_sum_exp"), {l.view}, {ly.view}, reduce_log_sum_exp_call().axes(1)));
  CHECK(std::fabs(ly.at<float>(0) - float(1000 + std::log(2.0))) < 1e-3);
  // int mean truncates
  Tensor im = make<int32_t>(kInt32, {3}, {1, 2, 2});
  Tensor imy(kInt32, {1});
  EXPECT_OK(call(K("reduce_mean"), {im.view}, {imy.view}, reduce_mean_call().axes(1)));
  CHECK(imy.at<int32_t>(0) == 1);
  // float32 sum of many ones is exact (double accumulation)
  Tensor ones(kFloat32, {1 << 25});
  for (int64_t i = 0; i < ones.numel(); i++) ones.data<float>()[i] = 1.0f;
  Tensor oy(kFloat32, {1});
  EXPECT_OK(call(K("reduce_sum"), {ones.view}, {oy.view}, reduce_sum_call().axes(1)));
  CHECK(oy.at<float>(0) == float(1 << 25));
  // bool max = any, min = all; int8 sum; bool sum is refused
  Tensor bx = make<uint8_t>(kBool, {2, 3}, {0, 1, 0, 1, 1, 1});
  Tensor by(kBool, {2, 1});
  EXPECT_OK(call(K("reduce_max"), {bx.view}, {by.view}, reduce_max_call().axes(2)));
  CHECK(by.at<uint8_t>(0) == 1 && by.at<uint8_t>(1) == 1);
  EXPECT_OK(call(K("reduce_min"), {bx.view}, {by.view}, reduce_min_call().axes(2)));
  CHECK(by.at<uint8_t>(0) == 0 && by.at<uint8_t>(1) == 1);
  EXPECT_ERROR(call(K("reduce_sum"), {bx.view}, {by.view}, reduce_sum_call().axes(2)), "reduce_sum: unsupported dtype bool");
  Tensor i8 = make<int8_t>(kInt8, {3}, {100, 100, -7});
  Tensor i8y(kInt8, {1});
  EXPECT_OK(call(K("reduce_sum"), {i8.view}, {i8y.view}, reduce_sum_call().axes(1)));
  CHECK(i8y.at<int8_t>(0) == int8_t(193));
  // errors
  Tensor e(kFloat32, {2, 3}), ey(kFloat32, {2, 3});
  EXPECT_ERROR(call(K("reduce_sum"), {e.view}, {ey.view}, reduce_sum_call().axes(2)),
               "reduce_sum: output dims [2,3] do not match input dims [2,3]");
  EXPECT_ERROR(call(K("reduce_sum"), {e.view}, {ey.view}, reduce_sum_call().axes(4)), "names axes beyond rank 2");
  Tensor eh(kFloat16, {2, 3}), ehy(kFloat16, {2, 1});
  EXPECT_ERROR(call(K("reduce_sum"), {eh.view}, {ehy.view}, reduce_sum_call().axes(2)), "unsupported dtype float16");
  Tensor ei(kInt32, {2, 1});
  EXPECT_ERROR(call(K("reduce_sum"), {e.view}, {ei.view}, reduce_sum_call().axes(2)), "output dtype int32 differs");
}

void test_arg() {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = make<float>(kFloat32, {2, 4}, {1, 3, 3, 2, 5, nan, 1, nan});
  Tensor y(kInt64, {2, 1});
  EXPECT_OK(call(K("argmax"), {x.view}, {y.view}, argmax_call().axis(1).select_last_index(0)));
  CHECK(y.at<int64_t>(0) == 1 && y.at<int64_t>(1) == 1);
  EXPECT_OK(call(K("argmax"), {x.view}, {y.view}, argmax_call().axis(-1).select_last_index(1)));
  CHECK(y.at<int64_t>(0) == 2 && y.at<int64_t>(1) == 3);
  EXPECT_OK(call(K("argmin"), {x.view}, {y.view}, argmin_call().axis(1).select_last_index(0)));
  CHECK(y.at<int64_t>(0) == 0 && y.at<int64_t>(1) == 1);
  Tensor y0(kInt64, {1, 4});
  EXPECT_OK(call(K("argmin"), {x.view}, {y0.view}, argmin_call().axis(0).select_last_index(0)));
  CHECK(y0.at<int64_t>(0) == 0 && y0.at<int64_t>(1) == 1 && y0.at<int64_t>(2) == 1 && y0.at<int64_t>(3) == 1);
  // big, against a naive loop, along a middle axis
  Rng rng;
  Tensor b(kInt32, {30, 500, 17}), by(kInt64, {30, 1, 17});
  for (int64_t i = 0; i < b.numel(); i++) b.data<int32_t>()[i] = int32_t(rng.integer(-50, 50));
  for (int last = 0; last < 2; last++) {
    EXPECT_OK(call(K("argmax"), {b.view}, {by.view}, argmax_call().axis(1).select_last_index(last)));
    int bad = 0;
    for (int64_t o = 0; o < 30; o++) {
      for (int64_t q = 0; q < 17; q++) {
        int64_t arg = 0;
        for (int64_t i = 1; i < 500; i++) {
          int32_t v = b.at<int32_t>((o * 500 + i) * 17 + q), best = b.at<int32_t>((o * 500 + arg) * 17 + q);
          if (last ? v >= best : v > best) arg = i;
        }
        if (by.at<int64_t>(o * 17 + q) != arg) bad++;
      }
    }
    CHECK(bad == 0);
  }
  Tensor e(kFloat32, {2, 0}), ey(kInt64, {2, 1});
  EXPECT_ERROR(call(K("argmax"), {e.view}, {ey.view}, argmax_call().axis(1).select_last_index(0)), "is empty");
  EXPECT_ERROR(call(K("argmax"), {x.view}, {y.view}, argmax_call().axis(2).select_last_index(0)), "axis 2 is out of range");
  Tensor yf(kFloat32, {2, 1});
  EXPECT_ERROR(call(K("argmax"), {x.view}, {yf.view}, argmax_call().axis(1).select_last_index(0)), "output must be int64");
}

void test_cumsum() {
  Tensor x = make<float>(kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y(kFloat32, {2, 3});
  Tensor ax = make<int64_t>(kInt64, {}, {1});
  EXPECT_OK(call(K("cumsum"), {x.view, ax.view}, {y.view}, cumsum_call().exclusive(0).reverse(0)));
  float w1[] = {1, 3, 6, 4, 9, 15};
  compare(y.data<float>(), w1, 6, "cumsum");
  EXPECT_OK(call(K("cumsum"), {x.view, ax.view}, {y.view}, cumsum_call().exclusive(1).reverse(0)));
  float w2[] = {0, 1, 3, 0, 4, 9};
  compare(y.data<float>(), w2, 6, "cumsum exclusive");
  EXPECT_OK(call(K("cumsum"), {x.view, ax.view}, {y.view}, cumsum_call().exclusive(0).reverse(1)));
  float w3[] = {6, 5, 3, 15, 11, 6};
  compare(y.data<float>(), w3, 6, "cumsum reverse");
  EXPECT_OK(call(K("cumsum"), {x.view, ax.view}, {y.view}, cumsum_call().exclusive(1).reverse(1)));
  float w4[] = {5, 3, 0, 11, 6, 0};
  compare(y.data<float>(), w4, 6, "cumsum exclusive reverse");
  Tensor ax0 = make<int32_t>(kInt32, {1}, {-2});
  EXPECT_OK(call(K("cumsum"), {x.view, ax0.view}, {y.view}, cumsum_call().exclusive(0).reverse(0)));
  float w5[] = {1, 2, 3, 5, 7, 9};
  compare(y.data<float>(), w5, 6, "cumsum axis 0");
  // in place, big, int64 against a naive loop
  Rng rng;
  Tensor b(kInt64, {3, 4000, 20}), want(kInt64, {3, 4000, 20});
  for (int64_t i = 0; i < b.numel(); i++) b.data<int64_t>()[i] = rng.integer(-9, 9);
  for (int64_t o = 0; o < 3; o++) {
    for (int64_t q = 0; q < 20; q++) {
      int64_t acc = 0;
      for (int64_t i = 0; i < 4000; i++) {
        acc += b.at<int64_t>((o * 4000 + i) * 20 + q);
        want.data<int64_t>()[(o * 4000 + i) * 20 + q] = acc;
      }
    }
  }
  Tensor ax1 = make<int64_t>(kInt64, {1}, {1});
  EXPECT_OK(call(K("cumsum"), {b.view, ax1.view}, {b.view}, cumsum_call().exclusive(0).reverse(0)));  // y aliases x
  compare(b.data<int64_t>(), want.data<int64_t>(), b.numel(), "cumsum int64 in place");
  Tensor axf = make<float>(kFloat32, {}, {1});
  EXPECT_ERROR(call(K("cumsum"), {x.view, axf.view}, {y.view}, cumsum_call().exclusive(0).reverse(0)),
               "axis must be one int32 or int64");
  Tensor ax5 = make<int64_t>(kInt64, {}, {5});
  EXPECT_ERROR(call(K("cumsum"), {x.view, ax5.view}, {y.view}, cumsum_call().exclusive(0).reverse(0)), "axis 5 is out of range");
}

void bench() {
  Tensor x(kFloat32, {512, 4096}), rows(kFloat32, {512, 1}), cols(kFloat32, {1, 4096}), all(kFloat32, {1, 1});
  for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = float(i % 77) * 0.01f;
  for (int threaded = 0; threaded < 2; threaded++) {
    call(K("reduce_sum"), {x.view}, {rows.view}, reduce_sum_call().axes(2), threads(threaded));
    double t0 = now_ms();
    call(K("reduce_sum"), {x.view}, {rows.view}, reduce_sum_call().axes(2), threads(threaded));
    double t1 = now_ms();
    call(K("reduce_sum"), {x.view}, {cols.view}, reduce_sum_call().axes(1), threads(threaded));
    double t2 = now_ms();
    call(K("reduce_sum"), {x.view}, {all.view}, reduce_sum_call().axes(3), threads(threaded));
    double t3 = now_ms();
    call(K("reduce_max"), {x.view}, {rows.view}, reduce_max_call().axes(2), threads(threaded));
    double t4 = now_ms();
    std::printf("bench %s: 2M f32 sum rows %.2f ms, sum cols %.2f ms, sum all %.2f ms, max rows %.2f ms\n",
                threaded ? "2 threads" : "1 thread ", t1 - t0, t2 - t1, t3 - t2, t4 - t3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {  // timings only on request, never in the test run
    bench();
    return 0;
  }
  for (int kind = 0; kind < 9; kind++) {
    check_kind<float>(kind, kFloat32);
    check_kind<double>(kind, kFloat64);
    check_kind<int32_t>(kind, kInt32);
    check_kind<int64_t>(kind, kInt64);
  }
  test_reduce_hand();
  test_arg();
  test_cumsum();
  return finish("reduce_test");
}
