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

// Chunks per thread of a parallel loop (core/util/host.h), read once.
int chunks_per_thread() {
  static const int k = parallel_chunks_setting();
  return k;
}

// A parallel loop: the caller publishes a job and claims chunks of it like the
// workers do; it returns once every chunk is done, without waiting for workers that
// never got to claim one. A chunk is claimed by a compare-and-swap on `ticket_`, the
// generation in its high 32 bits and the next chunk in its low 32, so a worker that
// wakes after its job ended claims nothing of the next job by mistake: a claim of
// generation g succeeds only while g is the current one, and job slot g % 2 is
// rewritten (for g + 2) only after job g's last chunk is done.
class ThreadPool {
 public:
  explicit ThreadPool(int n) : n_(n) {
    for (int i = 1; i < n_; ++i) workers_.emplace_back([this] { work(); });
  }
  // Detached on purpose: the pool lives for the process (and is rebuilt in a forked
  // child, whose copy of this object has no threads behind it).
  ~ThreadPool() = delete;

  int size() const { return n_; }

  void run(basin_parallel_body body, void* ctx, int64_t extent) {
    std::lock_guard<std::mutex> serial(run_mu_);
    uint32_t g = generation() + 1;  // only run() moves the generation
    if (g == 0) g = 2;              // 0 means no job; a wrapped generation keeps alternating slots
    Job& job = jobs_[g % 2];
    const int64_t want = std::min<int64_t>(extent, static_cast<int64_t>(n_) * chunks_per_thread());
    job.body = body;
    job.ctx = ctx;
    job.extent = extent;
    job.grain = (extent + want - 1) / want;
    const auto chunks = static_cast<uint32_t>((extent + job.grain - 1) / job.grain);
    job.done.store(0, std::memory_order_relaxed);
    job.chunks.store(chunks, std::memory_order_release);
    {
      // Under mu_, so that a worker about to sleep sees the new generation.
      std::lock_guard<std::mutex> l(mu_);
      ticket_.store(static_cast<uint64_t>(g) << 32, std::memory_order_seq_cst);
    }
    cv_.notify_all();
    claim_and_run();
    while (job.done.load(std::memory_order_acquire) < chunks) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }

 private:
  struct Job {
    basin_parallel_body body = nullptr;
    void* ctx = nullptr;
    int64_t extent = 0, grain = 1;
    std::atomic<uint32_t> chunks{0};  // read before a claim, so an atomic
    std::atomic<uint32_t> done{0};
  };

  uint32_t generation() const { return static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32); }

  // Claims and runs chunks of the current job until none is left.
  void claim_and_run() {
    uint64_t t = ticket_.load(std::memory_order_seq_cst);
    for (;;) {
      const uint32_t g = static_cast<uint32_t>(t >> 32), c = static_cast<uint32_t>(t);
      if (g == 0) return;
      Job& job = jobs_[g % 2];
      // A slot rewritten for a later job is seen only once the ticket has moved past
      // g, and then the claim below fails.
      if (c >= job.chunks.load(std::memory_order_acquire)) return;
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_seq_cst)) continue;
      // Chunk c of generation g is ours, and job g stays in its slot until it is done.
      const int64_t b = static_cast<int64_t>(c) * job.grain, e = std::min(job.extent, b + job.grain);
      t_in_parallel = true;
      job.body(job.ctx, b, e);
      t_in_parallel = false;
      job.done.fetch_add(1, std::memory_order_acq_rel);
      t = ticket_.load(std::memory_order_seq_cst);
    }
  }

  // Workers wait for a new job: they spin briefly (kernels often run several parallel
  // loops back to back), then sleep on a condition variable.
  void work() {
    uint32_t seen = 0;
    for (;;) {
      uint32_t g = generation();
      for (int spin = 0; g == seen && spin < 20000; ++spin) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
        g = generation();
      }
      if (g == seen) {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return generation() != seen; });
        g = generation();
      }
      seen = g;
      claim_and_run();
    }
  }

  int n_;
  std::vector<std::thread> workers_;
  std::mutex run_mu_, mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> ticket_{0};  // the current job's generation, its next chunk
  Job jobs_[2];
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
