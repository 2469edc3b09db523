// The AVX-512 paths of the quantized products (variants avx512bw and avx512vnni): qgemm_avx512_body.h and
// qrows_avx512_body.h compiled twice.
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
#define PLANC_QGEMM_AVX512 1
#endif

namespace planc {
namespace qgemm {

#ifdef PLANC_QGEMM_AVX512
namespace bw {
#define QVNNI 0
#define QT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
namespace {  // internal linkage: both copies, and both files, use the same names
#include "qgemm_avx512_body.h"
#include "qrows_avx512_body.h"
}  // namespace
#undef QT
#undef QVNNI
const Path kPath = {"avx512bw", false, kRows, kBlocks, kFRows, kFBlocks, dots_i8, dots_i16, dots_f32, row_dots_i8, row_dots_f32};
}  // namespace bw

namespace vnni {
#define QVNNI 1
#define QT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx512vnni")))
namespace {  // internal linkage: both copies, and both files, use the same names
#include "qgemm_avx512_body.h"
#include "qrows_avx512_body.h"
}  // namespace
#undef QT
#undef QVNNI
const Path kPath = {"avx512vnni", true, kRows, kBlocks, kFRows, kFBlocks, dots_i8, dots_i16, dots_f32, row_dots_i8, row_dots_f32};
}  // namespace vnni

const Path* avx512bw_path() { return &bw::kPath; }
const Path* avx512vnni_path() { return &vnni::kPath; }
#else
const Path* avx512bw_path() { return nullptr; }
const Path* avx512vnni_path() { return nullptr; }
#endif

}  // namespace qgemm
}  // namespace planc
