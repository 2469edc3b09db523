// cluster_mask: the vocabulary mask of planc.ClusterMask, the union of the active sets of each row's nearest centroid.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"

namespace planc {

// cpu/kmeans.cc: argmin_j ‖C_j‖² − 2 x_i·C_j per row (ties: lowest j) on the project's GEMM.
const char* kmeans_assign(const float* x, int64_t n, int64_t d, const float* c, int64_t r, const float* cnorm,
                          int32_t* out_assign, float* out_dist, ThreadPool* pool);

namespace {

// The operands of one call, checked.
struct ClusterProblem {
  const float* x;
  const float* centroids;
  const float* cnorm;
  const int32_t* offsets;
  const int32_t* ids;
  uint8_t* mask;
  int64_t rows, d, r, nnz, v;
};

// Checks a float32 tensor of the given dims (rank 1 or 2; d1 < 0: rank 1).
bool is_f32(const TensorView& t, int64_t d0, int64_t d1) {
  if (t.dtype != kFloat32 || !t.data) return false;
  return d1 < 0 ? t.rank == 1 && t.dims[0] == d0 : t.rank == 2 && t.dims[0] == d0 && t.dims[1] == d1;
}

// Checks offsets [r + 1]: non-decreasing, within [0, nnz].
const char* check_offsets(const int32_t* offsets, int64_t r, int64_t nnz) {
  for (int64_t j = 0; j <= r; j++) {
    const int64_t lo = j == 0 ? 0 : offsets[j - 1];
    if (offsets[j] < lo || offsets[j] > nnz)
      return kernel_error("cluster_mask: offsets[%lld] = %d is outside [%lld, %lld] (offsets must be non-decreasing within [0, nnz])",
                          (long long)j, offsets[j], (long long)lo, (long long)nnz);
  }
  return nullptr;
}

// Checks the operands and the output; fills p. Returns an error or nullptr.
const char* check_cluster_mask(const KernelArgs& args, ClusterProblem* p) {
  if (const char* err = check_arity("cluster_mask", args, cluster_mask_args::kArity)) return err;
  const TensorView &x = args.in[0], &c = args.in[1], &cn = args.in[2], &off = args.in[3], &ids = args.in[4];
  const TensorView& out = args.out[0];
  const int64_t v = args.iargs[cluster_mask_args::kVocab];
  if (x.dtype != kFloat32 || x.rank < 1)
    return kernel_error("cluster_mask: X must be float32 of rank >= 1, got %s %s", dtype_name(x.dtype), dims_str(x).c_str());
  const int64_t d = x.dims[x.rank - 1];
  if (c.dtype != kFloat32 || c.rank != 2 || c.dims[1] != d || c.dims[0] < 1 || (c.numel > 0 && !c.data))
    return kernel_error("cluster_mask: centroids must be float32 [R >= 1, %lld] (X %s), got %s %s", (long long)d,
                        dims_str(x).c_str(), dtype_name(c.dtype), dims_str(c).c_str());
  const int64_t r = c.dims[0];
  if (!is_f32(cn, r, -1))
    return kernel_error("cluster_mask: cnorm must be float32 [%lld], got %s %s", (long long)r, dtype_name(cn.dtype), dims_str(cn).c_str());
  if (off.dtype != kInt32 || off.rank != 1 || off.dims[0] != r + 1 || !off.data)
    return kernel_error("cluster_mask: offsets must be int32 [%lld], got %s %s", (long long)(r + 1), dtype_name(off.dtype), dims_str(off).c_str());
  if (ids.dtype != kInt32 || ids.rank != 1 || (ids.numel > 0 && !ids.data))
    return kernel_error("cluster_mask: ids must be int32 [nnz], got %s %s", dtype_name(ids.dtype), dims_str(ids).c_str());
  if (v < 1) return kernel_error("cluster_mask: V = %lld must be >= 1", (long long)v);
  if ((out.dtype != kUint8 && out.dtype != kBool) || out.rank != 1 || out.dims[0] != v || !out.data)
    return kernel_error("cluster_mask: output must be uint8 [%lld] (iargs V), got %s %s", (long long)v, dtype_name(out.dtype),
                        dims_str(out).c_str());
  int64_t rows = 1;
  for (int i = 0; i < x.rank - 1; i++) rows *= x.dims[i];
  if (rows > 0 && d > 0 && !x.data) return "cluster_mask: missing X";
  if (const char* err = check_offsets(off.as<int32_t>(), r, ids.numel)) return err;
  *p = ClusterProblem{x.as<float>(), c.as<float>(), cn.as<float>(), off.as<int32_t>(), ids.as<int32_t>(),
                      out.as<uint8_t>(), rows, d, r, ids.numel, v};
  return nullptr;
}

// Sets the mask bytes of cluster j's ids; an error when one is outside [0, v).
const char* set_cluster(const ClusterProblem& p, int32_t j) {
  const int32_t* ids = p.ids;
  for (int64_t t = p.offsets[j]; t < p.offsets[j + 1]; t++) {
    if (ids[t] < 0 || ids[t] >= p.v)
      return kernel_error("cluster_mask: ids[%lld] = %d (cluster %d) is outside [0, %lld)", (long long)t, ids[t], j,
                          (long long)p.v);
    p.mask[ids[t]] = 1;
  }
  return nullptr;
}

// Inputs X [rows..., D] float32, centroids [R, D] float32, cnorm [R] float32 (‖C_r‖²), offsets [R + 1] int32, ids
// [nnz] int32 (cluster r's active ids: ids[offsets[r] .. offsets[r + 1])); output active uint8 [V]; iargs V.
// Per row the nearest centroid r* = argmin_r cnorm[r] − 2 x·C_r (ties: lower r), from one GEMM over all rows; the
// mask is 1 exactly at the ids of the rows' clusters. Offsets are checked in full; ids as they are set.
const char* cluster_mask(const KernelArgs& args) {
  ClusterProblem p{};
  if (const char* err = check_cluster_mask(args, &p)) return err;
  std::memset(p.mask, 0, static_cast<size_t>(p.v));
  if (p.rows == 0) return nullptr;
  static thread_local std::vector<int32_t> assign;
  assign.resize(static_cast<size_t>(p.rows));
  if (const char* err = kmeans_assign(p.x, p.rows, p.d, p.centroids, p.r, p.cnorm, assign.data(), nullptr, args.pool)) {
    const std::string msg = err;  // err may be kernel_error's own buffer
    return kernel_error("cluster_mask: %s", msg.c_str());
  }
  std::sort(assign.begin(), assign.end());
  const auto end = std::unique(assign.begin(), assign.end());
  for (auto it = assign.begin(); it != end; ++it)
    if (const char* err = set_cluster(p, *it)) return err;
  return nullptr;
}

const KernelDef kDefs[] = {
    {"cluster_mask", cluster_mask},
};

}  // namespace

KernelList vocab_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
