// Coarse parallel loops for the tuner's own work between measurements (descending,
// ranking, updating the estimator): the measurement worker is idle then, and the
// machine's cores are free. A few threads take the indices in turn and are joined once.
// Not fine-grained parallel regions: on a few hundred rows (XGBoost's or LibTorch's
// OpenMP) each region waits for its threads, and beside a busy process that wait is a
// scheduler slice (models/gbt.cc). Kernels have their own runtime (codegen/cpu_runtime.h).
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace basin {

// The threads for the tuner's own work: every core, as for compiling ahead.
// BASIN_NUM_THREADS limits the kernels (and LibTorch beside them), not this.
inline int helper_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// fn(i) for every i in [0, n), on up to `threads` threads, the calling one among them;
// each thread takes the next index left. fn must be safe to run concurrently for
// distinct indices. The first exception thrown is rethrown once every thread is done.
template <class Fn>
void parallel_for(int n, Fn&& fn, int threads = helper_threads()) {
  threads = std::min(threads, n);
  if (threads <= 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int> next{0};
  std::exception_ptr error;
  std::mutex error_mu;
  auto work = [&] {
    for (int i; (i = next++) < n;) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> l(error_mu);
        if (!error) error = std::current_exception();
        next = n;  // the others stop at their next index
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// here() on the calling thread and there() on another at once (one after the other on
// a single core); the first exception is rethrown once both are done. For two
// independent parts of one step, one of which keeps thread-local state (LibTorch's
// grad mode) and so stays on the calling thread.
template <class Here, class There>
void run_both(Here&& here, There&& there) {
  if (helper_threads() < 2) {
    here();
    there();
    return;
  }
  std::exception_ptr error;
  std::thread other([&] {
    try {
      there();
    } catch (...) {
      error = std::current_exception();
    }
  });
  try {
    here();
  } catch (...) {
    other.join();
    throw;
  }
  other.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace basin
