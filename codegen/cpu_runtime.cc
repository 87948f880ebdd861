#include "codegen/cpu_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/util/host.h"

namespace basin::codegen {

namespace {

thread_local bool t_in_parallel = false;

// Workers wait for a new generation of work: they spin briefly (kernels often run
// several parallel loops back to back), then sleep on a condition variable.
class ThreadPool {
 public:
  explicit ThreadPool(int n) : n_(n) {
    for (int i = 1; i < n_; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  // Detached on purpose: the pool lives for the process (and is rebuilt in a forked
  // child, whose copy of this object has no threads behind it).
  ~ThreadPool() = delete;

  int size() const { return n_; }

  void run(basin_parallel_body body, void* ctx, int64_t extent) {
    std::lock_guard<std::mutex> serial(run_mu_);
    int64_t chunks = std::min<int64_t>(n_, extent);
    body_ = body;
    ctx_ = ctx;
    extent_ = extent;
    chunks_ = chunks;
    pending_.store(static_cast<int>(chunks - 1), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> l(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    run_chunk(0);
    while (pending_.load(std::memory_order_acquire) > 0) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }

 private:
  void run_chunk(int64_t c) {
    int64_t per = (extent_ + chunks_ - 1) / chunks_;
    int64_t b = c * per, e = std::min(extent_, b + per);
    t_in_parallel = true;
    if (b < e) body_(ctx_, b, e);
    t_in_parallel = false;
  }

  void work(int id) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t g = generation_.load(std::memory_order_acquire);
      for (int spin = 0; g == seen && spin < 20000; ++spin) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
        g = generation_.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        g = generation_.load(std::memory_order_acquire);
      }
      seen = g;
      if (id < chunks_) {
        run_chunk(id);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::mutex run_mu_, mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  basin_parallel_body body_ = nullptr;
  void* ctx_ = nullptr;
  int64_t extent_ = 0, chunks_ = 0;
};

ThreadPool* pool() {
  static ThreadPool* p = nullptr;
  static pid_t owner = 0;
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  if (!p || owner != getpid()) {  // first use, or first use in a forked child
    p = new ThreadPool(runtime_threads());
    owner = getpid();
  }
  return p;
}

}  // namespace

int runtime_threads() { return this_host().cores; }

}  // namespace basin::codegen

extern "C" void basin_parallel_for(basin_parallel_body body, void* ctx, int64_t extent) {
  using namespace basin::codegen;
  if (extent <= 0) return;
  ThreadPool* p = pool();
  if (t_in_parallel || extent == 1 || p->size() == 1) {
    body(ctx, 0, extent);
    return;
  }
  p->run(body, ctx, extent);
}
