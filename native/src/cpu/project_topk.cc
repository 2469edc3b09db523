// project_topk: logits = X·W (+ bias) in tiles of the vocabulary or its active ids, folded into a running log-sum-exp and top-k.
// A float16 / bfloat16 W: X's values rounded to its dtype once per call, W widened to float32 tile by tile (half.h).
// Variant packed: W widened and reordered once per plan into the AVX-512 GEMM's 32-column panels (prepare_packed), read
// by the GEMM where auto would pack W per call (more rows than its dot products take).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"
#include "gemm_avx512.h"
#include "half.h"
#include "topk_fold.h"
#include "vec_math.h"

#ifdef PLANC_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace planc {
namespace {

constexpr int64_t kRowBlock = 64;  // rows per pass over the weight (the tile buffer is at most 64 x 2048 floats)
constexpr int64_t kPackFloats = int64_t(1) << 17;  // a gathered tile of W: at most 512 KiB, so it stays in L2

// ---------- logits of one tile ----------

// The operands: X [rows, d], W [d, v] (transposed: [v, d]), bias [v] or null; the columns computed are the n ids of
// act (ascending), or all v columns (n = v) when act is null. A half W (wh, of dtype wdt: float16 or bfloat16; w null)
// is widened into each tile's pack, and x then holds X's values rounded to wdt.
struct Problem {
  const float* x;
  const float* w;
  const float* bias;
  int64_t rows, d, v, k;
  bool transposed;
  const int32_t* act;
  int64_t n;
  const uint16_t* wh = nullptr;
  int32_t wdt = kFloat32;
  const float* packed = nullptr;  // variant packed (no active mask, D > 0): W in avx512_pack_b's layout (float32)
};

// out[r][j] = sum_p a[r][p] w[p][j] for nr rows, nb columns of a row-major w (row stride ldw); four rows of w per step.
PLANC_HOT_BODY void gemv_rows_body(const float* a, int64_t nr, int64_t d, const float* w, int64_t ldw, int64_t nb, float* out) {
  std::fill(out, out + nr * nb, 0.0f);
  int64_t p = 0;
  for (; p + 4 <= d; p += 4) {
    const float* w0 = w + p * ldw;
    const float* w1 = w0 + ldw;
    const float* w2 = w1 + ldw;
    const float* w3 = w2 + ldw;
    for (int64_t r = 0; r < nr; r++) {
      const float a0 = a[r * d + p], a1 = a[r * d + p + 1], a2 = a[r * d + p + 2], a3 = a[r * d + p + 3];
      float* o = out + r * nb;
      for (int64_t j = 0; j < nb; j++) o[j] += a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j];
    }
  }
  for (; p < d; p++)
    for (int64_t r = 0; r < nr; r++) add_scaled(out + r * nb, a[r * d + p], w + p * ldw, nb);
}
PLANC_HOT_DISPATCH(void, gemv_rows, (const float* a, int64_t nr, int64_t d, const float* w, int64_t ldw, int64_t nb, float* out), (a, nr, d, w, ldw, nb, out))

// out[r][j] = a[r] . e[j] for nb rows of e (each d floats, contiguous).
void dot_rows(const float* a, int64_t nr, int64_t d, const float* e, int64_t nb, float* out) {
  for (int64_t j = 0; j < nb; j++)
    for (int64_t r = 0; r < nr; r++) out[r * nb + j] = dot(a + r * d, e + j * d, d);
}

// Whether the hand-written GEMV / dot loops beat the GEMM for nr rows of a [D, V] product (the thresholds of
// gemm.cc's prefer_gemv).
bool prefer_gemv(int64_t nr, int64_t d, int64_t v, bool transposed) {
  if (avx512_gemm_available()) return nr <= 2 || (!transposed && nr <= 4 && d * v < (int64_t(1) << 22));
#ifdef PLANC_HAVE_OPENBLAS
  return transposed ? nr <= 2 : nr <= 8;
#else
  return true;
#endif
}

// out [nr, nb] = a [nr, d] · B for nb columns: B is [d, nb] with row stride ldb, or (transposed) nb rows of d floats
// with stride ldb. v is the width of the whole product (for the GEMV-or-GEMM choice).
void product(const float* a, int64_t nr, int64_t d, const float* b, int64_t ldb, int64_t nb, bool transposed, int64_t v,
             float* out) {
  if (d == 0) {
    std::fill(out, out + nr * nb, 0.0f);
  } else if (prefer_gemv(nr, d, v, transposed)) {
    if (transposed) dot_rows(a, nr, d, b, nb, out);
    else gemv_rows(a, nr, d, b, ldb, nb, out);
  } else if (avx512_gemm_available()) {
    avx512_gemm(GemmCall{nr, nb, d, 1.0f, a, d, false, b, ldb, transposed, out, nb, false}, nullptr);
  } else {
#ifdef PLANC_HAVE_OPENBLAS
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasTrans : CblasNoTrans, static_cast<int>(nr),
                static_cast<int>(nb), static_cast<int>(d), 1.0f, a, static_cast<int>(d), b, static_cast<int>(ldb),
                0.0f, out, static_cast<int>(nb));
#endif
  }
}

// Asks for the cache lines of a row of d floats ahead of its use (rows are scattered: the stream prefetchers only
// catch on after a few misses of each).
inline void prefetch_row(const float* row, int64_t d) {
  for (int64_t q = 0; q < d; q += 16) __builtin_prefetch(row + q);
}

// How many rows of d floats ahead to prefetch: about 32 KiB, 4 to 16 rows.
int64_t prefetch_distance(int64_t d) { return std::min<int64_t>(16, std::max<int64_t>(4, 8192 / std::max<int64_t>(1, d))); }

// pack = W's columns [j0, j0 + nb) widened from a half W: [nb, d] (transposed: nb contiguous rows) or [d, nb].
void widen_tile(const Problem& p, int64_t j0, int64_t nb, float* pack) {
  if (p.transposed) return widen_run(p.wdt, p.wh + j0 * p.d, nb * p.d, pack);
  // d short runs a row of W apart: asked for ahead (the stream prefetchers do not follow them)
  constexpr int64_t kAhead = 8;
  const int64_t floats = nb / 2 + 16;  // the run's bytes as floats, one more line for its alignment
  for (int64_t q = 0; q < std::min(kAhead, p.d); q++) prefetch_row(reinterpret_cast<const float*>(p.wh + q * p.v + j0), floats);
  for (int64_t q = 0; q < p.d; q++) {
    if (q + kAhead < p.d) prefetch_row(reinterpret_cast<const float*>(p.wh + (q + kAhead) * p.v + j0), floats);
    widen_run(p.wdt, p.wh + q * p.v + j0, nb, pack + q * nb);
  }
}

// out [nr, nb] = logits of rows [r0, r0 + nr) and columns [j0, j0 + nb), bias included; a half W is widened into
// pack first. Single-threaded.
void tile_logits(const Problem& p, int64_t r0, int64_t nr, int64_t j0, int64_t nb, float* out, float* pack) {
  if (p.packed) {  // j0 is a multiple of 32 (tile widths are): the tile starts at panel j0 / 32
    GemmCall g{nr, nb, p.d, 1.0f, p.x + r0 * p.d, p.d, false, nullptr, 0, false, out, nb, false};
    g.bpacked = p.packed + (j0 / 32) * p.d * 32;
    avx512_gemm(g, nullptr);
  } else if (p.wh) {
    widen_tile(p, j0, nb, pack);
    product(p.x + r0 * p.d, nr, p.d, pack, p.transposed ? p.d : nb, nb, p.transposed, p.v, out);
  } else {
    const float* b = p.transposed ? p.w + j0 * p.d : p.w + j0;
    product(p.x + r0 * p.d, nr, p.d, b, p.transposed ? p.d : p.v, nb, p.transposed, p.v, out);
  }
  if (p.bias)
    for (int64_t r = 0; r < nr; r++) add_run(out + r * nb, p.bias + j0, nb);
}

// Whether a tile's columns of W go through a packed tile: always for a half W (widened there); for the active ids
// unless the dot products read W's rows in place.
bool needs_pack(const Problem& p, int64_t nr) {
  if (p.packed) return false;
  return p.wh || (p.act && !(p.transposed && prefer_gemv(nr, p.d, p.n, true)));
}

// pack [nb, d] = the W rows of ids (W [v, d]).
void gather_rows(const float* w, int64_t d, const int32_t* ids, int64_t nb, float* pack) {
  const int64_t ahead = prefetch_distance(d);
  for (int64_t j = 0; j < nb; j++) {
    if (j + ahead < nb) prefetch_row(w + ids[j + ahead] * d, d);
    std::memcpy(pack + j * d, w + ids[j] * d, static_cast<size_t>(d) * sizeof(float));
  }
}

// pack [d, nb] = the W columns of ids (W [d, v]).
void gather_cols(const float* w, int64_t d, int64_t v, const int32_t* ids, int64_t nb, float* pack) {
  for (int64_t q = 0; q < d; q++) {
    const float* row = w + q * v;
    float* dst = pack + q * nb;
    for (int64_t j = 0; j < nb; j++) dst[j] = row[ids[j]];
  }
}

// gather_rows and gather_cols from a half W, widened.
void gather_rows_half(const Problem& p, const int32_t* ids, int64_t nb, float* pack) {
  const int64_t ahead = prefetch_distance(p.d / 2);  // rows of half the bytes
  for (int64_t j = 0; j < nb; j++) {
    if (j + ahead < nb) prefetch_row(reinterpret_cast<const float*>(p.wh + ids[j + ahead] * p.d), p.d / 2 + 16);
    widen_run(p.wdt, p.wh + ids[j] * p.d, p.d, pack + j * p.d);
  }
}

void gather_cols_half(const Problem& p, const int32_t* ids, int64_t nb, float* pack) {
  for (int64_t q = 0; q < p.d; q++) {
    const uint16_t* row = p.wh + q * p.v;
    float* dst = pack + q * nb;
    if (p.wdt == kBFloat16) for (int64_t j = 0; j < nb; j++) dst[j] = bf16_to_float(row[ids[j]]);
    else for (int64_t j = 0; j < nb; j++) dst[j] = half_to_float(row[ids[j]]);
  }
}

// out [nr, nb] = logits of rows [r0, r0 + nr) and the active ids act[t0 .. t0 + nb), bias included; W's rows
// (transposed) are read in place by the dot products, else gathered into pack [nb * d]. Single-threaded.
void active_tile_logits(const Problem& p, int64_t r0, int64_t nr, int64_t t0, int64_t nb, float* out, float* pack) {
  const float* a = p.x + r0 * p.d;
  const int32_t* ids = p.act + t0;
  if (p.d == 0) {
    std::fill(out, out + nr * nb, 0.0f);
  } else if (!needs_pack(p, nr)) {
    const int64_t ahead = prefetch_distance(p.d);
    for (int64_t j = 0; j < nb; j++) {
      if (j + ahead < nb) prefetch_row(p.w + ids[j + ahead] * p.d, p.d);
      for (int64_t r = 0; r < nr; r++) out[r * nb + j] = dot(a + r * p.d, p.w + ids[j] * p.d, p.d);
    }
  } else if (p.transposed) {
    if (p.wh) gather_rows_half(p, ids, nb, pack);
    else gather_rows(p.w, p.d, ids, nb, pack);
    product(a, nr, p.d, pack, p.d, nb, true, p.n, out);
  } else {
    if (p.wh) gather_cols_half(p, ids, nb, pack);
    else gather_cols(p.w, p.d, p.v, ids, nb, pack);
    product(a, nr, p.d, pack, nb, nb, false, p.n, out);
  }
  if (!p.bias) return;
  for (int64_t r = 0; r < nr; r++) {
    float* o = out + r * nb;
    for (int64_t j = 0; j < nb; j++) o[j] += p.bias[ids[j]];
  }
}

// Columns per tile of the vocabulary or its active ids: a gathered or widened tile of W (when one is needed) stays
// within kPackFloats.
int64_t pack_tile_width(const Problem& p, int64_t nr) {
  const int64_t w = tile_width(nr, p.n);
  if (!needs_pack(p, nr)) return w;
  const int64_t cap = std::max<int64_t>(32, kPackFloats / std::max<int64_t>(1, p.d) / 32 * 32);
  return std::min(w, cap);
}

// Rows [r0, r0 + nr): parts of the vocabulary (or of the active ids) in parallel, each a run of tiles with its own
// state, then the merge.
void run_block(const Problem& p, int64_t r0, int64_t nr, float* values, int64_t* indices, ThreadPool* pool) {
  const int64_t tw = pack_tile_width(p, nr);
  const int64_t tiles = tw > 0 ? (p.n + tw - 1) / tw : 0;
  const int64_t threads = pool ? pool->threads() : 1;
  const double flops = 2.0 * nr * p.d * p.n;
  const int64_t n_parts = flops < 1e6 || threads == 1 || tiles == 0 ? 1 : std::min<int64_t>(tiles, 4 * threads);
  std::vector<PartState> parts(static_cast<size_t>(n_parts));
  auto run = [&](int64_t q0, int64_t q1) {
    static thread_local std::vector<float> buf, pack;
    buf.resize(static_cast<size_t>(nr * tw));
    if (needs_pack(p, nr)) pack.resize(static_cast<size_t>(tw * p.d));
    for (int64_t q = q0; q < q1; q++) {
      PartState& s = parts[static_cast<size_t>(q)];
      s.reset(nr, p.k);
      for (int64_t t = tiles * q / n_parts; t < tiles * (q + 1) / n_parts; t++) {
        const int64_t j0 = t * tw, nb = std::min(tw, p.n - j0);
        if (p.act) active_tile_logits(p, r0, nr, j0, nb, buf.data(), pack.data());
        else tile_logits(p, r0, nr, j0, nb, buf.data(), pack.data());
        const int32_t* ids = p.act ? p.act + j0 : nullptr;
        for (int64_t r = 0; r < nr; r++) fold_tile(s, r, buf.data() + r * nb, nb, j0, ids, p.k);
      }
    }
  };
  if (pool && n_parts > 1) pool->parallel_for(n_parts, 1, run);
  else run(0, n_parts);
  std::vector<Cand> cands;
  for (int64_t r = 0; r < nr; r++) merge_row(parts, r, p.k, values + (r0 + r) * p.k, indices + (r0 + r) * p.k, cands);
}

// ---------- the kernel ----------

// Checks the operands and outputs; fills p. Returns an error or nullptr.
const char* check_project_topk(const KernelArgs& args, Problem* p) {
  if (const char* err = check_arity("project_topk", args, project_topk_args::kArity)) return err;
  const TensorView &x = args.in[0], &w = args.in[1], &bias = args.in[2], &vals = args.out[0], &ids = args.out[1];
  const int64_t k = args.iargs[project_topk_args::kK], tr = args.iargs[project_topk_args::kTransposed];
  if (tr != 0 && tr != 1) return kernel_error("project_topk: transposed must be 0 or 1, got %lld", (long long)tr);
  if (x.dtype != kFloat32 || (w.dtype != kFloat32 && !is_half_dtype(w.dtype)))
    return kernel_error("project_topk: X must be float32 and W float32, float16 or bfloat16, got %s and %s",
                        dtype_name(x.dtype), dtype_name(w.dtype));
  if (x.rank < 2 || w.rank != 2)
    return kernel_error("project_topk: needs X of rank >= 2 and a 2-D W, got X %s and W %s", dims_str(x).c_str(), dims_str(w).c_str());
  const int64_t d = x.dims[x.rank - 1];
  const int64_t wd = tr ? w.dims[1] : w.dims[0], v = tr ? w.dims[0] : w.dims[1];
  if (wd != d)
    return kernel_error("project_topk: X %s and W %s (transposed=%lld) disagree on D", dims_str(x).c_str(), dims_str(w).c_str(), (long long)tr);
  if (d > INT_MAX || v > INT_MAX) return kernel_error("project_topk: W %s is too large", dims_str(w).c_str());
  if (bias.data && (bias.dtype != kFloat32 || bias.rank != 1 || bias.dims[0] != v))
    return kernel_error("project_topk: bias must be float32 [%lld], got %s %s", (long long)v, dtype_name(bias.dtype), dims_str(bias).c_str());
  if (args.n_in == 4 && args.in[3].data) {
    const TensorView& act = args.in[3];
    if ((act.dtype != kUint8 && act.dtype != kBool) || act.rank != 1 || act.dims[0] != v)
      return kernel_error("project_topk: active must be uint8 or bool [%lld], got %s %s", (long long)v,
                          dtype_name(act.dtype), dims_str(act).c_str());
  }
  if (k < 1 || k > v) return kernel_error("project_topk: k = %lld is out of range for a vocabulary of %lld", (long long)k, (long long)v);
  int64_t rows = 1;
  for (int i = 0; i < x.rank - 1; i++) rows *= x.dims[i];
  for (const TensorView* o : {&vals, &ids}) {
    bool ok = o->rank == x.rank && o->dims[o->rank - 1] == k;
    for (int i = 0; ok && i < x.rank - 1; i++) ok = o->dims[i] == x.dims[i];
    if (!ok)
      return kernel_error("project_topk: output %s must be X's leading dims + [%lld] (X %s)", dims_str(*o).c_str(),
                          (long long)k, dims_str(x).c_str());
  }
  if (vals.dtype != kFloat32 || ids.dtype != kInt64)
    return kernel_error("project_topk: outputs must be float32 and int64, got %s and %s", dtype_name(vals.dtype), dtype_name(ids.dtype));
  if (rows > 0 && (!x.data || !w.data || !vals.data || !ids.data)) return "project_topk: missing input or output";
  const bool half = w.dtype != kFloat32;
  *p = Problem{x.as<float>(), half ? nullptr : w.as<float>(), bias.data ? bias.as<float>() : nullptr, rows, d, v, k,
               tr == 1, nullptr, v, half ? w.as<uint16_t>() : nullptr, w.dtype};
  return nullptr;
}

// Inputs X [rows..., D], W [D, V] (transposed: [V, D]), bias? [V], active? [V] (uint8/bool); outputs values
// [rows..., k] float32 (log-softmax of the logits, best first, ties: lower id first) and indices [rows..., k] int64;
// iargs k, transposed. With active, only its nonzero ids are computed, normalized over and returned (fewer than k:
// the remaining slots are -inf with id 0). W may be float16 or bfloat16: then X's values are rounded to its dtype and
// both widened to float32 before the products (kernel-schema.ts F32_OR_HALF).
const char* project_topk_variant_unavailable(int64_t code);

const char* project_topk(const KernelArgs& args) {
  if (args.variant < 0 || args.variant >= project_topk_args::kVariantCount)
    return kernel_error("project_topk: no variant %lld", (long long)args.variant);
  if (const char* why = project_topk_variant_unavailable(args.variant)) return why;
  Problem p{};
  if (const char* err = check_project_topk(args, &p)) return err;
  static thread_local std::vector<int32_t> active;
  if (args.n_in == 4 && args.in[3].data) {
    active.resize(static_cast<size_t>(p.v + 1));
    p.n = compact_active(args.in[3].as<uint8_t>(), p.v, active.data());
    p.act = active.data();
  }
  static thread_local std::vector<float> xr;  // a half W: X's values rounded to its dtype
  if (p.wh && p.rows > 0) {
    xr.resize(static_cast<size_t>(p.rows * p.d));
    float* xrp = xr.data();
    const float* xp = p.x;
    run_parallel(args, p.rows * p.d, 1 << 15, [&](int64_t i0, int64_t i1) { round_run(p.wdt, xp + i0, i1 - i0, xrp + i0); });
    p.x = xrp;
  }
  // packed: the GEMM on the reordered W at any rows (at one or two, reading W in place as auto does would stream both
  // copies of W through the caches in one translation); D = 0 has no product
  if (args.variant == project_topk_args::kVariantPacked && !p.act && p.d > 0) {
    if (args.prepared == nullptr) return "project_topk: variant packed ran without its prepared W (the program binds it)";
    p.packed = static_cast<const float*>(args.prepared);
  }
#ifdef PLANC_HAVE_OPENBLAS
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);  // BLAS runs inside the pool's tasks
#endif
  float* values = args.out[0].as<float>();
  int64_t* indices = args.out[1].as<int64_t>();
  for (int64_t r0 = 0; r0 < p.rows; r0 += kRowBlock)
    run_block(p, r0, std::min(kRowBlock, p.rows - r0), values, indices, args.pool);
  return nullptr;
}

const char* project_topk_variant_unavailable(int64_t code) {
  if (code == project_topk_args::kVariantPacked && !avx512_gemm_available())
    return kernel_error("variant packed needs the AVX-512 GEMM: %s", avx512_gemm_unavailable());
  return nullptr;
}

int project_topk_prepared_input(int64_t code) {
  return code >= 0 && code < project_topk_args::kVariantCount ? project_topk_args::kVariantPreparedInput[code] : -1;
}

// Variant packed's W: float32 (a half W widened exactly) in avx512_pack_b's 32-column panels of the [D, V] product.
const char* prepare_packed(const KernelArgs& args, PreparedOperand* out) {
  Problem p{};
  if (const char* err = check_project_topk(args, &p)) return err;
  if (!avx512_gemm_available()) return project_topk_variant_unavailable(project_topk_args::kVariantPacked);
  const float* w = p.w;
  std::vector<float> wide;
  if (p.wh) {
    wide.resize(static_cast<size_t>(p.d * p.v));
    widen_run(p.wdt, p.wh, p.d * p.v, wide.data());
    w = wide.data();
  }
  float* dst = static_cast<float*>(out->alloc(static_cast<size_t>(avx512_packed_b_floats(p.d, p.v)) * sizeof(float)));
  avx512_pack_b(w, p.transposed ? p.d : p.v, p.transposed, p.d, p.v, dst);
  return nullptr;
}

const KernelDef kDefs[] = {
    {"project_topk", project_topk, project_topk_variant_unavailable, project_topk_prepared_input, prepare_packed},
};

}  // namespace

KernelList project_topk_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
