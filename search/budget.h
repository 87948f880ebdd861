// A tuning budget, one type for a task's (TuneOptions::budget) and a network's
// (NetworkTuneOptions::budget): trials (measured programs in the records, those a
// resumed run found there included), wall seconds of this run, or both, whichever is
// spent first.
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "core/util/error.h"

namespace basin::search {

struct Budget {
  int trials = 0;      // 0: no limit in trials
  double seconds = 0;  // 0: no limit in seconds

  // Whether it limits anything (a run without a limit never ends).
  bool limited() const { return trials > 0 || seconds > 0; }
  // Throws basin::Error when nothing is limited, or a part is negative or not finite.
  void require() const {
    if (trials < 0) throw Error("the trial budget must not be negative, got " + std::to_string(trials));
    if (!(std::isfinite(seconds) && seconds >= 0))
      throw Error("the time budget must be a non-negative number of seconds, got " + std::to_string(seconds));
    if (!limited()) throw Error("give a budget: trials or seconds");
  }
  // Spent by `trials_done` trials in `seconds_done` seconds.
  bool spent(int trials_done, double seconds_done) const {
    return (trials > 0 && trials_done >= trials) || (seconds > 0 && seconds_done >= seconds);
  }
  // The budget's first `share` (0 to 1) of each part: the same limits, scaled.
  Budget share(double s) const {
    Budget b;
    b.trials = trials > 0 ? std::max(1, static_cast<int>(std::ceil(s * trials))) : 0;
    b.seconds = seconds * s;
    return b;
  }
  // Trials left after `trials_done` (INT_MAX without a trial limit; 0 when spent).
  int trials_left(int trials_done) const { return trials > 0 ? std::max(0, trials - trials_done) : INT_MAX; }
  // Seconds left after `seconds_done` (infinity without a time limit; 0 when spent).
  double seconds_left(double seconds_done) const {
    return seconds > 0 ? std::max(0.0, seconds - seconds_done) : INFINITY;
  }
};

}  // namespace basin::search
