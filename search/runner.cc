#include "search/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace basin::search::detail {

namespace {

std::vector<size_t> every_slot(const Round& round) {
  std::vector<size_t> all(round.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

class LocalRunner : public RoundRunner {
 public:
  size_t start_round(size_t proposed, int) override { return proposed; }
  bool run(Round& round) override {
    round.measure_here(every_slot(round), nullptr);
    return false;
  }
};

class ClusterRunner : public RoundRunner {
 public:
  ClusterRunner(Cluster& cluster, const codegen::MeasureOptions& options) : cluster_(cluster), options_(options) {}

  size_t start_round(size_t proposed, int n) override {
    workers_ = cluster_.live_workers();
    return workers_.empty() ? proposed : std::min(proposed, static_cast<size_t>(std::max(n, 0)));
  }

  bool run(Round& round) override {
    if (workers_.empty()) {
      round.measure_here(every_slot(round), nullptr);
      return false;
    }
    // This rank's `own` slots spread evenly over the batch; the others dealt to the
    // workers in turn.
    const double ranks = static_cast<double>(workers_.size() + 1);
    const double c = static_cast<double>(contest_measurements_);
    const size_t n_new = round.size();
    const size_t own =
        std::min(n_new, static_cast<size_t>(std::max(0.0, std::round((static_cast<double>(n_new) + c) / ranks - c))));
    std::vector<size_t> mine;
    std::map<int, std::vector<RemoteProgram>> theirs;
    size_t dealt = 0;
    for (size_t i = 0; i < n_new; ++i) {
      if ((i + 1) * own / n_new > i * own / n_new) {
        mine.push_back(i);
        continue;
      }
      theirs[workers_[dealt++ % workers_.size()]].push_back(round.remote_program(i));
    }
    std::map<int, int> pending;  // slot -> the rank measuring it
    std::map<int, uint64_t> work;
    const std::string key = round.task_key();
    for (const auto& [rank, programs] : theirs) {
      work[rank] = cluster_.send(rank, key, options_, programs);
      for (const RemoteProgram& p : programs) pending[p.slot] = rank;
    }
    // A worker lost on the way leaves its unfinished programs to be measured here.
    std::vector<size_t> orphans;
    auto handle = [&](const RemoteOutcome& o) {
      if (o.kind == RemoteOutcome::Kind::Lost) {
        for (auto it = pending.begin(); it != pending.end();)
          if (it->second == o.rank) {
            orphans.push_back(static_cast<size_t>(it->first));
            it = pending.erase(it);
          } else {
            ++it;
          }
        return;
      }
      auto it = pending.find(o.slot);
      if (it == pending.end() || it->second != o.rank || work[o.rank] != o.work) return;  // not this round's
      pending.erase(it);
      if (o.kind == RemoteOutcome::Kind::Skipped) round.leave_unmeasured(static_cast<size_t>(o.slot));
      else round.take_remote(static_cast<size_t>(o.slot), o);
    };
    bool cancelled = false;
    auto cancel = [&] {
      if (cancelled) return;
      cancelled = true;
      for (const auto& [rank, id] : work) cluster_.cancel(rank, id);
    };
    auto take_arrived = [&] {
      while (std::optional<RemoteOutcome> o = cluster_.next(0)) handle(*o);
    };
    // A worker's results are taken as they come, between this rank's own.
    round.measure_here(mine, take_arrived);
    take_arrived();
    // The contest now, unless the budget is spent: then after the workers' results, as
    // on one rank. A worker's program that arrives after it is a challenger in the
    // task's next one.
    bool contested = false;
    if (!round.halted()) {
      contest_measurements_ = round.hold_contest();
      contested = true;
      take_arrived();
    }
    const auto waiting = std::chrono::steady_clock::now();
    while (!pending.empty()) {
      if (!cancelled && round.halted()) cancel();
      if (std::optional<RemoteOutcome> o = cluster_.next(0.25)) handle(*o);
    }
    round.waited(std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting).count());
    if (!orphans.empty()) round.measure_here(orphans, nullptr);
    return contested;
  }

 private:
  Cluster& cluster_;
  codegen::MeasureOptions options_;
  std::vector<int> workers_;  // the live workers of the round under way
  // The measurements of the last contest: the estimate of the one this rank holds while
  // the workers measure.
  int contest_measurements_ = 5;
};

}  // namespace

std::unique_ptr<RoundRunner> local_runner() { return std::make_unique<LocalRunner>(); }

std::unique_ptr<RoundRunner> cluster_runner(Cluster& cluster, const codegen::MeasureOptions& options) {
  return std::make_unique<ClusterRunner>(cluster, options);
}

}  // namespace basin::search::detail
