// Standalone test of attention and cache_write against a float64 reference (explicit scores + softmax); `bench` times them.
// Build: g++ -O3 -march=x86-64-v2 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc native/src/threadpool.cc
//   native/src/cpu/isa.cc native/src/cpu/attention.cc native/src/cpu/gemm.cc native/src/cpu/gemm_avx512.cc
//   native/src/cpu/softmax.cc native/src/cpu/movement.cc native/test/attention_test.cc [-DPLANC_HAVE_OPENBLAS
//   -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas] -o /tmp/attention_test
// Run: /tmp/attention_test [bench]
#include <algorithm>
#include <cstring>
#include <limits>

#include "test_util.h"

namespace planc {
KernelList attention_kernels();
KernelList gemm_kernels();
KernelList softmax_kernels();
KernelList movement_kernels();
}  // namespace planc

using test::Tensor;
using test::f32;

namespace {

planc::KernelFn k_attn, k_cache;
const float kNaNf = std::numeric_limits<float>::quiet_NaN();
const float kInff = std::numeric_limits<float>::infinity();

// One attention problem: Q in either layout, K/V [B,H,C,D] (rows >= L are NaN garbage), an optional mask.
struct Problem {
  int64_t b, h, sq, d, c, l;
  Problem(int64_t b_, int64_t h_, int64_t sq_, int64_t d_, int64_t c_, int64_t l_)
      : b(b_), h(h_), sq(sq_), d(d_), c(c_), l(l_) {}
  int layout = 0, causal = 0;
  planc::MaskKind kind = planc::kMaskNone;
  std::vector<int64_t> mdims;  // mask dims (a mask kind but none)
  float scale = 0.125f;
  Tensor q, k, v, mask;
};

std::vector<int64_t> q_dims(const Problem& p) {
  if (p.layout == 0) return {p.b, p.h, p.sq, p.d};
  return {p.b, p.sq, p.h * p.d};
}

int64_t q_index(const Problem& p, int64_t b, int64_t h, int64_t i) {
  if (p.layout == 0) return ((b * p.h + h) * p.sq + i) * p.d;
  return (b * p.sq + i) * p.h * p.d + h * p.d;
}

void make_problem(Problem& p, float mask_lo = -2, float mask_hi = 2) {
  p.q = f32(q_dims(p));
  p.k = f32({p.b, p.h, p.c, p.d});
  p.v = f32({p.b, p.h, p.c, p.d});
  test::fill_random(p.q, -1, 1);
  test::fill_random(p.k, -1, 1);
  test::fill_random(p.v, -1, 1);
  for (int64_t bh = 0; bh < p.b * p.h; bh++)
    for (int64_t j = p.l; j < p.c; j++)
      for (int64_t c = 0; c < p.d; c++) {
        p.k.data<float>()[(bh * p.c + j) * p.d + c] = kNaNf;
        p.v.data<float>()[(bh * p.c + j) * p.d + c] = kNaNf;
      }
  if (p.kind == planc::kMaskNone) return;
  p.mask = Tensor(p.kind == planc::kMaskAdd ? planc::kFloat32 : planc::kBool, p.mdims);
  if (p.kind == planc::kMaskAdd) {
    test::fill_random(p.mask, mask_lo, mask_hi);
    for (int64_t i = 0; i < p.mask.numel(); i += 5) p.mask.data<float>()[i] = -kInff;  // some keys masked out additively
  } else {
    std::uniform_int_distribution<int> u(0, 9);
    for (int64_t i = 0; i < p.mask.numel(); i++)
      p.mask.data<uint8_t>()[i] =
          u(test::random_engine()) < 7 ? (p.kind == planc::kMaskBoolKeep) : (p.kind == planc::kMaskBoolDrop);
  }
}

// The reference: explicit scores [L] per row in double, mask and causal bias, softmax as the reference evaluator.
std::vector<double> reference(Problem& p) {
  std::vector<double> y(static_cast<size_t>(test::numel(q_dims(p))));
  std::vector<double> s(static_cast<size_t>(p.l));
  const std::vector<int64_t>& md = p.mdims;
  for (int64_t b = 0; b < p.b; b++)
    for (int64_t h = 0; h < p.h; h++)
      for (int64_t i = 0; i < p.sq; i++) {
        const float* q = p.q.data<float>() + q_index(p, b, h, i);
        const float* k = p.k.data<float>() + (b * p.h + h) * p.c * p.d;
        const float* v = p.v.data<float>() + (b * p.h + h) * p.c * p.d;
        for (int64_t j = 0; j < p.l; j++) {
          double dot = 0;
          for (int64_t c = 0; c < p.d; c++) dot += double(q[c]) * k[j * p.d + c];
          s[j] = p.scale * dot;
          if (p.kind != planc::kMaskNone) {
            const int64_t mi = (((md[0] == 1 ? 0 : b) * md[1] + (md[1] == 1 ? 0 : h)) * md[2] + (md[2] == 1 ? 0 : i)) * md[3] +
                               (md[3] == 1 ? 0 : j);
            if (p.kind == planc::kMaskAdd) s[j] += p.mask.data<float>()[mi];
            else if ((p.mask.data<uint8_t>()[mi] != 0) == (p.kind == planc::kMaskBoolDrop)) s[j] = -INFINITY;
          }
          if (p.causal && j > p.l - p.sq + i) s[j] = -INFINITY;
        }
        double m = -INFINITY;
        bool nan = false;
        for (double x : s) {
          if (x != x) nan = true;
          else m = std::max(m, x);
        }
        double* out = y.data() + q_index(p, b, h, i);
        if (nan || std::isinf(m)) {  // all -inf: a fully masked row is zeros; NaN or +inf: NaN
          for (int64_t c = 0; c < p.d; c++) out[c] = !nan && m < 0 ? 0.0 : NAN;
          continue;
        }
        double sum = 0;
        for (double& x : s) sum += (x = std::exp(x - m));
        for (int64_t c = 0; c < p.d; c++) out[c] = 0;
        for (int64_t j = 0; j < p.l; j++)
          for (int64_t c = 0; c < p.d; c++) out[c] += s[j] / sum * v[j * p.d + c];
      }
  return y;
}

const char* run_attention(Problem& p, Tensor& y, planc::ThreadPool* pool) {
  std::vector<planc::TensorView> in = {p.q.view, p.k.view, p.v.view};
  if (p.kind != planc::kMaskNone) in.push_back(p.mask.view);
  return test::call(
      k_attn, in, {y.view},
      test::attention_call().num_heads(p.h).q_layout(p.layout).kv_len(p.l).mask_kind(p.kind).is_causal(p.causal).scale(p.scale),
      pool);
}

void check(Problem& p, planc::ThreadPool* pool) {
  char name[240];
  std::string md;
  for (size_t i = 0; i < p.mdims.size(); i++) md += (i ? "," : "") + std::to_string(p.mdims[i]);
  std::snprintf(name, sizeof name, "attention B%lld H%lld Sq%lld D%lld C%lld L%lld layout %d kind %d mask [%s] causal %d%s",
                (long long)p.b, (long long)p.h, (long long)p.sq, (long long)p.d, (long long)p.c, (long long)p.l,
                p.layout, static_cast<int>(p.kind), md.c_str(), p.causal, pool ? " threaded" : "");
  std::vector<double> want = reference(p);
  Tensor y = f32(q_dims(p));
  for (int64_t i = 0; i < y.numel(); i++) y.data<float>()[i] = 12345.0f;  // every element must be written
  const char* err = run_attention(p, y, pool);
  test::expect_ok(err, name);
  if (!err) test::close(y.data<float>(), want.data(), y.numel(), 2e-5, 2e-6, name);
}

// Mask shapes that broadcast to [B,H,Sq,L].
std::vector<std::vector<int64_t>> mask_shapes(const Problem& p) {
  return {{p.b, p.h, p.sq, p.l}, {1, 1, 1, p.l}, {p.b, 1, 1, p.l}, {1, p.h, p.sq, 1},
          {1, 1, p.sq, p.l},     {p.b, p.h, 1, 1}, {1, 1, 1, 1}};
}

void sweep(planc::ThreadPool* pool) {
  struct Geo { int64_t b, h, sq, d, c, l; } geos[] = {
      {2, 3, 1, 64, 10, 7},    // decode, L < C
      {2, 3, 5, 64, 12, 12},   // prefill-like, Sq < L = C
      {1, 2, 6, 7, 9, 6},      // Sq = L < C, odd head size
      {3, 1, 4, 13, 4, 4},     // Sq = L = C
      {1, 1, 1, 1, 1, 1},      // smallest
      {2, 2, 6, 8, 8, 3},      // Sq > L: causal rows before the first key are zeros
      {1, 2, 3, 16, 40, 37},   // L not a multiple of 4 or 8
      {1, 1, 10, 8, 4, 3},     // Sq >> L: with is_causal whole tiles and blocks of rows are zeros
      {2, 1, 9, 40, 70, 66},   // blocked path, D with a 32-, an 8- and no 16-column part, L > 32
  };
  for (const Geo& g : geos)
    for (int layout = 0; layout < 2; layout++)
      for (int causal = 0; causal < 2; causal++)
        for (int kind = 0; kind < planc::kMaskCount; kind++) {
          Problem base(g.b, g.h, g.sq, g.d, g.c, g.l);
          std::vector<std::vector<int64_t>> shapes = kind ? mask_shapes(base) : std::vector<std::vector<int64_t>>{{}};
          for (auto& md : shapes) {
            Problem p(g.b, g.h, g.sq, g.d, g.c, g.l);
            p.layout = layout;
            p.causal = causal;
            p.kind = planc::MaskKind(kind);
            p.mdims = md;
            make_problem(p);
            check(p, pool);
          }
        }
}

void large(planc::ThreadPool* pool) {
  struct Geo { int64_t b, h, sq, d, c, l; planc::MaskKind kind; int causal; } geos[] = {
      {32, 4, 1, 64, 300, 256, planc::kMaskAdd, 0},  // decode, crosses the threading threshold
      {32, 4, 1, 64, 64, 64, planc::kMaskNone, 0},
      {8, 4, 64, 64, 64, 64, planc::kMaskBoolKeep, 1},  // prefill
      {2, 8, 200, 64, 256, 230, planc::kMaskAdd, 1},
      {4, 4, 50, 64, 50, 50, planc::kMaskBoolDrop, 0},
  };
  for (const Geo& g : geos)
    for (int layout = 0; layout < 2; layout++) {
      Problem p(g.b, g.h, g.sq, g.d, g.c, g.l);
      p.layout = layout;
      p.kind = g.kind;
      p.causal = g.causal;
      if (p.kind) p.mdims = {p.b, 1, p.sq, p.l};
      make_problem(p);
      check(p, pool);
    }
}

void specials(planc::ThreadPool* pool) {
  // Large additive scores: the max subtraction keeps them finite; an all -inf row gives zeros, a +inf row NaN.
  Problem p(1, 1, 3, 8, 5, 5);
  p.kind = planc::kMaskAdd;
  p.mdims = {1, 1, 3, 5};
  make_problem(p);
  for (int j = 0; j < 5; j++) {
    p.mask.data<float>()[j] = 1000.0f * j;
    p.mask.data<float>()[5 + j] = -kInff;
    p.mask.data<float>()[10 + j] = j == 2 ? kInff : 0.0f;
  }
  check(p, pool);
  Tensor y = f32(q_dims(p));
  run_attention(p, y, pool);
  test::g_checks++;
  if (std::isnan(y.data<float>()[0]) || y.data<float>()[8] != 0.0f || !std::isnan(y.data<float>()[16])) {
    test::g_failures++;
    std::printf("FAIL specials: row 0 must be finite, row 1 zeros, row 2 NaN\n");
  }
  // Hand value: one query, two keys; scores 0 and ln 3 (scale 1) give weights 1/4, 3/4.
  Tensor q = f32({1, 1, 1, 1}, {1}), k = f32({1, 1, 2, 1}, {0, std::log(3.0f)}), v = f32({1, 1, 2, 1}, {4, 8});
  Tensor out = f32({1, 1, 1, 1});
  test::expect_ok(
      test::call(k_attn, {q.view, k.view, v.view}, {out.view},
                 test::attention_call().num_heads(1).q_layout(0).kv_len(2).mask_kind(planc::kMaskNone).is_causal(0).scale(1.0),
                 pool),
      "hand");
  double want = 7;
  test::close(out.data<float>(), &want, 1, 1e-6, 0, "hand value");
  // An omitted mask passed as a null view with mask_kind 0.
  test::expect_ok(
      test::call(k_attn, {q.view, k.view, v.view, planc::TensorView()}, {out.view},
                 test::attention_call().num_heads(1).q_layout(0).kv_len(2).mask_kind(planc::kMaskNone).is_causal(0).scale(1.0),
                 pool),
      "null mask view");
  test::close(out.data<float>(), &want, 1, 1e-6, 0, "null mask view value");
  // Empty batch.
  Tensor eq = f32({0, 2, 1, 4}), ek = f32({0, 2, 3, 4}), ev = f32({0, 2, 3, 4}), ey = f32({0, 2, 1, 4});
  test::expect_ok(
      test::call(k_attn, {eq.view, ek.view, ev.view}, {ey.view},
                 test::attention_call().num_heads(2).q_layout(0).kv_len(3).mask_kind(planc::kMaskNone).is_causal(0).scale(1.0),
                 pool),
      "empty batch");
}

void errors() {
  Tensor q = f32({2, 3, 4, 8}), k = f32({2, 3, 6, 8}), v = f32({2, 3, 6, 8}), y = f32({2, 3, 4, 8});
  // The arguments of every case below but the ones it changes.
  const test::attention_call base =
      test::attention_call().num_heads(3).q_layout(0).kv_len(5).mask_kind(planc::kMaskNone).is_causal(0).scale(0.5);
  auto call = [&](std::vector<planc::TensorView> in, const test::attention_call& args, planc::TensorView out) {
    return test::call(k_attn, in, {out}, args, nullptr);
  };
  test::expect_error(call({q.view, k.view, v.view}, test::attention_call(base).kv_len(7), y.view), "kv_len 7", "L > C");
  test::expect_error(call({q.view, k.view, v.view}, test::attention_call(base).kv_len(0), y.view), "kv_len 0", "L = 0");
  Tensor m_bad = f32({2, 3, 4, 6});  // last dim C, not L = 5
  test::expect_error(call({q.view, k.view, v.view, m_bad.view}, test::attention_call(base).mask_kind(planc::kMaskAdd), y.view),
                     "does not broadcast", "mask mL");
  Tensor m_b = f32({3, 1, 1, 5});
  test::expect_error(call({q.view, k.view, v.view, m_b.view}, test::attention_call(base).mask_kind(planc::kMaskAdd), y.view),
                     "[3,1,1,5]", "mask mB");
  Tensor m_r3 = f32({1, 4, 5});
  test::expect_error(call({q.view, k.view, v.view, m_r3.view}, test::attention_call(base).mask_kind(planc::kMaskAdd), y.view),
                     "rank 4", "mask rank");
  Tensor m_ok = f32({1, 1, 4, 5}), mb_ok = Tensor(planc::kBool, {1, 1, 4, 5});
  test::expect_error(
      call({q.view, k.view, v.view, m_ok.view}, test::attention_call(base).mask_kind(planc::kMaskBoolKeep), y.view),
      "needs a bool mask", "kind 2 float");
  test::expect_error(call({q.view, k.view, v.view, mb_ok.view}, test::attention_call(base).mask_kind(planc::kMaskAdd), y.view),
                     "needs a float32", "kind 1 bool");
  test::expect_error(call({q.view, k.view, v.view, m_ok.view}, base, y.view), "mask_kind 0 but", "kind 0 + mask");
  test::expect_error(call({q.view, k.view, v.view}, test::attention_call(base).mask_kind(planc::kMaskAdd), y.view), "no mask",
                     "kind 1 no mask");
  test::expect_error(call({q.view, k.view, v.view}, test::attention_call(base).mask_kind(planc::kMaskCount), y.view),
                     "mask_kind must", "kind 4");
  test::expect_error(call({q.view, k.view, v.view}, test::attention_call(base).q_layout(2), y.view), "q_layout", "layout 2");
  test::expect_error(call({q.view, k.view, v.view}, test::attention_call(base).is_causal(2), y.view), "is_causal", "causal 2");
  test::expect_error(call({q.view, k.view, v.view}, test::attention_call(base).num_heads(2), y.view), "num_heads 2", "heads");
  Tensor q3 = f32({2, 4, 24}), y3 = f32({2, 4, 24});
  test::expect_error(call({q3.view, k.view, v.view}, base, y3.view), "does not match K", "rank 3 Q, layout 0");
  test::expect_ok(call({q3.view, k.view, v.view}, test::attention_call(base).q_layout(1), y3.view), "rank 3 Q, layout 1");
  Tensor q3b = f32({2, 4, 25});
  test::expect_error(call({q3b.view, k.view, v.view}, test::attention_call(base).q_layout(1), q3b.view), "does not match K",
                     "H*D");
  Tensor qd = f32({2, 3, 4, 9});
  test::expect_error(call({qd.view, k.view, v.view}, base, qd.view), "[2,3,4,9]", "Q head size");
  Tensor y_bad = f32({2, 3, 5, 8});
  test::expect_error(call({q.view, k.view, v.view}, base, y_bad.view), "Y [2,3,5,8]", "Y dims");
  Tensor v_bad = f32({2, 3, 7, 8});
  test::expect_error(call({q.view, k.view, v_bad.view}, base, y.view), "V [2,3,7,8]", "V dims");
  Tensor qf64 = Tensor(planc::kFloat64, {2, 3, 4, 8});
  test::expect_error(call({qf64.view, k.view, v.view}, base, y.view), "float32", "Q dtype");
  // positional on purpose: one iarg short
  test::expect_error(test::call_positional(k_attn, {q.view, k.view, v.view}, {y.view}, {3, 0, 5, 0}, {0.5}, nullptr), "needs",
                     "iarg count");
  planc::TensorView missing = k.view;
  missing.data = nullptr;
  test::expect_error(call({q.view, missing, v.view}, base, y.view), "K is missing", "missing K");
}

// ---------- per-row past lengths (past_lens, input 4) ----------

// Batch row b of t (dim 0 is B) as a [1, ...] copy.
Tensor batch_row(const Tensor& t, int64_t b) {
  std::vector<int64_t> d = t.dims;
  d[0] = 1;
  Tensor r(t.dtype(), d);
  const size_t bytes = r.view.bytes();
  std::memcpy(r.data(), static_cast<const char*>(t.data()) + b * bytes, bytes);
  return r;
}

// The mask row b alone would get: batch row b (unless broadcast) and its first lb keys (unless broadcast).
Tensor mask_row(const Problem& p, int64_t b, int64_t lb) {
  const std::vector<int64_t>& md = p.mdims;
  const int64_t ml = md[3] == 1 ? 1 : lb, bb = md[0] == 1 ? 0 : b, es = planc::dtype_size(p.mask.dtype());
  Tensor r(p.mask.dtype(), {1, md[1], md[2], ml});
  for (int64_t x = 0; x < md[1] * md[2]; x++)
    std::memcpy(static_cast<char*>(r.data()) + x * ml * es,
                static_cast<const char*>(p.mask.data()) + ((bb * md[1] * md[2] + x) * md[3]) * es, ml * es);
  return r;
}

const char* run_attention_rows(Problem& p, const Tensor& past, Tensor& y, planc::ThreadPool* pool) {
  return test::call(
      k_attn, {p.q.view, p.k.view, p.v.view, p.kind ? p.mask.view : planc::TensorView(), past.view}, {y.view},
      test::attention_call().num_heads(p.h).q_layout(p.layout).kv_len(p.l).mask_kind(p.kind).is_causal(p.causal).scale(p.scale),
      pool);
}

// Bitwise comparison of n floats; one check.
void bitwise(const float* got, const float* want, int64_t n, const char* what) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (std::memcmp(got + i, want + i, sizeof(float)) != 0 && bad++ == 0) first = i;
  test::check_at(bad == 0, "", 0, "%s: %lld of %lld differ bitwise (first [%lld]: %.9g vs %.9g)", what, (long long)bad,
                 (long long)n, (long long)first, first < 0 ? 0.0 : double(got[first]), first < 0 ? 0.0 : double(want[first]));
}

// Rows with their own past lengths: for every batch row b, Y's row b is bit for bit what the kernel gives that row
// alone (B = 1) with kv_len = past[b] + Sq (and the mask cut to it), and close to the float64 reference. K/V rows
// past a row's own length are NaN: reading one would show.
void check_rows(int64_t b, int64_t h, int64_t sq, int64_t d, int64_t c, const std::vector<int64_t>& past, int layout,
                int causal, planc::MaskKind kind, int mask_shape, planc::ThreadPool* pool) {
  const int64_t l = *std::max_element(past.begin(), past.end()) + sq;
  Problem p(b, h, sq, d, c, l);
  p.layout = layout;
  p.causal = causal;
  p.kind = kind;
  if (kind) {
    const std::vector<int64_t> shapes[3] = {{b, h, sq, l}, {b, 1, 1, l}, {1, h, sq, 1}};
    p.mdims = shapes[mask_shape];
  }
  make_problem(p);
  for (int64_t bb = 0; bb < b; bb++)
    for (int64_t e = (bb * h * c + past[bb] + sq) * d; e < (bb + 1) * h * c * d; e++)
      if ((e / d) % c >= past[bb] + sq) p.k.data<float>()[e] = p.v.data<float>()[e] = kNaNf;
  Tensor pl = test::make_vec<int64_t>(planc::kInt64, {b}, past);
  Tensor y = f32(q_dims(p));
  for (int64_t i = 0; i < y.numel(); i++) y.data<float>()[i] = 12345.0f;
  char name[240];
  std::snprintf(name, sizeof name, "attention past_lens B%lld H%lld Sq%lld D%lld C%lld L%lld layout %d causal %d kind %d mask %d%s",
                (long long)b, (long long)h, (long long)sq, (long long)d, (long long)c, (long long)l, layout, causal,
                static_cast<int>(kind), mask_shape, pool ? " threaded" : "");
  const char* err = run_attention_rows(p, pl, y, pool);
  test::expect_ok(err, name);
  if (err) return;
  for (int64_t bb = 0; bb < b; bb++) {
    Problem r(1, h, sq, d, c, past[bb] + sq);
    r.layout = layout;
    r.causal = causal;
    r.kind = kind;
    r.scale = p.scale;
    r.q = batch_row(p.q, bb);
    r.k = batch_row(p.k, bb);
    r.v = batch_row(p.v, bb);
    if (kind) {
      r.mask = mask_row(p, bb, r.l);
      r.mdims = r.mask.dims;
    }
    Tensor alone = f32(q_dims(r));
    char what[300];
    std::snprintf(what, sizeof what, "%s: row %lld (past %lld) alone", name, (long long)bb, (long long)past[bb]);
    const char* e2 = run_attention(r, alone, pool);
    test::expect_ok(e2, what);
    if (e2) continue;
    const Tensor got = batch_row(y, bb);
    bitwise(got.data<float>(), alone.data<float>(), got.numel(), what);
    std::vector<double> want = reference(r);
    std::snprintf(what, sizeof what, "%s: row %lld vs reference", name, (long long)bb);
    test::close(got.data<float>(), want.data(), got.numel(), 2e-5, 2e-6, what);
  }
  // Every row at the longest length: bit for bit the call without past_lens.
  std::vector<int64_t> full(static_cast<size_t>(b), l - sq);
  Problem f = p;
  for (int64_t e = 0; e < f.k.numel(); e++)  // real keys everywhere below L again
    if ((e / d) % c < l && f.k.data<float>()[e] != f.k.data<float>()[e]) f.k.data<float>()[e] = f.v.data<float>()[e] = 0.5f;
  Tensor fl = test::make_vec<int64_t>(planc::kInt64, {b}, full), y1 = f32(q_dims(f)), y2 = f32(q_dims(f));
  test::expect_ok(run_attention_rows(f, fl, y1, pool), name);
  test::expect_ok(run_attention(f, y2, pool), name);
  std::snprintf(name + std::strlen(name), sizeof name - std::strlen(name), ": all rows at L vs no past_lens");
  bitwise(y1.data<float>(), y2.data<float>(), y1.numel(), name);
}

void row_tests(planc::ThreadPool* pool) {
  struct Geo { int64_t b, h, sq, d, c; std::vector<int64_t> past; } geos[] = {
      {3, 2, 1, 64, 20, {0, 7, 18}},       // decode: a row just joined, one midway, one at the capacity
      {4, 1, 1, 13, 9, {3, 3, 0, 8}},      // decode, odd head size, equal lengths
      {3, 2, 5, 40, 48, {0, 11, 40}},      // prefill (blocked path), D with 32- and 8-column parts
      {2, 3, 9, 16, 50, {37, 2}},          // prefill, several tiles of four rows, L > 32 for one row only
  };
  for (const Geo& g : geos)
    for (int layout = 0; layout < 2; layout++)
      for (int causal = 0; causal < 2; causal++)
        for (int kind = 0; kind < planc::kMaskCount; kind++)
          for (int shape = 0; shape < (kind ? 3 : 1); shape++)
            check_rows(g.b, g.h, g.sq, g.d, g.c, g.past, layout, causal, planc::MaskKind(kind), shape, pool);
}

// Padding: a batch row's keys followed by p masked keys (a padded source: additive finfo.min or -inf, or a bool
// mask's dropped keys; their K/V finite) give bit for bit the Y of its L keys alone, whatever p, on the decode and
// the blocked paths (the sums run over the row's own keys: softmax_scores' `used`).
void padding_tests(planc::ThreadPool* pool) {
  struct Geo { int64_t h, sq, d, l; } geos[] = {{2, 1, 64, 13}, {4, 1, 17, 40}, {2, 7, 40, 21}, {3, 12, 16, 51}};
  const float masked_add[2] = {-3.40282347e38f, -kInff};
  for (const Geo& g : geos)
    for (int layout = 0; layout < 2; layout++)
      for (int kind = planc::kMaskAdd; kind < planc::kMaskCount; kind++)
        for (int how = 0; how < (kind == planc::kMaskAdd ? 2 : 1); how++) {
          Problem alone(1, g.h, g.sq, g.d, g.l, g.l);
          alone.layout = layout;
          alone.kind = planc::MaskKind(kind);
          alone.mdims = {1, 1, 1, g.l};
          make_problem(alone);
          for (int64_t j = 0; j < g.l; j++) {  // every real key kept
            if (kind == planc::kMaskAdd) alone.mask.data<float>()[j] = 0.0f;
            else alone.mask.data<uint8_t>()[j] = kind == planc::kMaskBoolKeep;
          }
          Tensor want = f32(q_dims(alone));
          test::expect_ok(run_attention(alone, want, pool), "attention padding: alone");
          for (int64_t pad : {1, 3, 5, 8, 13, 37}) {
            const int64_t l = g.l + pad;
            Problem p(1, g.h, g.sq, g.d, l, l);
            p.layout = layout;
            p.kind = planc::MaskKind(kind);
            p.mdims = {1, 1, 1, l};
            make_problem(p);
            p.q = alone.q;
            for (int64_t bh = 0; bh < g.h; bh++)
              for (int64_t j = 0; j < g.l; j++)
                for (int64_t c = 0; c < g.d; c++) {
                  p.k.data<float>()[(bh * l + j) * g.d + c] = alone.k.data<float>()[(bh * g.l + j) * g.d + c];
                  p.v.data<float>()[(bh * l + j) * g.d + c] = alone.v.data<float>()[(bh * g.l + j) * g.d + c];
                }
            for (int64_t j = 0; j < l; j++) {
              const bool keep = j < g.l;
              if (kind == planc::kMaskAdd) p.mask.data<float>()[j] = keep ? 0.0f : masked_add[how];
              else p.mask.data<uint8_t>()[j] = keep == (kind == planc::kMaskBoolKeep);
            }
            Tensor y = f32(q_dims(p));
            char what[200];
            std::snprintf(what, sizeof what, "attention padding H%lld Sq%lld D%lld L%lld + %lld layout %d kind %d%s%s",
                          (long long)g.h, (long long)g.sq, (long long)g.d, (long long)g.l, (long long)pad, layout, kind,
                          how ? " -inf" : "", pool ? " threaded" : "");
            const char* err = run_attention(p, y, pool);
            test::expect_ok(err, what);
            if (!err) bitwise(y.data<float>(), want.data<float>(), y.numel(), what);
          }
        }
}

void row_errors() {
  Tensor q = f32({2, 3, 4, 8}), k = f32({2, 3, 6, 8}), v = f32({2, 3, 6, 8}), y = f32({2, 3, 4, 8});
  auto call = [&](const Tensor& past, int64_t kv_len) {
    return test::call(
        k_attn, {q.view, k.view, v.view, planc::TensorView(), past.view}, {y.view},
        test::attention_call().num_heads(3).q_layout(0).kv_len(kv_len).mask_kind(planc::kMaskNone).is_causal(1).scale(0.5),
        nullptr);
  };
  test::expect_ok(call(test::i64({2}, {0, 1}), 5), "past_lens 0, 1 (L 5)");
  test::expect_ok(call(test::i64({2}, {2, 0}), 6), "past_lens 2, 0 (L 6 = C)");
  test::expect_error(call(test::i64({2}, {-1, 1}), 5), "past_lens[0] = -1 is outside 0..1", "negative past_lens");
  test::expect_error(call(test::i64({2}, {0, 2}), 5), "past_lens[1] = 2 is outside 0..1", "past_lens + Sq > kv_len");
  test::expect_error(call(test::i64({2}, {0, INT64_MAX}), 6), "outside 0..2", "huge past_lens");
  test::expect_error(call(test::i64({2}, {0, INT64_MIN}), 6), "outside 0..2", "most negative past_lens");
  test::expect_error(call(test::i64({3}, {0, 0, 0}), 5), "past_lens must be [2] (B), got [3]", "past_lens [B+1]");
  test::expect_error(call(test::i64({1, 2}, {0, 0}), 5), "past_lens must be [2]", "past_lens rank 2");
  test::expect_error(call(test::i64({}, {0}), 5), "past_lens must be [2]", "past_lens scalar");
  test::expect_error(call(test::make<int32_t>(planc::kInt32, {2}, {0, 0}), 5), "past_lens must be int64, got int32", "past_lens int32");
  test::expect_error(call(f32({2}, {0, 0}), 5), "past_lens must be int64", "past_lens float32");
  Tensor missing = test::i64({2}, {0, 0});
  missing.view.data = nullptr;
  test::expect_error(call(missing, 5), "past_lens is malformed", "past_lens without data");
  test::expect_error(call(test::i64({2}, {0, 0}), 7), "kv_len 7", "kv_len > C with past_lens");
  // With a mask, kv_len still bounds its L dim.
  Tensor m = f32({2, 1, 1, 5});
  test::expect_ok(
      test::call(k_attn, {q.view, k.view, v.view, m.view, test::i64({2}, {1, 0}).view}, {y.view},
                 test::attention_call().num_heads(3).q_layout(0).kv_len(5).mask_kind(planc::kMaskAdd).is_causal(0).scale(0.5),
                 nullptr),
      "mask [2,1,1,5] with past_lens");
  test::expect_error(
      test::call(k_attn, {q.view, k.view, v.view, m.view, test::i64({2}, {0, 0}).view}, {y.view},
                 test::attention_call().num_heads(3).q_layout(0).kv_len(4).mask_kind(planc::kMaskAdd).is_causal(0).scale(0.5),
                 nullptr),
      "does not broadcast", "mask L != kv_len with past_lens");
  // A row's output does not depend on the other rows: changing row 1's length leaves row 0's Y bit for bit.
  test::fill_random(q);
  test::fill_random(k);
  test::fill_random(v);
  Tensor y2 = f32({2, 3, 4, 8});
  test::expect_ok(
      test::call(k_attn, {q.view, k.view, v.view, planc::TensorView(), test::i64({2}, {1, 0}).view}, {y.view},
                 test::attention_call().num_heads(3).q_layout(0).kv_len(6).mask_kind(planc::kMaskNone).is_causal(1).scale(0.5),
                 nullptr),
      "rows a");
  test::expect_ok(
      test::call(k_attn, {q.view, k.view, v.view, planc::TensorView(), test::i64({2}, {1, 2}).view}, {y2.view},
                 test::attention_call().num_heads(3).q_layout(0).kv_len(6).mask_kind(planc::kMaskNone).is_causal(1).scale(0.5),
                 nullptr),
      "rows b");
  bitwise(y.data<float>(), y2.data<float>(), 3 * 4 * 8, "row 0 with row 1 at another length");
  int64_t same_1 = 0;
  for (int64_t i = 3 * 4 * 8; i < y.numel(); i++) same_1 += y.data<float>()[i] == y2.data<float>()[i];
  test::check_at(same_1 < 3 * 4 * 8, "", 0, "row 1's Y must change with its length (%lld of %d equal)", (long long)same_1, 3 * 4 * 8);
}

// ---------- cache_write ----------

void check_cache(int64_t b, int64_t h, int64_t c, int64_t d, int64_t sn, int64_t pos, int layout, bool in_place,
                 planc::ThreadPool* pool) {
  char name[200];
  std::snprintf(name, sizeof name, "cache_write B%lld H%lld C%lld D%lld Sn%lld pos%lld layout %d%s%s", (long long)b,
                (long long)h, (long long)c, (long long)d, (long long)sn, (long long)pos, layout,
                in_place ? " in place" : "", pool ? " threaded" : "");
  Tensor cache = f32({b, h, c, d});
  test::fill_random(cache);
  Tensor nw = layout == 0 ? f32({b, h, sn, d}) : f32({b, sn, h * d});
  test::fill_random(nw);
  std::vector<double> want(cache.numel());
  for (int64_t i = 0; i < cache.numel(); i++) want[i] = cache.data<float>()[i];
  for (int64_t bb = 0; bb < b; bb++)
    for (int64_t hh = 0; hh < h; hh++)
      for (int64_t s = 0; s < sn; s++)
        for (int64_t x = 0; x < d; x++) {
          const int64_t src = layout == 0 ? ((bb * h + hh) * sn + s) * d + x : (bb * sn + s) * h * d + hh * d + x;
          want[((bb * h + hh) * c + pos + s) * d + x] = nw.data<float>()[src];
        }
  Tensor y = f32({b, h, c, d});
  for (int64_t i = 0; i < y.numel(); i++) y.data<float>()[i] = kNaNf;
  Tensor& out = in_place ? cache : y;
  const char* err = test::call(k_cache, {cache.view, nw.view}, {out.view},
                               test::cache_write_call().pos(pos).new_layout(layout).num_heads(h), pool);
  test::expect_ok(err, name);
  if (!err) test::close(out.data<float>(), want.data(), out.numel(), 0, 0, name);  // exact: a copy
}

void cache_tests(planc::ThreadPool* pool) {
  for (int layout = 0; layout < 2; layout++)
    for (int in_place = 0; in_place < 2; in_place++) {
      check_cache(2, 3, 10, 8, 1, 0, layout, in_place, pool);
      check_cache(2, 3, 10, 8, 1, 9, layout, in_place, pool);
      check_cache(2, 3, 10, 8, 4, 3, layout, in_place, pool);
      check_cache(1, 2, 5, 7, 5, 0, layout, in_place, pool);
      check_cache(3, 1, 6, 1, 0, 6, layout, in_place, pool);  // nothing to write
      check_cache(32, 8, 300, 64, 1, 123, layout, in_place, pool);
      check_cache(8, 4, 256, 64, 100, 20, layout, in_place, pool);
    }
  Tensor cache = f32({2, 3, 10, 8}), nw = f32({2, 3, 4, 8}), nw3 = f32({2, 4, 24});
  test::expect_error(test::call(k_cache, {cache.view, nw.view}, {cache.view},
                                test::cache_write_call().pos(7).new_layout(0).num_heads(3), nullptr),
                     "outside the capacity", "pos+Sn > C");
  test::expect_error(test::call(k_cache, {cache.view, nw.view}, {cache.view},
                                test::cache_write_call().pos(-1).new_layout(0).num_heads(3), nullptr),
                     "outside the capacity", "pos < 0");
  test::expect_ok(test::call(k_cache, {cache.view, nw.view}, {cache.view},
                             test::cache_write_call().pos(6).new_layout(0).num_heads(3), nullptr),
                  "pos+Sn = C");
  test::expect_error(test::call(k_cache, {cache.view, nw3.view}, {cache.view},
                                test::cache_write_call().pos(0).new_layout(0).num_heads(3), nullptr),
                     "does not match Cache", "rank 3 layout 0");
  test::expect_ok(test::call(k_cache, {cache.view, nw3.view}, {cache.view},
                             test::cache_write_call().pos(0).new_layout(1).num_heads(3), nullptr),
                  "rank 3 layout 1");
  test::expect_error(test::call(k_cache, {cache.view, nw.view}, {cache.view},
                                test::cache_write_call().pos(0).new_layout(0).num_heads(2), nullptr),
                     "num_heads 2", "heads");
  test::expect_error(test::call(k_cache, {cache.view, nw.view}, {cache.view},
                                test::cache_write_call().pos(0).new_layout(2).num_heads(3), nullptr),
                     "new_layout", "layout 2");
  Tensor nwd = f32({2, 3, 4, 9}), yb = f32({2, 3, 9, 8});
  test::expect_error(test::call(k_cache, {cache.view, nwd.view}, {cache.view},
                                test::cache_write_call().pos(0).new_layout(0).num_heads(3), nullptr),
                     "[2,3,4,9]", "New D");
  test::expect_error(
      test::call(k_cache, {cache.view, nw.view}, {yb.view}, test::cache_write_call().pos(0).new_layout(0).num_heads(3), nullptr),
      "Y [2,3,9,8]", "Y dims");
  // positional on purpose: one iarg short
  test::expect_error(test::call_positional(k_cache, {cache.view, nw.view}, {cache.view}, {0, 0}, {}, nullptr), "needs",
                     "iarg count");
}

// cache_write with past_lens (input 2): batch row b's rows go to past[b]..past[b]+Sn-1; pos (here -7, an error
// without past_lens) is unused.
void check_cache_rows(int64_t b, int64_t h, int64_t c, int64_t d, int64_t sn, const std::vector<int64_t>& past, int layout,
                      bool in_place, planc::ThreadPool* pool) {
  char name[200];
  std::snprintf(name, sizeof name, "cache_write past_lens B%lld H%lld C%lld D%lld Sn%lld layout %d%s%s", (long long)b,
                (long long)h, (long long)c, (long long)d, (long long)sn, layout, in_place ? " in place" : "",
                pool ? " threaded" : "");
  Tensor cache = f32({b, h, c, d});
  test::fill_random(cache);
  Tensor nw = layout == 0 ? f32({b, h, sn, d}) : f32({b, sn, h * d});
  test::fill_random(nw);
  std::vector<float> want(cache.data<float>(), cache.data<float>() + cache.numel());
  for (int64_t bb = 0; bb < b; bb++)
    for (int64_t hh = 0; hh < h; hh++)
      for (int64_t s = 0; s < sn; s++)
        for (int64_t x = 0; x < d; x++) {
          const int64_t src = layout == 0 ? ((bb * h + hh) * sn + s) * d + x : (bb * sn + s) * h * d + hh * d + x;
          want[((bb * h + hh) * c + past[bb] + s) * d + x] = nw.data<float>()[src];
        }
  Tensor y = f32({b, h, c, d});
  for (int64_t i = 0; i < y.numel(); i++) y.data<float>()[i] = kNaNf;
  Tensor& out = in_place ? cache : y;
  Tensor pl = test::make_vec<int64_t>(planc::kInt64, {b}, past);
  const char* err = test::call(k_cache, {cache.view, nw.view, pl.view}, {out.view},
                               test::cache_write_call().pos(-7).new_layout(layout).num_heads(h), pool);
  test::expect_ok(err, name);
  if (!err) bitwise(out.data<float>(), want.data(), out.numel(), name);
}

void cache_row_tests(planc::ThreadPool* pool) {
  for (int layout = 0; layout < 2; layout++)
    for (int in_place = 0; in_place < 2; in_place++) {
      check_cache_rows(3, 2, 10, 8, 1, {0, 4, 9}, layout, in_place, pool);
      check_cache_rows(2, 3, 12, 5, 4, {8, 0}, layout, in_place, pool);
      check_cache_rows(4, 2, 64, 32, 3, {61, 0, 17, 17}, layout, in_place, pool);
      check_cache_rows(2, 1, 6, 4, 0, {6, 0}, layout, in_place, pool);  // nothing to write
    }
  Tensor cache = f32({2, 3, 10, 8}), nw = f32({2, 3, 4, 8});
  auto call = [&](const Tensor& past) {
    return test::call(k_cache, {cache.view, nw.view, past.view}, {cache.view},
                      test::cache_write_call().pos(0).new_layout(0).num_heads(3), nullptr);
  };
  test::expect_ok(call(test::i64({2}, {6, 0})), "past_lens at C - Sn");
  test::expect_error(call(test::i64({2}, {7, 0})), "cache_write: past_lens[0] = 7 is outside 0..6", "past_lens + Sn > C");
  test::expect_error(call(test::i64({2}, {0, -1})), "past_lens[1] = -1 is outside 0..6", "negative past_lens");
  test::expect_error(call(test::i64({2}, {0, INT64_MAX})), "outside 0..6", "huge past_lens");
  test::expect_error(call(test::i64({1}, {0})), "past_lens must be [2] (B), got [1]", "past_lens [1]");
  test::expect_error(call(test::i64({2, 1}, {0, 0})), "past_lens must be [2]", "past_lens rank 2");
  test::expect_error(call(test::make<int32_t>(planc::kInt32, {2}, {0, 0})), "past_lens must be int64", "past_lens int32");
  Tensor missing = test::i64({2}, {0, 0});
  missing.view.data = nullptr;
  test::expect_error(call(missing), "past_lens is malformed", "past_lens without data");
}

// ---------- bench ----------

// The decomposed form with the project's kernels: transpose K, batched matmul (Q pre-scaled), softmax, matmul.
struct Decomposed {
  planc::KernelFn transpose, matmul, softmax;
  Tensor kt, s, p;
  void run(Tensor& q, Tensor& k, Tensor& v, Tensor& y, planc::ThreadPool* pool) {
    test::call(transpose, {k.view}, {kt.view}, test::transpose_call().perm({0, 1, 3, 2}), pool);
    test::call(matmul, {q.view, kt.view}, {s.view}, {}, pool);
    test::call(softmax, {s.view}, {p.view}, test::softmax_call().axis(3).log(0), pool);
    test::call(matmul, {p.view, v.view}, {y.view}, {}, pool);
  }
};

void bench(planc::ThreadPool* pool) {
  struct Case { int64_t b, h, sq, l; const char* name; } cases[] = {
      {32, 4, 1, 64, "decode B32 H4 D64 Sq1 L64"},
      {32, 4, 1, 256, "decode B32 H4 D64 Sq1 L256"},
      {8, 4, 64, 64, "prefill B8 H4 D64 Sq=L=64"},
      {8, 4, 256, 256, "prefill B8 H4 D64 Sq=L=256"},
  };
  const int64_t d = 64;
  Decomposed dec{test::find_kernel({planc::movement_kernels()}, "transpose"), test::find_kernel({planc::gemm_kernels()}, "matmul"),
                 test::find_kernel({planc::softmax_kernels()}, "softmax")};
  std::printf("| shape | threads | fused ms | decomposed ms | speedup | max |diff| |\n| --- | --- | --- | --- | --- | --- |\n");
  for (const Case& c : cases)
    for (planc::ThreadPool* pl : {static_cast<planc::ThreadPool*>(nullptr), pool}) {
      Tensor q = f32({c.b, c.h, c.sq, d}), k = f32({c.b, c.h, c.l, d}), v = f32({c.b, c.h, c.l, d});
      test::fill_random(q);
      test::fill_random(k);
      test::fill_random(v);
      Tensor y1 = f32({c.b, c.h, c.sq, d}), y2 = f32({c.b, c.h, c.sq, d});
      dec.kt = f32({c.b, c.h, d, c.l});
      dec.s = f32({c.b, c.h, c.sq, c.l});
      dec.p = f32({c.b, c.h, c.sq, c.l});
      Tensor qs = q;  // the decomposition's Q * scale
      for (int64_t i = 0; i < qs.numel(); i++) qs.data<float>()[i] *= 0.125f;
      const int reps = c.sq * c.l > 10000 ? 30 : 300;
      double best_f = 1e30, best_d = 1e30;
      for (int r = 0; r < reps; r++) {
        double t0 = test::now_ms();
        test::call(
            k_attn, {q.view, k.view, v.view}, {y1.view},
            test::attention_call().num_heads(c.h).q_layout(0).kv_len(c.l).mask_kind(planc::kMaskNone).is_causal(0).scale(0.125),
            pl);
        double t1 = test::now_ms();
        dec.run(qs, k, v, y2, pl);
        double t2 = test::now_ms();
        best_f = std::min(best_f, t1 - t0);
        best_d = std::min(best_d, t2 - t1);
      }
      double diff = 0;
      for (int64_t i = 0; i < y1.numel(); i++) diff = std::max(diff, double(std::fabs(y1.data<float>()[i] - y2.data<float>()[i])));
      std::printf("| %s | %d | %.4f | %.4f | %.1fx | %.2g |\n", c.name, pl ? pl->threads() : 1, best_f, best_d,
                  best_d / best_f, diff);
    }
}

}  // namespace

int main(int argc, char** argv) {
  k_attn = test::find_kernel({planc::attention_kernels()}, "attention");
  k_cache = test::find_kernel({planc::attention_kernels()}, "cache_write");
  if (!k_attn || !k_cache) return 1;
  planc::ThreadPool pool(2);
  if (argc > 1 && std::string(argv[1]) == "bench") {
    bench(&pool);
    return 0;
  }
  for (planc::ThreadPool* pl : {static_cast<planc::ThreadPool*>(nullptr), &pool}) {
    sweep(pl);
    large(pl);
    specials(pl);
    cache_tests(pl);
    row_tests(pl);
    padding_tests(pl);
    cache_row_tests(pl);
  }
  errors();
  row_errors();
  return test::finish("attention_test");
}
