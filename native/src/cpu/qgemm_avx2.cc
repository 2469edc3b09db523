// The 256-bit paths of the quantized products (variants avx2 and avxvnni): qgemm_avx2_body.h compiled twice,
// qrows_avx2_body.h for avx2.
#include <cstdint>
#include <cstring>
#include <vector>

#include "qgemm.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
// GCC 12 warns that the conversion intrinsics read _mm512_undefined_*() (a false positive, GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define PLANC_QGEMM_AVX2 1
#endif

namespace planc {
namespace qgemm {

#ifdef PLANC_QGEMM_AVX2
namespace avx2 {
#define QVNNI 0
#define QT __attribute__((target("avx2,fma")))
namespace {  // internal linkage: both copies, and both files, use the same names
#include "qgemm_avx2_body.h"
#include "qrows_avx2_body.h"
}  // namespace
#undef QT
#undef QVNNI
const Path kPath = {"avx2", false, kRows, kBlocks, kFRows, kFBlocks, dots_i8, dots_i16, dots_f32, row_dots_i8, row_dots_f32};
}  // namespace avx2

namespace vnni {
#define QVNNI 1
#define QT __attribute__((target("avx2,fma,avxvnni")))
namespace {  // internal linkage: both copies, and both files, use the same names
#include "qgemm_avx2_body.h"
}  // namespace
#undef QT
#undef QVNNI
// (the blocked row products are avx2's only: this path's stay on four W rows × two A rows, not measured on a CPU with
// AVX-VNNI yet)
const Path kPath = {"avxvnni", true, kRows, kBlocks, kFRows, kFBlocks, dots_i8, dots_i16, dots_f32, row_dots_i8_by4, row_dots_f32};
}  // namespace vnni

const Path* avx2_path() { return &avx2::kPath; }
const Path* avxvnni_path() { return &vnni::kPath; }
#else
const Path* avx2_path() { return nullptr; }
const Path* avxvnni_path() { return nullptr; }
#endif

}  // namespace qgemm
}  // namespace planc
