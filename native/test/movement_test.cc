// Standalone test of the movement kernels against naive index-by-index references, for 1/2/4/8-byte dtypes; `bench` times a few.
// Build: g++ -O3 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc native/src/threadpool.cc
//   native/src/cpu/isa.cc native/src/cpu/movement.cc native/test/movement_test.cc -o /tmp/movement_test &&
//   /tmp/movement_test [bench]
#include <algorithm>
#include <numeric>

#include "test_util.h"

namespace planc {
KernelList movement_kernels();
}

using test::Tensor;

namespace {

planc::KernelFn k_transpose, k_gather, k_gather_el, k_slice, k_concat, k_split, k_expand, k_tile, k_pad;

const int32_t kTypes[] = {planc::kUint8, planc::kFloat16, planc::kFloat32, planc::kInt64};

size_t esz(const Tensor& b) { return planc::dtype_size(b.dtype()); }

// A tensor of dtype dt with random bytes.
Tensor rnd(int32_t dt, std::vector<int64_t> dims) {
  Tensor b(dt, std::move(dims));
  test::fill_random(b);
  return b;
}

std::vector<int64_t> coords(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; d--) {
    c[d] = i % dims[d];
    i /= dims[d];
  }
  return c;
}

int64_t flat(const std::vector<int64_t>& c, const std::vector<int64_t>& dims) {
  int64_t f = 0;
  for (size_t d = 0; d < dims.size(); d++) f = f * dims[d] + c[d];
  return f;
}

// Copies element s of src into element d of dst.
void put(Tensor& dst, int64_t d, const Tensor& src, int64_t s) {
  std::memcpy(dst.data<uint8_t>() + d * esz(dst), src.data<uint8_t>() + s * esz(src), esz(dst));
}

void same_bytes(Tensor& got, Tensor& want, const char* what) {
  test::g_checks++;
  size_t bytes = static_cast<size_t>(want.numel()) * esz(want);
  if (got.numel() != want.numel() || std::memcmp(got.data(), want.data(), bytes) != 0) {
    test::g_failures++;
    int64_t at = -1;
    for (int64_t i = 0; i < want.numel() && at < 0; i++)
      if (std::memcmp(got.data<uint8_t>() + i * esz(got), want.data<uint8_t>() + i * esz(want), esz(want)) != 0) at = i;
    std::printf("FAIL %s: first differing element %lld\n", what, (long long)at);
  }
}

// ---------- transpose ----------

void check_transpose(int32_t dt, std::vector<int64_t> dims, std::vector<int64_t> perm, planc::ThreadPool* pool) {
  Tensor x = rnd(dt, dims);
  std::vector<int64_t> yd(dims.size());
  for (size_t i = 0; i < dims.size(); i++) yd[i] = dims[perm[i]];
  Tensor want(dt, yd), y(dt, yd);
  for (int64_t i = 0; i < want.numel(); i++) {
    auto c = coords(i, yd);
    std::vector<int64_t> xc(dims.size());
    for (size_t k = 0; k < dims.size(); k++) xc[perm[k]] = c[k];
    put(want, i, x, flat(xc, dims));
  }
  const char* err = test::call(k_transpose, {x.view}, {y.view}, test::transpose_call().perm(perm), pool);
  char what[160];
  std::snprintf(what, sizeof what, "transpose dtype %d rank %zu perm[0]=%lld", dt, dims.size(), (long long)(perm.empty() ? -1 : perm[0]));
  test::expect_ok(err, what);
  same_bytes(y, want, what);
}

void transposes(planc::ThreadPool* pool) {
  for (int32_t dt : kTypes) {
    check_transpose(dt, {}, {}, pool);
    check_transpose(dt, {7}, {0}, pool);
    check_transpose(dt, {37, 53}, {1, 0}, pool);
    check_transpose(dt, {300, 257}, {1, 0}, pool);
    check_transpose(dt, {1, 5, 1, 3}, {3, 2, 1, 0}, pool);
    std::vector<int64_t> p3 = {0, 1, 2};
    do check_transpose(dt, {3, 17, 20}, p3, pool); while (std::next_permutation(p3.begin(), p3.end()));
    std::vector<int64_t> p4 = {0, 1, 2, 3};
    do check_transpose(dt, {2, 5, 3, 7}, p4, pool); while (std::next_permutation(p4.begin(), p4.end()));
    check_transpose(dt, {2, 50, 8, 64}, {0, 2, 1, 3}, pool);  // head split
    check_transpose(dt, {2, 8, 50, 64}, {0, 2, 3, 1}, pool);
    check_transpose(dt, {2, 1, 2, 3, 1, 2, 2, 3}, {7, 0, 5, 2, 4, 3, 6, 1}, pool);
    check_transpose(dt, {64, 100, 33}, {2, 0, 1}, pool);
  }
  Tensor x(planc::kFloat32, {2, 3}), y(planc::kFloat32, {3, 2}), bad(planc::kFloat32, {2, 3});
  test::expect_error(test::call(k_transpose, {x.view}, {y.view}, test::transpose_call().perm({0, 0}), nullptr),
                     "not a permutation", "transpose perm");
  test::expect_error(test::call(k_transpose, {x.view}, {bad.view}, test::transpose_call().perm({1, 0}), nullptr), "Y dim 0",
                     "transpose dims");
  test::expect_error(test::call(k_transpose, {x.view}, {y.view}, test::transpose_call().perm({1}), nullptr), "perm entries",
                     "transpose perm length");
  Tensor yi(planc::kInt32, {3, 2});
  test::expect_error(test::call(k_transpose, {x.view}, {yi.view}, test::transpose_call().perm({1, 0}), nullptr),
                     "differs from Y dtype", "transpose dtype");
}

// ---------- gather ----------

void check_gather(int32_t dt, std::vector<int64_t> dims, int axis, std::vector<int64_t> idims, int32_t idt,
                  planc::ThreadPool* pool) {
  Tensor x = rnd(dt, dims);
  int r = dims.size();
  int a = axis < 0 ? axis + r : axis;
  Tensor ind(idt, idims);
  int64_t n = dims[a];
  for (int64_t k = 0; k < ind.numel(); k++) {
    int64_t v = static_cast<int64_t>(test::random_engine()() % (2 * n)) - n;  // [-n, n)
    if (idt == planc::kInt64) ind.data<int64_t>()[k] = v;
    else ind.data<int32_t>()[k] = static_cast<int32_t>(v);
  }
  std::vector<int64_t> yd(dims.begin(), dims.begin() + a);
  yd.insert(yd.end(), idims.begin(), idims.end());
  yd.insert(yd.end(), dims.begin() + a + 1, dims.end());
  Tensor want(dt, yd), y(dt, yd);
  for (int64_t i = 0; i < want.numel(); i++) {
    auto c = coords(i, yd);
    std::vector<int64_t> ic(c.begin() + a, c.begin() + a + idims.size());
    int64_t k = flat(ic, idims);
    int64_t v = idt == planc::kInt64 ? ind.data<int64_t>()[k] : ind.data<int32_t>()[k];
    if (v < 0) v += n;
    std::vector<int64_t> xc(c.begin(), c.begin() + a);
    xc.push_back(v);
    xc.insert(xc.end(), c.begin() + a + idims.size(), c.end());
    put(want, i, x, flat(xc, dims));
  }
  const char* err = test::call(k_gather, {x.view, ind.view}, {y.view}, test::gather_call().axis(axis), pool);
  char what[160];
  std::snprintf(what, sizeof what, "gather dtype %d rank %d axis %d idx rank %zu", dt, r, axis, idims.size());
  test::expect_ok(err, what);
  same_bytes(y, want, what);
}

void gathers(planc::ThreadPool* pool) {
  for (int32_t dt : kTypes) {
    check_gather(dt, {100, 16}, 0, {3, 5}, planc::kInt64, pool);
    check_gather(dt, {100, 16}, 1, {7}, planc::kInt32, pool);
    check_gather(dt, {4, 9, 6}, -2, {}, planc::kInt64, pool);
    check_gather(dt, {4, 9, 6}, 2, {2, 2}, planc::kInt32, pool);
    check_gather(dt, {32000, 64}, 0, {40, 30}, planc::kInt64, pool);  // embedding lookup, threaded
    check_gather(dt, {5000, 30}, 1, {4}, planc::kInt64, pool);
  }
  Tensor x(planc::kFloat32, {4, 3}), i = test::i64({2}, {1, 4}), y(planc::kFloat32, {2, 3});
  test::expect_error(test::call(k_gather, {x.view, i.view}, {y.view}, test::gather_call().axis(0), nullptr), "out of range",
                     "gather index 4");
  Tensor j = test::i64({2}, {-5, 0});
  test::expect_error(test::call(k_gather, {x.view, j.view}, {y.view}, test::gather_call().axis(0), nullptr), "index -5",
                     "gather index -5");
  Tensor k = test::i64({2}, {-4, 3});
  test::expect_ok(test::call(k_gather, {x.view, k.view}, {y.view}, test::gather_call().axis(0), nullptr), "gather -4 and 3");
  Tensor f(planc::kFloat32, {2});
  test::expect_error(test::call(k_gather, {x.view, f.view}, {y.view}, test::gather_call().axis(0), nullptr), "int64 or int32",
                     "gather index dtype");
  Tensor y2(planc::kFloat32, {3, 3});
  test::expect_error(test::call(k_gather, {x.view, k.view}, {y2.view}, test::gather_call().axis(0), nullptr), "Y dim 0",
                     "gather Y dims");
  test::expect_error(test::call(k_gather, {x.view, k.view}, {y.view}, test::gather_call().axis(2), nullptr),
                     "out of range for rank", "gather axis");
}

void check_gather_elements(int32_t dt, std::vector<int64_t> dims, int axis, std::vector<int64_t> idims, int32_t idt,
                           planc::ThreadPool* pool) {
  Tensor x = rnd(dt, dims);
  int r = dims.size();
  int a = axis < 0 ? axis + r : axis;
  int64_t n = dims[a];
  Tensor ind(idt, idims);
  for (int64_t k = 0; k < ind.numel(); k++) {
    int64_t v = static_cast<int64_t>(test::random_engine()() % (2 * n)) - n;
    if (idt == planc::kInt64) ind.data<int64_t>()[k] = v;
    else ind.data<int32_t>()[k] = static_cast<int32_t>(v);
  }
  Tensor want(dt, idims), y(dt, idims);
  for (int64_t i = 0; i < want.numel(); i++) {
    auto c = coords(i, idims);
    int64_t v = idt == planc::kInt64 ? ind.data<int64_t>()[i] : ind.data<int32_t>()[i];
    c[a] = v < 0 ? v + n : v;
    put(want, i, x, flat(c, dims));
  }
  const char* err = test::call(k_gather_el, {x.view, ind.view}, {y.view}, test::gather_elements_call().axis(axis), pool);
  char what[160];
  std::snprintf(what, sizeof what, "gather_elements dtype %d rank %d axis %d", dt, r, axis);
  test::expect_ok(err, what);
  same_bytes(y, want, what);
}

void gather_elements(planc::ThreadPool* pool) {
  for (int32_t dt : kTypes) {
    check_gather_elements(dt, {3, 4}, 0, {2, 4}, planc::kInt64, pool);
    check_gather_elements(dt, {3, 4}, 1, {3, 7}, planc::kInt32, pool);
    check_gather_elements(dt, {5, 6, 7}, 1, {4, 9, 5}, planc::kInt64, pool);
    check_gather_elements(dt, {5, 6, 7}, -1, {5, 6, 3}, planc::kInt64, pool);
    check_gather_elements(dt, {300, 200}, 0, {300, 200}, planc::kInt64, pool);
  }
  Tensor x(planc::kFloat32, {3, 4}), i = test::i64({1, 2}, {0, 3}), y(planc::kFloat32, {1, 2});
  test::expect_error(test::call(k_gather_el, {x.view, i.view}, {y.view}, test::gather_elements_call().axis(0), nullptr),
                     "out of range for axis", "gather_elements index");
  Tensor big = test::i64({1, 5}, {0, 0, 0, 0, 0}), y5(planc::kFloat32, {1, 5});
  test::expect_error(test::call(k_gather_el, {x.view, big.view}, {y5.view}, test::gather_elements_call().axis(0), nullptr),
                     "exceeds X dim", "gather_elements dims");
}

// ---------- slice ----------

void check_slice(int32_t dt, std::vector<int64_t> dims, std::vector<int64_t> starts, std::vector<int64_t> steps,
                 std::vector<int64_t> yd, planc::ThreadPool* pool) {
  Tensor x = rnd(dt, dims);
  Tensor want(dt, yd), y(dt, yd);
  for (int64_t i = 0; i < want.numel(); i++) {
    auto c = coords(i, yd);
    for (size_t d = 0; d < dims.size(); d++) c[d] = starts[d] + c[d] * steps[d];
    put(want, i, x, flat(c, dims));
  }
  std::vector<int64_t> starts_steps;
  for (size_t d = 0; d < dims.size(); d++) starts_steps.insert(starts_steps.end(), {starts[d], steps[d]});
  const char* err = test::call(k_slice, {x.view}, {y.view}, test::slice_call().starts_steps(starts_steps), pool);
  char what[160];
  std::snprintf(what, sizeof what, "slice dtype %d rank %zu", dt, dims.size());
  test::expect_ok(err, what);
  same_bytes(y, want, what);
}

void slices(planc::ThreadPool* pool) {
  for (int32_t dt : kTypes) {
    check_slice(dt, {10}, {2}, {3}, {3}, pool);
    check_slice(dt, {10}, {9}, {-2}, {5}, pool);
    check_slice(dt, {4, 6, 8}, {1, 0, 0}, {1, 1, 1}, {2, 6, 8}, pool);
    check_slice(dt, {4, 6, 8}, {0, 2, 0}, {1, 1, 1}, {4, 3, 8}, pool);     // KV-cache style: whole rows fold
    check_slice(dt, {4, 6, 8}, {3, 5, 7}, {-1, -2, -3}, {4, 3, 3}, pool);
    check_slice(dt, {2, 3, 500, 64}, {0, 0, 0, 0}, {1, 1, 1, 1}, {2, 3, 300, 64}, pool);
    check_slice(dt, {7, 9}, {0, 8}, {1, -1}, {7, 9}, pool);
    check_slice(dt, {5}, {4}, {1}, {1}, pool);
    check_slice(dt, {}, {}, {}, {}, pool);
  }
  Tensor x(planc::kFloat32, {10}), y(planc::kFloat32, {4}), y0(planc::kFloat32, {0});
  test::expect_error(test::call(k_slice, {x.view}, {y.view}, test::slice_call().starts_steps({0, 4}), nullptr), "leaves X's dim",
                     "slice past the end");
  test::expect_ok(test::call(k_slice, {x.view}, {y.view}, test::slice_call().starts_steps({0, 3}), nullptr),
                  "slice to the last element");
  test::expect_error(test::call(k_slice, {x.view}, {y.view}, test::slice_call().starts_steps({8, -3}), nullptr), "leaves X's dim",
                     "slice past the start");
  test::expect_error(test::call(k_slice, {x.view}, {y.view}, test::slice_call().starts_steps({10, 1}), nullptr), "leaves X's dim",
                     "slice start at dim");
  test::expect_error(test::call(k_slice, {x.view}, {y.view}, test::slice_call().starts_steps({-1, 1}), nullptr), "leaves X's dim",
                     "slice negative start");
  test::expect_error(test::call(k_slice, {x.view}, {y.view}, test::slice_call().starts_steps({0, 0}), nullptr), "step 0",
                     "slice step 0");
  test::expect_error(
      test::call(k_slice, {x.view}, {y.view}, test::slice_call().starts_steps({0, 4611686018427387904LL}), nullptr),
      "leaves X's dim", "slice huge step");
  test::expect_ok(test::call(k_slice, {x.view}, {y0.view}, test::slice_call().starts_steps({10, 1}), nullptr),
                  "slice empty at the end");
}

// ---------- concat and split ----------

void check_concat_split(int32_t dt, std::vector<std::vector<int64_t>> parts, int axis, planc::ThreadPool* pool) {
  int r = parts[0].size();
  int a = axis < 0 ? axis + r : axis;
  std::vector<int64_t> yd = parts[0];
  yd[a] = 0;
  for (auto& p : parts) yd[a] += p[a];
  std::vector<Tensor> xs;
  for (auto& p : parts) xs.push_back(rnd(dt, p));
  Tensor want(dt, yd), y(dt, yd);
  for (int64_t i = 0; i < want.numel(); i++) {
    auto c = coords(i, yd);
    size_t j = 0;
    while (c[a] >= parts[j][a]) c[a] -= parts[j++][a];
    put(want, i, xs[j], flat(c, parts[j]));
  }
  std::vector<planc::TensorView> in;
  for (auto& b : xs) in.push_back(b.view);
  const char* err = test::call(k_concat, in, {y.view}, test::concat_call().axis(axis), pool);
  char what[160];
  std::snprintf(what, sizeof what, "concat dtype %d rank %d axis %d parts %zu", dt, r, axis, parts.size());
  test::expect_ok(err, what);
  same_bytes(y, want, what);
  std::vector<Tensor> outs;
  for (auto& p : parts) outs.push_back(Tensor(dt, p));
  std::vector<planc::TensorView> out;
  for (auto& b : outs) out.push_back(b.view);
  err = test::call(k_split, {want.view}, out, test::split_call().axis(axis), pool);
  std::snprintf(what, sizeof what, "split dtype %d rank %d axis %d parts %zu", dt, r, axis, parts.size());
  test::expect_ok(err, what);
  for (size_t j = 0; j < parts.size(); j++) same_bytes(outs[j], xs[j], what);
}

void concats(planc::ThreadPool* pool) {
  for (int32_t dt : kTypes) {
    check_concat_split(dt, {{3}, {5}}, 0, pool);
    check_concat_split(dt, {{2, 3, 4}, {2, 1, 4}, {2, 0, 4}, {2, 5, 4}}, 1, pool);
    check_concat_split(dt, {{2, 3, 4}, {2, 3, 1}}, -1, pool);
    check_concat_split(dt, {{1, 3}, {4, 3}}, 0, pool);
    check_concat_split(dt, {{300, 8, 64}, {300, 1, 64}}, 1, pool);  // KV cache append, threaded
    check_concat_split(dt, {{7, 2}}, 1, pool);
  }
  Tensor a(planc::kFloat32, {2, 3}), b(planc::kFloat32, {3, 3}), y(planc::kFloat32, {5, 3}), y2(planc::kFloat32, {2, 6});
  test::expect_error(test::call(k_concat, {a.view, b.view}, {y2.view}, test::concat_call().axis(1), nullptr), "dim 0",
                     "concat mismatched dims");
  test::expect_error(test::call(k_concat, {a.view, a.view}, {y.view}, test::concat_call().axis(0), nullptr), "sum to",
                     "concat total");
  test::expect_error(test::call(k_concat, {a.view, b.view}, {y.view}, test::concat_call().axis(2), nullptr), "out of range",
                     "concat axis");
  Tensor bi(planc::kInt32, {3, 3});
  test::expect_error(test::call(k_concat, {a.view, bi.view}, {y.view}, test::concat_call().axis(0), nullptr), "dtype",
                     "concat dtype");
  test::expect_error(test::call(k_split, {y.view}, {a.view, a.view}, test::split_call().axis(0), nullptr), "sum to",
                     "split total");
  test::expect_error(test::call(k_split, {y2.view}, {a.view, b.view}, test::split_call().axis(1), nullptr), "dim 0",
                     "split dims");
}

// ---------- expand and tile ----------

void check_expand(int32_t dt, std::vector<int64_t> xd, std::vector<int64_t> yd, planc::ThreadPool* pool) {
  Tensor x = rnd(dt, xd);
  Tensor want(dt, yd), y(dt, yd);
  int off = yd.size() - xd.size();
  for (int64_t i = 0; i < want.numel(); i++) {
    auto c = coords(i, yd);
    std::vector<int64_t> xc(xd.size());
    for (size_t d = 0; d < xd.size(); d++) xc[d] = xd[d] == 1 ? 0 : c[d + off];
    put(want, i, x, flat(xc, xd));
  }
  const char* err = test::call(k_expand, {x.view}, {y.view}, {}, pool);
  char what[160];
  std::snprintf(what, sizeof what, "expand dtype %d rank %zu -> %zu", dt, xd.size(), yd.size());
  test::expect_ok(err, what);
  same_bytes(y, want, what);
}

void check_tile(int32_t dt, std::vector<int64_t> xd, std::vector<int64_t> reps, planc::ThreadPool* pool) {
  Tensor x = rnd(dt, xd);
  std::vector<int64_t> yd(xd.size());
  for (size_t d = 0; d < xd.size(); d++) yd[d] = xd[d] * reps[d];
  Tensor want(dt, yd), y(dt, yd);
  for (int64_t i = 0; i < want.numel(); i++) {
    auto c = coords(i, yd);
    for (size_t d = 0; d < xd.size(); d++) c[d] %= xd[d];
    put(want, i, x, flat(c, xd));
  }
  const char* err = test::call(k_tile, {x.view}, {y.view}, {}, pool);
  char what[160];
  std::snprintf(what, sizeof what, "tile dtype %d rank %zu", dt, xd.size());
  test::expect_ok(err, what);
  same_bytes(y, want, what);
}

void expands(planc::ThreadPool* pool) {
  for (int32_t dt : kTypes) {
    check_expand(dt, {3, 1}, {2, 3, 4}, pool);
    check_expand(dt, {1}, {5}, pool);
    check_expand(dt, {}, {2, 2}, pool);
    check_expand(dt, {2, 1, 6}, {2, 7, 6}, pool);
    check_expand(dt, {4, 5}, {3, 4, 5}, pool);
    check_expand(dt, {1, 1, 64}, {8, 300, 64}, pool);
    check_expand(dt, {4, 5}, {4, 5}, pool);
    check_tile(dt, {2, 3}, {2, 2}, pool);
    check_tile(dt, {5}, {1}, pool);
    check_tile(dt, {1, 3, 1}, {4, 1, 5}, pool);
    check_tile(dt, {3, 64}, {100, 1}, pool);
    check_tile(dt, {2, 0}, {3, 2}, pool);
  }
  Tensor x(planc::kFloat32, {3, 2}), y(planc::kFloat32, {3, 4}), y2(planc::kFloat32, {4, 2}), yb(planc::kFloat32, {2});
  test::expect_error(test::call(k_expand, {x.view}, {y.view}, {}, nullptr), "does not broadcast", "expand dims");
  test::expect_error(test::call(k_expand, {x.view}, {yb.view}, {}, nullptr), "below X rank", "expand rank");
  test::expect_error(test::call(k_tile, {x.view}, {y2.view}, {}, nullptr), "not a multiple", "tile dims");
}

// ---------- pad ----------

int64_t pad_src(planc::PadMode mode, int64_t j, int64_t begin, int64_t n) {
  int64_t p = j - begin;
  if (p >= 0 && p < n) return p;
  if (mode == planc::kPadEdge) return p < 0 ? 0 : n - 1;
  if (mode == planc::kPadWrap) return ((p % n) + n) % n;
  if (mode == planc::kPadReflect) {
    if (n == 1) return 0;
    int64_t period = 2 * (n - 1), q = ((p % period) + period) % period;
    return q < n ? q : period - q;
  }
  return -1;
}

void check_pad(int32_t dt, std::vector<int64_t> xd, planc::PadMode mode, std::vector<int64_t> pads, bool with_value,
               planc::ThreadPool* pool) {
  Tensor x = rnd(dt, xd);
  int r = xd.size();
  std::vector<int64_t> yd(r);
  for (int d = 0; d < r; d++) yd[d] = xd[d] + pads[d] + pads[d + r];
  Tensor value = rnd(dt, {});
  Tensor want(dt, yd), y(dt, yd);
  for (int64_t i = 0; i < want.numel(); i++) {
    auto c = coords(i, yd);
    bool fill = false;
    for (int d = 0; d < r; d++) {
      c[d] = pad_src(mode, c[d], pads[d], xd[d]);
      if (c[d] < 0) fill = true;
    }
    if (!fill) put(want, i, x, flat(c, xd));
    else if (with_value) put(want, i, value, 0);
    else std::memset(want.data<uint8_t>() + i * esz(want), 0, esz(want));
  }
  std::vector<planc::TensorView> in = {x.view};
  in.push_back(with_value ? value.view : planc::TensorView{});
  const char* err = test::call(k_pad, in, {y.view}, test::pad_call().mode(mode).pads(pads), pool);
  char what[160];
  std::snprintf(what, sizeof what, "pad dtype %d rank %d mode %d value %d", dt, r, static_cast<int>(mode), with_value);
  test::expect_ok(err, what);
  same_bytes(y, want, what);
}

void pads(planc::ThreadPool* pool) {
  for (int32_t dt : kTypes)
    for (int m = 0; m < planc::kPadCount; m++) {
      const planc::PadMode mode = planc::PadMode(m);
      check_pad(dt, {5}, mode, {2, 3}, mode == planc::kPadConstant, pool);
      check_pad(dt, {3, 4}, mode, {1, 2, 2, 1}, false, pool);
      check_pad(dt, {3, 4}, mode, {-1, 3, 0, -2}, true, pool);  // negative pads crop
      check_pad(dt, {2, 3, 4}, mode, {0, 0, 5, 0, 0, 7}, false, pool);
      check_pad(dt, {1, 3}, mode, {2, 0, 2, 0}, false, pool);
      check_pad(dt, {2, 50, 64}, mode, {0, 3, 0, 0, 4, 0}, true, pool);
      check_pad(dt, {100, 300}, mode, {1, 1, 1, 1}, false, pool);
    }
  check_pad(planc::kFloat32, {0, 3}, planc::kPadConstant, {1, 0, 1, 0}, true, pool);
  Tensor x(planc::kFloat32, {0, 3}), y(planc::kFloat32, {2, 3});
  test::expect_error(test::call(k_pad, {x.view, planc::TensorView{}}, {y.view},
                                test::pad_call().mode(planc::kPadReflect).pads({1, 0, 1, 0}), nullptr),
                     "empty axis", "pad reflect empty");
  Tensor x2(planc::kFloat32, {2, 3}), y2(planc::kFloat32, {4, 3});
  test::expect_error(test::call(k_pad, {x2.view, planc::TensorView{}}, {y2.view},
                                test::pad_call().mode(planc::kPadConstant).pads({1, 0, 0, 0}), nullptr),
                     "Y dim 0", "pad dims");
  test::expect_error(test::call(k_pad, {x2.view, planc::TensorView{}}, {y2.view},
                                test::pad_call().mode(planc::PadMode(planc::kPadCount + 1)).pads({1, 0, 1, 0}), nullptr),
                     "unknown mode", "pad mode");
  Tensor vi(planc::kInt32, {});
  test::expect_error(
      test::call(k_pad, {x2.view, vi.view}, {y2.view}, test::pad_call().mode(planc::kPadConstant).pads({1, 0, 1, 0}), nullptr),
      "value dtype", "pad value dtype");
}

void run_tests(planc::ThreadPool* pool) {
  transposes(pool);
  gathers(pool);
  gather_elements(pool);
  slices(pool);
  concats(pool);
  expands(pool);
  pads(pool);
}

void bench(planc::ThreadPool* pool) {
  std::printf("| op | ms | GB/s (read+write) |\n| --- | --- | --- |\n");
  auto time = [&](const char* name, const std::function<const char*()>& f, double bytes) {
    double best = 1e30;
    for (int r = 0; r < 100; r++) {
      double t0 = test::now_ms();
      f();
      best = std::min(best, test::now_ms() - t0);
    }
    std::printf("| %s | %.4f | %.1f |\n", name, best, bytes / best / 1e6);
  };
  Tensor a(planc::kFloat32, {8, 128, 8, 64}), b(planc::kFloat32, {8, 8, 128, 64});
  time(
      "transpose [8,128,8,64] perm 0,2,1,3",
      [&] { return test::call(k_transpose, {a.view}, {b.view}, test::transpose_call().perm({0, 2, 1, 3}), pool); },
      2.0 * a.numel() * 4);
  Tensor c(planc::kFloat32, {1024, 1024}), d(planc::kFloat32, {1024, 1024});
  time(
      "transpose [1024,1024] perm 1,0",
      [&] { return test::call(k_transpose, {c.view}, {d.view}, test::transpose_call().perm({1, 0}), pool); },
      2.0 * c.numel() * 4);
  Tensor e(planc::kFloat32, {8, 8, 128, 64}), f(planc::kFloat32, {8, 8, 64, 128});
  time(
      "transpose [8,8,128,64] perm 0,1,3,2",
      [&] { return test::call(k_transpose, {e.view}, {f.view}, test::transpose_call().perm({0, 1, 3, 2}), pool); },
      2.0 * e.numel() * 4);
  Tensor emb(planc::kFloat32, {32000, 512}), ids = test::i64({1, 64}, {}), g(planc::kFloat32, {1, 64, 512});
  for (int i = 0; i < 64; i++) ids.data<int64_t>()[i] = i * 499;
  time(
      "gather [32000,512] x 64 ids",
      [&] { return test::call(k_gather, {emb.view, ids.view}, {g.view}, test::gather_call().axis(0), pool); },
      2.0 * g.numel() * 4);
  Tensor cache(planc::kFloat32, {8, 8, 200, 64}), part(planc::kFloat32, {8, 8, 1, 64}), cat(planc::kFloat32, {8, 8, 201, 64});
  time(
      "concat [8,8,200,64]+[8,8,1,64] axis 2",
      [&] { return test::call(k_concat, {cache.view, part.view}, {cat.view}, test::concat_call().axis(2), pool); },
      2.0 * cat.numel() * 4);
  Tensor sl(planc::kFloat32, {8, 8, 100, 64});
  time(
      "slice [8,8,200,64] -> [8,8,100,64]",
      [&] {
        return test::call(k_slice, {cache.view}, {sl.view}, test::slice_call().starts_steps({0, 1, 0, 1, 50, 1, 0, 1}), pool);
      },
      2.0 * sl.numel() * 4);
  Tensor pp(planc::kFloat32, {8, 8, 202, 66});
  time(
      "pad [8,8,200,64] by 1 (constant)",
      [&] {
        return test::call(k_pad, {cache.view, planc::TensorView{}}, {pp.view},
                          test::pad_call().mode(planc::kPadConstant).pads({0, 0, 1, 1, 0, 0, 1, 1}), pool);
      },
      2.0 * pp.numel() * 4);
  Tensor ex(planc::kFloat32, {8, 8, 200, 64}), src(planc::kFloat32, {8, 1, 200, 64});
  time(
      "expand [8,1,200,64] -> [8,8,200,64]", [&] { return test::call(k_expand, {src.view}, {ex.view}, {}, pool); },
      2.0 * ex.numel() * 4);
}

}  // namespace

int main(int argc, char** argv) {
  auto list = planc::movement_kernels();
  k_transpose = test::find_kernel({list}, "transpose");
  k_gather = test::find_kernel({list}, "gather");
  k_gather_el = test::find_kernel({list}, "gather_elements");
  k_slice = test::find_kernel({list}, "slice");
  k_concat = test::find_kernel({list}, "concat");
  k_split = test::find_kernel({list}, "split");
  k_expand = test::find_kernel({list}, "expand");
  k_tile = test::find_kernel({list}, "tile");
  k_pad = test::find_kernel({list}, "pad");
  if (test::g_failures) return 1;
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    bench(&pool);
    return 0;
  }
  run_tests(nullptr);
  run_tests(&pool);
  return test::finish("movement_test");
}
