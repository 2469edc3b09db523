// The thread pool: persistent workers that spin briefly, then sleep, between jobs; the caller takes chunks too and
// waits only for chunks that were taken, not for workers to wake.
#include "threadpool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax() { _mm_pause(); }
#else
static inline void cpu_relax() {}
#endif

namespace planc {

namespace {
// How long an idle worker (or the caller waiting for workers) spins before sleeping: kernels of one program run
// back to back, and waking a sleeping thread costs more than most small kernels.
constexpr auto kSpin = std::chrono::microseconds(100);
}  // namespace

// A job's chunks are claimed through one word: the job's generation (high 24 bits), its chunk count (20 bits) and the
// next chunk index (low 20 bits). A claim is a compare-exchange of that word, so a worker that wakes late, after the
// job's chunks were all taken or while the next job is being set up, claims nothing and touches nothing of it. The
// caller waits only for the chunks to complete, never for idle workers to wake.
constexpr int kCountBits = 20;  // chunks per job ≤ 4 · threads ≤ 4096
constexpr uint64_t kCountMask = (uint64_t(1) << kCountBits) - 1;
constexpr uint64_t kGenMask = (uint64_t(1) << (64 - 2 * kCountBits)) - 1;
inline uint64_t gen_of(uint64_t word) { return word >> (2 * kCountBits); }
inline int64_t total_of(uint64_t word) { return static_cast<int64_t>((word >> kCountBits) & kCountMask); }
inline int64_t index_of(uint64_t word) { return static_cast<int64_t>(word & kCountMask); }

struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable wake;
  std::condition_variable done_cv;
  std::atomic<uint64_t> claim{0};  // generation | chunk count | next chunk index
  std::atomic<int64_t> done{0};    // chunks of the current job completed
  std::atomic<bool> stop{false};
  // The current job; written before `claim` publishes its generation (release), stable until all its chunks complete.
  const std::function<void(int64_t, int64_t)>* job = nullptr;
  int64_t n = 0;
  int64_t chunk = 0;

  // Claims and runs chunks of generation `gen` until none is left; returns whether this thread completed the last.
  bool run_chunks(uint64_t gen) {
    for (;;) {
      uint64_t cur = claim.load(std::memory_order_acquire);
      const int64_t idx = index_of(cur), total = total_of(cur);
      if (gen_of(cur) != gen || idx >= total) return false;
      if (!claim.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      // the job's fields stay as they are until this claimed chunk completes
      const int64_t b = idx * chunk;
      (*job)(b, std::min(n, b + chunk));
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == total) return true;
    }
  }

  // Spins until pred() holds or the spin time is over; returns pred().
  template <class Pred>
  static bool spin_until(Pred pred) {
    auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0; !pred(); i++) {
      cpu_relax();
      if ((i & 255) == 255 && std::chrono::steady_clock::now() > until) return pred();
    }
    return true;
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      auto changed = [&] { return stop.load(std::memory_order_acquire) || gen_of(claim.load(std::memory_order_acquire)) != seen; };
      if (!spin_until(changed)) {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, changed);
      }
      if (stop.load(std::memory_order_acquire)) return;
      seen = gen_of(claim.load(std::memory_order_acquire));
      if (run_chunks(seen)) {
        std::lock_guard<std::mutex> lock(mu);
        done_cv.notify_one();
      }
    }
  }
};

ThreadPool::ThreadPool(int threads) : impl_(new Impl) {
  int extra = std::max(0, threads - 1);
  for (int i = 0; i < extra; i++) impl_->workers.emplace_back([this] { impl_->worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop.store(true, std::memory_order_release);
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->workers) t.join();
  delete impl_;
}

int ThreadPool::threads() const { return static_cast<int>(impl_->workers.size()) + 1; }

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  int t = threads();
  if (min_chunk < 1) min_chunk = 1;
  if (t == 1 || n < 2 * min_chunk) {
    fn(0, n);
    return;
  }
  Impl& p = *impl_;
  const int64_t chunks = std::min<int64_t>({t * 4, n / min_chunk, static_cast<int64_t>(kCountMask)});
  p.job = &fn;
  p.n = n;
  p.chunk = (n + chunks - 1) / chunks;
  const int64_t total = (n + p.chunk - 1) / p.chunk;
  p.done.store(0, std::memory_order_relaxed);
  const uint64_t gen = (gen_of(p.claim.load(std::memory_order_relaxed)) + 1) & kGenMask;
  {
    // Publish under the lock so a worker between its last check and its wait cannot miss the wake-up.
    std::lock_guard<std::mutex> lock(p.mu);
    p.claim.store(gen << (2 * kCountBits) | static_cast<uint64_t>(total) << kCountBits, std::memory_order_release);
  }
  p.wake.notify_all();
  p.run_chunks(gen);
  auto finished = [&] { return p.done.load(std::memory_order_acquire) == total; };
  if (!Impl::spin_until(finished)) {
    std::unique_lock<std::mutex> lock(p.mu);
    p.done_cv.wait(lock, finished);
  }
  p.job = nullptr;
}

}  // namespace planc
