#include "models/plugin_call.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "core/util/error.h"
#include "core/util/host.h"

namespace basin::models {

namespace {
std::atomic<bool> g_stuck{false};
}  // namespace

bool plugin_stuck() { return g_stuck.load(); }

struct BoundedCalls::State {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> job;
  bool has_job = false, done = false, quit = false, stuck = false;
  std::exception_ptr error;
  std::thread thread;
};

BoundedCalls::BoundedCalls(std::string what) : what_(std::move(what)), state_(std::make_shared<State>()) {}

BoundedCalls::~BoundedCalls() {
  if (!state_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->stuck) return;  // detached: it holds the state
    state_->quit = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

void BoundedCalls::run(std::function<void()> job) {
  State& s = *state_;
  if (!s.thread.joinable() && !s.stuck) {
    // The state is shared with the thread, so that a thread left running keeps it.
    s.thread = std::thread([st = state_] {
      std::unique_lock<std::mutex> lock(st->mu);
      for (;;) {
        st->cv.wait(lock, [&] { return st->has_job || st->quit; });
        if (st->quit) return;
        std::function<void()> j = std::move(st->job);
        st->has_job = false;
        lock.unlock();
        std::exception_ptr e;
        try {
          j();
        } catch (...) {
          e = std::current_exception();
        }
        lock.lock();
        st->error = e;
        st->done = true;
        st->cv.notify_all();
      }
    });
  }
  const int seconds = plugin_timeout_seconds();
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.stuck)
    throw Error(what_ + ": an earlier call has not returned (it took more than " + std::to_string(seconds) +
                " s); load the plug-in again");
  s.job = std::move(job);
  s.has_job = true;
  s.done = false;
  s.error = nullptr;
  s.cv.notify_all();
  if (!s.cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return s.done; })) {
    s.stuck = true;
    g_stuck = true;
    s.thread.detach();
    throw Error(what_ + " did not return within " + std::to_string(seconds) +
                " s (BASIN_PLUGIN_TIMEOUT sets the bound on a plug-in's call)");
  }
  if (s.error) std::rethrow_exception(s.error);
}

}  // namespace basin::models
