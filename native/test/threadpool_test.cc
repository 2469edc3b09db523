// The thread pool: every index of every job covered exactly once, across many short jobs (workers waking late, after
// the caller took every chunk, must neither run stale chunks nor hold the caller), mixed sizes and pool sizes.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "test_util.h"
#include "threadpool.h"

namespace {

// Runs `jobs` parallel_for calls of sizes from `sizes` and checks each index was visited exactly once per job.
void cover(planc::ThreadPool& pool, int jobs, std::initializer_list<int64_t> sizes, bool sleep_between) {
  std::vector<std::atomic<int>> hits(4096);
  int bad = 0;
  for (int j = 0; j < jobs; j++) {
    for (int64_t n : sizes) {
      for (int64_t i = 0; i < n; i++) hits[i].store(0, std::memory_order_relaxed);
      pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; i++) hits[i].fetch_add(1, std::memory_order_relaxed);
      });
      for (int64_t i = 0; i < n; i++)
        if (hits[i].load() != 1 && bad++ < 3) std::fprintf(stderr, "job %d n %lld: index %lld visited %d times\n", j, (long long)n, (long long)i, hits[i].load());
    }
    // let idle workers fall asleep now and then, so the next job wakes them late
    if (sleep_between && j % 50 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
  CHECK(bad == 0);
}

}  // namespace

int main() {
  for (int threads : {1, 2, 3, 8}) {
    planc::ThreadPool pool(threads);
    CHECK(pool.threads() == threads);
    cover(pool, 2000, {2, 3, 7, 64}, false);
    cover(pool, 300, {1, 5, 100, 4096}, true);
    // a job the caller finishes alone before any worker wakes: it returns without waiting for the workers
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    auto t0 = std::chrono::steady_clock::now();
    std::atomic<int64_t> sum{0};
    pool.parallel_for(8, 1, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    CHECK(sum.load() == 8);
    std::printf("threadpool_test: %d threads, a job after 2 ms idle took %.1f us\n", threads, us);
  }
  return test::finish("threadpool_test");
}
