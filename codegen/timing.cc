#include "codegen/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace basin::codegen {

Timing time_function(const std::function<void()>& f, const TimingOptions& opt, std::vector<double>* rounds,
                     double prior_us) {
  using clock = std::chrono::steady_clock;
  double warm_us = 0;  // the last warm-up call's time
  for (int i = 0; i < opt.warmup; ++i) {
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
      f();
      ++calls;
      elapsed = std::chrono::duration<double>(clock::now() - t0).count();
    } while (elapsed < opt.min_round_seconds);
    per_call.push_back(elapsed / static_cast<double>(calls) * 1e6);
    t.calls += calls;
  }
  if (rounds) *rounds = per_call;
  return summarize_rounds(std::move(per_call), t.calls);
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
