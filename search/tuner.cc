#include "search/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_set>

#include "codegen/measure.h"
#include "codegen/version.h"
#include "core/util/blas.h"
#include "core/util/error.h"
#include "core/util/host.h"
#include "models/dataset.h"
#include "search/contest.h"
#include "search/runner.h"

namespace basin::search {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double epoch_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Each round's random choices depend on the seed and the trials done only.
uint64_t round_seed(uint64_t seed, int trials) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(trials) + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

long contest_winner(const std::vector<std::vector<double>>& windows) {
  long w = -1;
  double w_us = 0;
  for (size_t j = 0; j < windows.size(); ++j) {
    if (windows[j].empty()) continue;
    std::vector<double> v = windows[j];
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (w < 0 || *mid < w_us) w = static_cast<long>(j), w_us = *mid;
  }
  return w;
}

double pairwise_accuracy(const std::vector<double>& predicted, const std::vector<double>& latency) {
  models::PairCounts c = models::count_ordered_pairs(predicted, latency);
  return c.pairs > 0 ? c.agree / c.pairs : -1;
}

struct TaskTuner::Impl : detail::ContestHost {
  Impl(const ops::OpGraph& task, RecordStore& st, Strategy& sg, models::Estimator* e, const TuneOptions& o)
      : space(task, o.target, o.precision),
        store(st),
        strategy(sg),
        est(e),
        opt(o),
        contests(o.confirm, o.confirm_programs, o.settle_programs, res),
        runner(o.cluster ? detail::cluster_runner(*o.cluster, measure_options(o)) : detail::local_runner()) {}

  // The tuner's own clock: it runs only inside the constructor, round() and settle(),
  // so that a tuner whose rounds alternate with other tuners' (a network's tasks,
  // strategies interleaved by tune_interleaved) counts its own time, and a seconds
  // budget is its own.
  double active_seconds = 0;                      // of the spans that ended
  std::optional<Clock::time_point> active_since;  // the span running now, if any
  double clock() const override { return active_seconds + (active_since ? since(*active_since) : 0); }
  struct Active {
    explicit Active(Impl& m) : m(m), outer(!m.active_since) {
      if (outer) m.active_since = Clock::now();
    }
    ~Active() {
      if (!outer) return;
      m.active_seconds += since(*m.active_since);
      m.active_since.reset();
    }
    Impl& m;
    bool outer;
  };

  TaskSpace space;
  RecordStore& store;
  Strategy& strategy;
  models::Estimator* est;
  TuneOptions opt;
  TuneResult res;
  detail::ContestPolicy contests;
  std::unique_ptr<detail::RoundRunner> runner;
  std::vector<Measured> history;
  std::unordered_set<std::string> measured;
  std::vector<Candidate> seeds;         // TaskTuner::seed's, leading the next round
  std::vector<models::Sample> samples;  // successful programs, for the estimator
  size_t trained_on = 0;                // samples at the estimator's last update
  std::unique_ptr<codegen::MeasurePool> pool;
  std::string other_host_name;     // a machine other than this one that measured records of the task
  std::string other_codegen_name;  // a code generation other than this one's that the task's records name

  std::string label() const { return opt.label.empty() ? res.task_key : opt.label; }

  std::vector<Record> records_;  // this machine's records of the task, parallel to history
  std::vector<int> sample_of;    // each record's index in samples (-1: none)
  const std::vector<Record>& records() const override { return records_; }

  // The lowest latency of the programs measured so far (infinity: none), and the time
  // above which a new program is timed briefly (0: none; TuneOptions::slow_factor).
  double fastest_us = std::numeric_limits<double>::infinity();
  double slow_us() const { return opt.slow_factor > 0 && std::isfinite(fastest_us) ? opt.slow_factor * fastest_us : 0; }

  // Measured programs, in order: into the history and the estimator's samples (the
  // features of the successful ones computed in one batch: a network run resuming
  // thousands of programs computed them one at a time).
  void remember(std::vector<Candidate> cs, std::vector<Record> rs) {
    auto latency = [](const Record& r) { return r.ok() ? r.latency_us() : 0.0; };
    std::vector<Candidate> ok;
    for (size_t i = 0; i < cs.size(); ++i)
      if (latency(rs[i]) > 0) ok.push_back(cs[i]);
    std::vector<models::Sample> ss = ok.empty() ? std::vector<models::Sample>() : space.samples(ok);
    size_t next = 0;
    for (size_t i = 0; i < cs.size(); ++i) {
      const double latency_us = latency(rs[i]);
      history.push_back({std::move(cs[i]), latency_us});
      records_.push_back(std::move(rs[i]));
      sample_of.push_back(-1);
      if (latency_us <= 0) continue;
      fastest_us = std::min(fastest_us, latency_us);
      models::Sample& s = ss[next++];
      s.latency_us = latency_us;
      sample_of.back() = static_cast<int>(samples.size());
      samples.push_back(std::move(s));
    }
  }
  void remember(const Candidate& c, const Record& r) { remember(std::vector<Candidate>{c}, std::vector<Record>{r}); }

  std::optional<double> measure_again(size_t i) override {
    codegen::MeasureResult mr = measure(history[i].candidate);
    if (mr.ok() && !mr.latencies_us.empty()) return mr.min_us();
    return std::nullopt;
  }
  codegen::Candidate to_pool(const Candidate& c) const { return {&pool->sketches()[c.sketch], c.config}; }
  // `cs` compiled ahead in the worker (codegen::MeasurePool::prepare), in the order they
  // will be measured; its time counted as measurement.
  void prepare(const std::vector<Candidate>& cs) {
    auto tm = Clock::now();
    std::vector<codegen::Candidate> ahead;
    for (const Candidate& c : cs) ahead.push_back(to_pool(c));
    pool->prepare(ahead);
    res.measure_seconds += since(tm);
  }
  // One measurement by the worker pool, its time counted as measurement; brief when
  // the program is slower than slow_us (codegen::MeasurePool::measure_one; 0: full).
  codegen::MeasureResult measure(const Candidate& c, double slow_us = 0) {
    auto tm = Clock::now();
    codegen::MeasureResult mr = pool->measure_one(to_pool(c), slow_us);
    res.brief += mr.brief;
    res.disturbed += mr.disturbed;
    res.disturbed_kept += mr.disturbed_kept();
    res.measure_seconds += since(tm);
    res.compile_seconds += mr.compile_seconds;
    return mr;
  }
  void add_measurements(size_t i, const std::vector<double>& more) override {
    Record& r = records_[i];
    r.confirm_us.insert(r.confirm_us.end(), more.begin(), more.end());
    store.confirm(r.id, r.confirm_us);
    history[i].latency_us = r.latency_us();
    if (sample_of[i] >= 0) samples[static_cast<size_t>(sample_of[i])].latency_us = r.latency_us();
  }
  void name_best(size_t i) override { records_[i].best_seq = store.name_best(records_[i].id); }

  std::vector<std::vector<double>> measure_in_turn(const std::vector<size_t>& which, int times) override {
    std::vector<std::vector<double>> window(which.size());
    std::vector<Candidate> ahead;  // every measurement's program, in the order they run
    for (int k = 0; k < times; ++k)
      for (size_t i : which) ahead.push_back(history[i].candidate);
    prepare(ahead);
    for (int k = 0; k < times; ++k) {
      // Every program measured at least once, then no measurement past the time budget.
      if (k > 0 && budget_spent()) break;
      for (size_t j = 0; j < which.size(); ++j)
        if (std::optional<double> t = measure_again(which[j])) window[j].push_back(*t);
    }
    return window;
  }

  void settle() {
    if (res.settled || !contests.settle(*this, res.measured > 0)) return;
    res.settled = true;
    res.curve.push_back({clock(), res.trials, res.best_latency_us});
  }

  void update() {
    if (!est || !opt.update_estimator || !est->trainable() || samples.size() < 2) return;
    if (!est->ready() && static_cast<int>(samples.size()) < opt.min_train_samples) return;
    // A planning strategy's estimator changes once per plan (and on its first training).
    const size_t plan = static_cast<size_t>(strategy.plan_size());
    if (est->ready() && plan > 0 && trained_on > 0 && samples.size() < trained_on + plan) return;
    trained_on = samples.size();
    auto t = Clock::now();
    // Trees retrained at every update, as AutoTVM does, at its cheap step (offline
    // training takes more rounds of a smaller step); a ready MLP or ensemble fine-tuned.
    models::train_for_tuning(*est, samples, opt.seed);
    space.invalidate_predictions();
    res.update_seconds += since(t);
    ++res.updates;
  }

  bool done() const {
    if (opt.budget.trials > 0 && res.trials >= opt.budget.trials) return true;
    // With confirmation, the best's latency must also be a median over later rounds:
    // at least `confirm` more measurements after the window that confirmed it (a
    // contest it defended, or a measurement in each round without challengers). One
    // window can fall in a fast phase of a shared host (a GEMM stopped after 96 trials
    // on a program 8451 us in its window and 10740 us timed again); a
    // run does not end on it.
    if (opt.stop_at_us > 0 && res.best_latency_us > 0 && res.best_latency_us <= opt.stop_at_us &&
        (opt.confirm <= 0 || res.best->confirm_us.size() >= 2 * static_cast<size_t>(opt.confirm)))
      return true;
    return budget_spent();
  }
  // The time budget (a contest's measurements stop there; a trial budget counts new programs only).
  bool budget_spent() const { return opt.budget.seconds_left(clock()) <= 0; }
};

codegen::MeasureOptions measure_options(const TuneOptions& opt) {
  codegen::MeasureOptions mo;
  mo.timeout_seconds = opt.timeout_seconds;
  mo.program_hook = opt.program_hook;
  mo.keep_programs = opt.keep_programs;
  mo.target = opt.target;
  mo.precision = opt.precision;
  mo.compile_threads = opt.compile_threads;
  mo.max_instructions = opt.max_instructions;
  mo.constant_inputs = opt.constant_inputs;
  mo.cold_constants = opt.cold_constants;
  return mo;
}

TaskTuner::TaskTuner(const ops::OpGraph& task, RecordStore& store, Strategy& strategy, models::Estimator* est,
                     const TuneOptions& opt) {
  if (opt.target != "llvm" && opt.target != "cuda")
    throw Error("tuning target '" + opt.target + "' is not supported (llvm or cuda)");
  if (opt.batch <= 0) throw Error("the batch size must be positive");
  if (opt.confirm < 0 || opt.confirm > TuneOptions::kMaxConfirm)
    throw Error("confirm must be 0 to " + std::to_string(TuneOptions::kMaxConfirm) + " measurements, got " +
                std::to_string(opt.confirm));
  if (!valid_slow_factor(opt.slow_factor))
    throw Error("the slow factor must be 0 (every program timed in full) or 1 to 1e6, not " +
                fmt("%g", opt.slow_factor));
  if (strategy.needs_gradients() && !dynamic_cast<models::DifferentiableEstimator*>(est))
    throw Error("the " + strategy.name() +
                " strategy needs a differentiable estimator (mlp, ensemble, a TorchScript file, or one of its own with "
                "a gradient), not " +
                (est ? est->kind() : std::string("none")));
  const Clock::time_point started = Clock::now();
  set_blas_threads(1);  // the estimator's products on this thread (core/util/blas.h)
  impl_ = std::make_unique<Impl>(task, store, strategy, est, opt);
  Impl& m = *impl_;
  Impl::Active active(m);
  m.active_since = started;  // building the space counts too
  m.res.task_key = m.space.key();
  m.res.strategy = strategy.name();
  m.res.estimator = est ? est->kind() : "";
  const std::string generation = codegen::codegen_version(opt.target);
  std::vector<Candidate> resumed;
  std::vector<Record> resumed_records;
  for (Record& r : store.task_records(m.res.task_key, opt.target)) {
    // Another machine's latencies do not compare with this one's: its programs are
    // measured again here.
    if (!r.from_host(machine_description(opt.target))) {
      if (m.res.other_host++ == 0) m.other_host_name = r.host;
      continue;
    }
    // Nor do the latencies of code this basin no longer generates.
    if (!r.from_codegen(generation)) {
      if (m.res.other_codegen++ == 0) m.other_codegen_name = r.codegen;
      continue;
    }
    m.measured.insert(r.config);
    try {
      const sched::Sketch* s = nullptr;
      sched::Config c = sched::config_from_json(r.config, m.space.sketches(), store.path(), &s);
      resumed.push_back(m.space.make(static_cast<int>(s - m.space.sketches().data()), std::move(c)));
      resumed_records.push_back(std::move(r));
    } catch (const Error&) {
      // A program of sketches this basin no longer generates: it counts, it is not reused.
    }
  }
  m.remember(std::move(resumed), std::move(resumed_records));
  if (m.res.other_host > 0 && opt.log)
    opt.log("tune " + m.label() + ": " + std::to_string(m.res.other_host) + " records of this task in " + store.path() +
            " were measured on another machine (" + m.other_host_name + ", not " + machine_description(opt.target) +
            "); they are left out and their programs may be measured again here");
  if (m.res.other_codegen > 0 && opt.log)
    opt.log("tune " + m.label() + ": " + std::to_string(m.res.other_codegen) + " records of this task in " +
            store.path() + " measured code of another generation (" + m.other_codegen_name + ", not " + generation +
            "); they are left out and their programs may be measured again");
  m.contests.resume(m);
  m.res.resumed = static_cast<int>(m.measured.size());
  m.res.trials = m.res.resumed;
  m.res.curve.push_back({0, m.res.trials, m.res.best_latency_us});
  // The worker is forked before LibTorch starts its threads for the estimator.
  m.pool = std::make_unique<codegen::MeasurePool>(m.space.task(), m.space.sketches(), measure_options(opt));
  if (!m.samples.empty()) m.update();
}

TaskTuner::~TaskTuner() = default;

bool TaskTuner::done() const { return impl_->done(); }

RecordStore& TaskTuner::store() const { return impl_->store; }

void TaskTuner::settle() {
  Impl::Active active(*impl_);
  impl_->settle();
}

const TuneResult& TaskTuner::result() {
  TuneResult& res = impl_->res;
  impl_->contests.fallback(*impl_);
  res.seconds = impl_->clock();
  res.measured_ahead = impl_->pool->measured_ahead();
  res.overhead_fraction = res.seconds > 0 ? 1 - res.measure_seconds / res.seconds : 0;
  return res;
}

int TaskTuner::seed(const std::vector<std::string>& configs) {
  Impl& m = *impl_;
  const std::vector<sched::Sketch>& sketches = m.space.sketches();
  int queued = 0;
  for (const std::string& json : configs)
    for (size_t s = 0; s < sketches.size(); ++s) {
      std::optional<sched::Config> c = sched::fit_config(sketches[s], json);
      if (!c) continue;
      Candidate cand = m.space.make(static_cast<int>(s), *c);
      bool queued_already = m.measured.count(cand.json) > 0;
      for (const Candidate& q : m.seeds) queued_already |= q.json == cand.json;
      if (!queued_already) {
        m.seeds.push_back(std::move(cand));
        ++queued;
      }
      break;
    }
  return queued;
}

// A round of TaskTuner: its batch of new programs, measured by the tuner's runner
// (here, or shared with worker ranks), each into the file, the history, the best and
// the batch's accuracy.
class TaskTuner::RoundImpl : public detail::Round {
 public:
  RoundImpl(Impl& m, std::vector<Candidate> batch, std::function<bool()> stop)
      : m(m),
        batch(std::move(batch)),
        stop(std::move(stop)),
        here(machine_description(m.opt.target)),
        generation(codegen::codegen_version(m.opt.target)) {}

  Impl& m;
  std::vector<Candidate> batch;
  std::function<bool()> stop;
  const std::string here, generation;
  std::vector<double> predicted, latency;  // of the programs with a prediction
  int measured_now = 0, valid_now = 0;
  std::vector<size_t> unmeasured;

  size_t size() const override { return batch.size(); }
  // A stop halts the round once it has measured a program and the task has a valid one;
  // while it has none, the round goes on to the end of its batch: a first round cut
  // short by its slice of a network's budget on a loaded machine (its one program
  // failing) left the task with nothing to compile.
  bool halted() override {
    return measured_now > 0 && (m.done() || (stop && stop() && (valid_now > 0 || m.res.best_latency_us > 0)));
  }

  // A program measured (here or by a worker rank) into the file, the history, the best
  // and the batch's accuracy.
  void take(const Candidate& c, const codegen::MeasureResult& mr, const std::string& host, const std::string& codegen,
            double started_at, double finished_at) {
    TuneResult& res = m.res;
    Record r = models::record_of(
        {res.task_key, m.opt.target, m.space.sketches()[c.sketch].name, c.json, m.opt.seed,
         m.strategy.name() + (m.est ? ":" + m.est->kind() : ""), host, codegen, started_at, finished_at},
        mr);
    r.id = m.store.add(r);
    ++res.trials;
    ++res.measured;
    ++measured_now;
    if (r.ok()) ++valid_now;
    if (!r.ok()) {
      ++res.errors;
    } else if (!std::isnan(c.predicted)) {
      predicted.push_back(c.predicted);
      latency.push_back(r.min_latency_us());
    }
    m.remember(c, r);
    m.contests.consider(m, m.records().size() - 1);
    res.curve.push_back({m.clock(), res.trials, res.best_latency_us});
    if (m.opt.progress) m.opt.progress(res.trials, m.opt.budget.trials, m.clock(), res.best_latency_us);
  }

  // Compiled ahead on every core a slice at a time, so that a budget that runs out
  // mid-batch stops after at most one slice.
  void measure_here(const std::vector<size_t>& which, const std::function<void()>& between) override {
    constexpr size_t kPrepareSlice = 16;
    size_t prepared = 0;
    for (size_t k = 0; k < which.size(); ++k) {
      if (halted()) {
        unmeasured.insert(unmeasured.end(), which.begin() + static_cast<std::ptrdiff_t>(k), which.end());
        return;
      }
      if (k == prepared) {
        prepared = std::min(which.size(), k + kPrepareSlice);
        std::vector<Candidate> slice;
        for (size_t j = k; j < prepared; ++j) slice.push_back(batch[which[j]]);
        m.prepare(slice);
      }
      const Candidate& c = batch[which[k]];
      // Another process tuning this file measures (or has measured) it: not twice.
      if (!m.store.claim(m.res.task_key, m.opt.target, m.space.sketches()[c.sketch].name, c.json, here, generation)) {
        ++m.res.left_to_others;
        continue;
      }
      const double started = epoch_seconds();
      codegen::MeasureResult mr = m.measure(c, m.slow_us());
      take(c, mr, here, generation, started, epoch_seconds());
      if (between) between();
    }
  }
  void take_remote(size_t slot, const RemoteOutcome& o) override {
    m.res.brief += o.result.brief;
    m.res.disturbed += o.result.disturbed;
    m.res.disturbed_kept += o.result.disturbed_kept();
    m.res.compile_seconds += o.result.compile_seconds;
    if (!o.machine.empty() && !o.host.empty()) m.store.describe_machine(o.host, o.machine);
    take(batch[slot], o.result, o.host, o.codegen, o.started_at, o.finished_at);
  }
  void leave_unmeasured(size_t slot) override { unmeasured.push_back(slot); }
  int hold_contest() override {
    const int before = m.res.confirmations + m.res.best_remeasurements;
    m.contests.round(m);
    return m.res.confirmations + m.res.best_remeasurements - before;
  }
  void waited(double seconds) override {
    m.res.measure_seconds += seconds;
    m.res.wait_seconds += seconds;
  }
  std::string task_key() const override { return m.res.task_key; }
  RemoteProgram remote_program(size_t slot) const override {
    return {static_cast<int>(slot), m.space.sketches()[batch[slot].sketch].name, batch[slot].json, m.slow_us()};
  }
};

int TaskTuner::round(int n, const std::function<bool()>& stop) {
  Impl& m = *impl_;
  Impl::Active active(m);
  TuneResult& res = m.res;
  const TuneOptions& opt = m.opt;
  n = std::min(n, opt.budget.trials_left(res.trials));
  if (n <= 0) return 0;
  std::mt19937_64 rng(round_seed(opt.seed, res.trials));
  auto tp = Clock::now();
  SearchState state{m.space, m.est, m.history, m.measured, rng};
  std::vector<Candidate> batch = m.strategy.propose(state, n);
  if (!m.seeds.empty()) {
    // The queued seeds first, the proposals after them up to n in all.
    std::unordered_set<std::string> lead;
    std::vector<Candidate> seeded;
    for (Candidate& c : m.seeds)
      if (!m.measured.count(c.json) && lead.insert(c.json).second && static_cast<int>(seeded.size()) < n)
        seeded.push_back(std::move(c));
    m.seeds.clear();
    for (Candidate& c : batch)
      if (static_cast<int>(seeded.size()) < n && !lead.count(c.json)) seeded.push_back(std::move(c));
    batch = std::move(seeded);
  }
  if (m.est && m.est->ready() && !batch.empty()) m.space.predict(*m.est, batch);
  res.propose_seconds += since(tp);
  if (batch.empty()) {
    if (opt.log) opt.log("tune " + m.label() + ": every program of the space is measured; stopping");
    return 0;
  }
  // A strategy may propose more than n programs: measured one at a time, a trial budget
  // stops the round at n, but a shared round sends them all at once.
  batch.resize(m.runner->start_round(batch.size(), n));
  for (const Candidate& c : batch)
    if (!m.measured.insert(c.json).second)
      throw InternalError("strategy " + m.strategy.name() + " proposed a measured program");
  RoundImpl round(m, std::move(batch), stop);
  const bool contested = m.runner->run(round);
  // Programs the budget left unmeasured may be proposed again.
  for (size_t i : round.unmeasured) m.measured.erase(round.batch[i].json);
  if (!contested) m.contests.round(m);
  res.curve.push_back({m.clock(), res.trials, res.best_latency_us});
  ++res.rounds;
  double acc = pairwise_accuracy(round.predicted, round.latency);
  if (acc >= 0) res.last_batch_accuracy = acc;
  m.update();
  if (opt.log) {
    double wall = m.clock();
    opt.log("tune " + m.label() + " [" + m.strategy.name() + "] round " + std::to_string(res.rounds) + ": " +
            std::to_string(res.trials) + (opt.budget.trials > 0 ? "/" + std::to_string(opt.budget.trials) : "") +
            " trials, best " +
            (res.best_latency_us > 0 ? fmt("%.1f us", res.best_latency_us) : std::string("none yet")) +
            ", batch accuracy " + (acc >= 0 ? fmt("%.2f", acc) : std::string("n/a")) + ", propose " +
            fmt("%.2f s", res.propose_seconds) + ", update " + fmt("%.2f s", res.update_seconds) + ", overhead " +
            fmt("%.1f%%", 100 * (1 - res.measure_seconds / wall)) +
            (res.confirmations > 0 ? ", " + std::to_string(res.confirmations) + " confirmations" : std::string()) +
            (res.disturbed > 0 ? ", " + std::to_string(res.disturbed) + " timings disturbed by another process (" +
                                     std::to_string(res.disturbed_kept) + " at every try)"
                               : std::string()));
  }
  return round.measured_now;
}

TuneResult tune_task(const ops::OpGraph& task, RecordStore& store, Strategy& strategy, models::Estimator* est,
                     const TuneOptions& opt) {
  opt.budget.require();
  TaskTuner tuner(task, store, strategy, est, opt);
  while (!tuner.done())
    if (tuner.round(opt.batch) == 0) break;
  tuner.settle();
  return tuner.result();
}

std::vector<TuneResult> tune_interleaved(const ops::OpGraph& task, const std::vector<Contender>& contenders,
                                         const TuneOptions& opt) {
  opt.budget.require();
  if (contenders.empty()) throw Error("give at least one strategy to tune with");
  std::vector<std::unique_ptr<TaskTuner>> tuners;
  for (const Contender& c : contenders) {
    if (!c.strategy || !c.store) throw InternalError("tune_interleaved: a contender without a strategy or records");
    for (const std::unique_ptr<TaskTuner>& t : tuners)
      if (&t->store() == c.store ||
          std::filesystem::weakly_canonical(t->store().path()) == std::filesystem::weakly_canonical(c.store->path()))
        throw Error("the " + c.strategy->name() + " strategy needs a records file of its own (" + c.store->path() +
                    " is another strategy's)");
    tuners.push_back(std::make_unique<TaskTuner>(task, *c.store, *c.strategy, c.estimator, opt));
  }
  // A round each, in turn, until every tuner is done or has nothing left to propose.
  std::vector<bool> running(tuners.size(), true);
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < tuners.size(); ++i) {
      if (!running[i]) continue;
      if (tuners[i]->done() || tuners[i]->round(opt.batch) == 0) {
        running[i] = false;
        continue;
      }
      any = true;
    }
  }
  std::vector<TuneResult> results;
  for (const std::unique_ptr<TaskTuner>& t : tuners) t->settle();
  for (const std::unique_ptr<TaskTuner>& t : tuners) results.push_back(t->result());
  return results;
}

}  // namespace basin::search
