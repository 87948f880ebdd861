// The tuner's coarse parallel loops (core/util/parallel.h): every index once, work on
// several threads at once, errors rethrown on the calling thread after every thread is
// done, and run_both's first part on the calling thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/util/parallel.h"

namespace {

using Clock = std::chrono::steady_clock;

// Waits (up to ten seconds) until `flag` is set; whether it was.
bool wait_for(const std::atomic<bool>& flag) {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (!flag && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return flag;
}

TEST(ParallelFor, CallsEveryIndexOnce) {
  for (int threads : {1, 2, 5}) {
    std::vector<std::atomic<int>> calls(1000);
    basin::parallel_for(
        1000, [&](int i) { ++calls[static_cast<size_t>(i)]; }, threads);
    for (const auto& c : calls) ASSERT_EQ(c.load(), 1) << threads << " threads";
  }
  int none = 0;
  basin::parallel_for(0, [&](int) { ++none; });
  EXPECT_EQ(none, 0);
}

// Two indices on two threads run at once: each waits for the other to begin.
TEST(ParallelFor, RunsIndicesOnSeveralThreadsAtOnce) {
  std::atomic<bool> begun[2] = {false, false};
  std::atomic<int> met{0};
  std::vector<std::thread::id> ids(2);
  basin::parallel_for(
      2,
      [&](int i) {
        ids[static_cast<size_t>(i)] = std::this_thread::get_id();
        begun[i] = true;
        if (wait_for(begun[1 - i])) ++met;
      },
      2);
  EXPECT_EQ(met.load(), 2);
  EXPECT_NE(ids[0], ids[1]);
}

TEST(ParallelFor, TheFirstErrorIsRethrownOnceEveryThreadIsDone) {
  std::atomic<int> running{0}, finished{0};
  auto body = [&](int i) {
    ++running;
    if (i == 3) throw std::runtime_error("index 3");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ++finished;
    --running;
  };
  try {
    basin::parallel_for(100, body, 2);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 3");
  }
  EXPECT_EQ(running.load(), 1);    // only the index that threw never finished
  EXPECT_LT(finished.load(), 99);  // the others stopped taking indices
}

TEST(RunBoth, TheFirstPartRunsOnTheCallingThreadAndBothAtOnce) {
  if (basin::helper_threads() < 2) GTEST_SKIP() << "one core: run_both runs its parts one after the other";
  std::atomic<bool> here_begun{false}, there_begun{false};
  std::thread::id here_id, there_id;
  bool here_met = false, there_met = false;
  basin::run_both(
      [&] {
        here_id = std::this_thread::get_id();
        here_begun = true;
        here_met = wait_for(there_begun);
      },
      [&] {
        there_id = std::this_thread::get_id();
        there_begun = true;
        there_met = wait_for(here_begun);
      });
  EXPECT_EQ(here_id, std::this_thread::get_id());
  EXPECT_NE(there_id, here_id);
  EXPECT_TRUE(here_met);
  EXPECT_TRUE(there_met);
}

TEST(RunBoth, EitherPartsErrorIsRethrownAfterBothAreDone) {
  std::atomic<bool> other_done{false};
  EXPECT_THROW(basin::run_both([] { throw std::runtime_error("here"); },
                               [&] {
                                 std::this_thread::sleep_for(std::chrono::milliseconds(20));
                                 other_done = true;
                               }),
               std::runtime_error);
  EXPECT_TRUE(other_done);
  other_done = false;
  try {
    basin::run_both([&] { other_done = true; }, [] { throw std::runtime_error("there"); });
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "there");
  }
  EXPECT_TRUE(other_done);
}

}  // namespace
