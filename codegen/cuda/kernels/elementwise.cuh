// planc CUDA kernel templates, part 2: elementwise binary/compare/logic/where, unary, cast, copy, fill, range, values.
namespace planc {

// ---- binary arithmetic: Y = op(A, B) with broadcasting (FLAT: both inputs have Y's dims) ----
struct OpAdd { template <class T> __device__ static T f(T a, T b) { return a + b; } };
struct OpSub { template <class T> __device__ static T f(T a, T b) { return a - b; } };
struct OpMul { template <class T> __device__ static T f(T a, T b) { return a * b; } };
struct OpDiv { template <class T> __device__ static T f(T a, T b) { return a / b; } };
struct OpMax { template <class T> __device__ static T f(T a, T b) { return a > b || a != a ? a : b; } };
struct OpMin { template <class T> __device__ static T f(T a, T b) { return a < b || a != a ? a : b; } };
// mod: FMOD = C fmod; otherwise the result takes the divisor's sign.
// Integer division by zero is undefined on the CPU too; here it yields 0.
template <bool FMOD>
struct OpMod {
  template <class T> __device__ static T f(T a, T b) {
    if constexpr (std::is_floating_point<T>::value) {
      T r = (T)fmod((double)a, (double)b);
      if (!FMOD && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    } else {
      if (b == 0) return 0;
      T r = (T)(a % b);
      if (!FMOD && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};

template <class Op, class T, int R, bool FLAT>
__device__ void binary(const KArgs& a) {
  const Tensor &x = a.in[0], &y = a.in[1], &o = a.out[0];
  const T* A = (const T*)x.data;
  const T* B = (const T*)y.data;
  T* Y = (T*)o.data;
  for (int64_t i = gtid(); i < o.numel; i += gstride()) {
    const int64_t ia = FLAT ? i : bcast_off<R>(i, o.dims, x);
    const int64_t ib = FLAT ? i : bcast_off<R>(i, o.dims, y);
    Y[i] = Op::template f<T>(A[ia], B[ib]);
  }
}

// Pow: the exponent may have another numeric dtype.
template <class TA, class TB, int R>
__device__ void power(const KArgs& a) {
  const Tensor &x = a.in[0], &y = a.in[1], &o = a.out[0];
  const TA* A = (const TA*)x.data;
  const TB* B = (const TB*)y.data;
  TA* Y = (TA*)o.data;
  for (int64_t i = gtid(); i < o.numel; i += gstride()) {
    const double v = pow((double)A[bcast_off<R>(i, o.dims, x)], (double)B[bcast_off<R>(i, o.dims, y)]);
    Y[i] = (TA)v;
  }
}

// ---- compare (bool out) and logic (bool in and out) ----
struct OpEq { template <class T> __device__ static bool f(T a, T b) { return a == b; } };
struct OpLt { template <class T> __device__ static bool f(T a, T b) { return a < b; } };
struct OpGt { template <class T> __device__ static bool f(T a, T b) { return a > b; } };
struct OpLe { template <class T> __device__ static bool f(T a, T b) { return a <= b; } };
struct OpGe { template <class T> __device__ static bool f(T a, T b) { return a >= b; } };
struct OpAnd { template <class T> __device__ static bool f(T a, T b) { return (a != 0) && (b != 0); } };
struct OpOr { template <class T> __device__ static bool f(T a, T b) { return (a != 0) || (b != 0); } };
struct OpXor { template <class T> __device__ static bool f(T a, T b) { return (a != 0) != (b != 0); } };

template <class Op, class T, int R>
__device__ void compare(const KArgs& a) {
  const Tensor &x = a.in[0], &y = a.in[1], &o = a.out[0];
  const T* A = (const T*)x.data;
  const T* B = (const T*)y.data;
  uint8_t* Y = (uint8_t*)o.data;
  for (int64_t i = gtid(); i < o.numel; i += gstride()) {
    Y[i] = Op::template f<T>(A[bcast_off<R>(i, o.dims, x)], B[bcast_off<R>(i, o.dims, y)]) ? 1 : 0;
  }
}

template <class T, int R>
__device__ void where_select(const KArgs& a) {
  const Tensor &c = a.in[0], &x = a.in[1], &y = a.in[2], &o = a.out[0];
  const uint8_t* C = (const uint8_t*)c.data;
  const T* A = (const T*)x.data;
  const T* B = (const T*)y.data;
  T* Y = (T*)o.data;
  for (int64_t i = gtid(); i < o.numel; i += gstride()) {
    Y[i] = C[bcast_off<R>(i, o.dims, c)] ? A[bcast_off<R>(i, o.dims, x)] : B[bcast_off<R>(i, o.dims, y)];
  }
}

// ---- unary (float math in the element type; fargs carry alpha/beta) ----
struct URelu { template <class T> __device__ static T f(T x, const KArgs&) { return x > (T)0 ? x : (T)0; } };
struct UNeg { template <class T> __device__ static T f(T x, const KArgs&) { return -x; } };
struct UAbs { template <class T> __device__ static T f(T x, const KArgs&) { return x < (T)0 ? -x : x; } };
struct USign { template <class T> __device__ static T f(T x, const KArgs&) { return x > (T)0 ? (T)1 : x < (T)0 ? (T)-1 : (T)0; } };
struct UExp { template <class T> __device__ static T f(T x, const KArgs&) { return exp(x); } };
struct ULog { template <class T> __device__ static T f(T x, const KArgs&) { return log(x); } };
struct USqrt { template <class T> __device__ static T f(T x, const KArgs&) { return sqrt(x); } };
struct URecip { template <class T> __device__ static T f(T x, const KArgs&) { return (T)1 / x; } };
struct UTanh { template <class T> __device__ static T f(T x, const KArgs&) { return tanh(x); } };
struct USigmoid { template <class T> __device__ static T f(T x, const KArgs&) { return (T)1 / ((T)1 + exp(-x)); } };
struct UErf { template <class T> __device__ static T f(T x, const KArgs&) { return erf(x); } };
struct UFloor { template <class T> __device__ static T f(T x, const KArgs&) { return floor(x); } };
struct UCeil { template <class T> __device__ static T f(T x, const KArgs&) { return ceil(x); } };
struct URound { template <class T> __device__ static T f(T x, const KArgs&) { return rint(x); } };
struct USin { template <class T> __device__ static T f(T x, const KArgs&) { return sin(x); } };
struct UCos { template <class T> __device__ static T f(T x, const KArgs&) { return cos(x); } };
struct USoftplus { template <class T> __device__ static T f(T x, const KArgs&) { return x > (T)20 ? x : log1p(exp(x)); } };
struct UNot { template <class T> __device__ static T f(T x, const KArgs&) { return x ? (T)0 : (T)1; } };
struct UGelu {
  template <class T> __device__ static T f(T x, const KArgs& a) {
    const double v = (double)x;
    if (a.iargs[gelu_args::kApproximate] != kGeluNone) return (T)(0.5 * v * (1.0 + tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v))));
    return (T)(0.5 * v * (1.0 + erf(v * 0.70710678118654752440)));
  }
};
struct ULeakyRelu { template <class T> __device__ static T f(T x, const KArgs& a) { return x >= (T)0 ? x : (T)(a.fargs[leaky_relu_args::kAlpha] * (double)x); } };
struct UElu { template <class T> __device__ static T f(T x, const KArgs& a) { return x >= (T)0 ? x : (T)(a.fargs[elu_args::kAlpha] * expm1((double)x)); } };
struct UHardSigmoid {
  template <class T> __device__ static T f(T x, const KArgs& a) {
    const double v = a.fargs[hard_sigmoid_args::kAlpha] * (double)x + a.fargs[hard_sigmoid_args::kBeta];
    return (T)(v < 0.0 ? 0.0 : v > 1.0 ? 1.0 : v);
  }
};

template <class Op, class T>
__device__ void unary(const KArgs& a) {
  const T* X = (const T*)a.in[0].data;
  T* Y = (T*)a.out[0].data;
  const int64_t n = a.out[0].numel;
  for (int64_t i = gtid(); i < n; i += gstride()) Y[i] = Op::template f<T>(X[i], a);
}

// Clip with optional scalar min (in[1]) and max (in[2]).
template <class T>
__device__ void clip(const KArgs& a) {
  const T* X = (const T*)a.in[0].data;
  const T* lo = a.n_in > 1 ? (const T*)a.in[1].data : nullptr;
  const T* hi = a.n_in > 2 ? (const T*)a.in[2].data : nullptr;
  T* Y = (T*)a.out[0].data;
  const int64_t n = a.out[0].numel;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    T v = X[i];
    if (lo && v < *lo) v = *lo;
    if (hi && v > *hi) v = *hi;
    Y[i] = v;
  }
}

// ---- cast, copy, fill, range, values ----
template <class TX, class TY, bool TO_BOOL>
__device__ void cast(const KArgs& a) {
  const TX* X = (const TX*)a.in[0].data;
  TY* Y = (TY*)a.out[0].data;
  const int64_t n = a.out[0].numel;
  for (int64_t i = gtid(); i < n; i += gstride()) {
    if (TO_BOOL) Y[i] = (TY)(Conv<float, TX>::f(X[i]) != 0.0f ? 1 : 0);
    else Y[i] = Conv<TY, TX>::f(X[i]);
  }
}

// Byte copy: 16-byte words when both ends allow it.
__device__ inline void copy_bytes(const KArgs& a, int elem) {
  const uint8_t* X = (const uint8_t*)a.in[0].data;
  uint8_t* Y = (uint8_t*)a.out[0].data;
  const int64_t bytes = a.out[0].numel * elem;
  if ((((uintptr_t)X | (uintptr_t)Y | (uintptr_t)bytes) & 15) == 0) {
    const uint4* X4 = (const uint4*)X;
    uint4* Y4 = (uint4*)Y;
    for (int64_t i = gtid(); i < bytes / 16; i += gstride()) Y4[i] = X4[i];
    return;
  }
  for (int64_t i = gtid(); i < bytes; i += gstride()) Y[i] = X[i];
}

template <int ELEM>
__device__ void copy(const KArgs& a) { copy_bytes(a, ELEM); }

template <class T>
__device__ void fill(const KArgs& a) {
  T* Y = (T*)a.out[0].data;
  const T v = (T)a.fargs[fill_args::kValue];
  for (int64_t i = gtid(); i < a.out[0].numel; i += gstride()) Y[i] = v;
}

template <class T>
__device__ void range(const KArgs& a) {
  T* Y = (T*)a.out[0].data;
  for (int64_t i = gtid(); i < a.out[0].numel; i += gstride()) Y[i] = (T)(a.fargs[range_args::kStart] + (double)i * a.fargs[range_args::kDelta]);
}

// range with start and delta as int arguments (integer ranges over runtime dimensions)
template <class T>
__device__ void range_i(const KArgs& a) {
  T* Y = (T*)a.out[0].data;
  for (int64_t i = gtid(); i < a.out[0].numel; i += gstride()) Y[i] = (T)(a.iargs[range_args::kStartInt] + i * a.iargs[range_args::kDeltaInt]);
}

template <class T>
__device__ void values(const KArgs& a) {
  T* Y = (T*)a.out[0].data;
  for (int64_t i = gtid(); i < a.out[0].numel; i += gstride()) Y[i] = (T)a.iargs[values_args::kValues + i];
}

}  // namespace planc
