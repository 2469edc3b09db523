// cudasim's <mma.h>: nvcuda::wmma fragments spread over the 32 lanes of a warp (lane l holds elements l*E .. l*E+E-1
// of the tile in row-major order); load/store/mma are warp collectives. TF32 operands are read as the hardware reads
// them (the low 13 mantissa bits ignored); products accumulate in fp32, k in order, one fmaf each.
#pragma once
#include <stdint.h>
#include <string.h>

#include <type_traits>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
}  // namespace precision
enum layout_t { mem_row_major, mem_col_major };

template <class T> struct storage { using type = T; };
template <> struct storage<precision::tf32> { using type = float; };

template <class Use, int M, int N, int K> struct tile_shape;
template <int M, int N, int K> struct tile_shape<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K> struct tile_shape<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K> struct tile_shape<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
 public:
  static_assert((M == 16 && N == 16 && (K == 8 || K == 16)) || (M == 32 && N == 8 && K == 16) || (M == 8 && N == 32 && K == 16),
                "cudasim models the wmma shapes m16n16k8 (tf32), m16n16k16, m32n8k16 and m8n32k16");
  using element_type = typename storage<T>::type;
  static constexpr int rows = tile_shape<Use, M, N, K>::rows, cols = tile_shape<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols / 32;
  element_type x[num_elements];
};

// Round to the nearest TF32 value, ties away from zero (cvt.rna.tf32.f32).
inline float __float_to_tf32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&f, &u, 4);
  return f;
}

namespace detail {

template <class T> inline float operand(T v) { return static_cast<float>(v); }
inline float tf32_bits(float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  u &= 0xffffe000u;
  memcpy(&v, &u, 4);
  return v;
}

// Element (r, c) of a tile of `cols` columns: which lane, which slot.
inline void place(int r, int c, int cols, int e, int* lane, int* slot) {
  const int i = r * cols + c;
  *lane = i / e;
  *slot = i % e;
}

struct MmaOperands {
  void* d;
  const void* a;
  const void* b;
  const void* c;
};

template <class FD, class FA, class FB, class FC, bool TF32>
inline void complete_mma(::cudasim::Fiber** lanes, int) {
  constexpr int M = FA::rows, K = FA::cols, N = FB::cols;
  float A[M][K], B[K][N], D[M][N];
  int lane, slot;
  for (int r = 0; r < M; r++)
    for (int c = 0; c < K; c++) {
      place(r, c, K, FA::num_elements, &lane, &slot);
      const auto* op = reinterpret_cast<const MmaOperands*>(lanes[lane]->val);
      const float v = operand(static_cast<const FA*>(op->a)->x[slot]);
      A[r][c] = TF32 ? tf32_bits(v) : v;
    }
  for (int r = 0; r < K; r++)
    for (int c = 0; c < N; c++) {
      place(r, c, N, FB::num_elements, &lane, &slot);
      const auto* op = reinterpret_cast<const MmaOperands*>(lanes[lane]->val);
      const float v = operand(static_cast<const FB*>(op->b)->x[slot]);
      B[r][c] = TF32 ? tf32_bits(v) : v;
    }
  for (int r = 0; r < M; r++)
    for (int c = 0; c < N; c++) {
      place(r, c, N, FC::num_elements, &lane, &slot);
      const auto* op = reinterpret_cast<const MmaOperands*>(lanes[lane]->val);
      float acc = static_cast<float>(static_cast<const FC*>(op->c)->x[slot]);
      for (int k = 0; k < K; k++) acc = fmaf(A[r][k], B[k][c], acc);
      D[r][c] = acc;
    }
  for (int r = 0; r < M; r++)
    for (int c = 0; c < N; c++) {
      place(r, c, N, FD::num_elements, &lane, &slot);
      const auto* op = reinterpret_cast<const MmaOperands*>(lanes[lane]->val);
      static_cast<FD*>(op->d)->x[slot] = static_cast<typename FD::element_type>(D[r][c]);
    }
}

// Every lane of the warp (full mask) meets here before a fragment load or store.
inline void warp_meet(const char* name) { ::cudasim::warp_collective(::cudasim::complete_sync, 0xffffffffu, 0, 0, name); }

}  // namespace detail

template <class Use, int M, int N, int K, class T, class L>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, typename fragment<Use, M, N, K, T, L>::element_type v) {
  for (int i = 0; i < f.num_elements; i++) f.x[i] = v;
}

// matrix_a / matrix_b with their layout in the type.
template <class Use, int M, int N, int K, class T, class L, class P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
  static_assert(!std::is_void<L>::value, "an accumulator load needs a layout_t argument");
  using F = fragment<Use, M, N, K, T, L>;
  detail::warp_meet("wmma::load_matrix_sync");
  const int lane = ::cudasim::g_fiber->lane;
  for (int s = 0; s < F::num_elements; s++) {
    const int i = lane * F::num_elements + s, r = i / F::cols, c = i % F::cols;
    const size_t off = std::is_same<L, row_major>::value ? size_t(r) * ldm + c : size_t(c) * ldm + r;
    f.x[s] = static_cast<typename F::element_type>(p[off]);
  }
}

template <int M, int N, int K, class T, class P>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const P* p, unsigned ldm, layout_t layout) {
  using F = fragment<accumulator, M, N, K, T>;
  detail::warp_meet("wmma::load_matrix_sync");
  const int lane = ::cudasim::g_fiber->lane;
  for (int s = 0; s < F::num_elements; s++) {
    const int i = lane * F::num_elements + s, r = i / F::cols, c = i % F::cols;
    f.x[s] = static_cast<typename F::element_type>(p[layout == mem_row_major ? size_t(r) * ldm + c : size_t(c) * ldm + r]);
  }
}

template <int M, int N, int K, class T, class P>
inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
  using F = fragment<accumulator, M, N, K, T>;
  detail::warp_meet("wmma::store_matrix_sync");
  const int lane = ::cudasim::g_fiber->lane;
  for (int s = 0; s < F::num_elements; s++) {
    const int i = lane * F::num_elements + s, r = i / F::cols, c = i % F::cols;
    p[layout == mem_row_major ? size_t(r) * ldm + c : size_t(c) * ldm + r] = static_cast<P>(f.x[s]);
  }
}

template <int M, int N, int K, class TD, class TA, class LA, class TB, class LB, class TC>
inline void mma_sync(fragment<accumulator, M, N, K, TD>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c) {
  static_assert(std::is_same<TA, TB>::value, "wmma::mma_sync: a and b must have one precision");
  using FD = fragment<accumulator, M, N, K, TD>;
  using FA = fragment<matrix_a, M, N, K, TA, LA>;
  using FB = fragment<matrix_b, M, N, K, TB, LB>;
  using FC = fragment<accumulator, M, N, K, TC>;
  detail::MmaOperands ops{&d, &a, &b, &c};
  ::cudasim::warp_collective(detail::complete_mma<FD, FA, FB, FC, std::is_same<TA, precision::tf32>::value>, 0xffffffffu,
                             reinterpret_cast<uint64_t>(&ops), 0, "wmma::mma_sync");
}

}  // namespace wmma
}  // namespace nvcuda
