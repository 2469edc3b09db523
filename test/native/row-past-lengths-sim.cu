// test/row-past-lengths.test.ts's emulated-device part: codegen/cuda/kernels' attention and cache_write with past_lens
// (PAST) on cudasim. Pasted after the kernel templates (codegen/cuda/generate.ts templateSource). For every batch row
// b, attention with past_lens gives bit for bit what the kernel gives row b alone (B = 1) with kv_len = past[b] + Sq
// (K/V rows past a row's own length are NaN: reading one would show); bad past_lens set the module's error code;
// cache_write puts row b's new rows at past[b]. Prints ok/FAIL lines (native/cudasim/test/harness.h).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "harness.h"

using harness::check;

extern "C" __global__ void attn_rows_l0(const planc::KArgs a) { planc::attention<32, 0, 1, true, true>(a); }
extern "C" __global__ void attn_one_l0(const planc::KArgs a) { planc::attention<32, 0, 1, true>(a); }
extern "C" __global__ void attn_rows_l1(const planc::KArgs a) { planc::attention<32, 1, 0, false, true>(a); }
extern "C" __global__ void attn_one_l1(const planc::KArgs a) { planc::attention<32, 1, 0, false>(a); }
extern "C" __global__ void cw_rows(const planc::KArgs a) { planc::cache_write<1, true>(a); }

namespace {

constexpr int64_t H = 2, D = 32, C = 12;

planc::Tensor tensor(void* data, int32_t dtype, std::vector<int64_t> dims) {
  planc::Tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.rank = (int32_t)dims.size();
  t.numel = 1;
  for (size_t i = 0; i < dims.size(); i++) t.numel *= (t.dims[i] = dims[i]);
  return t;
}

planc::KArgs args() {
  planc::KArgs a;
  memset(&a, 0, sizeof a);
  return a;
}

float value(uint64_t& s) {
  s = s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((s >> 40) & 0xffff) / 32768.0f - 1.0f;
}

template <class T>
T* device(const std::vector<T>& v) {
  T* p = harness::alloc<T>(v.size() ? v.size() : 1);
  if (!v.empty()) memcpy(p, v.data(), v.size() * sizeof(T));
  return p;
}

// One attention launch; returns planc_error (then reset).
template <auto K>
unsigned long long run_attention(const char* name, float* q, std::vector<int64_t> qdims, float* k, float* v, int64_t b, float* mask,
                                 int64_t* past, int64_t past_n, int64_t L, int64_t sq, float* y, bool* launched) {
  planc::KArgs a = args();
  a.in[0] = tensor(q, 1, qdims);
  a.in[1] = tensor(k, 1, {b, H, C, D});
  a.in[2] = tensor(v, 1, {b, H, C, D});
  a.in[3] = mask ? tensor(mask, 1, {b, 1, 1, L}) : tensor(nullptr, 0, {});
  a.n_in = 4;
  if (past) {
    a.in[4] = tensor(past, 7, {past_n});
    a.n_in = 5;
  }
  a.out[0] = tensor(y, 1, qdims);
  a.n_out = 1;
  a.iargs[0] = H;
  a.iargs[2] = L;
  a.fargs[0] = 0.25;
  const int64_t rows = b * H * sq;
  planc_error = 0;
  *launched = harness::launch<K>(name, dim3((unsigned)((rows + 3) / 4)), dim3(128), 0, a);
  const unsigned long long e = planc_error;
  planc_error = 0;
  return e;
}

// QL 0 with an additive mask [B,1,1,L] and is_causal, or QL 1 with neither.
template <auto ROWS, auto ONE, int QL>
void rows_case(const char* label, int64_t sq, std::vector<int64_t> pastv) {
  const int64_t B = (int64_t)pastv.size();
  int64_t L = 0;
  for (int64_t p : pastv) L = p + sq > L ? p + sq : L;
  uint64_t s = 42 + sq;
  std::vector<float> q(B * H * sq * D), k(B * H * C * D), v(B * H * C * D), m(B * L);
  for (float& x : q) x = value(s);
  for (float& x : k) x = value(s);
  for (float& x : v) x = value(s);
  for (size_t i = 0; i < m.size(); i++) m[i] = i % 5 == 1 ? -INFINITY : value(s);
  for (int64_t b = 0; b < B; b++)
    for (int64_t e = b * H * C * D; e < (b + 1) * H * C * D; e++)
      if ((e / D) % C >= pastv[b] + sq) k[e] = v[e] = NAN;
  const std::vector<int64_t> qdims = QL == 0 ? std::vector<int64_t>{B, H, sq, D} : std::vector<int64_t>{B, sq, H * D};
  float *dq = device(q), *dk = device(k), *dv = device(v), *dm = QL == 0 ? device(m) : nullptr;
  float* dy = device(std::vector<float>(q.size(), 12345.0f));
  int64_t* dp = device(pastv);
  bool launched = false;
  std::string name = std::string(label) + " with past_lens";
  const unsigned long long err = run_attention<ROWS>(name.c_str(), dq, qdims, dk, dv, B, dm, dp, B, L, sq, dy, &launched);
  check(launched && err == 0, name.c_str(), harness::g_last_error + " error " + std::to_string(err));
  const int64_t per = H * sq * D;
  for (int64_t b = 0; b < B; b++) {
    const int64_t lb = pastv[b] + sq;
    std::vector<float> qb(q.begin() + b * per, q.begin() + (b + 1) * per);
    std::vector<float> kb(k.begin() + b * H * C * D, k.begin() + (b + 1) * H * C * D), vb(v.begin() + b * H * C * D, v.begin() + (b + 1) * H * C * D);
    std::vector<float> mb(m.begin() + b * L, m.begin() + b * L + lb);
    float* yb = device(std::vector<float>(per, -1.0f));
    const std::vector<int64_t> qd1 = QL == 0 ? std::vector<int64_t>{1, H, sq, D} : std::vector<int64_t>{1, sq, H * D};
    std::string nb = std::string(label) + " row " + std::to_string(b) + " alone";
    const unsigned long long e1 = run_attention<ONE>(nb.c_str(), device(qb), qd1, device(kb), device(vb), 1, QL == 0 ? device(mb) : nullptr,
                                                     nullptr, 0, lb, sq, yb, &launched);
    int bad = 0, nan = 0;
    for (int64_t i = 0; i < per; i++) {
      bad += memcmp(&yb[i], &dy[b * per + i], sizeof(float)) != 0;
      nan += yb[i] != yb[i];
    }
    std::string same = std::string(label) + " row " + std::to_string(b) + " (past " + std::to_string(pastv[b]) + ") bit for bit as alone";
    check(launched && e1 == 0 && bad == 0 && nan == 0, same.c_str(), std::to_string(bad) + " differ, " + std::to_string(nan) + " NaN");
  }
  // Bad past_lens: a value past kv_len - Sq (kErrKvLen 5), dims not [B] (kErrShape 3), a negative value.
  std::vector<int64_t> over = pastv;
  over[B - 1] = L - sq + 1;
  std::vector<int64_t> neg = pastv;
  neg[0] = -1;
  const unsigned long long e_over = run_attention<ROWS>("over", dq, qdims, dk, dv, B, dm, device(over), B, L, sq, dy, &launched);
  const unsigned long long e_neg = run_attention<ROWS>("negative", dq, qdims, dk, dv, B, dm, device(neg), B, L, sq, dy, &launched);
  const unsigned long long e_dims = run_attention<ROWS>("dims", dq, qdims, dk, dv, B, dm, dp, B - 1, L, sq, dy, &launched);
  check((e_over & 0xffffffffu) == 5 && (e_neg & 0xffffffffu) == 5 && (e_dims & 0xffffffffu) == 3,
        (std::string(label) + " bad past_lens set the error code").c_str(),
        std::to_string(e_over) + " " + std::to_string(e_neg) + " " + std::to_string(e_dims));
}

void cache_case() {
  const int64_t B = 3, Sn = 2;
  const std::vector<int64_t> pastv = {0, 7, 10};
  uint64_t s = 7;
  std::vector<float> cache(B * H * C * D), nw(B * Sn * H * D);
  for (float& x : cache) x = value(s);
  for (float& x : nw) x = value(s);
  std::vector<float> want = cache;
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < Sn; t++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t d = 0; d < D; d++) want[((b * H + h) * C + pastv[b] + t) * D + d] = nw[((b * Sn + t) * H + h) * D + d];
  float *dc = device(cache), *dn = device(nw), *dy = device(std::vector<float>(cache.size(), NAN));
  auto launch = [&](const std::vector<int64_t>& past, float* out, bool* ok) {
    planc::KArgs a = args();
    a.in[0] = tensor(dc, 1, {B, H, C, D});
    a.in[1] = tensor(dn, 1, {B, Sn, H * D});
    a.in[2] = tensor(device(past), 7, {(int64_t)past.size()});
    a.n_in = 3;
    a.out[0] = tensor(out, 1, {B, H, C, D});
    a.n_out = 1;
    a.iargs[0] = -5;  // pos: unused with past_lens
    a.iargs[1] = 1;
    a.iargs[2] = H;
    planc_error = 0;
    *ok = harness::launch<cw_rows>("cache_write rows", dim3(4), dim3(256), 0, a);
    const unsigned long long e = planc_error;
    planc_error = 0;
    return e;
  };
  bool ok = false;
  const unsigned long long e = launch(pastv, dy, &ok);
  check(ok && e == 0 && memcmp(dy, want.data(), want.size() * sizeof(float)) == 0, "cache_write with past_lens (a copy)", harness::g_last_error);
  const unsigned long long e_in = launch(pastv, dc, &ok);
  check(ok && e_in == 0 && memcmp(dc, want.data(), want.size() * sizeof(float)) == 0, "cache_write with past_lens (in place)", harness::g_last_error);
  const unsigned long long e_bad = launch({0, 11, 0}, dy, &ok);
  const unsigned long long e_dims = launch({0, 1}, dy, &ok);
  check((e_bad & 0xffffffffu) == 4 && (e_dims & 0xffffffffu) == 3, "cache_write bad past_lens set the error code",
        std::to_string(e_bad) + " " + std::to_string(e_dims));
}

}  // namespace

int main() {
  rows_case<attn_rows_l0, attn_one_l0, 0>("decode causal masked", 1, {0, 5, 11, 3});
  rows_case<attn_rows_l0, attn_one_l0, 0>("prefill causal masked", 3, {0, 6, 9});
  rows_case<attn_rows_l1, attn_one_l1, 1>("decode [B,Sq,H*D]", 1, {4, 0, 9});
  rows_case<attn_rows_l1, attn_one_l1, 1>("prefill [B,Sq,H*D]", 4, {8, 2});
  cache_case();
  return harness::g_failed ? 1 : 0;
}
