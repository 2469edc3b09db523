// The thread pool: persistent workers woken per parallel_for; the calling thread takes the first chunk itself.
#include "threadpool.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace planc {

struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable wake;
  std::condition_variable done;
  const std::function<void(int64_t, int64_t)>* job = nullptr;
  int64_t n = 0;
  int64_t chunk = 0;
  int64_t next = 0;      // next chunk start handed out
  int pending = 0;       // workers still busy with this job
  uint64_t generation = 0;
  bool stop = false;

  // Takes chunks until none are left; returns when the job's range is exhausted.
  void drain(const std::function<void(int64_t, int64_t)>& fn, std::unique_lock<std::mutex>& lock) {
    while (next < n) {
      int64_t b = next;
      int64_t e = std::min(n, b + chunk);
      next = e;
      lock.unlock();
      fn(b, e);
      lock.lock();
    }
  }

  void worker_loop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      wake.wait(lock, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      const auto* fn = job;
      drain(*fn, lock);
      if (--pending == 0) done.notify_one();
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
    impl_->stop = true;
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
  int64_t chunks = std::min<int64_t>(t * 4, n / min_chunk);
  int64_t chunk = (n + chunks - 1) / chunks;
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->job = &fn;
  impl_->n = n;
  impl_->chunk = chunk;
  impl_->next = 0;
  impl_->pending = static_cast<int>(impl_->workers.size());
  impl_->generation++;
  impl_->wake.notify_all();
  impl_->drain(fn, lock);
  impl_->done.wait(lock, [&] { return impl_->pending == 0; });
  impl_->job = nullptr;
}

}  // namespace planc
