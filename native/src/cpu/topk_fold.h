// The running log-sum-exp and top-k of the vocabulary projections (project_topk.cc, qproject_topk.cc): per-part state,
// folding a tile of logits into it, merging the parts of a row, tile widths, the active ids of a mask.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "vec_math.h"

namespace planc {
// Internal linkage, like vec_math.h: each kernel file gets its own copy.
namespace {

constexpr int64_t kNoId = std::numeric_limits<int64_t>::max();  // a padding candidate (fewer than k active ids)

// One part's state for a block of rows: running max, sum of e^(x - max), and the best k (value desc, id asc).
struct PartState {
  std::vector<float> max;
  std::vector<double> sum;
  std::vector<int64_t> count;
  std::vector<float> vals;
  std::vector<int64_t> ids;
  void reset(int64_t rows, int64_t k) {
    max.assign(static_cast<size_t>(rows), -kInf);
    sum.assign(static_cast<size_t>(rows), 0.0);
    count.assign(static_cast<size_t>(rows), 0);
    vals.resize(static_cast<size_t>(rows * k));
    ids.resize(static_cast<size_t>(rows * k));
  }
};

// Inserts (x, id) into a row's best-k list; equal values keep the earlier (lower) id first.
inline void insert_best(float* vals, int64_t* ids, int64_t& count, int64_t k, float x, int64_t id) {
  int64_t pos = count < k ? count++ : k - 1;
  while (pos > 0 && vals[pos - 1] < x) {
    vals[pos] = vals[pos - 1];
    ids[pos] = ids[pos - 1];
    pos--;
  }
  vals[pos] = x;
  ids[pos] = id;
}

// Folds one row's tile of logits l [nb] (ids j0.., or ids[0 .. nb) when ids is set) into its running max, sum and best k.
void fold_tile(PartState& s, int64_t r, const float* l, int64_t nb, int64_t j0, const int32_t* ids, int64_t k) {
  const float tm = nan_max(l, nb);
  float& m = s.max[static_cast<size_t>(r)];
  double& sum = s.sum[static_cast<size_t>(r)];
  if (m != m) return;  // a NaN already made this row NaN
  if (tm != tm) {
    m = tm;
    return;
  }
  if (tm > m) {
    if (m != -kInf) sum *= std::exp(static_cast<double>(m) - tm);
    m = tm;
  }
  if (m != -kInf) sum += exp_sum(l, nb, m);
  float* vals = s.vals.data() + r * k;
  int64_t* best = s.ids.data() + r * k;
  int64_t& count = s.count[static_cast<size_t>(r)];
  if (count == k && !(tm > vals[k - 1])) return;  // nothing in this tile beats the k-th best
  int64_t j = 0;
  for (; j < nb && count < k; j++) insert_best(vals, best, count, k, l[j], ids ? ids[j] : j0 + j);
  // then only the values above the k-th best, in order (an equal value keeps the earlier id ahead)
  while ((j = first_above(l, j, nb, vals[k - 1])) < nb) {
    insert_best(vals, best, count, k, l[j], ids ? ids[j] : j0 + j);
    j++;
  }
}

// One candidate of the final merge.
struct Cand {
  float v;
  int64_t id;
};

// The log-sum-exp of one row over the parts' states: NaN when a part saw a NaN, -HUGE_VAL when no id was computed.
double row_lse(const std::vector<PartState>& parts, int64_t r) {
  const size_t ri = static_cast<size_t>(r);
  float m = -kInf;
  for (const PartState& s : parts) {
    if (s.max[ri] != s.max[ri]) return std::numeric_limits<double>::quiet_NaN();
    m = std::max(m, s.max[ri]);
  }
  if (m == -kInf) return -HUGE_VAL;
  double sum = 0;
  for (const PartState& s : parts)
    if (s.max[ri] != -kInf) sum += s.sum[ri] * std::exp(static_cast<double>(s.max[ri]) - m);
  return m + std::log(sum);
}

// Orders candidates best first (value desc, NaN last, ties: lower id first), the first k of them.
void sort_cands(std::vector<Cand>& cands, int64_t k) {
  auto key = [](float v) { return v != v ? -kInf : v; };
  std::partial_sort(cands.begin(), cands.begin() + k, cands.end(), [&](const Cand& a, const Cand& b) {
    const float x = key(a.v), y = key(b.v);
    return x > y || (x == y && a.id < b.id);
  });
}

// The parts' candidates of one row (logits), the k best first; padded to k (fewer than k active ids: -inf with
// kNoId; a NaN row: NaN).
void best_cands(const std::vector<PartState>& parts, int64_t r, int64_t k, bool nan, std::vector<Cand>& cands) {
  const size_t ri = static_cast<size_t>(r);
  cands.clear();
  for (const PartState& s : parts)
    for (int64_t t = 0; t < s.count[ri]; t++) cands.push_back({s.vals[r * k + t], s.ids[r * k + t]});
  const Cand pad = nan ? Cand{std::numeric_limits<float>::quiet_NaN(), 0} : Cand{-kInf, kNoId};  // NaN rows stop early
  while (static_cast<int64_t>(cands.size()) < k) cands.push_back(pad);
  sort_cands(cands, k);
}

// The k first candidates as log-probs (logit − lse) and ids; padding gets -inf and id 0.
void write_row(const std::vector<Cand>& cands, int64_t k, double lse, float* values, int64_t* ids) {
  for (int64_t t = 0; t < k; t++) {
    const bool padded = cands[t].id == kNoId;
    values[t] = padded ? -kInf : static_cast<float>(static_cast<double>(cands[t].v) - lse);
    ids[t] = padded ? 0 : cands[t].id;
  }
}

// Merges the parts' states of one row into values (log-probs) and ids, k of each; slots beyond the ids computed
// (fewer than k active) get -inf and id 0.
[[maybe_unused]] void merge_row(const std::vector<PartState>& parts, int64_t r, int64_t k, float* values, int64_t* ids,
               std::vector<Cand>& cands) {
  const double lse = row_lse(parts, r);
  best_cands(parts, r, k, lse != lse, cands);
  write_row(cands, k, lse, values, ids);
}

// Columns per tile for nr rows: the [nr, tile] logits buffer stays near 64 KiB; a multiple of 32.
int64_t tile_width(int64_t nr, int64_t v) {
  const int64_t w = std::min<int64_t>(2048, std::max<int64_t>(512, 16384 / std::max<int64_t>(1, nr)));
  return std::min(v, (w + 31) / 32 * 32);
}

// The ids of the nonzero entries of mask [v] into ids (ascending); returns their number. Zero runs of 8 are skipped
// a word at a time; the rest is branch-free (ids needs room for v + 1).
int64_t compact_active(const uint8_t* mask, int64_t v, int32_t* ids) {
  int64_t n = 0, j = 0;
  for (; j + 8 <= v; j += 8) {
    uint64_t word;
    std::memcpy(&word, mask + j, sizeof word);
    if (word == 0) continue;
    for (int64_t i = j; i < j + 8; i++) {
      ids[n] = static_cast<int32_t>(i);
      n += mask[i] != 0;
    }
  }
  for (; j < v; j++) {
    ids[n] = static_cast<int32_t>(j);
    n += mask[j] != 0;
  }
  return n;
}

}  // namespace
}  // namespace planc
