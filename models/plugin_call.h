// A time bound on the calls of a plug-in loaded from a file (a TorchScript estimator):
// each runs on a thread the plug-in owns, and a call that has not returned within
// BASIN_PLUGIN_TIMEOUT seconds (core/util/host.h) is an error naming the plug-in, where
// it would otherwise block the tuning for ever. Code cannot be stopped from outside, so a
// stuck call's thread is left running, holding what it uses; the plug-in refuses
// further calls, and plugin_stuck() tells a command to end its process at once rather
// than run the exit handlers under it.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace basin::models {

class BoundedCalls {
 public:
  explicit BoundedCalls(std::string what);
  ~BoundedCalls();
  BoundedCalls(const BoundedCalls&) = delete;
  BoundedCalls& operator=(const BoundedCalls&) = delete;

  // Runs `job` on the plug-in's thread and returns when it does (its exception
  // rethrown here); throws basin::Error when it takes longer than the bound or an
  // earlier call is stuck. `job` must own (hold copies of) everything it uses: after a
  // timeout it outlives this call.
  void run(std::function<void()> job);

 private:
  struct State;
  std::string what_;
  std::shared_ptr<State> state_;
};

// Whether a plug-in's call was given up while still running (see above).
bool plugin_stuck();

}  // namespace basin::models
