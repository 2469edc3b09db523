// Standalone test of topk, trilu and one_hot against hand values and naive loops.
#include <algorithm>
#include <limits>

#include "test_util.h"

using namespace test;

namespace {

KernelFn K(const char* name) { return find_kernel({select_kernels()}, name); }

void test_topk_hand() {
  // ties: lower index first; NaN ranks largest
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = make<float>(kFloat32, {2, 5}, {3, 1, 3, 2, 5, 1, nan, 2, nan, 0});
  Tensor k = make<int64_t>(kInt64, {1}, {3});
  Tensor v(kFloat32, {2, 3}), i(kInt64, {2, 3});
  EXPECT_OK(call(K("topk"), {x.view, k.view}, {v.view, i.view}, topk_call().axis(-1).largest(1).sorted(1)));
  int64_t iw[] = {4, 0, 2, 1, 3, 2};
  compare(i.data<int64_t>(), iw, 6, "topk largest indices");
  CHECK(v.at<float>(0) == 5 && v.at<float>(1) == 3 && v.at<float>(2) == 3 && std::isnan(v.at<float>(3)) && v.at<float>(5) == 2);
  EXPECT_OK(call(K("topk"), {x.view, k.view}, {v.view, i.view}, topk_call().axis(1).largest(0).sorted(1)));
  int64_t sw[] = {1, 3, 0, 4, 0, 2};
  compare(i.data<int64_t>(), sw, 6, "topk smallest indices");
  // axis 0
  Tensor k1 = make<int64_t>(kInt64, {}, {1});
  Tensor v0(kFloat32, {1, 5}), i0(kInt64, {1, 5});
  EXPECT_OK(call(K("topk"), {x.view, k1.view}, {v0.view, i0.view}, topk_call().axis(0).largest(1).sorted(1)));
  int64_t aw[] = {0, 1, 0, 1, 0};
  compare(i0.data<int64_t>(), aw, 5, "topk axis 0");
  // the one-pass small-k path with NaNs and ties
  Tensor xs(kFloat32, {40});
  for (int n = 0; n < 40; n++) xs.data<float>()[n] = float(n % 7);
  xs.data<float>()[5] = nan;
  xs.data<float>()[20] = nan;
  Tensor k4 = make<int64_t>(kInt64, {}, {4});
  Tensor vs(kFloat32, {4}), is(kInt64, {4});
  EXPECT_OK(call(K("topk"), {xs.view, k4.view}, {vs.view, is.view}, topk_call().axis(0).largest(1).sorted(1)));
  int64_t lw[] = {5, 20, 6, 13};
  compare(is.data<int64_t>(), lw, 4, "topk small-k largest with NaN");
  EXPECT_OK(call(K("topk"), {xs.view, k4.view}, {vs.view, is.view}, topk_call().axis(0).largest(0).sorted(1)));
  int64_t smw[] = {0, 7, 14, 21};
  compare(is.data<int64_t>(), smw, 4, "topk small-k smallest with NaN");
  // errors
  Tensor k9 = make<int64_t>(kInt64, {}, {9});
  EXPECT_ERROR(call(K("topk"), {x.view, k9.view}, {v.view, i.view}, topk_call().axis(1).largest(1).sorted(1)),
               "K = 9 is out of range");
  Tensor k2 = make<int64_t>(kInt64, {}, {2});
  EXPECT_ERROR(call(K("topk"), {x.view, k2.view}, {v.view, i.view}, topk_call().axis(1).largest(1).sorted(1)),
               "do not match input dims [2,5] with K = 2");
  Tensor kf = make<float>(kFloat32, {}, {3});
  EXPECT_ERROR(call(K("topk"), {x.view, kf.view}, {v.view, i.view}, topk_call().axis(1).largest(1).sorted(1)),
               "K must be one int64");
  EXPECT_ERROR(call(K("topk"), {x.view, k.view}, {v.view, i.view}, topk_call().axis(2).largest(1).sorted(1)),
               "axis 2 is out of range");
}

// Random fibers with many ties, checked against std::stable_sort.
template <class T> void test_topk_random(int32_t dt) {
  Rng rng;
  struct Case { std::vector<int64_t> dims; int axis; int64_t k; };
  for (Case c : std::vector<Case>{{{7}, 0, 7}, {{7}, 0, 0}, {{3, 1000}, 1, 5}, {{3, 1000}, 1, 700}, {{50, 4, 30}, 1, 2},
                                  {{20, 300, 3}, 1, 300}, {{64, 32000}, 1, 8}}) {
    Tensor x(dt, c.dims);
    for (int64_t n = 0; n < x.numel(); n++) x.data<T>()[n] = T(rng.integer(-40, 40));
    std::vector<int64_t> od = c.dims;
    od[c.axis] = c.k;
    Tensor kt = make<int64_t>(kInt64, {1}, {c.k});
    for (int largest = 0; largest < 2; largest++) {
      Tensor v(dt, od), ix(kInt64, od);
      EXPECT_OK(call(K("topk"), {x.view, kt.view}, {v.view, ix.view}, topk_call().axis(c.axis).largest(largest).sorted(1)));
      int64_t outer = 1, inner = 1, len = c.dims[c.axis];
      for (int j = 0; j < c.axis; j++) outer *= c.dims[j];
      for (size_t j = c.axis + 1; j < c.dims.size(); j++) inner *= c.dims[j];
      int bad = 0;
      for (int64_t o = 0; o < outer; o++) {
        for (int64_t q = 0; q < inner; q++) {
          std::vector<int64_t> idx(len);
          for (int64_t n = 0; n < len; n++) idx[n] = n;
          auto val = [&](int64_t n) { return x.at<T>((o * len + n) * inner + q); };
          std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return largest ? val(a) > val(b) : val(a) < val(b); });
          for (int64_t t = 0; t < c.k; t++) {
            int64_t p = (o * c.k + t) * inner + q;
            if (ix.at<int64_t>(p) != idx[t] || v.at<T>(p) != val(idx[t])) bad++;
          }
        }
      }
      CHECK(bad == 0);
    }
  }
}

void test_trilu() {
  Rng rng;
  for (int32_t dt : {kFloat32, kInt64, kBool, kFloat16}) {
    for (int64_t kv : {-100, -2, -1, 0, 1, 3, 100}) {
      for (int upper = 0; upper < 2; upper++) {
        for (auto dims : std::vector<std::vector<int64_t>>{{4, 5}, {2, 3, 7, 3}, {1, 1}, {600, 300}}) {
          Tensor x(dt, dims), y(dt, dims);
          for (size_t n = 0; n < x.view.bytes(); n++) x.data<uint8_t>()[n] = uint8_t(rng.next() | 1);
          Tensor k = make<int64_t>(kInt64, {}, {kv});
          EXPECT_OK(call(K("trilu"), {x.view, k.view}, {y.view}, trilu_call().upper(upper)));
          int64_t rows = dims[dims.size() - 2], cols = dims.back();
          size_t es = dtype_size(dt);
          int bad = 0;
          for (int64_t n = 0; n < x.numel(); n++) {
            int64_t i = (n / cols) % rows, j = n % cols;
            bool keep = upper ? j - i >= kv : j - i <= kv;
            for (size_t b = 0; b < es; b++) {
              if (y.at<uint8_t>(n * es + b) != (keep ? x.at<uint8_t>(n * es + b) : 0)) bad++;
            }
          }
          CHECK(bad == 0);
        }
      }
    }
  }
  // k omitted, in place
  Tensor x = make<float>(kFloat32, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_OK(call(K("trilu"), {x.view, TensorView()}, {x.view}, trilu_call().upper(0)));
  float lw[] = {1, 0, 0, 4, 5, 0, 7, 8, 9};
  compare(x.data<float>(), lw, 9, "trilu lower in place");
  EXPECT_OK(call(K("trilu"), {x.view}, {x.view}, trilu_call().upper(1)));
  float uw[] = {1, 0, 0, 0, 5, 0, 0, 0, 9};
  compare(x.data<float>(), uw, 9, "trilu upper, no k");
  Tensor v(kFloat32, {3});
  EXPECT_ERROR(call(K("trilu"), {v.view}, {v.view}, trilu_call().upper(1)), "rank at least 2");
  Tensor kf = make<float>(kFloat32, {}, {1});
  EXPECT_ERROR(call(K("trilu"), {x.view, kf.view}, {x.view}, trilu_call().upper(1)), "k must be one int64");
}

void test_one_hot() {
  Tensor ind = make<int64_t>(kInt64, {2, 2}, {0, 2, -1, 5});
  Tensor depth = make<int64_t>(kInt64, {}, {3});
  Tensor vals = make<float>(kFloat32, {2}, {-1, 7});
  Tensor y(kFloat32, {2, 2, 3});
  EXPECT_OK(call(K("one_hot"), {ind.view, depth.view, vals.view}, {y.view}, one_hot_call().axis(-1)));
  float w[] = {7, -1, -1, -1, -1, 7, -1, -1, 7, -1, -1, -1};
  compare(y.data<float>(), w, 12, "one_hot axis -1");
  Tensor y0(kFloat32, {3, 2, 2});
  EXPECT_OK(call(K("one_hot"), {ind.view, depth.view, vals.view}, {y0.view}, one_hot_call().axis(0)));
  float w0[] = {7, -1, -1, -1, -1, -1, -1, -1, -1, 7, 7, -1};
  compare(y0.data<float>(), w0, 12, "one_hot axis 0");
  // float indices and depth, int64 values, middle axis
  Tensor fi = make<float>(kFloat32, {2, 2}, {1.7f, -0.5f, -2.2f, 9.0f});
  Tensor fd = make<float>(kFloat32, {}, {3.9f});
  Tensor iv = make<int64_t>(kInt64, {2}, {0, 1});
  Tensor y1(kInt64, {2, 3, 2});
  EXPECT_OK(call(K("one_hot"), {fi.view, fd.view, iv.view}, {y1.view}, one_hot_call().axis(1)));
  int64_t w1[] = {0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0};
  compare(y1.data<int64_t>(), w1, 12, "one_hot float indices");
  Tensor bad(kFloat32, {2, 2, 4});
  EXPECT_ERROR(call(K("one_hot"), {ind.view, depth.view, vals.view}, {bad.view}, one_hot_call().axis(-1)),
               "does not match indices dims [2,2] with depth 3");
  Tensor v3 = make<float>(kFloat32, {3}, {0, 1, 2});
  EXPECT_ERROR(call(K("one_hot"), {ind.view, depth.view, v3.view}, {y.view}, one_hot_call().axis(-1)),
               "values must have 2 elements");
  Tensor d0 = make<int64_t>(kInt64, {}, {0});
  EXPECT_ERROR(call(K("one_hot"), {ind.view, d0.view, vals.view}, {y.view}, one_hot_call().axis(-1)), "depth must be positive");
  EXPECT_ERROR(call(K("one_hot"), {ind.view, depth.view, vals.view}, {y.view}, one_hot_call().axis(4)), "axis 4 is out of range");
}

void bench() {
  Tensor x(kFloat32, {64, 32000}), v(kFloat32, {64, 8}), i(kInt64, {64, 8});
  Rng rng;
  for (int64_t n = 0; n < x.numel(); n++) x.data<float>()[n] = float(rng.uniform(-10, 10));
  Tensor k = make<int64_t>(kInt64, {}, {8});
  for (int threaded = 0; threaded < 2; threaded++) {
    call(K("topk"), {x.view, k.view}, {v.view, i.view}, topk_call().axis(1).largest(1).sorted(1), threads(threaded));
    double t0 = now_ms();
    call(K("topk"), {x.view, k.view}, {v.view, i.view}, topk_call().axis(1).largest(1).sorted(1), threads(threaded));
    std::printf("bench %s: topk k=8 over [64, 32000] f32 %.2f ms\n", threaded ? "2 threads" : "1 thread ", now_ms() - t0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {  // timings only on request, never in the test run
    bench();
    return 0;
  }
  test_topk_hand();
  test_topk_random<float>(kFloat32);
  test_topk_random<int64_t>(kInt64);
  test_topk_random<int32_t>(kInt32);
  test_trilu();
  test_one_hot();
  return finish("select_test");
}
