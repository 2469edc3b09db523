// A small fixed thread pool: parallel_for over [0, n) in contiguous chunks, sized to the machine's cores.
#pragma once
#include <cstdint>
#include <functional>

namespace planc {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const;
  // Calls fn(begin, end) on disjoint chunks covering [0, n); runs inline when n < min_chunk * 2 or one thread.
  void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace planc
