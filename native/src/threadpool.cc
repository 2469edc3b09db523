// The thread pool: persistent workers that spin briefly, then sleep, between jobs; the caller takes chunks too.
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

struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable wake;
  std::condition_variable done;
  std::atomic<uint64_t> generation{0};
  std::atomic<int64_t> next{0};
  std::atomic<int> pending{0};
  std::atomic<bool> stop{false};
  // The current job; written before `generation` is bumped (release) and read after it is seen (acquire).
  const std::function<void(int64_t, int64_t)>* job = nullptr;
  int64_t n = 0;
  int64_t chunk = 0;

  void run_chunks() {
    for (;;) {
      int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= n) return;
      (*job)(b, std::min(n, b + chunk));
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
      auto changed = [&] { return stop.load(std::memory_order_acquire) || generation.load(std::memory_order_acquire) != seen; };
      if (!spin_until(changed)) {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, changed);
      }
      if (stop.load(std::memory_order_acquire)) return;
      seen = generation.load(std::memory_order_acquire);
      run_chunks();
      if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu);
        done.notify_one();
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
  int64_t chunks = std::min<int64_t>(t * 4, n / min_chunk);
  p.job = &fn;
  p.n = n;
  p.chunk = (n + chunks - 1) / chunks;
  p.next.store(0, std::memory_order_relaxed);
  p.pending.store(static_cast<int>(p.workers.size()), std::memory_order_relaxed);
  {
    // Bump under the lock so a worker between its last check and its wait cannot miss the wake-up.
    std::lock_guard<std::mutex> lock(p.mu);
    p.generation.fetch_add(1, std::memory_order_release);
  }
  p.wake.notify_all();
  p.run_chunks();
  auto finished = [&] { return p.pending.load(std::memory_order_acquire) == 0; };
  if (!Impl::spin_until(finished)) {
    std::unique_lock<std::mutex> lock(p.mu);
    p.done.wait(lock, finished);
  }
  p.job = nullptr;
}

}  // namespace planc
