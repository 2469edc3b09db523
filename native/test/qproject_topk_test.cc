// qproject_topk's row products at every row count: each variant this machine runs against ref (bit-identical values and ids) over odd shapes; `bench` times it against qmatmul at the same M × V × D.
// Run: native/build-tests/qproject_topk_test [bench [M ...]]   (PLANC_ISA caps the variants, as for the addon)
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <ctime>
#include <vector>

#include "cpu/qgemm.h"
#include "test_util.h"

namespace planc {
KernelList qgemm_kernels();
KernelList qproject_topk_kernels();
}  // namespace planc

using test::Tensor;
using test::f32;

namespace {

namespace v = planc::qproject_topk_args;

planc::KernelFn k_qtopk, k_qmatmul;
std::vector<int64_t> g_variants;  // the variants this machine runs (auto, ref, ...)

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A vocabulary table as a plan holds it: int8 rows [V, Dp] (D rounded up to 64, zero padded), scale and sum per row,
// a residual plane [V, Dp / 2] of random nibbles.
struct Table {
  int64_t nv, d, dp;
  Tensor w, scale, sum, res;
};

Table make_table(int64_t nv, int64_t d, test::Rng& rng) {
  const int64_t dp = ceil_div(d, 64) * 64;
  Table t{nv, d, dp, Tensor(planc::kInt8, {nv, dp}), f32({nv}), Tensor(planc::kInt32, {nv}), Tensor(planc::kUint8, {nv, dp / 2})};
  int8_t* q = t.w.data<int8_t>();
  for (int64_t r = 0; r < nv; r++) {
    int32_t s = 0;
    for (int64_t i = 0; i < d; i++) {
      // mostly small values, a few at the extremes (±127, and -128, which a plan never writes but the sums must take)
      const int64_t u = rng.integer(0, 99);
      q[r * dp + i] = static_cast<int8_t>(u < 2 ? (u ? 127 : -128) : rng.integer(-40, 40));
      s += q[r * dp + i];
    }
    t.sum.data<int32_t>()[r] = s;
    t.scale.data<float>()[r] = static_cast<float>(rng.uniform(0.001, 0.01));
  }
  for (int64_t i = 0; i < t.res.numel(); i++) t.res.data<uint8_t>()[i] = static_cast<uint8_t>(rng.next() & 0xff);
  return t;
}

struct Case {
  int64_t rows, nv, d, k, input;
  bool bias, res;
  int active;  // 0: none; 1: about a third of the ids; 2: fewer than k ids; 3: runs (a shortlist's union of clusters)
};

std::string describe(const Case& c, int64_t variant, bool pool) {
  char s[240];
  std::snprintf(s, sizeof s, "qproject_topk %s rows=%lld V=%lld D=%lld k=%lld input=%lld bias=%d res=%d active=%d %s", v::kVariantNames[variant],
                (long long)c.rows, (long long)c.nv, (long long)c.d, (long long)c.k, (long long)c.input, c.bias, c.res, c.active,
                pool ? "pool" : "1 thread");
  return s;
}

uint8_t active_at(int mode, int64_t i, int64_t nv) {
  switch (mode) {
    case 1: return i % 3 == 1;
    case 2: return i == 5 || i == nv - 1;
    case 3: return (i / 37) % 3 != 1 || i % 11 == 0;
    default: return 1;
  }
}

// Every variant against ref, on one pool choice: the same values (bit for bit) and ids.
void check(const Case& c, const Table& t, test::Rng& rng, planc::ThreadPool* pool) {
  Tensor x = f32({c.rows, c.d}), bias = f32({c.nv}), act(planc::kUint8, {c.nv});
  for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = static_cast<float>(rng.uniform(-2, 2));
  if (c.rows > 3) std::fill(x.data<float>() + 2 * c.d, x.data<float>() + 3 * c.d, 0.0f);  // row 2 all zero: sa = 0
  if (c.rows > 5) x.data<float>()[4 * c.d + c.d / 2] = NAN;  // row 4: NaN
  for (int64_t i = 0; i < c.nv; i++) bias.data<float>()[i] = static_cast<float>(rng.uniform(-1, 1));
  for (int64_t i = 0; i < c.nv; i++) act.data<uint8_t>()[i] = active_at(c.active, i, c.nv);
  planc::TensorView none;
  auto run = [&](int64_t variant, Tensor& vals, Tensor& ids) {
    return test::call(k_qtopk,
                      {x.view, t.w.view, t.scale.view, t.sum.view, c.bias ? bias.view : none, c.active ? act.view : none,
                       c.res ? t.res.view : none},
                      {vals.view, ids.view}, test::qproject_topk_call().k(c.k).input(planc::QuantInput(c.input)).d(c.d), pool,
                      variant);
  };
  Tensor want_v = f32({c.rows, c.k}), want_i(planc::kInt64, {c.rows, c.k});
  test::expect_ok(run(v::kVariantRef, want_v, want_i), describe(c, v::kVariantRef, pool).c_str());
  for (int64_t variant : g_variants) {
    if (variant == v::kVariantRef) continue;
    Tensor got_v = f32({c.rows, c.k}), got_i(planc::kInt64, {c.rows, c.k});
    test::expect_ok(run(variant, got_v, got_i), describe(c, variant, pool).c_str());
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < got_v.numel(); i++) {
      const float a = got_v.data<float>()[i], b = want_v.data<float>()[i];
      const bool same_v = c.input == planc::kQuantInInt8 ? test::same(a, b) : (a == b || (a != a && b != b) || std::fabs(a - b) <= 1e-4f);
      if ((!same_v || got_i.data<int64_t>()[i] != want_i.data<int64_t>()[i]) && bad++ == 0) first = i;
    }
    CHECK_MSG(bad == 0, "%s: %lld slots differ from ref (first %lld: %.9g #%lld, ref %.9g #%lld)", describe(c, variant, pool).c_str(), (long long)bad,
              (long long)first, first >= 0 ? got_v.data<float>()[first] : 0.0f, first >= 0 ? (long long)got_i.data<int64_t>()[first] : 0LL,
              first >= 0 ? want_v.data<float>()[first] : 0.0f, first >= 0 ? (long long)want_i.data<int64_t>()[first] : 0LL);
  }
}

void tests() {
  test::Rng rng;
  // Odd vocabularies and D (Dp 64, 128, 576), every row count to 70 on one, the tile edges on the others.
  const Table small = make_table(37, 33, rng), mid = make_table(1001, 100, rng), wide = make_table(523, 520, rng);
  for (int64_t rows = 1; rows <= 70; rows++) {
    const int64_t k = 1 + rows % 8;
    check({rows, mid.nv, mid.d, k, planc::kQuantInInt8, rows % 2 == 0, false, static_cast<int>(rows % 4)}, mid, rng, &test::pool());
  }
  for (int64_t rows : {1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 48, 63, 64, 65, 70})
    for (planc::ThreadPool* pool : {static_cast<planc::ThreadPool*>(nullptr), &test::pool()})
      for (int active : {0, 1, 2, 3})
        for (bool bias : {false, true}) {
          check({rows, small.nv, small.d, 1 + (rows + active) % 8, planc::kQuantInInt8, bias, (rows + active) % 3 == 0, active}, small, rng, pool);
          check({rows, wide.nv, wide.d, 8 - (rows + active) % 8, planc::kQuantInInt8, bias, (rows + bias) % 2 == 1, active}, wide, rng, pool);
        }
  // k = 1..8 each with the residual plane (rescored candidates) and without, a shortlist's runs of ids
  for (int64_t k = 1; k <= 8; k++)
    for (bool res : {false, true}) check({33, mid.nv, mid.d, k, planc::kQuantInInt8, k % 2 == 0, res, 3}, mid, rng, &test::pool());
  // float32 rows at the same edges (close to ref: float sums in another order)
  for (int64_t rows : {7, 8, 9, 33, 65})
    for (int active : {0, 1}) check({rows, mid.nv, mid.d, 4, planc::kQuantInFloat32, true, false, active}, mid, rng, &test::pool());
}

// ---------- bench ----------

// This thread's CPU time in ms (one-thread runs: the time others' processes take on the shared cores is not counted).
double thread_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// The median of reps runs of fn and the best, in microseconds: the calling thread's CPU time, or wall time (the pool).
template <class F> void time_us(int reps, bool wall, F fn, double* median, double* best) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    const double t0 = wall ? test::now_ms() : thread_ms();
    fn();
    t.push_back(((wall ? test::now_ms() : thread_ms()) - t0) * 1e3);
  }
  std::sort(t.begin(), t.end());
  *median = t[t.size() / 2];
  *best = t[0];
}

// qproject_topk (int8 rows, k = 8; the full vocabulary and a shortlist of a quarter of it) against qmatmul at the
// same M × V × D (the int8 GEMM of this build: its packed micro-kernel tiles), on the auto variant under PLANC_ISA;
// GOPS = 2 · M · N · D / t (one thread: its CPU time; the pool: wall time). One JSON line per measurement on stdout.
void bench(const std::vector<int64_t>& ms) {
  const int64_t nv = 32000, d = 512, k = 8;
  test::Rng rng;
  const Table t = make_table(nv, d, rng);
  // the same int8 rows in qmatmul's packed layout [blocks, Dp / 4, 16, 4]
  Tensor wp(planc::kInt8, {nv / 16, d / 4, 16, 4}), bias = f32({nv}), act(planc::kUint8, {nv});
  for (int64_t n = 0; n < nv; n++)
    for (int64_t i = 0; i < d; i++) wp.data<int8_t>()[((n / 16) * (d / 4) + i / 4) * 64 + (n % 16) * 4 + i % 4] = t.w.data<int8_t>()[n * d + i];
  for (int64_t i = 0; i < nv; i++) act.data<uint8_t>()[i] = (i / 64) % 4 == 0;  // runs of 64 ids, 8000 of them
  const planc::IsaState& isa = planc::isa_state();
  const char* path = planc::qgemm::path_for(0)->name;
  planc::TensorView none;
  for (planc::ThreadPool* pl : {static_cast<planc::ThreadPool*>(nullptr), &test::pool()})
    for (int64_t m : ms) {
      Tensor x = f32({m, d}), vals = f32({m, k}), ids(planc::kInt64, {m, k}), y = f32({m, nv});
      for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = static_cast<float>(rng.uniform(-2, 2));
      const int reps = m <= 8 ? 41 : m <= 32 ? 21 : 11;
      double qm, qb, fm, fb, am, ab;
      time_us(
          reps, pl != nullptr,
          [&] {
            test::call(k_qmatmul, {x.view, wp.view, t.scale.view, t.sum.view, none, none}, {y.view},
                       test::qmatmul_call().activation(planc::kActNone).input(planc::kQuantInInt8).n(nv).k(d), pl, 0);
          },
          &qm, &qb);
      time_us(
          reps, pl != nullptr,
          [&] {
            test::call(k_qtopk, {x.view, t.w.view, t.scale.view, t.sum.view, none, none}, {vals.view, ids.view},
                       test::qproject_topk_call().k(k).input(planc::kQuantInInt8).d(d), pl, 0);
          },
          &fm, &fb);
      time_us(
          reps, pl != nullptr,
          [&] {
            test::call(k_qtopk, {x.view, t.w.view, t.scale.view, t.sum.view, none, act.view}, {vals.view, ids.view},
                       test::qproject_topk_call().k(k).input(planc::kQuantInInt8).d(d), pl, 0);
          },
          &am, &ab);
      const double ops = 2.0 * m * nv * d;
      std::printf("{\"isa\":\"%s\",\"path\":\"%s\",\"threads\":%d,\"M\":%lld,\"V\":%lld,\"D\":%lld,\"k\":%lld,\"qmatmul_us\":%.1f,\"qmatmul_gops\":%.1f,"
                  "\"topk_us\":%.1f,\"topk_gops\":%.1f,\"topk_of_qmatmul\":%.3f,\"topk_best_us\":%.1f,\"shortlist_us\":%.1f,\"shortlist_gops\":%.1f}\n",
                  planc::isa_name(isa.effective), path, pl ? pl->threads() : 1, (long long)m, (long long)nv, (long long)d, (long long)k, qm,
                  ops / qm * 1e-3, fm, ops / fm * 1e-3, qm / fm, fb, am, ops / 4 / am * 1e-3);
      std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
  const planc::KernelList q = planc::qgemm_kernels(), t = planc::qproject_topk_kernels();
  k_qmatmul = test::find_kernel({q}, "qmatmul");
  k_qtopk = test::find_kernel({t}, "qproject_topk");
  if (!k_qmatmul || !k_qtopk) return 1;
  const planc::VariantCheck unavailable = t.defs[0].variant_unavailable;
  for (int64_t code = 0; code < v::kVariantCount; code++) {
    if (const char* why = unavailable(code)) test::skip(std::string("qproject_topk variant ") + v::kVariantNames[code], why);
    else g_variants.push_back(code);
  }
  if (argc > 1 && std::string(argv[1]) == "bench") {
    std::vector<int64_t> ms;
    for (int i = 2; i < argc; i++) ms.push_back(std::atoll(argv[i]));
    if (ms.empty()) ms = {1, 8, 16, 32, 64};
    bench(ms);
    return 0;
  }
  std::printf("qproject_topk_test: variants run here:");
  for (int64_t code : g_variants) std::printf(" %s", v::kVariantNames[code]);
  std::printf("\n");
  tests();
  return test::finish("qproject_topk_test");
}
