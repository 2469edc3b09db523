// Standalone test of cast (all dtype pairs; float16 against the compiler's _Float16, bfloat16 against a rounding by
// scaling), copy, fill and range. (half_weights_test.cc checks bfloat16 rounding in depth.)
#include <algorithm>
#include <limits>

#include "half_ref.h"
#include "test_util.h"

using namespace test;

namespace {

KernelFn K(const char* name) { return find_kernel({cast_kernels()}, name); }

const int32_t kAll[] = {kFloat32, kFloat64, kInt32, kInt64, kInt8, kUint8, kBool, kFloat16, kBFloat16};

using half_ref::bf16_bits;
using half_ref::bf16_value;
using half_ref::f16_bits;
using half_ref::f16_value;

// The value an element of dtype dt holds, as a double.
double get(const Tensor& t, int64_t i) {
  switch (t.view.dtype) {
    case kFloat32: return t.at<float>(i);
    case kFloat64: return t.at<double>(i);
    case kInt32: return t.at<int32_t>(i);
    case kInt64: return static_cast<double>(t.at<int64_t>(i));
    case kInt8: return t.at<int8_t>(i);
    case kUint8: case kBool: return t.at<uint8_t>(i);
    case kFloat16: return f16_value(t.at<uint16_t>(i));
    case kBFloat16: return bf16_value(t.at<uint16_t>(i));
  }
  return 0;
}

void put(Tensor& t, int64_t i, double v) {
  switch (t.view.dtype) {
    case kFloat32: t.data<float>()[i] = float(v); break;
    case kFloat64: t.data<double>()[i] = v; break;
    case kInt32: t.data<int32_t>()[i] = int32_t(v); break;
    case kInt64: t.data<int64_t>()[i] = int64_t(v); break;
    case kInt8: t.data<int8_t>()[i] = int8_t(v); break;
    case kUint8: t.data<uint8_t>()[i] = uint8_t(v); break;
    case kBool: t.data<uint8_t>()[i] = v != 0; break;
    case kFloat16: t.data<uint16_t>()[i] = f16_bits(v); break;
    case kBFloat16: t.data<uint16_t>()[i] = bf16_bits(v); break;
  }
}

// The expected conversion of a source value v (exactly representable in both double and the source type).
double expect(double v, int32_t to) {
  auto wrap = [](double x, double mod, double half) {
    if (!std::isfinite(x)) return 0.0;
    double t = std::fmod(std::trunc(x), mod);
    if (t < 0) t += mod;
    return t >= half ? t - mod : t;
  };
  switch (to) {
    case kFloat32: return float(v);
    case kFloat64: return v;
    case kInt32: return wrap(v, 4294967296.0, 2147483648.0);
    case kInt8: return wrap(v, 256.0, 128.0);
    case kUint8: return wrap(v, 256.0, 256.0);
    case kInt64: return v != v ? 0 : v >= 9.2233720368547758e18 ? 9.2233720368547758e18 : v < -9.2233720368547758e18 ? -9.2233720368547758e18 : std::trunc(v);
    case kBool: return v != 0;
    case kFloat16: return f16_value(f16_bits(v));
    case kBFloat16: return bf16_value(bf16_bits(v));
  }
  return 0;
}

bool holds(int32_t dt, double v) {
  switch (dt) {
    case kFloat32: return std::isnan(v) || double(float(v)) == v;
    case kFloat64: return true;
    case kInt32: return v == std::trunc(v) && v >= -2147483648.0 && v <= 2147483647.0;
    case kInt64: return v == std::trunc(v) && std::fabs(v) < 1e18;
    case kInt8: return v == std::trunc(v) && v >= -128 && v <= 127;
    case kUint8: return v == std::trunc(v) && v >= 0 && v <= 255;
    case kBool: return v == 0 || v == 1;
    case kFloat16: return std::isnan(v) || f16_value(f16_bits(v)) == v;
    case kBFloat16: return std::isnan(v) || bf16_value(bf16_bits(v)) == v;
  }
  return false;
}

void test_all_pairs() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> pool = {0, -0.0, 1, -1, 0.5, -0.5, 1.5, -2.5, 2.75, 127, 128, -128, -129, 255, 256, 300, -300,
                              65504, 65519, 65520, 1e5, -1e5, 3e9, -3e9, 2147483647, -2147483648.0, 4294967296.0 + 5,
                              1e-8, 6e-8, 3e-8, 1e20, -1e20, 1e300, INFINITY, -INFINITY, nan, 0.1, 1.0 / 3,
                              5.960464477539063e-08, 2.9802322387695312e-08,
                              // bfloat16: ties to even (257, 1 + 2^-8, 1 + 3·2^-8), its largest value, halfway to 2^128
                              257, -257, 1.00390625, 1.01171875, 0x1.fep127, -0x1.ffp127};
  for (int32_t from : kAll) {
    std::vector<double> vals;
    for (double v : pool) {
      if (holds(from, v)) vals.push_back(v);
    }
    for (int32_t to : kAll) {
      int64_t n = static_cast<int64_t>(vals.size());
      Tensor x(from, {n}), y(to, {n});
      for (int64_t i = 0; i < n; i++) put(x, i, vals[i]);
      EXPECT_OK(call(K("cast"), {x.view}, {y.view}));
      int bad = 0;
      for (int64_t i = 0; i < n; i++) {
        double src = get(x, i);
        double want = expect(src, to);
        double got = get(y, i);
        if (!(got == want || (got != got && want != want)) || (got == 0 && std::signbit(got) != std::signbit(want) &&
                                                                 (to == kFloat32 || to == kFloat64 || to == kFloat16 || to == kBFloat16))) {
          if (bad++ < 3) std::fprintf(stderr, "cast %d→%d: %.17g gave %.17g, want %.17g\n", from, to, src, got, want);
        }
      }
      CHECK(bad == 0);
    }
  }
}

// float16 rounding from doubles: every half value, every midpoint and its neighbours, and random doubles.
void test_f16_rounding() {
  std::vector<double> vals;
  for (uint32_t b = 0; b < 0x7c00; b++) {
    double v = f16_value(uint16_t(b));
    double next = f16_value(uint16_t(b + 1));
    double mid = (v + next) / 2;
    for (double s : {1.0, -1.0}) {
      vals.push_back(s * v);
      vals.push_back(s * mid);
      vals.push_back(s * std::nextafter(mid, 0.0));
      vals.push_back(s * std::nextafter(mid, 1e9));
    }
  }
  Rng rng;
  for (int i = 0; i < 200000; i++) vals.push_back(std::ldexp(rng.uniform(-1, 1), int(rng.integer(-30, 17))));
  int64_t n = static_cast<int64_t>(vals.size());
  Tensor x(kFloat64, {n}), y(kFloat16, {n}), xf(kFloat32, {n}), yf(kFloat16, {n});
  for (int64_t i = 0; i < n; i++) {
    x.data<double>()[i] = vals[i];
    xf.data<float>()[i] = float(vals[i]);
  }
  EXPECT_OK(call(K("cast"), {x.view}, {y.view}));
  EXPECT_OK(call(K("cast"), {xf.view}, {yf.view}));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    if (y.at<uint16_t>(i) != f16_bits(vals[i]) || yf.at<uint16_t>(i) != f16_bits(double(float(vals[i])))) {
      if (bad++ < 5) std::fprintf(stderr, "f16 of %.17g: got %04x want %04x\n", vals[i], y.at<uint16_t>(i), f16_bits(vals[i]));
    }
  }
  CHECK(bad == 0);
  // and back: every half to float32 exactly
  Tensor h(kFloat16, {65536}), hf(kFloat32, {65536});
  for (int64_t i = 0; i < 65536; i++) h.data<uint16_t>()[i] = uint16_t(i);
  EXPECT_OK(call(K("cast"), {h.view}, {hf.view}));
  bad = 0;
  for (int64_t i = 0; i < 65536; i++) {
    double want = f16_value(uint16_t(i));
    double got = hf.at<float>(i);
    if (!(got == want || (got != got && want != want)) || std::signbit(got) != std::signbit(want)) bad++;
  }
  CHECK(bad == 0);
}

void test_copy_fill_range() {
  Tensor x = make<int32_t>(kInt32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y(kFloat32, {6});
  EXPECT_OK(call(K("copy"), {x.view}, {y.view}));
  CHECK(std::memcmp(x.data(), y.data(), 24) == 0);
  Tensor small(kFloat32, {5});
  EXPECT_ERROR(call(K("copy"), {x.view}, {small.view}), "copy: output holds 20 bytes");
  Tensor big(kUint8, {3 << 20}), big2(kUint8, {3 << 20});
  for (int64_t i = 0; i < big.numel(); i++) big.data<uint8_t>()[i] = uint8_t(i * 7);
  EXPECT_OK(call(K("copy"), {big.view}, {big2.view}));
  CHECK(big.store == big2.store);

  Tensor f(kFloat32, {3, 1000});
  EXPECT_OK(call(K("fill"), {}, {f.view}, fill_call().value(0.1)));
  CHECK(f.at<float>(0) == 0.1f && f.at<float>(2999) == 0.1f);
  Tensor fi(kInt64, {4});
  EXPECT_OK(call(K("fill"), {}, {fi.view}, fill_call().value(-2.7)));
  CHECK(fi.at<int64_t>(0) == -2 && fi.at<int64_t>(3) == -2);
  Tensor fb(kBool, {2});
  EXPECT_OK(call(K("fill"), {}, {fb.view}, fill_call().value(0.5)));
  CHECK(fb.at<uint8_t>(0) == 1);
  Tensor fh(kFloat16, {2});
  EXPECT_OK(call(K("fill"), {}, {fh.view}, fill_call().value(1.0)));
  CHECK(fh.at<uint16_t>(1) == 0x3c00);
  EXPECT_ERROR(call(K("fill"), {}, {fh.view}), "fill: needs 0 inputs, 1 output, 0 iargs and 1 farg; got 0, 1, 0 and 0");

  Tensor r(kFloat32, {5});
  EXPECT_OK(call(K("range"), {}, {r.view}, range_call().start(1.0).delta(0.5)));
  float rw[] = {1.0f, 1.5f, 2.0f, 2.5f, 3.0f};
  compare(r.data<float>(), rw, 5, "range f32");
  Tensor ri(kInt64, {4});
  EXPECT_OK(call(K("range"), {}, {ri.view}, range_call().start(10).delta(-3)));
  int64_t riw[] = {10, 7, 4, 1};
  compare(ri.data<int64_t>(), riw, 4, "range int64");
  Tensor r0(kInt32, {0});
  EXPECT_OK(call(K("range"), {}, {r0.view}, range_call().start(0).delta(1)));
  Tensor r2(kInt32, {2, 2});
  EXPECT_ERROR(call(K("range"), {}, {r2.view}, range_call().start(0).delta(1)), "range: output must have rank 1");
  Tensor c1(kFloat32, {2, 3}), c2(kFloat16, {3, 2});
  EXPECT_ERROR(call(K("cast"), {c1.view}, {c2.view}), "cast: output dims [3,2] differ from input dims [2,3]");
}

void bench() {
  const int64_t n = 1 << 22;
  Tensor x(kFloat32, {n}), h(kFloat16, {n}), i(kInt64, {n});
  Rng rng;
  for (int64_t k = 0; k < n; k++) x.data<float>()[k] = float(rng.uniform(-100, 100));
  for (int threaded = 0; threaded < 2; threaded++) {
    call(K("cast"), {x.view}, {h.view}, {}, threads(threaded));
    double t0 = now_ms();
    call(K("cast"), {x.view}, {h.view}, {}, threads(threaded));
    double t1 = now_ms();
    call(K("cast"), {x.view}, {i.view}, {}, threads(threaded));
    double t2 = now_ms();
    std::printf("bench %s: cast 4M f32→f16 %.2f ms, f32→i64 %.2f ms\n", threaded ? "2 threads" : "1 thread ", t1 - t0, t2 - t1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {  // timings only on request, never in the test run
    bench();
    return 0;
  }
  test_all_pairs();
  test_f16_rounding();
  test_copy_fill_range();
  return finish("cast_test");
}
