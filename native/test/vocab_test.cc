// Standalone test of cluster_mask (cpu/vocab.cc) against a float64 nearest-centroid reference; `bench` times it.
// Build: g++ -O3 -march=x86-64-v2 -std=c++17 -pthread -Inative/src native/src/kernel_common.cc native/src/cpu/isa.cc native/src/threadpool.cc native/src/cpu/gemm.cc native/src/cpu/gemm_avx512.cc native/src/cpu/kmeans.cc native/src/cpu/vocab.cc native/test/vocab_test.cc [-DPLANC_HAVE_OPENBLAS -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas] -o /tmp/vocab_test && /tmp/vocab_test [bench]
#include <algorithm>
#include <limits>

#include "test_util.h"

namespace planc {
KernelList vocab_kernels();
}  // namespace planc

using namespace test;

namespace {

KernelFn k_mask;

// A clustering: centroids [R, D], their squared norms, and each cluster's sorted active ids in CSR form.
struct Clusters {
  Tensor c, cnorm, offsets, ids;
};

// Random centroids and random active sets of about `per` ids each out of V (sorted, unique).
Clusters make_clusters(Rng& rng, int64_t r, int64_t d, int64_t v, int64_t per) {
  Clusters cl{Tensor(kFloat32, {r, d}), Tensor(kFloat32, {r}), Tensor(kInt32, {r + 1}), Tensor()};
  for (int64_t i = 0; i < cl.c.numel(); i++) cl.c.data<float>()[i] = float(rng.uniform(-1, 1));
  for (int64_t j = 0; j < r; j++) {
    double s = 0;
    for (int64_t p = 0; p < d; p++) s += double(cl.c.data<float>()[j * d + p]) * cl.c.data<float>()[j * d + p];
    cl.cnorm.data<float>()[j] = float(s);
  }
  std::vector<int32_t> all;
  cl.offsets.data<int32_t>()[0] = 0;
  for (int64_t j = 0; j < r; j++) {
    std::vector<int32_t> set;
    const int64_t n = std::min<int64_t>(v, int64_t(rng.uniform(0, 2 * per)));
    for (int64_t t = 0; t < n; t++) set.push_back(int32_t(rng.uniform(0, double(v))) % int32_t(v));
    std::sort(set.begin(), set.end());
    set.erase(std::unique(set.begin(), set.end()), set.end());
    all.insert(all.end(), set.begin(), set.end());
    cl.offsets.data<int32_t>()[j + 1] = int32_t(all.size());
  }
  cl.ids = make_vec<int32_t>(kInt32, {int64_t(all.size())}, all);
  return cl;
}

// Float64 scores cnorm[j] − 2 x·C_j of one row.
std::vector<double> scores(const float* x, const Clusters& cl, int64_t r, int64_t d) {
  std::vector<double> s(static_cast<size_t>(r));
  for (int64_t j = 0; j < r; j++) {
    double dot = 0;
    for (int64_t p = 0; p < d; p++) dot += double(x[p]) * cl.c.data<float>()[j * d + p];
    s[j] = cl.cnorm.data<float>()[j] - 2 * dot;
  }
  return s;
}

// Runs one random case: the mask must hold every id of each row's clear winner, and nothing outside the clusters
// within float rounding of a row's best score.
void run_case(Rng& rng, std::vector<int64_t> xdims, int64_t r, int64_t v, int64_t per, bool threaded) {
  const int64_t d = xdims.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < xdims.size(); i++) rows *= xdims[i];
  Clusters cl = make_clusters(rng, r, d, v, per);
  Tensor x(kFloat32, xdims), mask(kUint8, {v});
  for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = float(rng.uniform(-1, 1));
  std::fill(mask.data<uint8_t>(), mask.data<uint8_t>() + v, 0xAB);  // the kernel must clear it
  EXPECT_OK(call(k_mask, {x.view, cl.c.view, cl.cnorm.view, cl.offsets.view, cl.ids.view}, {mask.view},
                 cluster_mask_call().vocab(v), threads(threaded)));
  std::vector<uint8_t> must(v, 0), may(v, 0);
  const int32_t* off = cl.offsets.data<int32_t>();
  for (int64_t i = 0; i < rows; i++) {
    const std::vector<double> s = scores(x.data<float>() + i * d, cl, r, d);
    const double best = *std::min_element(s.begin(), s.end());
    const double eps = 1e-4 * (1 + std::fabs(best));
    int64_t first = -1, near = 0;
    for (int64_t j = 0; j < r; j++) {
      if (s[j] > best + eps) continue;
      near++;
      if (first < 0) first = j;
      for (int32_t t = off[j]; t < off[j + 1]; t++) may[cl.ids.at<int32_t>(t)] = 1;
    }
    if (near == 1)
      for (int32_t t = off[first]; t < off[first + 1]; t++) must[cl.ids.at<int32_t>(t)] = 1;
  }
  int bad = 0;
  for (int64_t j = 0; j < v; j++) {
    const uint8_t got = mask.at<uint8_t>(j);
    if (got > 1 || (must[j] && !got) || (got && !may[j])) bad++;
  }
  CHECK(bad == 0);
  if (bad) std::fprintf(stderr, "rows %lld D %lld R %lld V %lld: %d mask bytes wrong\n", (long long)rows, (long long)d,
                        (long long)r, (long long)v, bad);
}

void test_hand_values() {
  // Centroids (0,0), (2,0), (0,2), (2,0) again: x (1.9, 0.1) → cluster 1 (3 ties with it, the lower r wins); x (0.1,
  // 1.5) → cluster 2; x (0, 0) → cluster 0.
  Tensor c = make<float>(kFloat32, {4, 2}, {0, 0, 2, 0, 0, 2, 2, 0});
  Tensor cn = make<float>(kFloat32, {4}, {0, 4, 4, 4});
  Tensor off = make<int32_t>(kInt32, {5}, {0, 2, 3, 5, 6});
  Tensor ids = make<int32_t>(kInt32, {6}, {0, 7, 3, 1, 9, 5});  // cluster 0 {0, 7}, 1 {3}, 2 {1, 9}, 3 {5}
  Tensor mask(kUint8, {10});
  Tensor x1 = make<float>(kFloat32, {1, 2}, {1.9f, 0.1f});
  EXPECT_OK(call(k_mask, {x1.view, c.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)));
  for (int j = 0; j < 10; j++) CHECK(mask.at<uint8_t>(j) == (j == 3 ? 1 : 0));
  Tensor x3 = make<float>(kFloat32, {3, 1, 2}, {1.9f, 0.1f, 0.1f, 1.5f, 0, 0});
  EXPECT_OK(call(k_mask, {x3.view, c.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)));
  const uint8_t want[10] = {1, 1, 0, 1, 0, 0, 0, 1, 0, 1};
  for (int j = 0; j < 10; j++) CHECK(mask.at<uint8_t>(j) == want[j]);
  // A bool output works the same; no rows: an all-zero mask.
  Tensor maskb(kBool, {10});
  EXPECT_OK(call(k_mask, {x3.view, c.view, cn.view, off.view, ids.view}, {maskb.view}, cluster_mask_call().vocab(10)));
  for (int j = 0; j < 10; j++) CHECK(maskb.at<uint8_t>(j) == want[j]);
  Tensor x0(kFloat32, {0, 2});
  EXPECT_OK(call(k_mask, {x0.view, c.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)));
  for (int j = 0; j < 10; j++) CHECK(mask.at<uint8_t>(j) == 0);
  // An empty cluster (offsets equal): nothing set.
  Tensor off_empty = make<int32_t>(kInt32, {5}, {0, 2, 2, 5, 6});
  EXPECT_OK(call(k_mask, {x1.view, c.view, cn.view, off_empty.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)));
  for (int j = 0; j < 10; j++) CHECK(mask.at<uint8_t>(j) == 0);
  // cnorm is taken as given: a huge norm for cluster 1 sends x1 to cluster 3.
  Tensor cn_big = make<float>(kFloat32, {4}, {0, 100, 4, 4});
  EXPECT_OK(call(k_mask, {x1.view, c.view, cn_big.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)));
  for (int j = 0; j < 10; j++) CHECK(mask.at<uint8_t>(j) == (j == 5 ? 1 : 0));
}

void test_errors() {
  Tensor x(kFloat32, {2, 3}), c(kFloat32, {4, 3}), cn(kFloat32, {4}), ids = make<int32_t>(kInt32, {3}, {0, 4, 9});
  Tensor off = make<int32_t>(kInt32, {5}, {0, 1, 2, 3, 3}), mask(kUint8, {10});
  EXPECT_OK(call(k_mask, {x.view, c.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)));
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view}, {mask.view}, cluster_mask_call().vocab(10)), "needs 5 inputs");
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view, ids.view}, {mask.view}), "needs 5 inputs");  // vocab left off
  Tensor xd(kFloat64, {2, 3}), x4(kFloat32, {2, 4}), c5(kFloat32, {4, 5}), c0(kFloat32, {0, 3}), ci(kInt32, {4, 3});
  EXPECT_ERROR(call(k_mask, {xd.view, c.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "X must be float32");
  EXPECT_ERROR(call(k_mask, {x4.view, c.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "centroids must be float32 [R >= 1, 4]");
  EXPECT_ERROR(call(k_mask, {x.view, c5.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "centroids must be float32 [R >= 1, 3]");
  EXPECT_ERROR(call(k_mask, {x.view, c0.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "centroids must be");
  EXPECT_ERROR(call(k_mask, {x.view, ci.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "centroids must be");
  Tensor cn3(kFloat32, {3}), cn64(kFloat64, {4});
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn3.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "cnorm must be float32 [4], got float32 [3]");
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn64.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "cnorm must be float32 [4]");
  Tensor off4(kInt32, {4}), off64(kInt64, {5});
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off4.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "offsets must be int32 [5]");
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off64.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "offsets must be int32 [5]");
  Tensor ids64(kInt64, {3}), ids2(kInt32, {1, 3});
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view, ids64.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "ids must be int32");
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view, ids2.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "ids must be int32");
  Tensor mask9(kUint8, {9}), maskf(kFloat32, {10});
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view, ids.view}, {mask9.view}, cluster_mask_call().vocab(10)),
               "output must be uint8 [10] (iargs V), got uint8 [9]");
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view, ids.view}, {maskf.view}, cluster_mask_call().vocab(10)),
               "output must be uint8 [10]");
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view, ids.view}, {mask.view}, cluster_mask_call().vocab(0)),
               "V = 0 must be >= 1");
  Tensor bad_down = make<int32_t>(kInt32, {5}, {0, 2, 1, 3, 3});
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, bad_down.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "offsets[2] = 1 is outside [2, 3]");
  Tensor bad_end = make<int32_t>(kInt32, {5}, {0, 1, 2, 3, 4});
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, bad_end.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "offsets[4] = 4 is outside [3, 3]");
  Tensor bad_start = make<int32_t>(kInt32, {5}, {-1, 1, 2, 3, 3});
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, bad_start.view, ids.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "offsets[0] = -1 is outside [0, 3]");
  // An id out of range in the cluster a row picks: X = 0 picks cluster 0 (all centroids 0, ties: lowest r).
  Tensor ids_bad = make<int32_t>(kInt32, {3}, {10, 4, 9}), ids_neg = make<int32_t>(kInt32, {3}, {-2, 4, 9});
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view, ids_bad.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "ids[0] = 10 (cluster 0) is outside [0, 10)");
  EXPECT_ERROR(call(k_mask, {x.view, c.view, cn.view, off.view, ids_neg.view}, {mask.view}, cluster_mask_call().vocab(10)),
               "ids[0] = -2 (cluster 0) is outside [0, 10)");
}

void test_random() {
  Rng rng;
  run_case(rng, {1, 8}, 1, 50, 10, true);
  run_case(rng, {1, 1, 16}, 3, 100, 20, true);
  run_case(rng, {5, 16}, 4, 100, 20, false);
  run_case(rng, {4, 1, 64}, 50, 2000, 100, true);
  run_case(rng, {32, 1, 128}, 200, 32000, 300, true);
  run_case(rng, {70, 33}, 100, 5000, 50, true);
  run_case(rng, {300, 96}, 1000, 32000, 60, true);
  run_case(rng, {3, 0}, 5, 100, 20, true);  // D = 0: every row picks cluster 0
}

// Times cluster_mask at R 1000, D 512 for 1 and 32 rows (V 32000, about 2000 ids per cluster).
void bench() {
  Rng rng;
  const int64_t r = 1000, d = 512, v = 32000;
  Clusters cl = make_clusters(rng, r, d, v, 1000);
  Tensor mask(kUint8, {v});
  for (int64_t rows : {1, 8, 32}) {
    Tensor x(kFloat32, {rows, 1, d});
    for (int64_t i = 0; i < x.numel(); i++) x.data<float>()[i] = float(rng.uniform(-1, 1));
    double best = 1e30;
    for (int round = 0; round < 20; round++) {
      const double t0 = now_ms();
      for (int i = 0; i < 5; i++)
        call(k_mask, {x.view, cl.c.view, cl.cnorm.view, cl.offsets.view, cl.ids.view}, {mask.view}, cluster_mask_call().vocab(v));
      best = std::min(best, (now_ms() - t0) / 5);
    }
    int64_t active = 0;
    for (int64_t j = 0; j < v; j++) active += mask.at<uint8_t>(j);
    std::printf("cluster_mask R %lld D %lld rows %2lld: %.3f ms (%lld of %lld ids active)\n", (long long)r, (long long)d,
                (long long)rows, best, (long long)active, (long long)v);
  }
}

}  // namespace

int main(int argc, char** argv) {
  k_mask = find_kernel({vocab_kernels()}, "cluster_mask");
  if (argc > 1 && std::strcmp(argv[1], "bench") == 0) {
    bench();
    return 0;
  }
  test_hand_values();
  test_errors();
  test_random();
  return finish("vocab_test");
}
