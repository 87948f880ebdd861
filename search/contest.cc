#include "search/contest.h"

#include <algorithm>

#include "search/tuner.h"

namespace basin::search::detail {

ContestPolicy::ContestPolicy(int confirm, int confirm_programs, int settle_programs, TuneResult& res)
    : confirm_(confirm), confirm_programs_(confirm_programs), settle_programs_(settle_programs), res_(res) {}

bool ContestPolicy::eligible(const Record& r) const { return r.ok() && (confirm_ <= 0 || r.confirmed()); }

long ContestPolicy::incumbent(const ContestHost& h) const {
  return best_ >= 0 && eligible(h.records()[static_cast<size_t>(best_)]) ? best_ : -1;
}

// Faster than the best, or any program while the best is a fallback (result() may be
// called in the middle of a round, before anything is confirmed).
bool ContestPolicy::beats_best(const ContestHost& h, const Record& r) const {
  return incumbent(h) < 0 || r.latency_us() < res_.best_latency_us;
}

// records[i] becomes the best; an eligible one is named so in the file (the program
// compilation takes) and in res.bests.
void ContestPolicy::take_best(ContestHost& h, size_t i) {
  if (eligible(h.records()[i]) && (res_.bests.empty() || res_.bests.back().record_id != h.records()[i].id)) {
    h.name_best(i);
    const Record& r = h.records()[i];
    res_.bests.push_back({h.clock(), res_.trials, r.id, r.config, r.latency_us()});
  }
  best_ = static_cast<long>(i);
  res_.best = h.records()[i];
  res_.best_latency_us = res_.best->latency_us();
}

void ContestPolicy::consider(ContestHost& h, size_t i) {
  if (confirm_ <= 0 && beats_best(h, h.records()[i])) take_best(h, i);
}

void ContestPolicy::add_measurements(ContestHost& h, size_t i, const std::vector<double>& more) {
  h.add_measurements(i, more);
  if (static_cast<long>(i) == best_) {
    res_.best = h.records()[i];
    res_.best_latency_us = res_.best->latency_us();
  }
}

// The `k` of `which` (record indices) of lowest latency, fastest first.
std::vector<size_t> ContestPolicy::fastest(const ContestHost& h, std::vector<size_t> which, size_t k) const {
  const std::vector<Record>& records = h.records();
  k = std::min(k, which.size());
  std::partial_sort(which.begin(), which.begin() + static_cast<std::ptrdiff_t>(k), which.end(),
                    [&](size_t a, size_t b) { return records[a].latency_us() < records[b].latency_us(); });
  which.resize(k);
  return which;
}

// `contest` (record indices) measured `confirm` times each, side by side; each keeps its
// measurements, and the window's winner (contest_winner) becomes the best. A program
// never confirmed whose measurements all failed (a timeout on a loaded machine, a wrong
// result) has its one measurement, and one measurement does not make a best.
void ContestPolicy::hold(ContestHost& h, const std::vector<size_t>& contest) {
  std::vector<std::vector<double>> window = h.measure_in_turn(contest, confirm_);
  for (size_t j = 0; j < contest.size(); ++j) {
    if (window[j].empty()) {
      if (!h.records()[contest[j]].confirmed()) unconfirmable_.insert(contest[j]);
      continue;
    }
    add_measurements(h, contest[j], window[j]);
  }
  const long w = contest_winner(window);
  if (w >= 0 && static_cast<long>(contest[static_cast<size_t>(w)]) != incumbent(h))
    take_best(h, contest[static_cast<size_t>(w)]);
}

void ContestPolicy::round(ContestHost& h) {
  if (confirm_ <= 0) return;
  const std::vector<Record>& records = h.records();
  const long inc = incumbent(h);
  std::vector<size_t> fresh, again;
  for (size_t i = 0; i < records.size(); ++i)
    if (static_cast<long>(i) != inc && records[i].ok() && !unconfirmable_.count(i) && beats_best(h, records[i]))
      (records[i].confirmed() ? again : fresh).push_back(i);
  const size_t slots = static_cast<size_t>(std::max(confirm_programs_, 1));
  std::vector<size_t> challengers = fastest(h, std::move(fresh), slots);
  for (size_t i : fastest(h, std::move(again), slots - challengers.size())) challengers.push_back(i);
  if (challengers.empty()) {
    if (inc < 0) return;
    ++res_.best_remeasurements;
    if (std::optional<double> t = h.measure_again(static_cast<size_t>(inc)))
      add_measurements(h, static_cast<size_t>(inc), {*t});
    return;
  }
  res_.confirmations += static_cast<int>(challengers.size()) * confirm_;
  if (inc >= 0) {
    challengers.insert(challengers.begin(), static_cast<size_t>(inc));
    res_.best_remeasurements += confirm_;
  }
  hold(h, challengers);
}

bool ContestPolicy::settle(ContestHost& h, bool measured_any) {
  if (confirm_ <= 0 || settle_programs_ < 2 || !measured_any) return false;
  const long inc = incumbent(h);
  std::vector<size_t> others;
  for (size_t i = 0; i < h.records().size(); ++i)
    if (static_cast<long>(i) != inc && eligible(h.records()[i])) others.push_back(i);
  std::vector<size_t> contest = fastest(h, std::move(others), static_cast<size_t>(settle_programs_ - (inc >= 0)));
  if (inc >= 0) contest.insert(contest.begin(), static_cast<size_t>(inc));
  if (contest.size() < 2) return false;
  res_.best_remeasurements += static_cast<int>(contest.size()) * confirm_;
  hold(h, contest);
  return true;
}

void ContestPolicy::resume(const ContestHost& h) {
  const std::vector<Record>& records = h.records();
  auto before = [](const Record& r, const Record& o) {
    return r.best_seq != o.best_seq ? r.best_seq > o.best_seq : r.latency_us() < o.latency_us();
  };
  long b = -1;
  for (size_t i = 0; i < records.size(); ++i)
    if (eligible(records[i]) && (b < 0 || before(records[i], records[static_cast<size_t>(b)])))
      b = static_cast<long>(i);
  if (b < 0) return;
  // Named already: not named again, nor listed as a change of this run.
  best_ = b;
  res_.best = records[static_cast<size_t>(b)];
  res_.best_latency_us = res_.best->latency_us();
}

void ContestPolicy::fallback(ContestHost& h) {
  if (res_.best) return;
  for (size_t i = 0; i < h.records().size(); ++i)
    if (h.records()[i].ok() && (!res_.best || h.records()[i].latency_us() < res_.best_latency_us)) take_best(h, i);
}

}  // namespace basin::search::detail
