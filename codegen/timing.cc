#include "codegen/timing.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace basin::codegen {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool has_clflushopt() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, a, b, c, d);
  return (b >> 23) & 1u;
}

__attribute__((target("clflushopt"))) void flush_opt(const char* p, const char* end) {
  for (; p < end; p += 64) _mm_clflushopt(const_cast<char*>(p));
  _mm_mfence();
}

void flush(const char* p, const char* end) {
  for (; p < end; p += 64) _mm_clflush(p);
  _mm_mfence();
}
#endif

}  // namespace

void evict_from_caches(const void* p, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool opt = has_clflushopt();
  const char* begin = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63});
  const char* end = static_cast<const char*>(p) + bytes;
  if (opt) flush_opt(begin, end);
  else flush(begin, end);
#else
  (void)p;
  (void)bytes;
#endif
}

Timing time_function(const std::function<void()>& f, const TimingOptions& opt, std::vector<double>* rounds,
                     double prior_us) {
  using clock = std::chrono::steady_clock;
  double warm_us = 0;  // the last warm-up call's time
  for (int i = 0; i < opt.warmup; ++i) {
    if (opt.before_call) opt.before_call();
    auto t0 = clock::now();
    f();
    warm_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();
  }
  std::vector<double> per_call;
  Timing t;
  if (opt.slow_us > 0 && opt.warmup > 0 && warm_us > opt.slow_us && (prior_us <= 0 || prior_us > opt.slow_us)) {
    per_call.push_back(prior_us > 0 ? std::min(prior_us, warm_us) : warm_us);
    if (rounds) *rounds = per_call;
    t = summarize_rounds(std::move(per_call), 1);
    t.brief = true;
    return t;
  }
  for (int r = 0; r < std::max(1, opt.rounds); ++r) {
    int64_t calls = 0;
    auto t0 = clock::now();
    double elapsed = 0;
    do {
      if (opt.before_call) {  // each call timed alone
        opt.before_call();
        auto c0 = clock::now();
        f();
        elapsed += std::chrono::duration<double>(clock::now() - c0).count();
      } else {  // the round timed whole
        f();
        elapsed = std::chrono::duration<double>(clock::now() - t0).count();
      }
      ++calls;
    } while (elapsed < opt.min_round_seconds);
    per_call.push_back(elapsed / static_cast<double>(calls) * 1e6);
    t.calls += calls;
  }
  if (rounds) *rounds = per_call;
  return summarize_rounds(std::move(per_call), t.calls);
}

bool disturbed_timing(double cpu_seconds, double wall_seconds) {
  return wall_seconds > 0 && cpu_seconds < kQuietShare * wall_seconds;
}

Timing summarize_rounds(std::vector<double> per_call_us, int64_t calls) {
  std::sort(per_call_us.begin(), per_call_us.end());
  Timing t;
  t.min_us = per_call_us.front();
  t.median_us = per_call_us[per_call_us.size() / 2];
  t.calls = calls;
  return t;
}

}  // namespace basin::codegen
