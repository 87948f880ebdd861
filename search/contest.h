// Which measured program of a task is its best (TuneOptions::confirm; docs/search.md,
// "Confirmation"): the contest policy of a task's tuner (search/tuner.h).
//
// A program whose first measurement beats the best is a challenger. At the end of a
// round the challengers (new ones first, fastest first, up to confirm_programs) are
// measured `confirm` times side by side with the best, and the winner of that window
// (contest_winner) is the best. Every program keeps its measurements (their median is
// its latency), but only a side-by-side win makes a best: a program measured in one
// quiet phase of a shared machine has a low median that the best, measured in every
// round, cannot show. A round without challengers measures the best once more. At the
// end of a run (settle) the best and the fastest other confirmed programs meet again.
// Without confirmation (confirm 0) any program faster than the best becomes it.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_set>
#include <vector>

#include "records/records.h"

namespace basin::search {
struct TuneResult;
}

namespace basin::search::detail {

// What the policy asks of its tuner: the task's records on this machine (in the order
// measured) and measurements of them again.
class ContestHost {
 public:
  virtual ~ContestHost() = default;
  virtual const std::vector<Record>& records() const = 0;
  // records[i] measured once more: the minimum of the measurement, or nothing when it
  // fails (a program that ran once and fails now keeps the measurements it has).
  virtual std::optional<double> measure_again(size_t i) = 0;
  // Each of `which` measured `times` times, in turn, so that every program meets the
  // same phases of a shared machine (compiled ahead); after the first pass none past
  // the time budget. The minimum of each measurement, parallel to which.
  virtual std::vector<std::vector<double>> measure_in_turn(const std::vector<size_t>& which, int times) = 0;
  // records[i] with `more` measurements appended (Record::confirm_us): into the file,
  // the history and the estimator's samples.
  virtual void add_measurements(size_t i, const std::vector<double>& more) = 0;
  // records[i] named the best in the file (RecordStore::name_best; its best_seq set).
  virtual void name_best(size_t i) = 0;
  // The tuner's own seconds so far (a BestChange's time).
  virtual double clock() const = 0;
};

class ContestPolicy {
 public:
  // The best, the bests' changes and the counts of measurements again go into `res`.
  ContestPolicy(int confirm, int confirm_programs, int settle_programs, TuneResult& res);

  // A record that may be the best: a confirmed one (any one when confirmation is off).
  bool eligible(const Record& r) const;
  // The best while it is eligible (a fallback's is not), else -1.
  long incumbent(const ContestHost& h) const;
  // A new record, records[i]: without confirmation, the best when it beats it.
  void consider(ContestHost& h, size_t i);
  // The end of a round's contest (above).
  void round(ContestHost& h);
  // The end of a run's contest (above); a run that measured nothing new changes nothing.
  // Returns whether it held one.
  bool settle(ContestHost& h, bool measured_any);
  // On resume: the program a tuner named the best last (Record::best_seq), else the
  // fastest confirmed one (a file from a basin before the contest).
  void resume(const ContestHost& h);
  // While no program is confirmed, the fastest of all (a run that measured nothing new).
  void fallback(ContestHost& h);

 private:
  bool beats_best(const ContestHost& h, const Record& r) const;
  void take_best(ContestHost& h, size_t i);
  void add_measurements(ContestHost& h, size_t i, const std::vector<double>& more);
  std::vector<size_t> fastest(const ContestHost& h, std::vector<size_t> which, size_t k) const;
  void hold(ContestHost& h, const std::vector<size_t>& contest);

  int confirm_, confirm_programs_, settle_programs_;
  TuneResult& res_;
  long best_ = -1;                            // res.best's index in the records (-1: none)
  std::unordered_set<size_t> unconfirmable_;  // records whose confirmations all failed
};

}  // namespace basin::search::detail
