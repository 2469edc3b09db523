// qproject_topk: the k best of log_softmax(logits) over int8 vocabulary rows Wq [V, Dp], logits as qmatmul's
// (float(Σ quant(x) · Wq[v]) · (sa · w_scale[v]) + bias[v]), in tiles of the vocabulary or its active ids; with the
// residual plane, the best candidates rescored from float32 x and 12-bit rows.
#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"
#include "qgemm.h"
#include "topk_fold.h"

namespace planc {
namespace {

namespace v = qproject_topk_args;
using qgemm::Path;
using qgemm::Rows;

constexpr int64_t kRowBlock = 64;  // rows per pass over the weight
constexpr int64_t kRescored = 8;  // with a residual plane, at least this many candidates per row are rescored (pack.ts RESCORED)

struct Problem {
  Rows x;
  const float* sa;  // [rows]
  const int8_t* w;
  const float* scale;
  const int32_t* wsum;
  const float* bias;
  int64_t rows, dp, v, k;
  bool f32, offset;  // float32 input; int8 input read as q + 128
  const int32_t* act;
  int64_t n;  // ids computed: v, or the active count
  const float* xf;     // X [rows, d] as given (rescoring)
  const uint8_t* res;  // residual plane [V, dp / 2], or null
  int64_t d, kc;       // kc: candidates kept per row (k, or max(k, kRescored) with a residual plane)
};

// One candidate's fine logit: float(Σ_d x[d] · (15 · q[d] + r[d]) in double, as eight partial sums by d mod 8 added
// pairwise) · (w_scale / 15) + bias (compiler/quant/pack.ts fineLogit: the same operations in the same order).
__attribute__((optimize("fp-contract=off"))) float fine_logit(const Problem& p, const float* x, int64_t id) {
  const int8_t* q = p.w + id * p.dp;
  const uint8_t* res = p.res + id * (p.dp / 2);
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t d = 0; d < p.d; d++)
    acc[d & 7] += static_cast<double>(x[d]) * static_cast<double>(qgemm::kResidualSteps * q[d] + qgemm::residual_at(res, d));
  const double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  float l = static_cast<float>(sum) * (p.scale[id] / static_cast<float>(qgemm::kResidualSteps));
  if (p.bias) l += p.bias[id];
  return l;
}

// Keeps a row's kc best candidates, replaces their logits by their fine ones, corrects the normalizer for them and
// re-sorts; returns the corrected lse (unchanged for a NaN row or one with nothing computed).
double rescore_row(const Problem& p, int64_t row, double lse, std::vector<Cand>& cands) {
  cands.resize(static_cast<size_t>(p.kc));
  if (!std::isfinite(lse)) return lse;
  const float* x = p.xf + row * p.d;
  double mass = 1.0;  // Σ exp(l − lse) over the vocabulary, the candidates' terms swapped for their fine ones
  for (Cand& c : cands) {
    if (c.id == kNoId) continue;
    const float fine = fine_logit(p, x, c.id);
    mass += std::exp(static_cast<double>(fine) - lse) - std::exp(static_cast<double>(c.v) - lse);
    c.v = fine;
  }
  sort_cands(cands, static_cast<int64_t>(cands.size()));
  return mass > 0 ? lse + std::log(mass) : lse;
}

// The dequantization of one row's nb sums in place (logits = float(acc) · (sa · w_scale[id]) + bias[id]), specialized
// so each case is one branch-free loop (contiguous ids vectorize). The float operations of qmatmul's epilogue, no FMA
// contraction.
template <bool Ids, bool F32, bool Offset, bool Bias>
__attribute__((optimize("fp-contract=off"))) void dequantize_row(const Problem& p, float sa, const int32_t* ids, int64_t t0, int64_t nb,
                                                                  const int32_t* acc, float* out) {
  for (int64_t j = 0; j < nb; j++) {
    const int64_t id = Ids ? ids[j] : t0 + j;
    float l;
    if constexpr (F32) {
      l = out[j] * (sa * p.scale[id]);
    } else {
      int32_t a = acc[j];
      if constexpr (Offset) a = static_cast<int32_t>(static_cast<uint32_t>(a) - 128u * static_cast<uint32_t>(p.wsum[id]));
      l = static_cast<float>(a) * (sa * p.scale[id]);
    }
    if constexpr (Bias) l += p.bias[id];
    out[j] = l;
  }
}

using DequantizeRow = void (*)(const Problem&, float, const int32_t*, int64_t, int64_t, const int32_t*, float*);

template <bool Ids, bool F32>
DequantizeRow dequantize_for(bool offset, bool bias) {
  if (offset) return bias ? dequantize_row<Ids, F32, true, true> : dequantize_row<Ids, F32, true, false>;
  return bias ? dequantize_row<Ids, F32, false, true> : dequantize_row<Ids, F32, false, false>;
}

DequantizeRow dequantize_for(const Problem& p) {
  if (p.act) return p.f32 ? dequantize_for<true, true>(false, p.bias) : dequantize_for<true, false>(p.offset, p.bias);
  return p.f32 ? dequantize_for<false, true>(false, p.bias) : dequantize_for<false, false>(p.offset, p.bias);
}

// Logits of rows [r0, r0 + nr) for the nb ids from t0 (of the active list, or of the vocabulary): out [nr, nb].
void tile_logits(const Problem& p, const Path& path, int64_t r0, int64_t nr, int64_t t0, int64_t nb, float* out, std::vector<int32_t>& acc) {
  const int32_t* ids = p.act ? p.act + t0 : nullptr;
  const int8_t* w = p.act ? p.w : p.w + t0 * p.dp;
  if (p.f32) {
    path.row_dots_f32(p.x, r0, nr, w, p.dp, ids, nb, out);
  } else {
    acc.resize(static_cast<size_t>(nr * nb));
    path.row_dots_i8(p.x, r0, nr, w, p.dp, ids, nb, acc.data());
  }
  const DequantizeRow dq = dequantize_for(p);
  for (int64_t r = 0; r < nr; r++) dq(p, p.sa[r0 + r], ids, t0, nb, p.f32 ? nullptr : acc.data() + r * nb, out + r * nb);
}

// Rows [r0, r0 + nr): parts of the vocabulary (or of the active ids) in parallel, each a run of tiles with its own
// state, then the merge (project_topk.cc's run_block).
void run_block(const Problem& p, const Path& path, int64_t r0, int64_t nr, float* values, int64_t* indices, ThreadPool* pool) {
  const int64_t tw = tile_width(nr, p.n);
  const int64_t tiles = tw > 0 ? (p.n + tw - 1) / tw : 0;
  const int64_t threads = pool ? pool->threads() : 1;
  const double work = 2.0 * nr * p.dp * p.n;
  const int64_t n_parts = work < 1e6 || threads == 1 || tiles == 0 ? 1 : std::min<int64_t>(tiles, 4 * threads);
  std::vector<PartState> parts(static_cast<size_t>(n_parts));
  auto run = [&](int64_t q0, int64_t q1) {
    static thread_local std::vector<float> buf;
    static thread_local std::vector<int32_t> acc;
    buf.resize(static_cast<size_t>(nr * tw));
    for (int64_t q = q0; q < q1; q++) {
      PartState& s = parts[static_cast<size_t>(q)];
      s.reset(nr, p.kc);
      for (int64_t t = tiles * q / n_parts; t < tiles * (q + 1) / n_parts; t++) {
        const int64_t j0 = t * tw, nb = std::min(tw, p.n - j0);
        tile_logits(p, path, r0, nr, j0, nb, buf.data(), acc);
        const int32_t* ids = p.act ? p.act + j0 : nullptr;
        for (int64_t r = 0; r < nr; r++) fold_tile(s, r, buf.data() + r * nb, nb, j0, ids, p.kc);
      }
    }
  };
  if (pool && n_parts > 1) pool->parallel_for(n_parts, 1, run);
  else run(0, n_parts);
  // the rows' merges (and rescoring, a few thousand products a row) split over the pool
  auto merge = [&](int64_t ra, int64_t rb) {
    static thread_local std::vector<Cand> cands;
    for (int64_t r = ra; r < rb; r++) {
      double lse = row_lse(parts, r);
      best_cands(parts, r, p.kc, lse != lse, cands);
      if (p.res) lse = rescore_row(p, r0 + r, lse, cands);
      write_row(cands, p.k, lse, values + (r0 + r) * p.k, indices + (r0 + r) * p.k);
    }
  };
  if (pool && p.res && nr > 1) pool->parallel_for(nr, 1, merge);
  else merge(0, nr);
}

bool dims_are(const TensorView& t, std::initializer_list<int64_t> d) {
  if (t.rank != static_cast<int32_t>(d.size())) return false;
  int i = 0;
  for (int64_t x : d)
    if (t.dims[i++] != x) return false;
  return true;
}

// Checks the operands and outputs. Returns an error or nullptr; *rows, *dp, *vocab on success.
const char* check_qproject_topk(const KernelArgs& args, int64_t* rows, int64_t* dp, int64_t* vocab) {
  if (const char* err = check_arity("qproject_topk", args, v::kArity)) return err;
  if (const char* err = qgemm::check_variant("qproject_topk", args.variant)) return err;
  const TensorView &x = args.in[0], &w = args.in[1], &ws = args.in[2], &sum = args.in[3], &bias = args.in[4];
  const TensorView &vals = args.out[0], &ids = args.out[1];
  const int64_t k = args.iargs[v::kK], input = args.iargs[v::kInput], d = args.iargs[v::kD];
  if (input != kQuantInInt8 && input != kQuantInFloat32)
    return kernel_error("qproject_topk: input must be int8 (%d) or float32 (%d), got %lld", int(kQuantInInt8), int(kQuantInFloat32), (long long)input);
  if (!sum.data && x.numel > 0) return "qproject_topk: w_sum (int32 [V]) is required";
  for (const TensorView* t : {&x, &w, &ws, &sum, &vals, &ids})
    if (!view_ok(*t)) return "qproject_topk: a malformed or missing input or output view";
  if (x.dtype != kFloat32 || x.rank < 2 || x.dims[x.rank - 1] != d || d < 0 || d > INT_MAX)
    return kernel_error("qproject_topk: X must be float32 [rows..., %lld] of rank >= 2, got %s %s", (long long)d, dtype_name(x.dtype), dims_str(x).c_str());
  const int64_t p = (d + 63) / 64 * 64;
  if (w.dtype != kInt8 || w.rank != 2 || w.dims[1] != p || w.dims[0] > INT_MAX)
    return kernel_error("qproject_topk: w must be int8 [V, %lld] (D = %lld rounded up to 64), got %s %s", (long long)p, (long long)d,
                        dtype_name(w.dtype), dims_str(w).c_str());
  const int64_t nv = w.dims[0];
  if (ws.dtype != kFloat32 || !dims_are(ws, {nv}))
    return kernel_error("qproject_topk: w_scale must be float32 [%lld], got %s %s", (long long)nv, dtype_name(ws.dtype), dims_str(ws).c_str());
  if (sum.dtype != kInt32 || !dims_are(sum, {nv}))
    return kernel_error("qproject_topk: w_sum must be int32 [%lld], got %s %s", (long long)nv, dtype_name(sum.dtype), dims_str(sum).c_str());
  if (bias.data && (!view_ok(bias) || bias.dtype != kFloat32 || !dims_are(bias, {nv})))
    return kernel_error("qproject_topk: bias must be float32 [%lld], got %s %s", (long long)nv, dtype_name(bias.dtype), dims_str(bias).c_str());
  if (args.n_in > 5 && args.in[5].data) {
    const TensorView& act = args.in[5];
    if (!view_ok(act) || (act.dtype != kUint8 && act.dtype != kBool) || !dims_are(act, {nv}))
      return kernel_error("qproject_topk: active must be uint8 or bool [%lld], got %s %s", (long long)nv, dtype_name(act.dtype), dims_str(act).c_str());
  }
  if (args.n_in > 6 && args.in[6].data) {
    const TensorView& res = args.in[6];
    if (!view_ok(res) || res.dtype != kUint8 || !dims_are(res, {nv, p / 2}))
      return kernel_error("qproject_topk: w_res must be uint8 [%lld, %lld], got %s %s", (long long)nv, (long long)(p / 2), dtype_name(res.dtype),
                          dims_str(res).c_str());
  }
  if (k < 1 || k > nv) return kernel_error("qproject_topk: k = %lld is out of range for a vocabulary of %lld", (long long)k, (long long)nv);
  int64_t n = 1;
  for (int i = 0; i < x.rank - 1; i++) n *= x.dims[i];
  for (const TensorView* o : {&vals, &ids}) {
    bool ok = o->rank == x.rank && o->dims[o->rank - 1] == k;
    for (int i = 0; ok && i < x.rank - 1; i++) ok = o->dims[i] == x.dims[i];
    if (!ok)
      return kernel_error("qproject_topk: output %s must be X's leading dims + [%lld] (X %s)", dims_str(*o).c_str(), (long long)k, dims_str(x).c_str());
  }
  if (vals.dtype != kFloat32 || ids.dtype != kInt64)
    return kernel_error("qproject_topk: outputs must be float32 and int64, got %s and %s", dtype_name(vals.dtype), dtype_name(ids.dtype));
  if (n > 0 && (!x.data || !w.data || !ws.data || !sum.data || !vals.data || !ids.data)) return "qproject_topk: missing input or output data";
  *rows = n;
  *dp = p;
  *vocab = nv;
  return nullptr;
}

// Inputs X [rows..., D], Wq int8 [V, Dp], w_scale [V], w_sum [V] int32, bias? [V], active? [V] (uint8/bool), w_res?
// [V, Dp / 2] uint8 (the best max(k, 8) rescored, compiler/kernel-schema.ts); outputs
// values [rows..., k] (log-softmax of the logits, best first, ties: lower id first) and indices [rows..., k] int64;
// iargs k, input (int8 or float32), d. With active, only its nonzero ids are computed, normalized over and returned
// (fewer than k: the remaining slots are -inf with id 0), as project_topk.
const char* qproject_topk(const KernelArgs& args) {
  int64_t rows = 0, dp = 0, nv = 0;
  if (const char* err = check_qproject_topk(args, &rows, &dp, &nv)) return err;
  if (rows == 0) return nullptr;
  const Path& path = *qgemm::path_for(args.variant);
  const int64_t input = args.iargs[v::kInput], d = args.iargs[v::kD];
  static thread_local qgemm::RowBuffers rbuf;
  static thread_local std::vector<int32_t> active;
  Problem p{};
  p.x = qgemm::quantize_rows(args, args.in[0].as<float>(), rows, d, dp, input, path, rbuf);
  p.sa = rbuf.scale.data();
  p.w = args.in[1].as<int8_t>();
  p.scale = args.in[2].as<float>();
  p.wsum = args.in[3].as<int32_t>();
  p.bias = args.in[4].data ? args.in[4].as<float>() : nullptr;
  p.rows = rows;
  p.dp = dp;
  p.v = nv;
  p.k = args.iargs[v::kK];
  p.f32 = input == kQuantInFloat32;
  p.offset = !p.f32 && path.unsigned_a;
  p.n = nv;
  p.xf = args.in[0].as<float>();
  p.d = d;
  p.res = args.n_in > 6 && args.in[6].data ? args.in[6].as<uint8_t>() : nullptr;
  p.kc = p.res ? std::min(nv, std::max(p.k, kRescored)) : p.k;
  if (args.n_in > 5 && args.in[5].data) {
    active.resize(static_cast<size_t>(nv + 1));
    p.n = compact_active(args.in[5].as<uint8_t>(), nv, active.data());
    p.act = active.data();
  }
  float* values = args.out[0].as<float>();
  int64_t* indices = args.out[1].as<int64_t>();
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) run_block(p, path, r0, std::min(kRowBlock, rows - r0), values, indices, args.pool);
  return nullptr;
}

const KernelDef kDefs[] = {
    {"qproject_topk", qproject_topk, qgemm::variant_unavailable},
};

}  // namespace

KernelList qproject_topk_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
