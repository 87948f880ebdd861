#include "search/network.h"

#include <map>
#include <set>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <memory>

#include "core/util/hardware.h"
#include "core/util/host.h"
#include "models/estimator.h"
#include "search/tuner.h"

namespace basin::search {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct TaskState {
  std::unique_ptr<Strategy> strategy;
  std::unique_ptr<models::Estimator> est;
  std::unique_ptr<TaskTuner> tuner;
  double last_gain_us = 0;  // best latency improvement of the last round
  std::set<std::string> offered;  // its kin's programs that led a round of it
  int rounds = 0;
  bool retired = false;
};

}  // namespace

double constant_bytes(const graph::Partition& p) {
  if (p.run_constant_bytes >= 0) return p.run_constant_bytes;
  double bytes = 0;
  for (const graph::NetworkTask& t : p.tasks)
    for (int i : t.constant_inputs) {
      const te::Tensor& x = t.graph.inputs.at(static_cast<size_t>(i));
      bytes += static_cast<double>(t.weight) * static_cast<double>(x.numel()) * x.dtype().bytes();
    }
  return bytes;
}

bool weights_exceed_cache(const graph::Partition& p) {
  const double bytes = constant_bytes(p);
  // Under half of the smallest cache the probe finds (1 MiB), without probing.
  return bytes > 0.5 * static_cast<double>(int64_t{1} << 20) &&
         bytes > 0.5 * static_cast<double>(effective_cache_bytes());
}

double settle_reserve_seconds(const std::vector<const TuneResult*>& tasks, int settle_programs, int confirm,
                              double budget_seconds) {
  if (settle_programs < 2 || confirm <= 0 || budget_seconds <= 0) return 0;
  double s = 0;
  for (const TuneResult* r : tasks) {
    const int n = r->measured + r->confirmations + r->best_remeasurements;
    if (r->measured > 0 && n > 0) s += settle_programs * confirm * r->measure_seconds / n;
  }
  return std::min(s, 0.1 * budget_seconds);
}

// The programs of every task's first round together, when NetworkTuneOptions::first_batch
// is automatic.
constexpr int kFirstRoundPrograms = 256;
// Proposals the family sweep adds for a task tuned by little more than its first round.
constexpr int kSweepProposals = 4;
// A first round given once the budget is spent compiles at most this many programs.
constexpr int kLateFirstBatch = 4;

NetworkTuneResult tune_network(const graph::Partition& p, RecordStore& store, const NetworkTuneOptions& opt) {
  opt.budget.require();
  if (opt.task.batch <= 0) throw Error("the batch size must be positive");
  if (opt.first_batch < 0) throw Error("the first round's batch size must be positive (or 0: automatic)");
  const int first_batch =
      opt.first_batch > 0
          ? std::min(opt.task.batch, opt.first_batch)
          : std::min(opt.task.batch,
                     std::max(4, kFirstRoundPrograms / std::max<int>(1, static_cast<int>(p.tasks.size()))));
  const auto t0 = Clock::now();
  using WeightsTiming = NetworkTuneOptions::WeightsTiming;
  const bool asked = opt.weights_timing == WeightsTiming::Cold;
  const bool cold =
      opt.task.target == "llvm" && (asked || (opt.weights_timing == WeightsTiming::Auto && weights_exceed_cache(p)));
  if (cold && opt.task.log) {
    char line[200];
    if (asked)
      std::snprintf(line, sizeof line, "network: programs timed with their %.0f MB of weights evicted, as asked",
                    constant_bytes(p) / 1e6);
    else
      std::snprintf(line, sizeof line,
                    "network: programs timed with their %.0f MB of weights evicted, which exceed half the "
                    "last-level cache (%.0f MiB measured, %.0f MiB reported)",
                    constant_bytes(p) / 1e6, static_cast<double>(effective_cache_bytes()) / (1 << 20),
                    static_cast<double>(last_level_cache_bytes()) / (1 << 20));
    opt.task.log(line);
  }
  // Estimators a family of tasks shares (destroyed after the tasks' tuners).
  std::vector<std::unique_ptr<models::Estimator>> family_owned;
  std::vector<TaskState> tasks(p.tasks.size());
  for (TaskState& t : tasks) t.strategy = make_strategy(opt.strategy);
  // One estimator per task (each task's updates fine-tune its own), the file read once.
  const std::string spec = opt.make_estimator                        ? ""
                           : !opt.estimator.empty() || tasks.empty() ? opt.estimator
                                                                     : tasks[0].strategy->default_estimator();
  std::vector<std::unique_ptr<models::Estimator>> estimators;
  if (!spec.empty()) estimators = models::estimators_for_target(spec, opt.task.target, static_cast<int>(tasks.size()));
  if (!opt.estimator_family.empty() && opt.estimator_family.size() != p.tasks.size())
    throw InternalError("tune_network: estimator families for " + std::to_string(opt.estimator_family.size()) + " of " +
                        std::to_string(p.tasks.size()) + " tasks");
  std::map<std::string, models::Estimator*> family_estimator;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    TaskState& t = tasks[i];
    if (opt.make_estimator) t.est = opt.make_estimator(i);
    else if (!spec.empty()) t.est = std::move(estimators[i]);
    models::Estimator* est = t.est.get();
    if (!opt.make_estimator && est && !opt.estimator_family.empty() && !opt.estimator_family[i].empty()) {
      auto [it, first] = family_estimator.emplace(opt.estimator_family[i], est);
      if (first) family_owned.push_back(std::move(t.est));
      else est = it->second;
      t.est.reset();
    }
    TuneOptions to = opt.task;
    to.seed = opt.task.seed + i;
    to.budget = {};  // the scheduler's budget, not the task's
    to.progress = nullptr;
    to.label = "task " + std::to_string(i) + " " + p.tasks[i].label + " x" + std::to_string(p.tasks[i].weight);
    to.constant_inputs = p.tasks[i].constant_inputs;
    to.precision = sched::task_precision(opt.task.precision, p.tasks[i].writes_output);
    to.cold_constants = cold;
    if (opt.task_options) opt.task_options(i, to);
    t.tuner = std::make_unique<TaskTuner>(p.tasks[i].graph, store, *t.strategy, est, to);
  }
  const double setup_seconds = since(t0);
  auto total_trials = [&] {
    int n = 0;
    for (TaskState& t : tasks) n += t.tuner->result().trials;
    return n;
  };
  auto estimate = [&] {
    double s = 0;
    for (size_t i = 0; i < tasks.size(); ++i) {
      double b = tasks[i].tuner->result().best_latency_us;
      if (b <= 0) return 0.0;
      s += p.tasks[i].weight * b;
    }
    return s;
  };
  NetworkTuneResult res;
  res.resumed = total_trials();
  // The settling contests come out of a seconds budget (settle_reserve_seconds): the
  // rounds end this much before it, the estimate renewed after each round. On
  // efficientnet_b0 at 60 s, 70 tasks settling after the budget took 14 s more.
  double settle_reserve = 0;
  auto renew_settle_reserve = [&] {
    std::vector<const TuneResult*> rs;
    for (TaskState& t : tasks) rs.push_back(&t.tuner->result());
    settle_reserve = settle_reserve_seconds(rs, opt.task.settle_programs, opt.task.confirm, opt.budget.seconds);
  };
  auto out_of_budget = [&] {
    if (res.stopped || (opt.stop && opt.stop())) return res.stopped = true;
    return opt.budget.spent(total_trials(), since(t0) + settle_reserve);
  };
  res.curve.push_back({0, res.resumed, estimate()});
  // Every task gets a first round (in order), unless the file already has programs of it.
  std::vector<size_t> warm;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (tasks[i].tuner->result().best_latency_us <= 0) warm.push_back(i);
  size_t next_warm = 0;
  const std::vector<std::vector<size_t>> kin =
      opt.kin_seeds > 0 ? kin_tasks(p, static_cast<int>(p.tasks.size())) : std::vector<std::vector<size_t>>(tasks.size());
  // The best programs of task i's kin_seeds nearest kin that have one: (kin, its
  // config, valid until the kin's next round).
  auto kin_programs = [&](size_t i) {
    std::vector<std::pair<size_t, const std::string*>> out;
    for (size_t j : kin[i]) {
      if (static_cast<int>(out.size()) >= opt.kin_seeds) break;
      const TuneResult& r = tasks[j].tuner->result();
      if (r.best) out.emplace_back(j, &r.best->config);
    }
    return out;
  };
  // The tasks' indices, the heaviest (weight x best latency) first, ties in task order.
  auto heaviest_first = [&] {
    std::vector<double> load(tasks.size());
    for (size_t j = 0; j < tasks.size(); ++j)
      load[j] = static_cast<double>(p.tasks[j].weight) * std::max(0.0, tasks[j].tuner->result().best_latency_us);
    std::vector<size_t> order(tasks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return load[a] > load[b]; });
    return order;
  };
  // The family sweep (NetworkTuneOptions::family_sweep): once the first rounds are done
  // and what is left of the budget is the sweep's share, each task of a family measures
  // the best programs of up to three others fitted to its extents (TaskTuner::seed): the
  // nearest tasks before and after it (a range's tasks are in the order of their
  // buckets' extents) with more trials, and the family's task of most trials. The budget
  // goes where the weighted latency gains most, so a shape range's short buckets keep
  // little more than their first round; the long buckets' tuned programs are their
  // cheapest next step, and the family's estimator, taught by the long buckets' tasks,
  // proposes a few more (kSweepProposals).
  bool swept = opt.estimator_family.empty() || opt.family_sweep <= 0;
  auto sweep_due = [&] {
    if (swept || next_warm < warm.size()) return false;
    return opt.budget.share(1 - opt.family_sweep).spent(total_trials(), since(t0));
  };
  // A task that has not had its first round gets it even once the budget's seconds are
  // spent (unless the run is stopped, or its trials are spent: a budget of trials is
  // exact): a round whose stop is due measures until the task has a valid program
  // (TaskTuner::round), so that every task can be compiled. Earlier first rounds overrun
  // their slices by what a slice's compilations take (a loaded machine, a GPU's
  // compiler); the last tasks had none.
  auto first_rounds_left = [&] {
    if (next_warm >= warm.size() || res.stopped || opt.budget.trials_left(total_trials()) == 0) return false;
    if (opt.stop && opt.stop()) {
      res.stopped = true;
      return false;
    }
    return true;
  };
  while (!out_of_budget() || first_rounds_left()) {
    if (sweep_due()) {
      swept = true;
      int seeded = 0, measured = 0;
      // Each task's trials and best program as the sweep starts (what it offers the others).
      std::vector<int> trials(tasks.size());
      std::vector<std::string> best(tasks.size());
      for (size_t j = 0; j < tasks.size(); ++j) {
        const TuneResult& r = tasks[j].tuner->result();
        trials[j] = r.trials;
        if (r.best) best[j] = r.best->config;
      }
      // The heaviest tasks first, so that a sweep the budget cuts short has served the
      // tasks that matter most.
      for (size_t i : heaviest_first()) {
        if (out_of_budget()) break;
        const std::string& fam = opt.estimator_family[i];
        if (fam.empty()) continue;
        int below = -1, above = -1, most = -1;
        for (size_t j = 0; j < tasks.size(); ++j) {
          if (j == i || opt.estimator_family[j] != fam || best[j].empty()) continue;
          if (j < i && trials[j] > trials[i]) below = static_cast<int>(j);
          if (j > i && trials[j] > trials[i] && above < 0) above = static_cast<int>(j);
          if (most < 0 || trials[j] > trials[static_cast<size_t>(most)]) most = static_cast<int>(j);
        }
        std::vector<std::string> configs;
        for (int j : {below, above, most})
          if (j >= 0) configs.push_back(best[static_cast<size_t>(j)]);
        const int q = tasks[i].tuner->seed(configs);
        // A task that has had little more than its first round also measures the
        // proposals of its family's estimator, which the other tasks have taught since.
        const int more = trials[i] <= 2 * first_batch ? kSweepProposals : 0;
        if (q + more == 0) continue;
        seeded += q + more;
        measured += tasks[i].tuner->round(q + more, out_of_budget);
      }
      if (opt.task.log && seeded > 0)
        opt.task.log("network: family sweep: " + std::to_string(measured) + " of " + std::to_string(seeded) +
                     " programs (other extents' best, the family's proposals) measured");
      res.curve.push_back({since(t0), total_trials(), estimate()});
      if (opt.progress) opt.progress(total_trials(), opt.budget.trials, since(t0), estimate());
      continue;
    }
    int pick = -1;
    int batch = opt.task.batch;
    // A first round ends by its task's share of what is left of the budget, so that a
    // budget too small for every task's full first round (a GPU's compilations, a
    // network of many tasks) still leaves each task a measured program.
    std::function<bool()> round_stop = out_of_budget;
    if (next_warm < warm.size()) {
      const int remaining = static_cast<int>(warm.size() - next_warm);
      pick = static_cast<int>(warm[next_warm++]);
      batch = first_batch;
      batch = std::min(batch, std::max(1, opt.budget.trials_left(total_trials()) / remaining));
      if (out_of_budget()) batch = std::min(batch, kLateFirstBatch);
      if (opt.budget.seconds > 0) {
        const double deadline = since(t0) + opt.budget.seconds_left(since(t0) + settle_reserve) / remaining;
        round_stop = [&out_of_budget, &t0, deadline] { return out_of_budget() || since(t0) >= deadline; };
      }
    } else {
      // Each task's best and trials as this pick starts (a kin's latency is read once per pick).
      std::vector<double> best_us(tasks.size());
      std::vector<int> trials(tasks.size());
      for (size_t i = 0; i < tasks.size(); ++i) {
        const TuneResult& r = tasks[i].tuner->result();
        best_us[i] = r.best_latency_us;
        trials[i] = r.trials;
      }
      double best_priority = -1;
      bool kin_led = false;
      for (size_t i = 0; i < tasks.size(); ++i) {
        TaskState& t = tasks[i];
        if (t.retired) continue;
        double priority;
        bool led = false;
        if (best_us[i] <= 0) {
          priority = 1e30;  // no valid program yet: first in line until retired
        } else {
          double optimistic = best_us[i] / (2.0 * (t.rounds + 1));
          // A kin's best program the task has not been offered, whose latency scaled by
          // the tasks' flops is below the task's best, promises that difference.
          double kin_gain = 0;
          for (const auto& [j, config] : kin_programs(i))
            if (!t.offered.count(*config) && p.tasks[i].flops > 0 && p.tasks[j].flops > 0)
              kin_gain = std::max(kin_gain, best_us[i] - best_us[j] * p.tasks[i].flops / p.tasks[j].flops);
          led = kin_gain > std::max(t.last_gain_us, optimistic);
          priority = p.tasks[i].weight * std::max({t.last_gain_us, optimistic, kin_gain});
        }
        if (priority > best_priority) {
          best_priority = priority;
          pick = static_cast<int>(i);
          kin_led = led;
        }
      }
      // A round for what the kin found is a first round's size: it measures their
      // programs and a few of the task's own.
      if (kin_led) batch = std::min(batch, first_batch);
      // A round measures at most twice the programs its task has measured, so that the
      // rounds after a first round grow from its size to the batch: the tasks' second
      // rounds come early, and a first minute reaches more of them (efficientnet_b0's
      // 60 s networks: 5.68 and 5.66 ms with rounds of 8 after the first 4, 5.89 with 16).
      if (pick >= 0) batch = std::min(batch, std::max(first_batch, 2 * trials[static_cast<size_t>(pick)]));
    }
    if (pick < 0) break;  // every task retired
    TaskState& t = tasks[pick];
    if (opt.kin_seeds > 0) {
      std::vector<std::string> configs;
      for (const auto& [j, config] : kin_programs(static_cast<size_t>(pick)))
        if (t.offered.insert(*config).second) configs.push_back(*config);
      res.kin_seeded += t.tuner->seed(configs);
    }
    double before = t.tuner->result().best_latency_us;
    int n = t.tuner->round(std::min(batch, std::max(opt.budget.trials_left(total_trials()), 1)), round_stop);
    ++t.rounds;
    renew_settle_reserve();
    double after = t.tuner->result().best_latency_us;
    t.last_gain_us = before > 0 && after > 0 ? before - after : 0;
    if (n == 0) t.retired = true;
    if (after <= 0 && t.rounds >= 3) {
      t.retired = true;
      if (opt.task.log)
        opt.task.log("network: task " + std::to_string(pick) + " (" + p.tasks[pick].label +
                     ") has no valid program after 3 rounds; retired");
    }
    res.curve.push_back({since(t0), total_trials(), estimate()});
    if (opt.progress) opt.progress(total_trials(), opt.budget.trials, since(t0), estimate());
  }
  // Each task's fastest programs side by side, the heaviest tasks (weight x best
  // latency) first while a seconds budget lasts (a task left unsettled keeps its
  // confirmed best); the final estimate follows (not when stopped: the user wants the
  // run over now).
  if (!res.stopped)
    for (size_t i : heaviest_first()) {
      if (opt.budget.seconds > 0 && since(t0) >= opt.budget.seconds) break;
      if (opt.stop && opt.stop()) break;
      tasks[i].tuner->settle();
    }
  res.curve.push_back({since(t0), total_trials(), estimate()});
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TuneResult& r = tasks[i].tuner->result();
    TaskReport tr;
    tr.key = p.tasks[i].key;
    tr.label = p.tasks[i].label;
    tr.weight = p.tasks[i].weight;
    tr.trials = r.trials;
    tr.resumed = r.resumed;
    tr.measured = r.measured;
    tr.errors = r.errors;
    tr.rounds = r.rounds;
    tr.best_us = r.best_latency_us;
    tr.retired = tasks[i].retired;
    tr.settled = r.settled;
    res.measured += r.measured;
    res.disturbed += r.disturbed;
    res.disturbed_kept += r.disturbed_kept;
    res.measure_seconds += r.measure_seconds;
    res.wait_seconds += r.wait_seconds;
    res.propose_seconds += r.propose_seconds;
    res.update_seconds += r.update_seconds;
    res.tasks.push_back(tr);
  }
  if (res.disturbed > 0 && opt.task.log)
    opt.task.log("network: " + std::to_string(res.disturbed) +
                 " timings were disturbed by another process sharing the cores and timed again; " +
                 std::to_string(res.disturbed_kept) +
                 " programs were disturbed at every try (their latencies are too high): tune on a quiet machine");
  res.trials = total_trials();
  res.seconds = since(t0);
  res.setup_seconds = setup_seconds;
  res.overhead_fraction = res.seconds > 0 ? 1 - res.measure_seconds / res.seconds : 0;
  res.estimated_latency_us = estimate();
  return res;
}

graph::Partition merge_partitions(const std::vector<const graph::Partition*>& parts,
                                  const std::vector<int64_t>& scale) {
  graph::Partition p;
  p.run_constant_bytes = 0;
  for (const graph::Partition* part : parts)
    p.run_constant_bytes = std::max(p.run_constant_bytes, constant_bytes(*part));
  std::map<std::string, size_t> at;
  for (size_t n = 0; n < parts.size(); ++n)
    for (graph::NetworkTask t : parts[n]->tasks) {
      if (!scale.empty()) t.weight = static_cast<int>(std::min<int64_t>(t.weight * scale.at(n), int64_t{1} << 30));
      auto [it, fresh] = at.emplace(t.key, p.tasks.size());
      if (fresh) {
        p.tasks.push_back(t);
        continue;
      }
      graph::NetworkTask& m = p.tasks[it->second];
      m.weight += t.weight;
      m.writes_output = m.writes_output || t.writes_output;
      m.flops += t.flops;
      std::set<int> both;
      for (int i : m.constant_inputs)
        if (t.constant_inputs.count(i)) both.insert(i);
      m.constant_inputs = both;
    }
  return p;
}

namespace {

// `s` with every run of digits replaced by what `replace` returns for it.
template <class Replace>
std::string map_numbers(const std::string& s, Replace replace) {
  std::string out;
  for (size_t a = 0; a < s.size();) {
    if (!std::isdigit(static_cast<unsigned char>(s[a]))) {
      out += s[a++];
      continue;
    }
    size_t b = a;
    while (b < s.size() && std::isdigit(static_cast<unsigned char>(s[b]))) ++b;
    out += replace(s.substr(a, b - a));
    a = b;
  }
  return out;
}

}  // namespace

std::vector<std::string> range_families(const graph::Partition& p, const std::set<int64_t>& extents) {
  std::vector<std::string> out;
  for (const graph::NetworkTask& t : p.tasks)
    out.push_back(map_numbers(t.label, [&](const std::string& num) {
      return num.size() < 12 && extents.count(std::stoll(num)) ? std::string("#") : num;
    }));
  return out;
}

std::vector<std::vector<size_t>> kin_tasks(const graph::Partition& p, int most) {
  const size_t n = p.tasks.size();
  std::vector<std::string> form(n);
  std::vector<std::vector<double>> numbers(n);
  for (size_t i = 0; i < n; ++i)
    form[i] = map_numbers(p.tasks[i].key, [&](const std::string& num) {
      numbers[i].push_back(std::log1p(std::strtod(num.c_str(), nullptr)));
      return std::string("#");
    });
  std::vector<std::vector<size_t>> out(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::pair<double, size_t>> near;
    for (size_t j = 0; j < n; ++j) {
      if (j == i || form[j] != form[i]) continue;
      double d = 0;
      for (size_t x = 0; x < numbers[i].size(); ++x) d += std::fabs(numbers[i][x] - numbers[j][x]);
      near.emplace_back(d, j);
    }
    std::sort(near.begin(), near.end());
    for (size_t x = 0; x < near.size() && static_cast<int>(x) < most; ++x) out[i].push_back(near[x].second);
  }
  return out;
}

std::vector<codegen::ProgramChoice> choose_programs(const graph::Partition& p, const RecordStore* store,
                                                    const std::string& target, std::vector<int>* untuned,
                                                    const std::string& precision) {
  std::vector<codegen::ProgramChoice> out;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const graph::NetworkTask& t = p.tasks[i];
    std::vector<sched::Sketch> sketches =
        sched::sketches_for(t.graph, target, sched::task_precision(precision, t.writes_output));
    std::set<std::string> names;
    for (const sched::Sketch& s : sketches) names.insert(s.name);
    codegen::ProgramChoice c;
    std::optional<Record> best = store ? store->best(t.key, target, &names) : std::nullopt;
    if (best) {
      const sched::Sketch* s = nullptr;
      c.config = sched::config_from_json(best->config, sketches, store->path(), &s);
      c.sketch = s->name;
      c.tuned = true;
    } else {
      const sched::Sketch& s = sketches.at(sched::default_sketch(sketches));
      c.sketch = s.name;
      c.config = sched::default_config(s);
      if (untuned) untuned->push_back(static_cast<int>(i));
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace basin::search
