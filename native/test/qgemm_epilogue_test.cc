// Standalone test of the qmatmul epilogue's codes (native/src/cpu/qgemm_epilogue.cc): AVX2 and AVX-512 against the scalar
// code bit for bit, int32 sums (with and without the vpdpbusd offset) and float sums, every activation, odd tiles, NaN,
// inf, -0 and subnormal values; nothing written outside the tile. Run: native/build-tests/qgemm_epilogue_test
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "cpu/qgemm.h"
#include "test_util.h"

namespace {

namespace q = planc::qgemm;

const char* code_name(q::EpilogueCode code) {
  return code == q::EpilogueCode::kAvx512 ? "avx512" : code == q::EpilogueCode::kAvx2 ? "avx2" : "scalar";
}

// A float with now and then a special value: NaN, ±inf, ±0, a subnormal, a large one.
float special_or(test::Rng& rng, double lo, double hi) {
  switch (rng.integer(0, 40)) {
    case 0: return std::numeric_limits<float>::quiet_NaN();
    case 1: return std::numeric_limits<float>::infinity();
    case 2: return -std::numeric_limits<float>::infinity();
    case 3: return -0.0f;
    case 4: return 0.0f;
    case 5: return 1e-40f;
    case 6: return -3e38f;
    default: return static_cast<float>(rng.uniform(lo, hi));
  }
}

int32_t int_sum(test::Rng& rng) {
  switch (rng.integer(0, 30)) {
    case 0: return std::numeric_limits<int32_t>::min();
    case 1: return std::numeric_limits<int32_t>::max();
    case 2: return 0;
    default: return static_cast<int32_t>(rng.integer(-(int64_t(1) << 30), int64_t(1) << 30));
  }
}

// One tile of sums [nr, nc] (row stride ld) at rows r0.., columns c0.. of Y [r0 + nr + 1, ldy]; y starts as a pattern so
// that writes outside the tile show.
struct Tile {
  int64_t r0, nr, c0, nc, ld, ldy;
  std::vector<int32_t> acc_i, wsum;
  std::vector<float> acc_f, sa, scale, bias, res;
};

Tile make_tile(test::Rng& rng, int64_t nr, int64_t nc) {
  Tile t;
  t.r0 = rng.integer(0, 3);
  t.nr = nr;
  t.c0 = 16 * rng.integer(0, 2);
  t.nc = nc;
  t.ld = (nc + 15) / 16 * 16 + 16 * rng.integer(0, 1);
  t.ldy = t.c0 + nc + rng.integer(0, 5);
  const int64_t rows = t.r0 + nr + 1, n = t.c0 + nc;
  t.acc_i.resize(static_cast<size_t>(nr * t.ld));
  t.acc_f.resize(t.acc_i.size());
  for (size_t i = 0; i < t.acc_i.size(); i++) {
    t.acc_i[i] = int_sum(rng);
    t.acc_f[i] = special_or(rng, -1e4, 1e4);
  }
  t.wsum.resize(static_cast<size_t>(nc));
  for (auto& w : t.wsum) w = rng.integer(0, 20) == 0 ? std::numeric_limits<int32_t>::min() : static_cast<int32_t>(rng.integer(-50000, 50000));
  t.sa.resize(static_cast<size_t>(rows));
  for (auto& s : t.sa) s = rng.integer(0, 15) == 0 ? (rng.integer(0, 1) ? 0.0f : std::numeric_limits<float>::quiet_NaN()) : static_cast<float>(rng.uniform(1e-6, 1e-2));
  t.scale.resize(static_cast<size_t>(n));
  for (auto& s : t.scale) s = static_cast<float>(rng.uniform(1e-5, 1e-2));
  t.bias.resize(static_cast<size_t>(n));
  for (auto& b : t.bias) b = special_or(rng, -3, 3);
  t.res.resize(static_cast<size_t>(rows * t.ldy));
  for (auto& r : t.res) r = special_or(rng, -3, 3);
  return t;
}

// Y after the epilogue of code `code` over the tile (int32 sums, with or without wsum, or float sums).
std::vector<float> run(const Tile& t, q::EpilogueCode code, int64_t act, bool f32, bool wsum, bool bias, bool res) {
  std::vector<float> y(static_cast<size_t>((t.r0 + t.nr + 1) * t.ldy));
  for (size_t i = 0; i < y.size(); i++) y[i] = static_cast<float>(i) * 0.25f - 7.0f;
  const q::Epilogue e{act, t.sa.data(), t.scale.data(), bias ? t.bias.data() : nullptr, res ? t.res.data() : nullptr, y.data(), t.ldy, code};
  if (f32) q::apply_epilogue(e, t.acc_f.data(), t.ld, t.r0, t.nr, t.c0, t.nc);
  else q::apply_epilogue(e, t.acc_i.data(), t.ld, wsum ? t.wsum.data() : nullptr, t.r0, t.nr, t.c0, t.nc);
  return y;
}

void check_code(q::EpilogueCode code) {
  test::Rng rng;
  const int64_t ns[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 47, 50, 64, 100};
  int64_t tiles = 0, cases = 0;
  for (int64_t nr = 1; nr <= 20; nr++)
    for (int64_t nc : ns) {
      const Tile t = make_tile(rng, nr, nc);
      tiles++;
      for (int64_t act = planc::kActNone; act < planc::kActCount; act++)
        for (int kind = 0; kind < 3; kind++)  // int32, int32 less 128 · wsum, float
          for (int opt = 0; opt < 4; opt++) {
            const bool f32 = kind == 2, wsum = kind == 1, bias = opt & 1, res = opt & 2;
            const std::vector<float> want = run(t, q::EpilogueCode::kScalar, act, f32, wsum, bias, res);
            const std::vector<float> got = run(t, code, act, f32, wsum, bias, res);
            cases++;
            int64_t bad = 0, first = -1;
            for (size_t i = 0; i < got.size(); i++)
              if (std::memcmp(&got[i], &want[i], 4) != 0 && bad++ == 0) first = static_cast<int64_t>(i);
            CHECK_MSG(bad == 0,
                      "epilogue %s nr=%lld nc=%lld c0=%lld act=%lld %s bias=%d res=%d: %lld values differ from scalar (first "
                      "[%lld]: %.9g vs %.9g)",
                      code_name(code), (long long)nr, (long long)nc, (long long)t.c0, (long long)act,
                      f32 ? "float" : wsum ? "int32-wsum" : "int32", bias, res, (long long)bad, (long long)first,
                      first >= 0 ? got[first] : 0.0f, first >= 0 ? want[first] : 0.0f);
          }
    }
  std::printf("qgemm_epilogue_test: %s against scalar: %lld tiles, %lld cases\n", code_name(code), (long long)tiles, (long long)cases);
}

// The scalar code against the formula written out for act none / relu (no libm).
void check_scalar_formula() {
  test::Rng rng;
  for (int64_t nc : {5, 33}) {
    const Tile t = make_tile(rng, 4, nc);
    for (int64_t act : {planc::kActNone, planc::kActRelu}) {
      const std::vector<float> y = run(t, q::EpilogueCode::kScalar, act, false, true, true, true);
      int bad = 0;
      for (int64_t r = 0; r < t.nr; r++)
        for (int64_t c = 0; c < t.nc; c++) {
          const int32_t s = static_cast<int32_t>(static_cast<uint32_t>(t.acc_i[r * t.ld + c]) - 128u * static_cast<uint32_t>(t.wsum[c]));
          const int64_t row = t.r0 + r, col = t.c0 + c;
          volatile float m = t.sa[row] * t.scale[col];
          volatile float v = static_cast<float>(s) * m;
          v = v + t.bias[col];
          if (act == planc::kActRelu) v = v > 0.0f ? v : 0.0f;
          v = v + t.res[row * t.ldy + col];
          const float want = v;
          bad += std::memcmp(&want, &y[row * t.ldy + col], 4) != 0;
        }
      CHECK_MSG(bad == 0, "epilogue scalar act=%lld nc=%lld: %d values differ from the formula", (long long)act, (long long)nc, bad);
    }
  }
}

}  // namespace

int main() {
  std::printf("qgemm_epilogue_test: PLANC_ISA level %s, best epilogue %s\n", planc::isa_name(planc::isa_state().effective),
              code_name(q::best_epilogue()));
  check_scalar_formula();
  for (q::EpilogueCode code : {q::EpilogueCode::kAvx2, q::EpilogueCode::kAvx512}) {
    if (q::epilogue_runs(code)) check_code(code);
    else test::skip(std::string("qmatmul epilogue ") + code_name(code), "not run by this CPU within PLANC_ISA");
  }
  return test::finish("qgemm_epilogue_test");
}
