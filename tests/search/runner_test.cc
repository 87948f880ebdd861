// The parts of a task's tuning round, each alone: the budget (search/budget.h), the
// contest policy on records it is handed (search/contest.h), the local and cluster
// runners on a round they are handed (search/runner.h); then a whole tuner whose round
// is shared with two worker ranks, one of them lost on the way (a cluster in the
// process: the transport, MPI, is tests/tools/mpi_test.cc's).
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <utility>
#include <unistd.h>

#include "core/util/error.h"
#include "core/util/host.h"
#include "records/records.h"
#include "search/budget.h"
#include "search/contest.h"
#include "search/runner.h"
#include "search/tuner.h"
#include "tests/search/search_test_util.h"

using namespace basin;
using namespace basin::search_test;
using basin::search::Record;

namespace {

TEST(Budget, LimitsByTrialsSecondsOrEitherAndRefusesNone) {
  search::Budget b;
  EXPECT_FALSE(b.limited());
  EXPECT_THROW(b.require(), Error);
  EXPECT_THROW((search::Budget{-1, 10}).require(), Error);
  EXPECT_THROW((search::Budget{0, -1}).require(), Error);
  EXPECT_THROW((search::Budget{0, NAN}).require(), Error);
  EXPECT_THROW((search::Budget{0, INFINITY}).require(), Error);
  EXPECT_NO_THROW((search::Budget{5, 0}).require());

  const search::Budget both{100, 60};
  EXPECT_FALSE(both.spent(99, 59.9));
  EXPECT_TRUE(both.spent(100, 0));  // whichever is spent first
  EXPECT_TRUE(both.spent(0, 60));
  EXPECT_EQ(both.trials_left(30), 70);
  EXPECT_EQ(both.trials_left(130), 0);
  EXPECT_DOUBLE_EQ(both.seconds_left(45), 15);
  EXPECT_EQ((search::Budget{0, 60}).trials_left(1000), INT_MAX);
  EXPECT_TRUE(std::isinf((search::Budget{10, 0}).seconds_left(5)));

  // The family sweep starts at (1 - its share) of either part.
  const search::Budget first = both.share(0.9);
  EXPECT_EQ(first.trials, 90);
  EXPECT_DOUBLE_EQ(first.seconds, 54);
  EXPECT_FALSE(first.spent(89, 53));
  EXPECT_TRUE(first.spent(90, 0));
  EXPECT_EQ((search::Budget{0, 60}).share(0.5).trials, 0);  // no limit stays none
}

// Records handed to the policy, their measurements again scripted per record.
class FakeHost : public search::detail::ContestHost {
 public:
  std::vector<Record> recs;
  std::map<size_t, std::deque<double>> again;  // record -> its next measurements (none left: a failure)
  std::vector<size_t> named;
  std::vector<std::vector<size_t>> windows;  // each measure_in_turn's programs

  size_t add(double latency_us, bool ok = true) {
    Record r;
    r.id = static_cast<int64_t>(recs.size()) + 1;
    r.config = "c" + std::to_string(recs.size());
    if (ok) r.latencies_us = {latency_us};
    else r.error = "wrong result";
    recs.push_back(r);
    return recs.size() - 1;
  }
  const std::vector<Record>& records() const override { return recs; }
  std::optional<double> measure_again(size_t i) override {
    std::deque<double>& q = again[i];
    if (q.empty()) return std::nullopt;
    const double t = q.front();
    q.pop_front();
    return t;
  }
  std::vector<std::vector<double>> measure_in_turn(const std::vector<size_t>& which, int times) override {
    windows.push_back(which);
    std::vector<std::vector<double>> w(which.size());
    for (int k = 0; k < times; ++k)
      for (size_t j = 0; j < which.size(); ++j)
        if (std::optional<double> t = measure_again(which[j])) w[j].push_back(*t);
    return w;
  }
  void add_measurements(size_t i, const std::vector<double>& more) override {
    recs[i].confirm_us.insert(recs[i].confirm_us.end(), more.begin(), more.end());
  }
  void name_best(size_t i) override {
    named.push_back(i);
    recs[i].best_seq = static_cast<int64_t>(named.size());
  }
  double clock() const override { return 1; }
};

TEST(ContestPolicy, OnlyASideBySideWinMakesABest) {
  FakeHost h;
  search::TuneResult res;
  search::detail::ContestPolicy policy(2, 2, 3, res);
  const size_t a = h.add(100);
  policy.consider(h, a);
  EXPECT_FALSE(res.best);  // with confirmation, a first measurement makes no best
  h.again[a] = {100, 102};
  policy.round(h);  // a is its own challenger: confirmed, the best
  ASSERT_EQ(h.windows.size(), 1u);
  EXPECT_EQ(h.windows[0], std::vector<size_t>{a});
  ASSERT_TRUE(res.best);
  EXPECT_EQ(res.best->id, h.recs[a].id);
  EXPECT_EQ(res.confirmations, 2);

  // b measured once faster, but slower side by side with a: a stays the best.
  const size_t b = h.add(80);
  h.again[a] = {99, 101};
  h.again[b] = {105, 110};
  policy.round(h);
  EXPECT_EQ(h.windows.back(), (std::vector<size_t>{a, b}));  // the best first, then the challengers
  EXPECT_EQ(res.best->id, h.recs[a].id);
  EXPECT_EQ(res.best_remeasurements, 2);

  // c wins its window: the best, named in the file and in the bests.
  const size_t c = h.add(90);
  h.again[a] = {100, 100};
  h.again[c] = {90, 91};
  policy.round(h);
  EXPECT_EQ(res.best->id, h.recs[c].id);
  EXPECT_EQ(h.named, (std::vector<size_t>{a, c}));
  ASSERT_EQ(res.bests.size(), 2u);
  EXPECT_EQ(res.bests.back().record_id, h.recs[c].id);

  // A challenger whose every measurement fails is never challenged again; a round
  // without challengers measures the best once.
  const size_t d = h.add(10);
  h.again[c] = {90, 90};
  policy.round(h);  // d's window is empty
  EXPECT_EQ(res.best->id, h.recs[c].id);
  const int before = res.best_remeasurements;
  h.again[c] = {92};
  policy.round(h);
  EXPECT_EQ(res.best_remeasurements, before + 1);
  EXPECT_EQ(h.recs[c].confirm_us.back(), 92);
  (void)d;

  // Settling: the best and the two fastest other confirmed programs, side by side.
  h.again[a] = {70, 70};
  h.again[b] = {200, 200};
  h.again[c] = {91, 91};
  EXPECT_TRUE(policy.settle(h, true));
  EXPECT_EQ(h.windows.back().size(), 3u);
  EXPECT_EQ(h.windows.back()[0], c);
  EXPECT_EQ(res.best->id, h.recs[a].id);
  EXPECT_FALSE(policy.settle(h, false));  // a run that measured nothing changes nothing
}

TEST(ContestPolicy, WithoutConfirmationTheFastestIsTheBestAndResumeTakesTheLastNamed) {
  FakeHost h;
  search::TuneResult res;
  search::detail::ContestPolicy quick(0, 2, 3, res);
  quick.consider(h, h.add(100));
  quick.consider(h, h.add(0, false));
  quick.consider(h, h.add(50));
  quick.consider(h, h.add(70));
  EXPECT_DOUBLE_EQ(res.best_latency_us, 50);
  quick.round(h);  // no contests without confirmation
  EXPECT_TRUE(h.windows.empty());

  // A resumed file: the program named last is the best, not the fastest.
  FakeHost r;
  const size_t x = r.add(50), y = r.add(60);
  r.recs[x].confirm_us = {50};
  r.recs[x].best_seq = 1;
  r.recs[y].confirm_us = {60};
  r.recs[y].best_seq = 2;
  search::TuneResult resumed;
  search::detail::ContestPolicy policy(2, 2, 3, resumed);
  policy.resume(r);
  EXPECT_EQ(resumed.best->id, r.recs[y].id);
  EXPECT_TRUE(resumed.bests.empty());  // named already: not a change of this run
  EXPECT_EQ(policy.incumbent(r), static_cast<long>(y));

  // While nothing is confirmed, the fallback is the fastest measured program.
  FakeHost f;
  f.add(30);
  f.add(20);
  search::TuneResult fres;
  search::detail::ContestPolicy fp(2, 2, 3, fres);
  fp.fallback(f);
  EXPECT_DOUBLE_EQ(fres.best_latency_us, 20);
  EXPECT_LT(fp.incumbent(f), 0);  // not an eligible best
}

// A round handed to a runner: which slot went where.
class FakeRound : public search::detail::Round {
 public:
  explicit FakeRound(size_t n, int halt_after = -1) : n(n), halt_after(halt_after) {}
  size_t n;
  int halt_after;  // halted once this many are measured (-1: never)
  std::vector<size_t> here, remote, unmeasured;
  int contests = 0, contest_size = 7;
  double waited_s = 0;

  int measured() const { return static_cast<int>(here.size() + remote.size()); }
  size_t size() const override { return n; }
  void measure_here(const std::vector<size_t>& which, const std::function<void()>& between) override {
    for (size_t k = 0; k < which.size(); ++k) {
      if (halted()) {
        unmeasured.insert(unmeasured.end(), which.begin() + static_cast<std::ptrdiff_t>(k), which.end());
        return;
      }
      here.push_back(which[k]);
      if (between) between();
    }
  }
  void take_remote(size_t slot, const search::RemoteOutcome&) override { remote.push_back(slot); }
  void leave_unmeasured(size_t slot) override { unmeasured.push_back(slot); }
  bool halted() override { return halt_after >= 0 && measured() >= halt_after; }
  int hold_contest() override {
    ++contests;
    return contest_size;
  }
  void waited(double s) override { waited_s += s; }
  std::string task_key() const override { return "task"; }
  search::RemoteProgram remote_program(size_t slot) const override {
    return {static_cast<int>(slot), "sketch", "{}", 0};
  }
};

// Worker ranks in the process: each measures what it is sent (a latency of 100 plus the
// slot), except the ranks in `lost`, which are reported lost.
class FakeCluster : public search::Cluster {
 public:
  std::vector<int> workers{1, 2};
  std::set<int> lost;
  std::map<int, std::vector<search::RemoteProgram>> sent;
  std::set<int> cancelled;
  std::deque<search::RemoteOutcome> queue;
  uint64_t next_work = 1;
  std::string host = "worker machine";

  std::vector<int> live_workers() override { return workers; }
  uint64_t send(int rank, const std::string&, const codegen::MeasureOptions&,
                const std::vector<search::RemoteProgram>& programs) override {
    const uint64_t id = next_work++;
    for (const search::RemoteProgram& p : programs) sent[rank].push_back(p);
    if (lost.count(rank)) {
      search::RemoteOutcome o;
      o.kind = search::RemoteOutcome::Kind::Lost;
      o.rank = rank;
      queue.push_back(o);
      return id;
    }
    for (const search::RemoteProgram& p : programs) {
      search::RemoteOutcome o;
      o.rank = rank;
      o.work = id;
      o.slot = p.slot;
      o.result.latencies_us = {100.0 + p.slot};
      o.host = host;
      o.codegen = "fake";
      queue.push_back(o);
    }
    return id;
  }
  // A cancelled work's programs after the one under way come back skipped.
  void cancel(int rank, uint64_t) override {
    cancelled.insert(rank);
    bool first = true;
    for (search::RemoteOutcome& o : queue)
      if (o.rank == rank && o.kind == search::RemoteOutcome::Kind::Measured && !std::exchange(first, false))
        o.kind = search::RemoteOutcome::Kind::Skipped;
  }
  // With `slow`, an outcome comes only to a caller that waits, one per call.
  bool slow = false;
  std::optional<search::RemoteOutcome> next(double timeout_seconds) override {
    if (queue.empty() || (slow && timeout_seconds <= 0)) return std::nullopt;
    search::RemoteOutcome o = queue.front();
    queue.pop_front();
    return o;
  }
  std::vector<search::RankReport> report(int, double) override { return {}; }
  search::Traffic traffic() override { return {}; }
};

TEST(RoundRunner, TheLocalRunnerMeasuresEveryProgramHereInOrder) {
  std::unique_ptr<search::detail::RoundRunner> local = search::detail::local_runner();
  EXPECT_EQ(local->start_round(20, 16), 20u);  // one at a time: a trial budget stops it by itself
  FakeRound round(5);
  EXPECT_FALSE(local->run(round));  // the tuner holds the contest
  EXPECT_EQ(round.here, (std::vector<size_t>{0, 1, 2, 3, 4}));
  FakeRound halted(5, 2);
  local->run(halted);
  EXPECT_EQ(halted.here, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(halted.unmeasured, (std::vector<size_t>{2, 3, 4}));
}

TEST(RoundRunner, TheClusterRunnerDealsTheRoundAndHoldsTheContestWhileTheWorkersMeasure) {
  FakeCluster cluster;
  std::unique_ptr<search::detail::RoundRunner> shared = search::detail::cluster_runner(cluster, {});
  // Sent at once: n at most.
  ASSERT_EQ(shared->start_round(20, 16), 16u);
  FakeRound first(16);
  EXPECT_TRUE(shared->run(first));
  EXPECT_EQ(first.contests, 1);
  // Three ranks, a contest of 5 measurements assumed: this rank measures
  // round((16 + 5) / 3 - 5) = 2 programs, the workers 7 each.
  EXPECT_EQ(first.here.size(), 2u);
  EXPECT_EQ(cluster.sent[1].size(), 7u);
  EXPECT_EQ(cluster.sent[2].size(), 7u);
  std::set<size_t> all(first.here.begin(), first.here.end());
  all.insert(first.remote.begin(), first.remote.end());
  EXPECT_EQ(all.size(), 16u);
  EXPECT_TRUE(first.unmeasured.empty());

  // The last contest took 7 measurements: round((16 + 7) / 3 - 7) = 1 program here.
  cluster.sent.clear();
  shared->start_round(16, 16);
  FakeRound second(16);
  shared->run(second);
  EXPECT_EQ(second.here.size(), 1u);

  // A lost worker's programs are measured here, after the others.
  cluster.sent.clear();
  cluster.lost = {2};
  shared->start_round(16, 16);
  FakeRound lost(16);
  shared->run(lost);
  EXPECT_EQ(lost.remote.size(), cluster.sent[1].size());
  EXPECT_EQ(lost.here.size(), 16u - lost.remote.size());
  for (const search::RemoteProgram& p : cluster.sent[2])
    EXPECT_NE(std::find(lost.here.begin(), lost.here.end(), static_cast<size_t>(p.slot)), lost.here.end());

  // No live worker: every program here, the contest left to the tuner.
  cluster.workers.clear();
  EXPECT_EQ(shared->start_round(20, 16), 20u);
  FakeRound alone(4);
  EXPECT_FALSE(shared->run(alone));
  EXPECT_EQ(alone.here.size(), 4u);
}

TEST(RoundRunner, ASpentBudgetCancelsTheWorkersAndSkipsTheContest) {
  FakeCluster cluster;
  cluster.workers = {1};
  std::unique_ptr<search::detail::RoundRunner> shared = search::detail::cluster_runner(cluster, {});
  shared->start_round(16, 16);
  cluster.slow = true;
  FakeRound round(16, 1);  // spent after the first program
  EXPECT_FALSE(shared->run(round));
  EXPECT_EQ(round.contests, 0);
  EXPECT_TRUE(cluster.cancelled.count(1));
  // Two ranks: 6 programs here (round((16 + 5) / 2 - 5)), 10 sent; one measured here and
  // one by the worker (under way when cancelled), the other 14 left to be proposed again.
  EXPECT_EQ(round.here.size(), 1u);
  EXPECT_EQ(round.remote.size(), 1u);
  EXPECT_EQ(round.unmeasured.size(), 14u);
}

class TunerOnRanks : public ::testing::Test {
 protected:
  std::string db =
      (std::filesystem::temp_directory_path() / ("basin_runner_" + std::to_string(::getpid()) + ".db")).string();
  void TearDown() override {
    for (const char* ext : {"", "-wal", "-shm"}) std::remove((db + ext).c_str());
  }
};

TEST_F(TunerOnRanks, EveryProgramOfASharedRoundIsRecordedOnceWhereItWasMeasured) {
  FakeCluster cluster;
  cluster.lost = {2};
  search::RecordStore store(db);
  std::unique_ptr<search::Strategy> random = search::make_strategy("random");
  search::TuneOptions opt;
  opt.budget.trials = 32;
  opt.batch = 16;
  opt.cluster = &cluster;
  const search::TuneResult r = search::tune_task(small_gemm(), store, *random, nullptr, opt);
  EXPECT_EQ(r.measured, 32);
  EXPECT_EQ(r.rounds, 2);
  std::set<std::string> configs;
  int from_worker = 0, here = 0;
  for (const Record& rec : store.task_records(r.task_key, "llvm")) {
    EXPECT_TRUE(configs.insert(rec.config).second) << "measured twice: " << rec.config;
    if (rec.host == cluster.host) ++from_worker;
    else if (rec.host == machine_description("llvm")) ++here;
  }
  EXPECT_EQ(static_cast<int>(configs.size()), 32);
  // Worker 1 measured its programs; worker 2 was lost and its programs measured here.
  EXPECT_EQ(from_worker, static_cast<int>(cluster.sent[1].size()));
  EXPECT_EQ(here, 32 - from_worker);
  EXPECT_GT(from_worker, 0);
  EXPECT_GT(cluster.sent[2].size(), 0u);
}

}  // namespace
