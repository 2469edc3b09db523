// The AMX-INT8 path of the quantized products (variant amx): int8 rows × packed Wq on tile registers (tdpbusd), the
// qproject_topk row products transposed (tdpbsud); few rows, int16 and float32 inputs go to the avx512vnni kernels.
#include <cstdint>
#include <cstring>
#include <vector>

#include "isa.h"
#include "qgemm.h"

// AMX intrinsics: GCC 11+, clang 12+, on x86-64 Linux (the tile state needs arch_prctl permission).
#if defined(__x86_64__) && defined(__linux__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define PLANC_QGEMM_AMX 1
#endif

namespace planc {
namespace qgemm {

#ifdef PLANC_QGEMM_AMX
namespace {

#define AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl")))

constexpr int kRows = 32, kBlocks = 4;  // the path's int8 tile: two row tiles × four blocks (two at a time)
// Fewer rows of A go to the avx512vnni kernels (measured on a Xeon with AMX: below these the vector kernels win or tie).
constexpr int64_t kMinRows = 9;          // qmatmul (one row tile costs about what eight rows of vpdpbusd do)
constexpr int64_t kMinRowDots = 5;       // the row products (qproject_topk)
constexpr int64_t kTileK = 64;           // bytes of K per A tile row (16 k-groups of 4)

// The CPU's AMX-TILE / AMX-INT8 and the OS's tile state within PLANC_ISA's cap (isa.cc); then Linux's per-process
// permission for the tile data (ARCH_REQ_XCOMP_PERM), asked once.
const char* amx_check() {
  constexpr const char* kLacks = "this CPU lacks AMX-TILE / AMX-INT8 (or the OS has not enabled the AMX tile state)";
  if (const char* why = cpu_unavailable({CpuFeature::kAmx}, kLacks)) return why;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return "the Linux kernel refused the AMX tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM XTILEDATA)";
  return nullptr;
}

// Palette 1, all eight tiles 16 rows × 64 bytes: C 0-3 (int32 16 × 16), A 4-5, B 6-7; or, for a last row tile of
// p < 16 rows, its C tiles (0-1 when it is the first of its pair, else 2-3) and A tile (4, else 5) of p rows.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  explicit TileConfig(int p = 16, bool second = false) {
    for (int t : {second ? 2 : 0, second ? 3 : 1, second ? 5 : 4}) rows[t] = static_cast<uint8_t>(p);
  }
};

// A tile configuration loaded on the calling thread (ldtilecfg is per thread; the pool's threads each load it; other
// code on the thread may use tiles between calls), released when the kernel returns.
struct Tiles {
  AMX explicit Tiles(const TileConfig& c) { _tile_loadconfig(&c); }
  AMX void load(const TileConfig& c) { _tile_loadconfig(&c); }
  AMX ~Tiles() { _tile_release(); }
};

// RT row tiles (16 rows of A from a, row stride lda) × BT blocks (B tiles from b[0], b[1]; the last of kt k-tiles from
// tail[0], tail[1] when given): the int32 sums into acc (row stride ld), the configured rows of each tile.
template <int RT, int BT>
AMX void tiles_i8(const uint8_t* a, int64_t lda, const int8_t* const b[2], const int8_t* const tail[2], int64_t kt, int32_t* acc,
                  int64_t ld) {
  _tile_zero(0);
  if (BT > 1) _tile_zero(1);
  if (RT > 1) _tile_zero(2);
  if (RT > 1 && BT > 1) _tile_zero(3);
  for (int64_t t = 0; t < kt; t++) {
    const bool last = t == kt - 1 && tail[0];
    _tile_loadd(6, last ? tail[0] : b[0] + t * 1024, 64);
    _tile_loadd(4, a + t * kTileK, lda);
    if (BT > 1) _tile_loadd(7, last ? tail[1] : b[1] + t * 1024, 64);
    _tile_dpbusd(0, 4, 6);
    if (RT > 1) _tile_loadd(5, a + 16 * lda + t * kTileK, lda);
    if (BT > 1) _tile_dpbusd(1, 4, 7);
    if (RT > 1) _tile_dpbusd(2, 5, 6);
    if (RT > 1 && BT > 1) _tile_dpbusd(3, 5, 7);
  }
  // The configured rows of each C tile (a partial row tile stores only its rows).
  _tile_stored(0, acc, ld * 4);
  if (BT > 1) _tile_stored(1, acc + 16, ld * 4);
  if (RT > 1) _tile_stored(2, acc + 16 * ld, ld * 4);
  if (RT > 1 && BT > 1) _tile_stored(3, acc + 16 * ld + 16, ld * 4);
}

// The avx512vnni path (set before the first call, by amx_path()).
const Path* g_vnni = nullptr;

// The delegated kernels take at most g_vnni->rows rows: larger row counts in runs of those.
inline void by_rows(DotsI32 fn, const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  const int64_t step = g_vnni->rows;
  for (int64_t r = 0; r < nr; r += step) fn(a, w, r0 + r, nr - r < step ? nr - r : step, b0, nb, acc + r * nb * kBlock);
}

AMX __attribute__((noinline)) void tiles_dots_i8(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb,
                                                 int32_t* acc) {
  const int64_t ld = nb * kBlock, kg = w.kgroups, kt = (kg + 15) / 16, kpad = kt * kTileK;
  // A straight from the rows, or (K not a multiple of 64: the last tile would read past a row) a zero-padded copy.
  const uint8_t* ap = a.u8 + r0 * a.kp;
  int64_t lda = a.kp;
  static thread_local std::vector<uint8_t> abuf;
  if (kpad != a.kp) {
    abuf.resize(static_cast<size_t>(nr * kpad));
    for (int64_t r = 0; r < nr; r++) {
      std::memcpy(abuf.data() + r * kpad, ap + r * a.kp, static_cast<size_t>(a.kp));
      std::memset(abuf.data() + r * kpad + a.kp, 0, static_cast<size_t>(kpad - a.kp));
    }
    ap = abuf.data();
    lda = kpad;
  }
  // The last k-tile of each block zero-padded past its kg % 16 k-groups (then A's padding multiplies zeros).
  alignas(64) int8_t tails[kBlocks][1024];
  const int64_t tail_groups = kg % 16;
  for (int64_t b = 0; tail_groups && b < nb; b++) {
    std::memcpy(tails[b], w.w8 + ((b0 + b) * kg + (kt - 1) * 16) * 64, static_cast<size_t>(tail_groups * 64));
    std::memset(tails[b] + tail_groups * 64, 0, static_cast<size_t>((16 - tail_groups) * 64));
  }
  // Row groups of 32 (two row tiles) on 16-row tiles, except a last group whose last tile has p < 16 rows: it runs
  // after them, on a configuration with p-row tiles for it (A rows past nr are never read, C rows never written).
  const int64_t p = nr % 16, last = p ? (nr - 1) / 32 * 32 : nr;
  const TileConfig full, part(static_cast<int>(p), nr - last > 16);
  Tiles tiles(last > 0 ? full : part);
  for (int phase = 0; phase < 2; phase++) {
    const int64_t rb = phase ? last : 0, re = phase ? nr : last;
    if (rb >= re) continue;
    if (phase && last > 0) tiles.load(part);
    for (int64_t b = 0; b < nb; b += 2) {
      const bool two = b + 1 < nb;
      const int8_t* bp[2] = {w.w8 + (b0 + b) * kg * 64, two ? w.w8 + (b0 + b + 1) * kg * 64 : nullptr};
      const int8_t* tp[2] = {tail_groups ? tails[b] : nullptr, tail_groups && two ? tails[b + 1] : nullptr};
      for (int64_t r = rb; r < re; r += 32) {
        const uint8_t* ar = ap + r * lda;
        int32_t* out = acc + r * ld + b * kBlock;
        if (re - r > 16) (two ? tiles_i8<2, 2> : tiles_i8<2, 1>)(ar, lda, bp, tp, kt, out, ld);
        else (two ? tiles_i8<1, 2> : tiles_i8<1, 1>)(ar, lda, bp, tp, kt, out, ld);
      }
    }
  }
}

// Few rows on the avx512vnni kernel (one call when they fit its tile), else on tiles.
void dots_i8(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  if (nr >= kMinRows) tiles_dots_i8(a, w, r0, nr, b0, nb, acc);
  else if (nr <= g_vnni->rows) g_vnni->dots_i8(a, w, r0, nr, b0, nb, acc);
  else by_rows(g_vnni->dots_i8, a, w, r0, nr, b0, nb, acc);
}

void dots_i16(const Rows& a, const Weights& w, int64_t r0, int64_t nr, int64_t b0, int64_t nb, int32_t* acc) {
  by_rows(g_vnni->dots_i16, a, w, r0, nr, b0, nb, acc);
}

// VT vocabulary tiles (16 W rows each, A tiles from wt[v], row stride ldw) × RT row tiles of A in VNNI form (B tiles
// from xb[r], 1024 bytes per k-tile): tdpbsud gives C[w row][A row]; written transposed to out[r][j] (row stride nw),
// nv W rows and nr A rows kept.
template <int VT, int RT>
AMX void tiles_rows(const int8_t* const wt[2], int64_t ldw, const uint8_t* const xb[2], int64_t kt, int32_t* out, int64_t nw,
                    int64_t nv, int64_t nr) {
  _tile_zero(0);
  if (RT > 1) _tile_zero(1);
  if (VT > 1) _tile_zero(2);
  if (VT > 1 && RT > 1) _tile_zero(3);
  for (int64_t t = 0; t < kt; t++) {
    _tile_loadd(4, wt[0] + t * kTileK, ldw);
    _tile_loadd(6, xb[0] + t * 1024, 64);
    if (RT > 1) _tile_loadd(7, xb[1] + t * 1024, 64);
    _tile_dpbsud(0, 4, 6);
    if (VT > 1) _tile_loadd(5, wt[1] + t * kTileK, ldw);
    if (RT > 1) _tile_dpbsud(1, 4, 7);
    if (VT > 1) _tile_dpbsud(2, 5, 6);
    if (VT > 1 && RT > 1) _tile_dpbsud(3, 5, 7);
  }
  alignas(64) int32_t c[4][256];
  _tile_stored(0, c[0], 64);
  if (RT > 1) _tile_stored(1, c[1], 64);
  if (VT > 1) _tile_stored(2, c[2], 64);
  if (VT > 1 && RT > 1) _tile_stored(3, c[3], 64);
  for (int v = 0; v < VT; v++)
    for (int rt = 0; rt < RT; rt++) {
      const int32_t* s = c[2 * v + rt];
      const int64_t jv = nv - 16 * v < 16 ? nv - 16 * v : 16, ir = nr - 16 * rt < 16 ? nr - 16 * rt : 16;
      for (int64_t i = 0; i < ir; i++) {
        int32_t* o = out + (16 * rt + i) * nw + 16 * v;
        for (int64_t j = 0; j < jv; j++) o[j] = s[16 * j + i];
      }
    }
}

AMX __attribute__((noinline)) void tiles_row_dots_i8(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp,
                                                     const int32_t* ids, int64_t nw, int32_t* out) {
  const int64_t kt = dp / kTileK, rtiles = (nr + 15) / 16, groups = dp / 4;
  // A rows in VNNI form, per row tile: [k-group][16 rows][4 bytes] (rows past nr zero).
  static thread_local std::vector<uint8_t> xb;
  static thread_local std::vector<int8_t> wbuf;
  xb.assign(static_cast<size_t>(rtiles * groups * 64), 0);
  for (int64_t r = 0; r < nr; r++) {
    const uint8_t* x = a.u8 + (r0 + r) * a.kp;
    uint8_t* dst = xb.data() + (r / 16) * groups * 64 + (r % 16) * 4;
    for (int64_t g = 0; g < groups; g++) std::memcpy(dst + g * 64, x + 4 * g, 4);
  }
  wbuf.resize(static_cast<size_t>(32 * dp));
  Tiles tiles{TileConfig()};
  for (int64_t j0 = 0; j0 < nw; j0 += 32) {
    const int64_t nv = nw - j0 < 32 ? nw - j0 : 32;
    // W rows straight from w when they are 32 consecutive rows; else gathered (ids) or zero-padded (the last tile).
    const int8_t* wp = w + j0 * dp;
    if (ids || nv < 32) {
      for (int64_t j = 0; j < nv; j++) std::memcpy(wbuf.data() + j * dp, w + (ids ? ids[j0 + j] : j0 + j) * dp, static_cast<size_t>(dp));
      if (nv < 32) std::memset(wbuf.data() + nv * dp, 0, static_cast<size_t>((32 - nv) * dp));
      wp = wbuf.data();
    }
    const int8_t* wt[2] = {wp, wp + 16 * dp};
    for (int64_t rt = 0; rt < rtiles; rt += 2) {
      const bool two = rt + 1 < rtiles;
      const uint8_t* xp[2] = {xb.data() + rt * groups * 64, two ? xb.data() + (rt + 1) * groups * 64 : nullptr};
      int32_t* o = out + (16 * rt) * nw + j0;
      const int64_t n = nr - 16 * rt;
      if (nv > 16) (two ? tiles_rows<2, 2> : tiles_rows<2, 1>)(wt, dp, xp, kt, o, nw, nv, n);
      else (two ? tiles_rows<1, 2> : tiles_rows<1, 1>)(wt, dp, xp, kt, o, nw, nv, n);
    }
  }
}

void row_dots_i8(const Rows& a, int64_t r0, int64_t nr, const int8_t* w, int64_t dp, const int32_t* ids, int64_t nw, int32_t* out) {
  if (nr >= kMinRowDots) tiles_row_dots_i8(a, r0, nr, w, dp, ids, nw, out);
  else g_vnni->row_dots_i8(a, r0, nr, w, dp, ids, nw, out);
}

Path make_path() {
  g_vnni = avx512vnni_path();
  const Path& v = *g_vnni;
  return {"amx", true, kRows, kBlocks, v.f32_rows, v.f32_blocks, dots_i8, dots_i16, v.dots_f32, row_dots_i8, v.row_dots_f32};
}

}  // namespace

const Path* amx_path() {
  if (!avx512vnni_path()) return nullptr;
  static const Path path = make_path();
  return &path;
}

const char* amx_unavailable() {
  static const char* const why = amx_check();
  return why;
}
#else
const Path* amx_path() { return nullptr; }
const char* amx_unavailable() { return "this build has no AMX support (a compiler without AMX-INT8 intrinsics, or not x86-64 Linux)"; }
#endif

}  // namespace qgemm
}  // namespace planc
