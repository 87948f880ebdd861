// Timing of kernels and of the peer: warm-up, then rounds that each repeat the call
// until a minimum time has passed; min and median of the per-call time over rounds.
// full() is BENCHMARKS.md's protocol (5 rounds of at least 200 ms); quick() is the
// short one for `basin op --timing quick`; tuning() the adaptive one for candidates,
// with a brief one for candidates known to be slow (TimingOptions::slow_us).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/util/hardware.h"

namespace basin::codegen {

struct TimingOptions {
  int warmup = 1;
  int rounds = 5;
  double min_round_seconds = 0.2;
  // Brief timing of a slow program (0: never). When the warm-up call takes more than
  // slow_us, and so did the caller's earlier call (time_function's prior_us), that
  // call is the only round: its time, or prior_us when lower. While tuning, a program
  // far slower than the best needs no precise figure to be ranked, and its full rounds
  // cost what its latency costs (gemm-1024: the programs measured averaged 2 to 6
  // times the best's latency; docs/search.md, "Brief timing of slow programs").
  double slow_us = 0;
  // Run before every call, untimed (the warm-up's too): each call is then timed alone,
  // and a round lasts until its calls alone took min_round_seconds. A network's tuning
  // evicts the task's weights from the caches here (MeasureOptions::cold_constants).
  std::function<void()> before_call;
  static TimingOptions full() { return with(1, 5, 0.2); }
  static TimingOptions quick() { return with(1, 3, 0.01); }
  // Candidates during tuning: 3 rounds of at least 5 ms (about 20 ms for a
  // sub-millisecond kernel).
  static TimingOptions tuning() { return with(1, 3, 0.005); }
  static TimingOptions with(int warmup, int rounds, double min_round_seconds) {
    TimingOptions t;
    t.warmup = warmup;
    t.rounds = rounds;
    t.min_round_seconds = min_round_seconds;
    return t;
  }
};

struct Timing {
  double min_us = 0;
  double median_us = 0;
  int64_t calls = 0;   // timed calls in all rounds
  bool brief = false;  // timed by its warm-up call and the caller's earlier call alone (TimingOptions::slow_us)
};

// The min and median of per-call times in microseconds (one per round, at least one),
// with the number of timed calls.
Timing summarize_rounds(std::vector<double> per_call_us, int64_t calls);

// Writes back and evicts the cache lines of [p, p + bytes) from every level of the
// caches (x86: clflushopt where the CPU has it, else clflush; elsewhere nothing).
void evict_from_caches(const void* p, size_t bytes);

// Times f; the per-call time of every round goes to `rounds` when given. prior_us: the
// time of a call of f the caller made just before (a measured candidate's check run),
// which must exceed opt.slow_us too for a brief timing; 0 when there is none, and the
// warm-up call alone decides.
Timing time_function(const std::function<void()>& f, const TimingOptions& opt = TimingOptions::full(),
                     std::vector<double>* rounds = nullptr, double prior_us = 0);

// Whether a timing that lasted `wall_seconds`, during which the thread that timed it was
// on a CPU for `cpu_seconds` (basin::thread_cpu_seconds), ran beside other work on its
// cores: on a CPU less than kQuietShare of the time. That thread never waits while it
// times (it runs the kernel's own share of the work and spins until the other threads'
// shares are done), so on a quiet machine it keeps its core but for what the kernel's
// own threads take; a compiler or a second tuner on the cores takes time slices from
// it, and the latency it leaves can be several times the program's own (MeasurePool
// times such a program again).
bool disturbed_timing(double cpu_seconds, double wall_seconds);

}  // namespace basin::codegen
