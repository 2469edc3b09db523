// Data movement for any dtype, by element size: transpose, gather(_elements), slice, concat, split, expand, tile, pad.
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "../kernel.h"
#include "../threadpool.h"

namespace planc {
namespace {

// Elements per parallel task below which work runs inline.
constexpr int64_t kMinElems = 1 << 15;

// Rows per task for rows of row_len elements.
int64_t min_rows(int64_t row_len) { return std::max<int64_t>(1, kMinElems / std::max<int64_t>(1, row_len)); }

void run_rows(ThreadPool* pool, int64_t rows, int64_t row_len, const std::function<void(int64_t, int64_t)>& fn) {
  if (rows <= 0) return;
  if (pool) pool->parallel_for(rows, min_rows(row_len), fn);
  else fn(0, rows);
}

// Checks X and Y have one supported dtype; sets the element size.
const char* check_dtypes(const char* kernel, const TensorView& x, const TensorView& y, size_t* esize) {
  if (x.dtype != y.dtype) return kernel_error("%s: X dtype %d differs from Y dtype %d", kernel, x.dtype, y.dtype);
  *esize = dtype_size(x.dtype);
  if (*esize == 0) return kernel_error("%s: unsupported dtype %d", kernel, x.dtype);
  return nullptr;
}

int64_t prod(const int64_t* dims, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= dims[d];
  return n;
}

void row_major_strides(const int64_t* dims, int rank, int64_t* strides) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    strides[d] = s;
    s *= dims[d];
  }
}

// Calls fn<T>() with T the unsigned integer type of the element size (1, 2, 4 or 8 bytes).
template <typename Fn>
void by_size(size_t esize, Fn&& fn) {
  switch (esize) {
    case 1: fn(uint8_t{}); break;
    case 2: fn(uint16_t{}); break;
    case 4: fn(uint32_t{}); break;
    default: fn(uint64_t{}); break;
  }
}

// ---------- transpose ----------

// A transpose with size-1 dims dropped and input axes that stay adjacent in the output merged.
struct Perm {
  int rank = 0;
  int64_t dims[kMaxRank] = {0};  // input dims (merged)
  int perm[kMaxRank] = {0};      // output axis i is input axis perm[i]
};

Perm canonical_perm(const TensorView& x, const int64_t* perm) {
  // Drop size-1 dims.
  int map[kMaxRank];
  int kept = 0;
  int64_t dims[kMaxRank];
  for (int d = 0; d < x.rank; d++) {
    map[d] = x.dims[d] == 1 ? -1 : kept;
    if (x.dims[d] != 1) dims[kept++] = x.dims[d];
  }
  int p[kMaxRank];
  int n = 0;
  for (int i = 0; i < x.rank; i++)
    if (map[perm[i]] >= 0) p[n++] = map[perm[i]];
  // Merge runs of output axes that are consecutive input axes: group g starts at output axis gs[g].
  int group_of_input[kMaxRank];
  int groups = 0;
  for (int i = 0; i < n; i++) {
    if (i == 0 || p[i] != p[i - 1] + 1) groups++;
    group_of_input[p[i]] = groups - 1;
  }
  Perm out;
  out.rank = groups;
  // Groups in input order: walk input axes, a new group each time the group id changes.
  int input_pos[kMaxRank];
  int pos = -1, last = -1;
  for (int d = 0; d < n; d++) {
    const int g = group_of_input[d];
    if (g != last) {
      pos++;
      out.dims[pos] = 1;
      input_pos[g] = pos;
      last = g;
    }
    out.dims[pos] *= dims[d];
  }
  for (int g = 0; g < groups; g++) out.perm[g] = input_pos[g];
  return out;
}

// Copies contiguous inner runs: the last output axis is the last input axis.
template <typename T>
void transpose_runs(const Perm& c, const T* src, T* dst, ThreadPool* pool) {
  const int r = c.rank;
  int64_t in_st[kMaxRank], out_dims[kMaxRank];
  row_major_strides(c.dims, r, in_st);
  for (int i = 0; i < r; i++) out_dims[i] = c.dims[c.perm[i]];
  const int64_t inner = out_dims[r - 1];
  const int64_t rows = prod(out_dims, 0, r - 1);
  run_rows(pool, rows, inner, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; row++) {
      int64_t rem = row, off = 0;
      for (int i = r - 2; i >= 0; i--) {
        off += (rem % out_dims[i]) * in_st[c.perm[i]];
        rem /= out_dims[i];
      }
      std::memcpy(dst + row * inner, src + off, sizeof(T) * inner);
    }
  });
}

constexpr int64_t kTile = 16;

// General case: the input's last axis sits at output axis q < r-1. Each batch (the other output axes) is a plane
// dst[a * os_q + b] = src[a + b * is_l] over a < na (input's last axis) and b < nb (output's last axis), in tiles.
template <typename T>
void transpose_tiled(const Perm& c, const T* src, T* dst, ThreadPool* pool) {
  const int r = c.rank;
  int64_t in_st[kMaxRank], out_dims[kMaxRank], out_st[kMaxRank];
  row_major_strides(c.dims, r, in_st);
  for (int i = 0; i < r; i++) out_dims[i] = c.dims[c.perm[i]];
  row_major_strides(out_dims, r, out_st);
  int q = 0;
  while (c.perm[q] != r - 1) q++;
  const int64_t na = out_dims[q], nb = out_dims[r - 1], os_q = out_st[q], is_l = in_st[c.perm[r - 1]];
  // Batch axes: every output axis except q and r-1.
  int bax[kMaxRank];
  int nbax = 0;
  for (int i = 0; i < r - 1; i++)
    if (i != q) bax[nbax++] = i;
  int64_t batches = 1;
  for (int k = 0; k < nbax; k++) batches *= out_dims[bax[k]];
  const int64_t a_tiles = (na + kTile - 1) / kTile;
  run_rows(pool, batches * a_tiles, kTile * nb, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
      int64_t rem = t / a_tiles, soff = 0, doff = 0;
      for (int k = nbax - 1; k >= 0; k--) {
        const int i = bax[k];
        const int64_t ci = rem % out_dims[i];
        rem /= out_dims[i];
        soff += ci * in_st[c.perm[i]];
        doff += ci * out_st[i];
      }
      const int64_t a0 = (t % a_tiles) * kTile, a1 = std::min(na, a0 + kTile);
      const T* s = src + soff;
      T* d = dst + doff;
      for (int64_t b0 = 0; b0 < nb; b0 += kTile) {
        const int64_t b1 = std::min(nb, b0 + kTile);
        for (int64_t a = a0; a < a1; a++)
          for (int64_t b = b0; b < b1; b++) d[a * os_q + b] = s[a + b * is_l];
      }
    }
  });
}

const char* transpose(const KernelArgs& args) {
  if (const char* err = check_arity("transpose", args, transpose_args::kArity)) return err;
  const TensorView &x = args.in[0], &y = args.out[0];
  size_t esize;
  if (const char* err = check_dtypes("transpose", x, y, &esize)) return err;
  if (args.n_iargs != transpose_args::kPerm + x.rank || y.rank != x.rank)
    return kernel_error("transpose: X rank %d needs %d perm entries and Y rank %d", x.rank, args.n_iargs, y.rank);
  bool seen[kMaxRank] = {false};
  const int64_t* perm = args.iargs + transpose_args::kPerm;
  for (int i = 0; i < x.rank; i++) {
    const int64_t p = perm[i];
    if (p < 0 || p >= x.rank || seen[p]) return kernel_error("transpose: perm entry %d (%lld) is not a permutation", i, (long long)p);
    seen[p] = true;
  }
  for (int i = 0; i < x.rank; i++) {
    const int64_t p = perm[i];
    if (y.dims[i] != x.dims[p])
      return kernel_error("transpose: Y dim %d is %lld, X dim %lld is %lld", i, (long long)y.dims[i], (long long)p,
                          (long long)x.dims[p]);
  }
  if (x.numel == 0) return nullptr;
  const Perm c = canonical_perm(x, perm);
  if (c.rank <= 1) {  // nothing moves: the permutation only touched size-1 dims
    std::memcpy(y.data, x.data, x.bytes());
    return nullptr;
  }
  by_size(esize, [&](auto tag) {
    using T = decltype(tag);
    if (c.perm[c.rank - 1] == c.rank - 1) transpose_runs<T>(c, x.as<T>(), y.as<T>(), args.pool);
    else transpose_tiled<T>(c, x.as<T>(), y.as<T>(), args.pool);
  });
  return nullptr;
}

// ---------- copies by per-axis source maps (slice, expand, tile, pad) ----------

// A piece of one output row: len elements at dst (relative to the row) from src (relative to the row's source
// base) stepping by step (0 repeats one element, 1 is a plain copy); src -1 writes the fill value.
struct Run {
  int64_t dst, src, len, step;
};

// A copy described per output axis: maps[a][i] = source offset (elements) of output coordinate i on axis a, or -1
// for the fill value. The trailing axes are folded into `runs` over rows of row_len elements.
struct MapCopy {
  int outer = 0;                                // axes before the row
  int64_t outer_dims[kMaxRank] = {0};
  std::vector<int64_t> maps[kMaxRank];          // one per outer axis
  int64_t row_len = 0;
  std::vector<Run> runs;
};

// Splits one axis's map into runs of equal step (the fill is its own run kind).
std::vector<Run> runs_of(const std::vector<int64_t>& m) {
  std::vector<Run> runs;
  const int64_t n = static_cast<int64_t>(m.size());
  int64_t j = 0;
  while (j < n) {
    Run r{j, m[j], 1, 0};
    if (m[j] < 0) {
      while (j + r.len < n && m[j + r.len] < 0) r.len++;
    } else if (j + 1 < n && m[j + 1] >= 0) {
      r.step = m[j + 1] - m[j];
      while (j + r.len < n && m[j + r.len] >= 0 && m[j + r.len] - m[j + r.len - 1] == r.step) r.len++;
    }
    runs.push_back(r);
    j += r.len;
  }
  return runs;
}

// Builds the copy from per-axis maps of an output with dims ydims; x_block[a] is the source size of axes a..end
// (X's stride of axis a-1), used to fold trailing axes that copy whole contiguous blocks into longer rows.
MapCopy build_copy(int rank, const int64_t* ydims, std::vector<int64_t>* maps, const int64_t* x_block) {
  MapCopy c;
  if (rank == 0) {
    c.row_len = 1;
    c.runs.push_back(Run{0, 0, 1, 1});
    return c;
  }
  int a = rank - 1;
  c.row_len = ydims[a];
  c.runs = runs_of(maps[a]);
  // Fold axis a-1 in while the row is one plain copy of the whole source block below it.
  while (a > 0 && c.runs.size() == 1 && c.runs[0].src == 0 && c.runs[0].step == 1 && c.row_len == x_block[a]) {
    a--;
    std::vector<int64_t> folded;  // the rows of axis a as runs of row_len
    std::vector<Run> runs;
    for (int64_t i = 0; i < ydims[a]; i++) {
      const int64_t s = maps[a][i];
      Run r{i * c.row_len, s, c.row_len, 1};
      if (!runs.empty()) {
        Run& p = runs.back();
        const bool both_fill = s < 0 && p.src < 0;
        const bool adjacent = s >= 0 && p.src >= 0 && p.step == 1 && p.src + p.len == s;
        if (both_fill || adjacent) {
          p.len += c.row_len;
          continue;
        }
      }
      runs.push_back(r);
    }
    c.runs = runs;
    c.row_len *= ydims[a];
  }
  c.outer = a;
  for (int d = 0; d < a; d++) {
    c.outer_dims[d] = ydims[d];
    c.maps[d] = std::move(maps[d]);
  }
  return c;
}

template <typename T>
void copy_run(T* dst, const T* src, const Run& r, T fill) {
  T* d = dst + r.dst;
  if (r.src < 0) {
    std::fill(d, d + r.len, fill);
  } else if (r.step == 1) {
    std::memcpy(d, src + r.src, sizeof(T) * r.len);
  } else if (r.step == 0) {
    std::fill(d, d + r.len, src[r.src]);
  } else {
    const T* s = src + r.src;
    for (int64_t k = 0; k < r.len; k++) d[k] = s[k * r.step];
  }
}

template <typename T>
void run_copy(const MapCopy& c, const T* src, T* dst, T fill, ThreadPool* pool) {
  const int64_t rows = prod(c.outer_dims, 0, c.outer);
  run_rows(pool, rows, c.row_len, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; row++) {
      int64_t rem = row, base = 0;
      bool dead = false;
      for (int d = c.outer - 1; d >= 0; d--) {
        const int64_t s = c.maps[d][rem % c.outer_dims[d]];
        rem /= c.outer_dims[d];
        if (s < 0) dead = true;
        base += s;
      }
      T* out = dst + row * c.row_len;
      if (dead) {
        std::fill(out, out + c.row_len, fill);
        continue;
      }
      for (const Run& r : c.runs) copy_run(out, src + base, r, fill);
    }
  });
}

// Runs a map copy for any element size; fill is the fill element's bytes (or null for zeros).
void map_copy(int rank, const int64_t* ydims, std::vector<int64_t>* maps, const TensorView& x, const TensorView& y,
              size_t esize, const void* fill, ThreadPool* pool) {
  int64_t st[kMaxRank];
  row_major_strides(x.dims, x.rank, st);
  int64_t block[kMaxRank];  // source elements under axis a (X's stride of axis a-1, aligned to Y's axes)
  const int off = rank - x.rank;
  for (int a = 0; a < rank; a++) {
    const int xa = a - 1 - off;
    block[a] = xa >= 0 ? st[xa] : (a - 1 - off == -1 ? x.numel : -1);
  }
  MapCopy c = build_copy(rank, ydims, maps, block);
  by_size(esize, [&](auto tag) {
    using T = decltype(tag);
    T f{};
    if (fill) std::memcpy(&f, fill, sizeof f);
    run_copy<T>(c, x.as<T>(), y.as<T>(), f, pool);
  });
}

// ---------- slice ----------

const char* slice(const KernelArgs& args) {
  if (const char* err = check_arity("slice", args, slice_args::kArity)) return err;
  const TensorView &x = args.in[0], &y = args.out[0];
  size_t esize;
  if (const char* err = check_dtypes("slice", x, y, &esize)) return err;
  const int64_t* starts_steps = args.iargs + slice_args::kStartsSteps;  // start, step of each axis
  if (y.rank != x.rank || args.n_iargs != slice_args::kStartsSteps + 2 * x.rank)
    return kernel_error("slice: X rank %d needs Y rank %d and %d iargs, got %d and %d", x.rank, x.rank, 2 * x.rank, y.rank,
                        args.n_iargs);
  if (y.numel == 0) return nullptr;
  int64_t st[kMaxRank];
  row_major_strides(x.dims, x.rank, st);
  std::vector<int64_t> maps[kMaxRank];
  for (int a = 0; a < x.rank; a++) {
    const int64_t step = starts_steps[2 * a + 1], n = y.dims[a], dim = x.dims[a];
    if (step == 0) return kernel_error("slice: axis %d has step 0", a);
    // ONNX start normalization (a start computed from sizes, such as -len, is only known here): negative counts from
    // the end, then clamp to [0, dim] (step > 0) or [-1, dim - 1] (step < 0)
    int64_t start = starts_steps[2 * a];
    if (start < 0) start += dim;
    start = step > 0 ? std::min(std::max<int64_t>(start, 0), dim) : std::min(std::max<int64_t>(start, -1), dim - 1);
    if (n == 0) continue;
    // Every index start + i*step (i < n) must lie in [0, dim): check both ends without overflow.
    const int64_t span = step > 0 ? dim - 1 - start : start;  // room in the step's direction
    const int64_t mag = step > 0 ? step : -step;
    if (start < 0 || start >= dim || (n > 1 && (span < 0 || (n - 1) > span / mag)))
      return kernel_error("slice: axis %d: start %lld step %lld for %lld elements leaves X's dim %lld", a,
                          (long long)start, (long long)step, (long long)n, (long long)dim);
    maps[a].resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) maps[a][i] = (start + i * step) * st[a];
  }
  map_copy(x.rank, y.dims, maps, x, y, esize, nullptr, args.pool);
  return nullptr;
}

// ---------- expand and tile ----------

const char* expand(const KernelArgs& args) {
  if (const char* err = check_arity("expand", args, expand_args::kArity)) return err;
  const TensorView &x = args.in[0], &y = args.out[0];
  size_t esize;
  if (const char* err = check_dtypes("expand", x, y, &esize)) return err;
  if (y.rank < x.rank) return kernel_error("expand: Y rank %d is below X rank %d", y.rank, x.rank);
  const int off = y.rank - x.rank;
  int64_t st[kMaxRank];
  row_major_strides(x.dims, x.rank, st);
  for (int a = 0; a < y.rank; a++) {
    const int64_t xd = a >= off ? x.dims[a - off] : 1;
    if (xd != 1 && xd != y.dims[a])
      return kernel_error("expand: X dim %d (%lld) does not broadcast to Y dim %d (%lld)", a - off, (long long)xd, a,
                          (long long)y.dims[a]);
  }
  if (y.numel == 0) return nullptr;
  std::vector<int64_t> maps[kMaxRank];
  for (int a = 0; a < y.rank; a++) {
    const bool bcast = a < off || x.dims[a - off] == 1;
    maps[a].resize(static_cast<size_t>(y.dims[a]));
    for (int64_t i = 0; i < y.dims[a]; i++) maps[a][i] = bcast ? 0 : i * st[a - off];
  }
  map_copy(y.rank, y.dims, maps, x, y, esize, nullptr, args.pool);
  return nullptr;
}

const char* tile(const KernelArgs& args) {
  if (const char* err = check_arity("tile", args, tile_args::kArity)) return err;
  const TensorView &x = args.in[0], &y = args.out[0];
  size_t esize;
  if (const char* err = check_dtypes("tile", x, y, &esize)) return err;
  if (y.rank != x.rank) return kernel_error("tile: Y rank %d differs from X rank %d", y.rank, x.rank);
  for (int a = 0; a < x.rank; a++) {
    const bool ok = x.dims[a] == 0 ? y.dims[a] == 0 : y.dims[a] % x.dims[a] == 0;
    if (!ok) return kernel_error("tile: Y dim %d (%lld) is not a multiple of X dim %lld", a, (long long)y.dims[a], (long long)x.dims[a]);
  }
  if (y.numel == 0) return nullptr;
  int64_t st[kMaxRank];
  row_major_strides(x.dims, x.rank, st);
  std::vector<int64_t> maps[kMaxRank];
  for (int a = 0; a < x.rank; a++) {
    maps[a].resize(static_cast<size_t>(y.dims[a]));
    for (int64_t i = 0; i < y.dims[a]; i++) maps[a][i] = (i % x.dims[a]) * st[a];
  }
  map_copy(x.rank, y.dims, maps, x, y, esize, nullptr, args.pool);
  return nullptr;
}

// ---------- pad ----------

// Source coordinate of output coordinate j on an axis of n elements padded by `begin`, or -1 for the fill.
int64_t pad_source(int64_t mode, int64_t j, int64_t begin, int64_t n) {
  const int64_t p = j - begin;
  if (p >= 0 && p < n) return p;
  switch (mode) {
    case kPadEdge: return p < 0 ? 0 : n - 1;
    case kPadWrap: return ((p % n) + n) % n;
    case kPadReflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      const int64_t q = ((p % period) + period) % period;
      return q < n ? q : period - q;
    }
    default: return -1;  // kPadConstant
  }
}

const char* pad(const KernelArgs& args) {
  if (const char* err = check_arity("pad", args, pad_args::kArity)) return err;
  const TensorView &x = args.in[0], &y = args.out[0];
  size_t esize;
  if (const char* err = check_dtypes("pad", x, y, &esize)) return err;
  if (y.rank != x.rank || args.n_iargs != pad_args::kPads + 2 * x.rank)
    return kernel_error("pad: X rank %d needs Y rank %d and %d iargs, got %d and %d", x.rank, x.rank,
                        pad_args::kPads + 2 * x.rank, y.rank, args.n_iargs);
  const int64_t mode = args.iargs[pad_args::kMode];
  if (mode < 0 || mode >= kPadCount) return kernel_error("pad: unknown mode %lld", (long long)mode);
  const int64_t* pads = args.iargs + pad_args::kPads;
  const void* fill = nullptr;
  if (args.n_in == 2 && args.in[1].data) {
    const TensorView& v = args.in[1];
    if (v.dtype != x.dtype) return kernel_error("pad: value dtype %d differs from X dtype %d", v.dtype, x.dtype);
    if (v.numel > 0) fill = v.data;
  }
  for (int a = 0; a < x.rank; a++) {
    const int64_t want = x.dims[a] + pads[a] + pads[a + x.rank];
    if (y.dims[a] != want)
      return kernel_error("pad: Y dim %d is %lld, X dim %lld padded by %lld and %lld gives %lld", a, (long long)y.dims[a],
                          (long long)x.dims[a], (long long)pads[a], (long long)pads[a + x.rank], (long long)want);
    if (mode != 0 && x.dims[a] == 0 && y.dims[a] > 0) return kernel_error("pad: cannot pad the empty axis %d in mode %lld", a, (long long)mode);
  }
  if (y.numel == 0) return nullptr;
  int64_t st[kMaxRank];
  row_major_strides(x.dims, x.rank, st);
  std::vector<int64_t> maps[kMaxRank];
  for (int a = 0; a < x.rank; a++) {
    maps[a].resize(static_cast<size_t>(y.dims[a]));
    for (int64_t j = 0; j < y.dims[a]; j++) {
      const int64_t s = pad_source(mode, j, pads[a], x.dims[a]);
      maps[a][j] = s < 0 ? -1 : s * st[a];
    }
  }
  map_copy(x.rank, y.dims, maps, x, y, esize, fill, args.pool);
  return nullptr;
}

// ---------- concat and split ----------

// Checks that part's dims equal whole's except on axis; returns an error or nullptr.
const char* check_part(const char* kernel, const char* what, int i, const TensorView& part, const TensorView& whole, int axis) {
  if (part.dtype != whole.dtype) return kernel_error("%s: %s %d dtype %d differs from %d", kernel, what, i, part.dtype, whole.dtype);
  if (part.rank != whole.rank) return kernel_error("%s: %s %d has rank %d, expected %d", kernel, what, i, part.rank, whole.rank);
  for (int d = 0; d < whole.rank; d++)
    if (d != axis && part.dims[d] != whole.dims[d])
      return kernel_error("%s: %s %d dim %d is %lld, expected %lld", kernel, what, i, d, (long long)part.dims[d],
                          (long long)whole.dims[d]);
  return nullptr;
}

// Axis argument of concat/split, normalized against rank.
// (concat_args::kAxis and split_args::kAxis are the same position.)
const char* axis_arg(const char* kernel, const KernelArgs& args, int rank, int* axis) {
  static_assert(concat_args::kAxis == split_args::kAxis, "concat and split read one axis position");
  const int64_t given = args.iargs[concat_args::kAxis];
  int64_t a = given;
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) return kernel_error("%s: axis %lld is out of range for rank %d", kernel, (long long)given, rank);
  *axis = static_cast<int>(a);
  return nullptr;
}

// Moves blocks between the whole tensor and its parts: for each outer index, part j's block of blocks[j] bytes sits
// at whole offset o * whole_block + offsets[j]. to_whole: concat, else split.
void move_parts(const TensorView& whole, const TensorView* parts, int n, int axis, size_t esize, bool to_whole, ThreadPool* pool) {
  const int64_t outer = prod(whole.dims, 0, axis);
  const int64_t inner = prod(whole.dims, axis + 1, whole.rank);
  const int64_t whole_block = whole.dims[axis] * inner * static_cast<int64_t>(esize);
  std::vector<int64_t> blocks(n), offsets(n);
  int64_t off = 0;
  for (int j = 0; j < n; j++) {
    blocks[j] = parts[j].dims[axis] * inner * static_cast<int64_t>(esize);
    offsets[j] = off;
    off += blocks[j];
  }
  uint8_t* w = static_cast<uint8_t*>(whole.data);
  run_rows(pool, outer, whole_block / static_cast<int64_t>(esize), [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; o++)
      for (int j = 0; j < n; j++) {
        if (blocks[j] == 0) continue;
        uint8_t* wp = w + o * whole_block + offsets[j];
        uint8_t* pp = static_cast<uint8_t*>(parts[j].data) + o * blocks[j];
        if (to_whole) std::memcpy(wp, pp, blocks[j]);
        else std::memcpy(pp, wp, blocks[j]);
      }
  });
}

const char* concat(const KernelArgs& args) {
  if (const char* err = check_arity("concat", args, concat_args::kArity)) return err;
  const TensorView& y = args.out[0];
  int axis = 0;
  if (const char* err = axis_arg("concat", args, y.rank, &axis)) return err;
  if (dtype_size(y.dtype) == 0) return kernel_error("concat: unsupported dtype %d", y.dtype);
  int64_t total = 0;
  for (int j = 0; j < args.n_in; j++) {
    if (!args.in[j].data) return kernel_error("concat: input %d is missing", j);
    if (const char* err = check_part("concat", "input", j, args.in[j], y, axis)) return err;
    total += args.in[j].dims[axis];
  }
  if (total != y.dims[axis]) return kernel_error("concat: inputs sum to %lld on axis %d, Y has %lld", (long long)total, axis, (long long)y.dims[axis]);
  if (y.numel == 0) return nullptr;
  move_parts(y, args.in, args.n_in, axis, dtype_size(y.dtype), true, args.pool);
  return nullptr;
}

const char* split(const KernelArgs& args) {
  if (const char* err = check_arity("split", args, split_args::kArity)) return err;
  const TensorView& x = args.in[0];
  int axis = 0;
  if (const char* err = axis_arg("split", args, x.rank, &axis)) return err;
  if (dtype_size(x.dtype) == 0) return kernel_error("split: unsupported dtype %d", x.dtype);
  int64_t total = 0;
  for (int j = 0; j < args.n_out; j++) {
    if (const char* err = check_part("split", "output", j, args.out[j], x, axis)) return err;
    total += args.out[j].dims[axis];
  }
  if (total != x.dims[axis]) return kernel_error("split: outputs sum to %lld on axis %d, X has %lld", (long long)total, axis, (long long)x.dims[axis]);
  if (x.numel == 0) return nullptr;
  move_parts(x, args.out, args.n_out, axis, dtype_size(x.dtype), false, args.pool);
  return nullptr;
}

// ---------- gather and gather_elements ----------

// Index i of an index tensor as int64.
int64_t index_at(const TensorView& idx, int64_t i) {
  return idx.dtype == kInt64 ? idx.as<int64_t>()[i] : static_cast<int64_t>(idx.as<int32_t>()[i]);
}

const char* check_indices_dtype(const char* kernel, const TensorView& idx) {
  if (!idx.data) return kernel_error("%s: indices are missing", kernel);
  if (idx.dtype != kInt64 && idx.dtype != kInt32) return kernel_error("%s: indices must be int64 or int32, got dtype %d", kernel, idx.dtype);
  return nullptr;
}

const char* gather(const KernelArgs& args) {
  if (const char* err = check_arity("gather", args, gather_args::kArity)) return err;
  const TensorView &x = args.in[0], &ind = args.in[1], &y = args.out[0];
  size_t esize;
  if (const char* err = check_dtypes("gather", x, y, &esize)) return err;
  if (const char* err = check_indices_dtype("gather", ind)) return err;
  if (x.rank < 1) return "gather: X must have rank >= 1";
  const int64_t given = args.iargs[gather_args::kAxis];
  int64_t axis = given;
  if (axis < 0) axis += x.rank;
  if (axis < 0 || axis >= x.rank) return kernel_error("gather: axis %lld is out of range for rank %d", (long long)given, x.rank);
  const int a = static_cast<int>(axis);
  if (y.rank != x.rank - 1 + ind.rank)
    return kernel_error("gather: Y rank %d, expected %d", y.rank, x.rank - 1 + ind.rank);
  for (int d = 0; d < y.rank; d++) {
    const int64_t want = d < a ? x.dims[d] : d < a + ind.rank ? ind.dims[d - a] : x.dims[d - ind.rank + 1];
    if (y.dims[d] != want) return kernel_error("gather: Y dim %d is %lld, expected %lld", d, (long long)y.dims[d], (long long)want);
  }
  const int64_t n = x.dims[a], m = ind.numel;
  static thread_local std::vector<int64_t> norm;
  norm.resize(static_cast<size_t>(m));
  for (int64_t k = 0; k < m; k++) {
    const int64_t i = index_at(ind, k);
    if (i < -n || i >= n) return kernel_error("gather: index %lld at position %lld is out of range for axis %d of size %lld", (long long)i, (long long)k, a, (long long)n);
    norm[k] = i < 0 ? i + n : i;
  }
  if (y.numel == 0) return nullptr;
  const int64_t outer = prod(x.dims, 0, a), inner = prod(x.dims, a + 1, x.rank);
  const int64_t* idx = norm.data();
  by_size(esize, [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.as<T>();
    T* dst = y.as<T>();
    run_rows(args.pool, outer * m, inner, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; r++) {
        const int64_t o = r / m, k = r % m;
        const T* s = src + (o * n + idx[k]) * inner;
        if (inner == 1) dst[r] = *s;
        else std::memcpy(dst + r * inner, s, sizeof(T) * inner);
      }
    });
  });
  return nullptr;
}

const char* gather_elements(const KernelArgs& args) {
  if (const char* err = check_arity("gather_elements", args, gather_elements_args::kArity)) return err;
  const TensorView &x = args.in[0], &ind = args.in[1], &y = args.out[0];
  size_t esize;
  if (const char* err = check_dtypes("gather_elements", x, y, &esize)) return err;
  if (const char* err = check_indices_dtype("gather_elements", ind)) return err;
  if (x.rank < 1 || ind.rank != x.rank || y.rank != x.rank)
    return kernel_error("gather_elements: X, indices and Y need one rank >= 1, got %d, %d, %d", x.rank, ind.rank, y.rank);
  const int64_t given = args.iargs[gather_elements_args::kAxis];
  int64_t axis = given;
  if (axis < 0) axis += x.rank;
  if (axis < 0 || axis >= x.rank) return kernel_error("gather_elements: axis %lld is out of range for rank %d", (long long)given, x.rank);
  const int a = static_cast<int>(axis);
  for (int d = 0; d < x.rank; d++) {
    if (y.dims[d] != ind.dims[d]) return kernel_error("gather_elements: Y dim %d is %lld, indices have %lld", d, (long long)y.dims[d], (long long)ind.dims[d]);
    if (d != a && ind.dims[d] > x.dims[d])
      return kernel_error("gather_elements: indices dim %d (%lld) exceeds X dim %lld", d, (long long)ind.dims[d], (long long)x.dims[d]);
  }
  const int64_t n = x.dims[a];
  for (int64_t k = 0; k < ind.numel; k++) {
    const int64_t i = index_at(ind, k);
    if (i < -n || i >= n) return kernel_error("gather_elements: index %lld at position %lld is out of range for axis %d of size %lld", (long long)i, (long long)k, a, (long long)n);
  }
  if (y.numel == 0) return nullptr;
  int64_t xs[kMaxRank];
  row_major_strides(x.dims, x.rank, xs);
  const int r = x.rank;
  const int64_t inner = ind.dims[r - 1], rows = ind.numel / inner;
  by_size(esize, [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.as<T>();
    T* dst = y.as<T>();
    run_rows(args.pool, rows, inner, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; row++) {
        int64_t rem = row, base = 0;
        for (int d = r - 2; d >= 0; d--) {
          if (d != a) base += (rem % ind.dims[d]) * xs[d];
          rem /= ind.dims[d];
        }
        for (int64_t j = 0; j < inner; j++) {
          int64_t i = index_at(ind, row * inner + j);
          if (i < 0) i += n;
          const int64_t off = a == r - 1 ? base + i : base + j + i * xs[a];
          dst[row * inner + j] = src[off];
        }
      }
    });
  });
  return nullptr;
}


// ---------- scatter_nd ----------

// Y = X with the slices addressed by the last axis of the indices replaced (iarg 0 = reduction: 0 none, 1 add,
// 2 mul, 3 max, 4 min) by the matching rows of the updates.
const char* scatter_nd(const KernelArgs& args) {
  if (const char* err = check_arity("scatter_nd", args, scatter_nd_args::kArity)) return err;
  const TensorView &x = args.in[0], &ind = args.in[1], &upd = args.in[2], &y = args.out[0];
  size_t esize;
  if (const char* err = check_dtypes("scatter_nd", x, y, &esize)) return err;
  if (const char* err = check_indices_dtype("scatter_nd", ind)) return err;
  if (upd.dtype != x.dtype) return kernel_error("scatter_nd: updates are %s, data %s", dtype_name(upd.dtype), dtype_name(x.dtype));
  if (!same_dims(x, y)) return kernel_error("scatter_nd: output %s differs from data %s", dims_str(y).c_str(), dims_str(x).c_str());
  const int64_t red = args.iargs[scatter_nd_args::kReduction];
  if (red < 0 || red >= kScatterCount) return kernel_error("scatter_nd: unknown reduction %lld", (long long)red);
  if (red != kScatterNone && x.dtype != kFloat32 && x.dtype != kInt64 && x.dtype != kInt32)
    return kernel_error("scatter_nd: reduction on %s data is not supported", dtype_name(x.dtype));
  if (ind.rank < 1) return "scatter_nd: indices need rank >= 1";
  const int64_t k = ind.dims[ind.rank - 1];
  if (k < 1 || k > x.rank) return kernel_error("scatter_nd: index depth %lld is out of range for data of rank %d", (long long)k, x.rank);
  if (upd.rank != ind.rank - 1 + x.rank - k) return kernel_error("scatter_nd: updates %s do not match indices %s and data %s", dims_str(upd).c_str(), dims_str(ind).c_str(), dims_str(x).c_str());
  for (int d = 0; d < upd.rank; d++) {
    const int64_t want = d < ind.rank - 1 ? ind.dims[d] : x.dims[d - (ind.rank - 1) + k];
    if (upd.dims[d] != want) return kernel_error("scatter_nd: updates %s do not match indices %s and data %s", dims_str(upd).c_str(), dims_str(ind).c_str(), dims_str(x).c_str());
  }
  const int64_t n = ind.numel / k, slice = prod(x.dims, static_cast<int>(k), x.rank);
  int64_t xs[kMaxRank];
  row_major_strides(x.dims, x.rank, xs);
  static thread_local std::vector<int64_t> offs;
  offs.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; r++) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; j++) {
      int64_t i = index_at(ind, r * k + j);
      const int64_t size = x.dims[j];
      if (i < -size || i >= size) return kernel_error("scatter_nd: index %lld at position %lld is out of range for axis %lld of size %lld", (long long)i, (long long)(r * k + j), (long long)j, (long long)size);
      off += (i < 0 ? i + size : i) * xs[j];
    }
    offs[r] = off;
  }
  if (y.numel == 0) return nullptr;
  if (y.data != x.data) std::memcpy(y.data, x.data, x.bytes());
  auto apply = [&](auto tag) {
    using T = decltype(tag);
    const T* u = upd.as<T>();
    T* dst = y.as<T>();
    for (int64_t r = 0; r < n; r++) {
      T* d = dst + offs[r];
      const T* s = u + r * slice;
      for (int64_t j = 0; j < slice; j++) {
        switch (red) {
          case kScatterAdd: d[j] += s[j]; break;
          case kScatterMul: d[j] *= s[j]; break;
          case kScatterMax: d[j] = d[j] < s[j] ? s[j] : d[j]; break;
          case kScatterMin: d[j] = s[j] < d[j] ? s[j] : d[j]; break;
          default: d[j] = s[j];
        }
      }
    }
  };
  if (red == kScatterNone) {
    by_size(esize, [&](auto tag) {
      using T = decltype(tag);
      const T* u = upd.as<T>();
      T* dst = y.as<T>();
      for (int64_t r = 0; r < n; r++) std::memcpy(dst + offs[r], u + r * slice, sizeof(T) * slice);
    });
  } else if (x.dtype == kFloat32) {
    apply(float{});
  } else if (x.dtype == kInt64) {
    apply(int64_t{});
  } else {
    apply(int32_t{});
  }
  return nullptr;
}

const KernelDef kDefs[] = {
    {"scatter_nd", scatter_nd}, {"transpose", transpose}, {"gather", gather}, {"gather_elements", gather_elements},
    {"slice", slice},         {"concat", concat}, {"split", split},
    {"expand", expand},       {"tile", tile},     {"pad", pad},
};

}  // namespace

KernelList movement_kernels() { return {kDefs, sizeof kDefs / sizeof kDefs[0]}; }

}  // namespace planc
