// The CPU runtime's parallel loops (codegen/cpu_runtime.h): every index once, chunks
// claimed in turn so that a slow thread holds up one small chunk, nested loops serial.
#include "codegen/cpu_runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/util/host.h"

namespace {

// Three threads whatever the machine (set before the pool is first used).
[[maybe_unused]] const bool kThreeThreads = setenv("BASIN_NUM_THREADS", "3", 1) == 0;

struct Counts {
  std::vector<std::atomic<int>> hits;
  explicit Counts(int64_t n) : hits(static_cast<size_t>(n)) {}
};

void count_body(void* ctx, int64_t b, int64_t e) {
  auto* c = static_cast<Counts*>(ctx);
  for (int64_t i = b; i < e; ++i) c->hits[static_cast<size_t>(i)].fetch_add(1);
}

TEST(CpuRuntime, EveryIndexRunsOnceWhateverTheExtent) {
  ASSERT_EQ(basin::codegen::runtime_threads(), 3);
  // Back-to-back loops of every small extent and a few large ones: chunks of one job
  // never leak into the next.
  for (int rep = 0; rep < 20; ++rep)
    for (int64_t n : {1, 2, 3, 4, 5, 7, 11, 12, 13, 24, 100, 1000, 12345}) {
      Counts c(n);
      basin_parallel_for(count_body, &c, n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(c.hits[static_cast<size_t>(i)].load(), 1) << "extent " << n << " index " << i;
    }
  basin_parallel_for(count_body, nullptr, 0);  // nothing to do, nothing touched
}

struct SlowThread {
  std::thread::id caller;
  int64_t extent = 0;
  std::atomic<bool> chosen{false};
  std::atomic<int64_t> done_by_others{0};
  std::atomic<int64_t> slow_chunk{0};  // the size of the chunk the slow thread took
  std::atomic<int64_t> others_before_wake{-1};
};

// The first chunk a worker (not the caller) claims waits until the other threads have
// run every other index, or 20 s; the caller's chunks take a millisecond each, so
// that workers get some.
void slow_body(void* ctx, int64_t b, int64_t e) {
  auto* s = static_cast<SlowThread*>(ctx);
  if (std::this_thread::get_id() == s->caller) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } else if (!s->chosen.exchange(true)) {
    s->slow_chunk = e - b;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (s->done_by_others.load() < s->extent - (e - b) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s->others_before_wake = s->done_by_others.load();
    return;
  }
  s->done_by_others.fetch_add(e - b);
}

TEST(CpuRuntime, ASlowThreadHoldsUpOneSmallChunk) {
  SlowThread s;
  s.caller = std::this_thread::get_id();
  s.extent = 48;
  basin_parallel_for(slow_body, &s, s.extent);
  ASSERT_TRUE(s.chosen.load()) << "no worker took a chunk";
  // The static split gave each of the 3 threads 16 indices; now a thread holds a few.
  EXPECT_LE(s.slow_chunk.load(), s.extent / (3 * basin::parallel_chunks_setting()) + 1);
  EXPECT_LT(s.slow_chunk.load(), s.extent / 3);
  // While it waited, the others ran every other index.
  EXPECT_EQ(s.others_before_wake.load(), s.extent - s.slow_chunk.load());
}

thread_local bool t_in_outer = false;

struct Nested {
  Counts inner{8};
  std::atomic<int> outer_indices{0}, inner_elsewhere{0};
};

void inner_body(void* ctx, int64_t b, int64_t e) {
  auto* n = static_cast<Nested*>(ctx);
  if (!t_in_outer) n->inner_elsewhere.fetch_add(1);
  count_body(&n->inner, b, e);
}

void outer_body(void* ctx, int64_t b, int64_t e) {
  auto* n = static_cast<Nested*>(ctx);
  t_in_outer = true;
  for (int64_t i = b; i < e; ++i) {
    n->outer_indices.fetch_add(1);
    basin_parallel_for(inner_body, ctx, 8);
  }
  t_in_outer = false;
}

TEST(CpuRuntime, ANestedLoopRunsOnItsOwnThread) {
  Nested n;
  basin_parallel_for(outer_body, &n, 64);
  EXPECT_EQ(n.outer_indices.load(), 64);
  EXPECT_EQ(n.inner_elsewhere.load(), 0) << "an inner loop's chunk ran on another thread";
  for (int i = 0; i < 8; ++i) EXPECT_EQ(n.inner.hits[static_cast<size_t>(i)].load(), 64);
}

}  // namespace
