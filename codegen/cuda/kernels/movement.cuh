// planc CUDA kernel templates, part 5: data movement (T is an unsigned integer of the element's size): transpose,
// gather, slice, concat, split, expand, tile, trilu.
namespace planc {

// Row-major strides of t's dims (t has rank R).
template <int R>
__device__ __forceinline__ void strides_of(const Tensor& t, int64_t* s) {
  int64_t acc = 1;
#pragma unroll
  for (int ax = R - 1; ax >= 0; --ax) { s[ax] = acc; acc *= t.dims[ax]; }
}

// Y[i] = X[perm-permuted index]; iargs = perm (R values).
template <class T, int R>
__device__ void transpose(const KArgs& a) {
  const Tensor &tx = a.in[0], &ty = a.out[0];
  // s[ax] = stride in X of Y's axis ax = the product of X's dims after perm[ax].
  int64_t s[R];
#pragma unroll
  for (int ax = 0; ax < R; ax++) {
    int64_t st = 1;
    for (int j = (int)a.iargs[transpose_args::kPerm + ax] + 1; j < R; j++) st *= tx.dims[j];
    s[ax] = st;
  }
  const T* X = (const T*)tx.data;
  T* Y = (T*)ty.data;
  for (int64_t i = gtid(); i < ty.numel; i += gstride()) {
    int64_t r = i, off = 0;
#pragma unroll
    for (int ax = R - 1; ax >= 0; --ax) {
      const int64_t d = ty.dims[ax];
      off += (r % d) * s[ax];
      r /= d;
    }
    Y[i] = X[off];
  }
}

// Y = X gathered along AXIS by indices I (TI int64 or int32; negative ones wrap; out of range: error, 0 written).
template <class T, class TI, int AXIS>
__device__ void gather(const KArgs& a) {
  const Tensor &tx = a.in[0], &ti = a.in[1], &ty = a.out[0];
  int64_t inner = 1;
  for (int i = AXIS + 1; i < tx.rank; i++) inner *= tx.dims[i];
  const int64_t n = tx.dims[AXIS], ni = ti.numel;
  if (inner == 0 || ni == 0) return;
  const T* X = (const T*)tx.data;
  const TI* I = (const TI*)ti.data;
  T* Y = (T*)ty.data;
  for (int64_t i = gtid(); i < ty.numel; i += gstride()) {
    const int64_t e = i % inner, t = i / inner, j = t % ni, o = t / ni;
    int64_t idx = (int64_t)I[j];
    if (idx < 0) idx += n;
    if (idx < 0 || idx >= n) {
      fail(a, kErrIndex);
      Y[i] = 0;
      continue;
    }
    Y[i] = X[(o * n + idx) * inner + e];
  }
}

// Y[i] = X[start + i * step] per axis; iargs = (start, step) per axis of X (2R values).
template <class T, int R>
__device__ void slice(const KArgs& a) {
  const Tensor &tx = a.in[0], &ty = a.out[0];
  int64_t xs[R];
  strides_of<R>(tx, xs);
  const T* X = (const T*)tx.data;
  T* Y = (T*)ty.data;
  for (int64_t i = gtid(); i < ty.numel; i += gstride()) {
    int64_t r = i, off = 0;
    bool ok = true;
#pragma unroll
    for (int ax = R - 1; ax >= 0; --ax) {
      const int64_t d = ty.dims[ax], c = r % d;
      r /= d;
      // ONNX start normalization: negative counts from the end, then clamp to the axis in the step's direction
      const int64_t step = a.iargs[slice_args::kStartsSteps + 2 * ax + 1], dim = tx.dims[ax];
      int64_t start = a.iargs[slice_args::kStartsSteps + 2 * ax];
      if (start < 0) start += dim;
      start = step > 0 ? min(max(start, (int64_t)0), dim) : min(max(start, (int64_t)-1), dim - 1);
      const int64_t src = start + c * step;
      ok = ok && src >= 0 && src < tx.dims[ax];
      off += src * xs[ax];
    }
    if (!ok) {
      fail(a, kErrSlice);
      continue;
    }
    Y[i] = X[off];
  }
}

// Y = the inputs joined along AXIS (up to kMaxIn of them).
template <class T, int AXIS>
__device__ void concat(const KArgs& a) {
  const Tensor& ty = a.out[0];
  int64_t inner = 1;
  for (int i = AXIS + 1; i < ty.rank; i++) inner *= ty.dims[i];
  const int64_t total = ty.dims[AXIS];
  if (inner == 0 || total == 0) return;
  T* Y = (T*)ty.data;
  for (int64_t i = gtid(); i < ty.numel; i += gstride()) {
    const int64_t e = i % inner, t = i / inner, c = t % total, o = t / total;
    int64_t base = 0;
    for (int k = 0; k < a.n_in; k++) {
      const int64_t dk = a.in[k].dims[AXIS];
      if (c < base + dk) {
        Y[i] = ((const T*)a.in[k].data)[(o * dk + (c - base)) * inner + e];
        break;
      }
      base += dk;
    }
  }
}

// The input cut along AXIS into the outputs (their dims give the sizes).
template <class T, int AXIS>
__device__ void split(const KArgs& a) {
  const Tensor& tx = a.in[0];
  int64_t inner = 1;
  for (int i = AXIS + 1; i < tx.rank; i++) inner *= tx.dims[i];
  const int64_t total = tx.dims[AXIS];
  if (inner == 0 || total == 0) return;
  const T* X = (const T*)tx.data;
  for (int64_t i = gtid(); i < tx.numel; i += gstride()) {
    const int64_t e = i % inner, t = i / inner, c = t % total, o = t / total;
    int64_t base = 0;
    for (int k = 0; k < a.n_out; k++) {
      const int64_t dk = a.out[k].dims[AXIS];
      if (c < base + dk) {
        ((T*)a.out[k].data)[(o * dk + (c - base)) * inner + e] = X[i];
        break;
      }
      base += dk;
    }
  }
}

// Broadcast copy (Expand).
template <class T, int R>
__device__ void expand(const KArgs& a) {
  const Tensor &tx = a.in[0], &ty = a.out[0];
  const T* X = (const T*)tx.data;
  T* Y = (T*)ty.data;
  for (int64_t i = gtid(); i < ty.numel; i += gstride()) Y[i] = X[bcast_off<R>(i, ty.dims, tx)];
}

// Tile: Y index modulo X's dims.
template <class T, int R>
__device__ void tile(const KArgs& a) {
  const Tensor &tx = a.in[0], &ty = a.out[0];
  int64_t xs[R];
  strides_of<R>(tx, xs);
  const T* X = (const T*)tx.data;
  T* Y = (T*)ty.data;
  for (int64_t i = gtid(); i < ty.numel; i += gstride()) {
    int64_t r = i, off = 0;
#pragma unroll
    for (int ax = R - 1; ax >= 0; --ax) {
      const int64_t d = ty.dims[ax];
      off += ((r % d) % tx.dims[ax]) * xs[ax];
      r /= d;
    }
    Y[i] = X[off];
  }
}

// Trilu over the last two dims: keeps j - i >= k (UPPER) or j - i <= k, zeroes the rest; k from the optional
// int64 scalar input.
template <class T, bool UPPER>
__device__ void trilu(const KArgs& a) {
  const Tensor &tx = a.in[0], &ty = a.out[0];
  const int64_t k = (a.n_in > 1 && a.in[1].data) ? *(const int64_t*)a.in[1].data : 0;
  const int64_t rows = tx.dims[tx.rank - 2], cols = tx.dims[tx.rank - 1];
  if (rows == 0 || cols == 0) return;
  const T* X = (const T*)tx.data;
  T* Y = (T*)ty.data;
  for (int64_t i = gtid(); i < ty.numel; i += gstride()) {
    const int64_t c = i % cols, r = (i / cols) % rows;
    const bool keep = UPPER ? (c - r >= k) : (c - r <= k);
    Y[i] = keep ? X[i] : (T)0;
  }
}

}  // namespace planc
