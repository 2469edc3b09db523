// Standalone test of the binary elementwise kernels against hand values and a naive broadcasting loop.
#include <functional>
#include <limits>

#include "test_util.h"

using namespace test;

namespace {

KernelFn K(const char* name) { return find_kernel({elementwise_kernels()}, name); }

// Flat index into x (right-aligned to out dims, broadcasting size-1 dims) for output flat index i.
int64_t src_index(const TensorView& x, const TensorView& out, int64_t i) {
  int64_t idx = 0, stride = 1;
  for (int j = out.rank - 1; j >= 0; j--) {
    int64_t c = i % out.dims[j];
    i /= out.dims[j];
    int xi = j - (out.rank - x.rank);
    if (xi < 0) continue;
    int64_t d = x.dims[xi];
    if (d != 1) idx += c * stride;
    stride *= d;
  }
  return idx;
}

template <class T, class Y>
void naive(const Tensor& a, const Tensor& b, Tensor& y, const std::function<Y(T, T)>& f) {
  for (int64_t i = 0; i < y.numel(); i++) {
    y.data<Y>()[i] = f(a.at<T>(src_index(a.view, y.view, i)), b.at<T>(src_index(b.view, y.view, i)));
  }
}

template <class T> Tensor random_tensor(int32_t dt, std::vector<int64_t> dims, Rng& rng, double lo, double hi) {
  Tensor t(dt, dims);
  for (int64_t i = 0; i < t.numel(); i++) {
    if constexpr (std::is_floating_point<T>::value) t.data<T>()[i] = static_cast<T>(rng.uniform(lo, hi));
    else t.data<T>()[i] = static_cast<T>(rng.integer(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
  }
  return t;
}

struct Shapes {
  std::vector<int64_t> a, b, y;
};

const std::vector<Shapes> kShapes = {
    {{}, {}, {}},
    {{1}, {1}, {1}},
    {{7}, {7}, {7}},
    {{7}, {}, {7}},
    {{}, {7}, {7}},
    {{3, 1}, {1, 4}, {3, 4}},
    {{2, 3, 5}, {5}, {2, 3, 5}},
    {{2, 3, 5}, {3, 1}, {2, 3, 5}},
    {{1, 3, 1}, {2, 1, 5}, {2, 3, 5}},
    {{1000, 33}, {33}, {1000, 33}},
    {{1000, 33}, {1000, 1}, {1000, 33}},
    {{40000}, {40000}, {40000}},
    {{257, 1, 129}, {1, 65, 1}, {257, 65, 129}},
    {{2, 1, 3, 1, 5, 1}, {1, 4, 1, 6, 1, 7}, {2, 4, 3, 6, 5, 7}},
    {{4, 0, 3}, {3}, {4, 0, 3}},
};

template <class T, class Y>
void check_binary(const char* name, int32_t dt, int32_t ydt, double lo, double hi, const std::function<Y(T, T)>& f) {
  Rng rng;
  for (const Shapes& s : kShapes) {
    for (int threaded = 0; threaded < 2; threaded++) {
      Tensor a = random_tensor<T>(dt, s.a, rng, lo, hi);
      Tensor b = random_tensor<T>(dt, s.b, rng, lo, hi);
      Tensor y(ydt, s.y), want(ydt, s.y);
      EXPECT_OK(call(K(name), {a.view, b.view}, {y.view}, {}, threads(threaded != 0)));
      naive<T, Y>(a, b, want, f);
      std::string what = std::string(name) + " " + std::to_string(dt) + " shape #" + std::to_string(&s - kShapes.data());
      compare<Y>(y.data<Y>(), want.data<Y>(), y.numel(), what.c_str());
    }
  }
}

template <class T> T wrap(int64_t v) { return static_cast<T>(static_cast<uint64_t>(v)); }

template <class T> void check_int_arith(int32_t dt) {
  check_binary<T, T>("add", dt, dt, -100, 100, [](T a, T b) { return wrap<T>(int64_t(a) + int64_t(b)); });
  check_binary<T, T>("sub", dt, dt, -100, 100, [](T a, T b) { return wrap<T>(int64_t(a) - int64_t(b)); });
  check_binary<T, T>("mul", dt, dt, -100, 100, [](T a, T b) { return wrap<T>(int64_t(a) * int64_t(b)); });
  check_binary<T, T>("div", dt, dt, -20, 20, [](T a, T b) { return b == 0 ? T(0) : T(a / b); });
  check_binary<T, T>("max", dt, dt, -20, 20, [](T a, T b) { return a > b ? a : b; });
  check_binary<T, T>("min", dt, dt, -20, 20, [](T a, T b) { return a < b ? a : b; });
  check_binary<T, T>("mod", dt, dt, -20, 20, [](T a, T b) {
    if (b == 0) return T(0);
    int64_t r = int64_t(a) % int64_t(b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return T(r);
  });
}

template <class T> void check_float_arith(int32_t dt) {
  check_binary<T, T>("add", dt, dt, -10, 10, [](T a, T b) { return T(a + b); });
  check_binary<T, T>("sub", dt, dt, -10, 10, [](T a, T b) { return T(a - b); });
  check_binary<T, T>("mul", dt, dt, -10, 10, [](T a, T b) { return T(a * b); });
  check_binary<T, T>("div", dt, dt, -10, 10, [](T a, T b) { return T(a / b); });
  check_binary<T, T>("pow", dt, dt, 0.1, 3, [](T a, T b) { return T(std::pow(double(a), double(b))); });
  check_binary<T, T>("max", dt, dt, -10, 10, [](T a, T b) { return a > b ? a : b; });
  check_binary<T, T>("min", dt, dt, -10, 10, [](T a, T b) { return a < b ? a : b; });
  check_binary<T, T>("mod", dt, dt, -10, 10, [](T a, T b) { return T(std::fmod(a, b)); });
}

template <class T> void check_compare(int32_t dt) {
  using B = uint8_t;
  check_binary<T, B>("equal", dt, kBool, -3, 3, [](T a, T b) { return B(a == b); });
  check_binary<T, B>("less", dt, kBool, -3, 3, [](T a, T b) { return B(a < b); });
  check_binary<T, B>("greater", dt, kBool, -3, 3, [](T a, T b) { return B(a > b); });
  check_binary<T, B>("less_equal", dt, kBool, -3, 3, [](T a, T b) { return B(a <= b); });
  check_binary<T, B>("greater_equal", dt, kBool, -3, 3, [](T a, T b) { return B(a >= b); });
}

void test_hand_values() {
  // integer mod follows the divisor's sign; division truncates; x / 0 and x mod 0 give 0
  Tensor a = make<int32_t>(kInt32, {6}, {-7, 7, -7, 7, 5, INT32_MIN});
  Tensor b = make<int32_t>(kInt32, {6}, {3, -3, -3, 3, 0, -1});
  Tensor y(kInt32, {6});
  EXPECT_OK(call(K("mod"), {a.view, b.view}, {y.view}));
  int32_t mod_want[] = {2, -2, -1, 1, 0, 0};
  compare(y.data<int32_t>(), mod_want, 6, "int mod");
  EXPECT_OK(call(K("div"), {a.view, b.view}, {y.view}));
  int32_t div_want[] = {-2, -2, 2, 2, 0, INT32_MIN};
  compare(y.data<int32_t>(), div_want, 6, "int div");

  // int64 mod and div
  Tensor a64 = make<int64_t>(kInt64, {4}, {-7, 7, INT64_MIN, 9});
  Tensor b64 = make<int64_t>(kInt64, {4}, {2, -2, -1, 0});
  Tensor y64(kInt64, {4});
  EXPECT_OK(call(K("mod"), {a64.view, b64.view}, {y64.view}));
  int64_t mod64[] = {1, -1, 0, 0};
  compare(y64.data<int64_t>(), mod64, 4, "int64 mod");
  EXPECT_OK(call(K("div"), {a64.view, b64.view}, {y64.view}));
  int64_t div64[] = {-3, -3, INT64_MIN, 0};
  compare(y64.data<int64_t>(), div64, 4, "int64 div");

  // float mod: fmod (sign of the dividend), NaN → 0
  Tensor fa = make<float>(kFloat32, {4}, {-7.5f, 7.5f, 1.0f, INFINITY});
  Tensor fb = make<float>(kFloat32, {4}, {2.0f, -2.0f, 0.0f, 2.0f});
  Tensor fy(kFloat32, {4});
  EXPECT_OK(call(K("mod"), {fa.view, fb.view}, {fy.view}));
  float fmod_want[] = {-1.5f, 1.5f, 0.0f, 0.0f};
  compare(fy.data<float>(), fmod_want, 4, "float mod");

  // fmod=1: the dividend's sign; floats keep NaN
  Tensor ca = make<int32_t>(kInt32, {4}, {-7, 7, -7, 5});
  Tensor cb = make<int32_t>(kInt32, {4}, {3, -3, -3, 0});
  Tensor cy(kInt32, {4});
  EXPECT_OK(call(K("mod"), {ca.view, cb.view}, {cy.view}, mod_call().fmod(1)));
  int32_t cw[] = {-1, 1, -1, 0};
  compare(cy.data<int32_t>(), cw, 4, "int fmod");
  EXPECT_OK(call(K("mod"), {fa.view, fb.view}, {fy.view}, mod_call().fmod(1)));
  CHECK(fy.at<float>(0) == -1.5f && fy.at<float>(1) == 1.5f && std::isnan(fy.at<float>(2)) && std::isnan(fy.at<float>(3)));
  EXPECT_ERROR(call(K("mod"), {fa.view, fb.view}, {fy.view}, mod_call().fmod(2)), "fmod must be 0 or 1");
  // positional on purpose: an iarg add does not take
  EXPECT_ERROR(call_positional(K("add"), {fa.view, fb.view}, {fy.view}, {1}, {}),
               "add: needs 2 inputs, 1 output, 0 iargs and 0 fargs; got 2, 1, 1 and 0");

  // max/min propagate NaN from either side
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor ma = make<float>(kFloat32, {3}, {nan, 1.0f, 2.0f});
  Tensor mb = make<float>(kFloat32, {3}, {1.0f, nan, -3.0f});
  Tensor my(kFloat32, {3});
  EXPECT_OK(call(K("max"), {ma.view, mb.view}, {my.view}));
  CHECK(std::isnan(my.at<float>(0)) && std::isnan(my.at<float>(1)) && my.at<float>(2) == 2.0f);
  EXPECT_OK(call(K("min"), {ma.view, mb.view}, {my.view}));
  CHECK(std::isnan(my.at<float>(0)) && std::isnan(my.at<float>(1)) && my.at<float>(2) == -3.0f);

  // int32 add wraps
  Tensor wa = make<int32_t>(kInt32, {1}, {INT32_MAX});
  Tensor wb = make<int32_t>(kInt32, {1}, {1});
  Tensor wy(kInt32, {1});
  EXPECT_OK(call(K("add"), {wa.view, wb.view}, {wy.view}));
  CHECK(wy.at<int32_t>(0) == INT32_MIN);
}

void test_pow() {
  // integer pow: exact, negative exponents truncate toward 0
  Tensor a = make<int64_t>(kInt64, {6}, {2, 3, -2, 2, 1, -1});
  Tensor b = make<int64_t>(kInt64, {6}, {10, 0, 3, -1, -5, -3});
  Tensor y(kInt64, {6});
  EXPECT_OK(call(K("pow"), {a.view, b.view}, {y.view}));
  int64_t want[] = {1024, 1, -8, 0, 1, -1};
  compare(y.data<int64_t>(), want, 6, "int pow");
  // float base, int64 exponent (ONNX T1/T2)
  Tensor fa = make<float>(kFloat32, {2, 2}, {2.0f, 3.0f, 0.5f, -2.0f});
  Tensor fb = make<int64_t>(kInt64, {2}, {2, 3});
  Tensor fy(kFloat32, {2, 2});
  EXPECT_OK(call(K("pow"), {fa.view, fb.view}, {fy.view}));
  float fwant[] = {4.0f, 27.0f, 0.25f, -8.0f};
  compare(fy.data<float>(), fwant, 4, "float^int pow");
  // int base, float exponent
  Tensor ia = make<int32_t>(kInt32, {3}, {4, 9, 2});
  Tensor ib = make<float>(kFloat32, {3}, {0.5f, 0.5f, -1.0f});
  Tensor iy(kInt32, {3});
  EXPECT_OK(call(K("pow"), {ia.view, ib.view}, {iy.view}));
  int32_t iwant[] = {2, 3, 0};
  compare(iy.data<int32_t>(), iwant, 3, "int^float pow");
}

void test_logic_where() {
  Tensor a = make<uint8_t>(kBool, {4}, {0, 0, 1, 1});
  Tensor b = make<uint8_t>(kBool, {4}, {0, 1, 0, 1});
  Tensor y(kBool, {4});
  EXPECT_OK(call(K("and"), {a.view, b.view}, {y.view}));
  uint8_t and_w[] = {0, 0, 0, 1};
  compare(y.data<uint8_t>(), and_w, 4, "and");
  EXPECT_OK(call(K("or"), {a.view, b.view}, {y.view}));
  uint8_t or_w[] = {0, 1, 1, 1};
  compare(y.data<uint8_t>(), or_w, 4, "or");
  EXPECT_OK(call(K("xor"), {a.view, b.view}, {y.view}));
  uint8_t xor_w[] = {0, 1, 1, 0};
  compare(y.data<uint8_t>(), xor_w, 4, "xor");

  // where with three-way broadcasting, several element sizes
  Rng rng;
  for (int32_t dt : {kFloat32, kInt64, kBool, kFloat16, kFloat64}) {
    for (auto dims : std::vector<std::vector<std::vector<int64_t>>>{
             {{3, 1}, {1, 4}, {4}, {3, 4}}, {{50, 1, 70}, {50, 60, 1}, {}, {50, 60, 70}}, {{7}, {7}, {7}, {7}}}) {
      Tensor c(kBool, dims[0]), x(dt, dims[1]), z(dt, dims[2]), out(dt, dims[3]);
      for (int64_t i = 0; i < c.numel(); i++) c.data<uint8_t>()[i] = rng.next() & 1;
      for (size_t i = 0; i < x.view.bytes(); i++) x.data<uint8_t>()[i] = uint8_t(rng.next());
      for (size_t i = 0; i < z.view.bytes(); i++) z.data<uint8_t>()[i] = uint8_t(rng.next());
      EXPECT_OK(call(K("where"), {c.view, x.view, z.view}, {out.view}));
      size_t es = dtype_size(dt);
      int bad = 0;
      for (int64_t i = 0; i < out.numel(); i++) {
        bool cv = c.at<uint8_t>(src_index(c.view, out.view, i));
        const Tensor& s = cv ? x : z;
        if (std::memcmp(out.data<uint8_t>() + i * es, s.data<uint8_t>() + src_index(s.view, out.view, i) * es, es) != 0) bad++;
      }
      CHECK(bad == 0);
    }
  }
}

void test_errors() {
  Tensor a(kFloat32, {3, 4}), b(kFloat32, {5}), y(kFloat32, {3, 4});
  EXPECT_ERROR(call(K("add"), {a.view, b.view}, {y.view}), "input 1 dims [5] do not broadcast to output dims [3,4]");
  Tensor b4(kFloat32, {4}), y2(kFloat32, {3, 5});
  EXPECT_ERROR(call(K("add"), {a.view, b4.view}, {y2.view}), "do not broadcast");
  Tensor one(kFloat32, {1}), y5(kFloat32, {5});
  EXPECT_ERROR(call(K("mul"), {one.view, one.view}, {y5.view}), "not the broadcast");
  Tensor bi(kInt32, {4});
  EXPECT_ERROR(call(K("add"), {a.view, bi.view}, {y.view}), "dtypes differ");
  Tensor yb(kFloat32, {3, 4});
  EXPECT_ERROR(call(K("less"), {a.view, b4.view}, {yb.view}), "output must be bool");
  EXPECT_ERROR(call(K("and"), {a.view, b4.view}, {yb.view}), "must be bool");
  EXPECT_ERROR(call(K("add"), {a.view}, {y.view}), "add: needs 2 inputs");
  EXPECT_ERROR(call(K("add"), {a.view, TensorView()}, {y.view}), "input 1 is missing");
  Tensor c(kFloat32, {3, 4});
  EXPECT_ERROR(call(K("where"), {c.view, a.view, a.view}, {y.view}), "condition must be bool");
  Tensor big(kFloat32, {2, 3, 4});
  EXPECT_ERROR(call(K("sub"), {big.view, a.view}, {y.view}), "higher rank");
  Tensor s(kFloat16, {3, 4});
  EXPECT_ERROR(call(K("add"), {s.view, s.view}, {s.view}), "unsupported dtype float16");
}

void bench() {
  const int64_t n = 1 << 22;
  Tensor a(kFloat32, {n / 512, 512}), b(kFloat32, {n / 512, 512}), row(kFloat32, {512}), y(kFloat32, {n / 512, 512});
  for (int64_t i = 0; i < n; i++) a.data<float>()[i] = b.data<float>()[i] = float(i % 1000);
  for (int threaded = 0; threaded < 2; threaded++) {
    for (int rep = 0; rep < 2; rep++) {
      double t0 = now_ms();
      call(K("add"), {a.view, b.view}, {y.view}, {}, threads(threaded));
      double t1 = now_ms();
      call(K("mul"), {a.view, row.view}, {y.view}, {}, threads(threaded));
      double t2 = now_ms();
      if (rep == 1) {
        std::printf("bench %s: add same-shape 4M f32 %.2f ms, mul row-bcast %.2f ms\n", threaded ? "2 threads" : "1 thread",
                    t1 - t0, t2 - t1);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {  // timings only on request, never in the test run
    bench();
    return 0;
  }
  check_float_arith<float>(kFloat32);
  check_float_arith<double>(kFloat64);
  check_int_arith<int32_t>(kInt32);
  check_int_arith<int64_t>(kInt64);
  check_int_arith<int8_t>(kInt8);
  check_compare<float>(kFloat32);
  check_compare<int64_t>(kInt64);
  check_compare<int32_t>(kInt32);
  test_hand_values();
  test_pow();
  test_logic_where();
  test_errors();
  return finish("elementwise_test");
}
