// `basin tune-op`: tune one operator with a search strategy (search/tuner.h), every
// measured program going to the records file; a run restarted on the same file
// resumes. With --compare, the best program and LibTorch's kernel are timed again with
// the full protocol in the same run.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "codegen/measure.h"
#include "codegen/op_check.h"
#include "codegen/torch_reference.h"
#include "core/schedule/sketch.h"
#include "core/util/blas.h"
#include "core/util/error.h"
#include "core/util/parse.h"
#include "models/calibrate.h"
#include "models/estimator.h"
#include "search/tuner.h"
#include "tools/commands.h"
#include "tools/ranks.h"

namespace basin::tools {

// "90", "90s", "5m", "1.5h" -> seconds.
double parse_duration(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw ParseError("--budget: '" + text + "' is not a duration (90, 90s, 5m, 1h)");
  }
  std::string unit = text.substr(used);
  static const std::map<std::string, double> units = {{"", 1}, {"s", 1}, {"m", 60}, {"min", 60}, {"h", 3600}};
  auto it = units.find(unit);
  if (it == units.end() || !(v > 0) || !std::isfinite(v))
    throw ParseError("--budget: '" + text + "' is not a positive duration (90, 90s, 5m, 1h)");
  // At most a year: a larger figure (1e306h) would overflow the clock's arithmetic.
  if (v * it->second > 365.0 * 24 * 3600) throw ParseError("--budget: '" + text + "' is longer than a year");
  return v * it->second;
}

// The progress bar, on stderr when it is a terminal.
std::function<void(const std::string&)> tuning_log(bool quiet, bool bar) {
  if (quiet) return nullptr;
  return [bar](const std::string& line) { std::cerr << (bar ? "\r\033[K" : "") << "basin: " << line << "\n"; };
}

void add_compile_options(CLI::App* cmd, int& compile_threads, int64_t& max_instructions) {
  cmd->add_option("--compile-threads", compile_threads,
                  "threads that compile each batch before it is timed (default: every core; 1: none ahead)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-instructions", max_instructions,
                  "a program emitted with more LLVM instructions is an error, not compiled (default " +
                      std::to_string(codegen::kMaxInstructions) + "; 0: no limit)")
      ->check(CLI::NonNegativeNumber);
}

void add_slow_factor_option(CLI::App* cmd, double& slow_factor) {
  cmd->add_option("--slow-factor", slow_factor,
                  "a new program slower than F times the fastest so far is timed by its check run and one call, "
                  "not in full rounds (default 2; 0: every program in full; else 1 to 1e6)")
      ->check([](const std::string& v) {
        double f = 0;
        try {
          f = std::stod(v);
        } catch (const std::exception&) {
          return std::string("not a number: ") + v;
        }
        return search::valid_slow_factor(f) ? std::string() : std::string("0 (off) or 1 to 1e6");
      });
}

void add_timeout_option(CLI::App* cmd, double& timeout) {
  cmd->add_option("--timeout", timeout,
                  "seconds allowed per candidate: compile, check and time (default 10; 0.01 to 3600)")
      ->check([](const std::string& v) {
        double t = 0;
        size_t used = 0;
        try {
          t = std::stod(v, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != v.size()) return std::string("not a number: ") + v;
        // Below 10 ms no program compiles in time: every one would be recorded as a timeout.
        return std::isfinite(t) && t >= 0.01 && t <= 3600 ? std::string() : std::string("0.01 to 3600 seconds");
      });
}

namespace {
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) {
  g_interrupted = 1;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}
}  // namespace

InterruptStops::InterruptStops() {
  g_interrupted = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_);
}
InterruptStops::~InterruptStops() { sigaction(SIGINT, &old_, nullptr); }
bool InterruptStops::interrupted() { return g_interrupted != 0; }

void draw_progress(int done, int total, double seconds, double best_us) {
  char line[160];
  if (total > 0) {
    const int width = 30, filled = std::min(width, done * width / std::max(total, 1));
    std::snprintf(line, sizeof line, "\r[%s%s] %d/%d trials  %.0f s  best %.1f us ", std::string(filled, '#').c_str(),
                  std::string(width - filled, ' ').c_str(), done, total, seconds, best_us);
  } else {
    std::snprintf(line, sizeof line, "\r%d trials  %.0f s  best %.1f us ", done, seconds, best_us);
  }
  std::cerr << line << std::flush;
}

namespace {

struct TuneOpOptions {
  std::string name, workload, target = "llvm", precision, strategy, records, estimator, budget;
  std::vector<std::string> params;
  int trials = 0, batch = 32, confirm = 2, compile_threads = 0;
  uint64_t seed = 1;
  int64_t max_instructions = codegen::kMaxInstructions;
  double timeout = 10, stop_at = 0, slow_factor = 2;
  bool compare = false, json = false, quiet = false, no_calibrate = false;
};

// "gradient,annealing" -> {"gradient", "annealing"}.
std::vector<std::string> split_strategies(const std::string& list) {
  std::vector<std::string> names;
  for (std::string& name : split_list(list))
    if (!name.empty()) names.push_back(std::move(name));
  return names;
}

// With several strategies, each has a records file of its own: runs.db ->
// runs.gradient.db (the strategy's name before the file name's extension).
std::string records_of(const std::string& path, const std::string& strategy) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1))
    return path + "." + strategy;
  return path.substr(0, dot) + "." + strategy + path.substr(dot);
}

// One strategy's run: what it tunes with, and then what it found.
struct Run {
  std::unique_ptr<search::Strategy> strategy;
  std::string spec;  // the estimator as named ("" : none)
  std::unique_ptr<models::Estimator> est;
  std::string records;
  std::unique_ptr<search::RecordStore> store;
  search::TuneResult result;
  nlohmann::json json;
};

nlohmann::json result_json(const TuneOpOptions& o, const ops::OpGraph& g, const Run& run) {
  const search::TuneResult& r = run.result;
  nlohmann::json j = {{"op", g.op},
                      {"task", r.task_key},
                      {"target", o.target},
                      {"precision", o.precision},
                      {"strategy", r.strategy},
                      {"estimator", run.spec.empty() ? "none" : run.spec},
                      {"estimator_file", models::estimator_file(run.spec, o.target)},
                      {"records", run.records},
                      {"seed", o.seed},
                      {"trials", r.trials},
                      {"resumed", r.resumed},
                      {"other_host_records", r.other_host},
                      {"other_codegen_records", r.other_codegen},
                      {"measured", r.measured},
                      {"errors", r.errors},
                      {"rounds", r.rounds},
                      {"confirmations", r.confirmations},
                      {"best_remeasurements", r.best_remeasurements},
                      {"settled", r.settled},
                      {"search_seconds", r.seconds},
                      {"measure_seconds", r.measure_seconds},
                      {"compile_seconds", r.compile_seconds},
                      {"measured_ahead", r.measured_ahead},
                      {"brief", r.brief},
                      {"disturbed", r.disturbed},
                      {"disturbed_kept", r.disturbed_kept},
                      {"propose_seconds", r.propose_seconds},
                      {"update_seconds", r.update_seconds},
                      {"updates", r.updates},
                      {"overhead_fraction", r.overhead_fraction},
                      {"flops", g.flops}};
  if (!o.workload.empty()) j["workload"] = o.workload;
  if (r.last_batch_accuracy >= 0) j["last_batch_accuracy"] = r.last_batch_accuracy;
  nlohmann::json curve = nlohmann::json::array();
  for (const search::CurvePoint& p : r.curve) curve.push_back({p.seconds, p.trials, p.best_us});
  j["curve"] = curve;
  nlohmann::json bests = nlohmann::json::array();
  for (const search::BestChange& b : r.bests)
    bests.push_back({{"seconds", b.seconds},
                     {"trials", b.trials},
                     {"record_id", b.record_id},
                     {"config", nlohmann::json::parse(b.config)},
                     {"latency_us", b.latency_us}});
  j["bests"] = bests;
  if (r.best) {
    j["best_latency_us"] = r.best->latency_us();
    j["best_config"] = nlohmann::json::parse(r.best->config);
    j["gflops"] = g.flops / (r.best->latency_us() * 1e-6) / 1e9;
  } else {
    j["best_latency_us"] = nullptr;
  }
  return j;
}

// --compare: each run's best program timed again with the full protocol (the runs in
// turn), then LibTorch's kernel, in this process.
void compare(const ops::OpGraph& g, std::vector<Run>& runs) {
  std::vector<sched::Sketch> sketches = sched::cpu_sketches(g);
  codegen::MeasureOptions mo;
  mo.timing = codegen::TimingOptions::full();
  mo.timeout_seconds = 120;
  std::unique_ptr<codegen::MeasurePool> pool;
  for (Run& run : runs) {
    if (!run.result.best) continue;
    if (!pool) pool = std::make_unique<codegen::MeasurePool>(g, sketches, mo);
    const sched::Sketch* s = nullptr;
    sched::Config c = sched::config_from_json(run.result.best->config, sketches, run.records, &s);
    codegen::MeasureResult m = pool->measure_one({&pool->sketches()[static_cast<size_t>(s - sketches.data())], c});
    if (!m.ok())
      throw Error("the " + run.result.strategy + " strategy's best program failed when timed again: " + m.error);
    run.json["final_latency_us"] = m.min_us();
  }
  // The same protocol for both (BENCHMARKS.md): full timing, the peer on basin's threads.
  const int threads = codegen::match_torch_threads();
  codegen::Timing t = codegen::time_torch_reference(g, codegen::random_inputs(g, 1), codegen::TimingOptions::full());
  for (Run& run : runs) {
    run.json["torch_latency_us"] = t.min_us;
    run.json["torch_threads"] = threads;
    run.json["torch_blas_core"] = blas_core();
    if (run.json.contains("final_latency_us"))
      run.json["speedup_vs_torch"] = t.min_us / run.json["final_latency_us"].get<double>();
  }
}

void print_run(const TuneOpOptions& o, const Run& run) {
  const search::TuneResult& r = run.result;
  const nlohmann::json& j = run.json;
  std::printf("task               %s\n", r.task_key.c_str());
  const std::string file = j["estimator_file"].get<std::string>();
  std::printf("strategy           %s (estimator %s%s), seed %llu\n", r.strategy.c_str(),
              run.spec.empty() ? "none" : run.spec.c_str(),
              file.empty() || file == run.spec ? "" : (": " + file).c_str(), static_cast<unsigned long long>(o.seed));
  std::printf("trials             %d (%d resumed from %s, %d failed in this run, %d timed briefly as slow)\n", r.trials,
              r.resumed, run.records.c_str(), r.errors, r.brief);
  if (r.disturbed > 0)
    std::printf("disturbed          %d timings repeated as another process took the cores, %d programs at every try: "
                "the machine was not quiet\n",
                r.disturbed, r.disturbed_kept);
  if (r.best)
    std::printf("best latency       %.2f us  (%.1f GFLOP/s)\n", r.best->latency_us(), j["gflops"].get<double>());
  else std::printf("best latency       none: no program ran successfully\n");
  if (j.contains("final_latency_us"))
    std::printf("timed again        %.2f us (full protocol)\n", j["final_latency_us"].get<double>());
  if (j.contains("torch_latency_us"))
    std::printf("LibTorch           %.2f us%s\n", j["torch_latency_us"].get<double>(),
                j.contains("speedup_vs_torch")
                    ? ("  (speedup " + std::to_string(j["speedup_vs_torch"].get<double>()) + ")").c_str()
                    : "");
  std::printf(
      "time               %.1f s (compile and measure %.1f s, propose %.1f s, estimator %.1f s; overhead %.1f%%)\n",
      r.seconds, r.measure_seconds, r.propose_seconds, r.update_seconds, 100 * r.overhead_fraction);
  if (r.best) std::printf("best configuration %s\n", r.best->config.c_str());
}

int run_tune_op(const TuneOpOptions& o) {
  check_precision_option(o.target, o.precision, false);
  if ((o.trials > 0) == !o.budget.empty()) throw ParseError("give one budget: --trials N or --budget T");
  if (o.trials < 0) throw ParseError("--trials must be positive");
  if (o.batch <= 0 || o.batch > kMaxBatch)
    throw ParseError("--batch must be positive, at most " + std::to_string(kMaxBatch));
  if (o.confirm < 0 || o.confirm > search::TuneOptions::kMaxConfirm)
    throw ParseError("--confirm must be 0 to " + std::to_string(search::TuneOptions::kMaxConfirm));
  const double budget_seconds = o.budget.empty() ? 0 : parse_duration(o.budget);  // before any file is made
  if (o.no_calibrate) models::set_use_calibration(false);
  if (o.compare && o.target == "cuda")
    throw ParseError(
        "--compare times the peer on the CPU; on the GPU, bench/gpu_ops.py compares against PyTorch's CUDA kernels");
  const std::vector<std::string> strategies = split_strategies(o.strategy);
  const bool several = strategies.size() > 1;
  for (size_t i = 0; i < strategies.size(); ++i)
    for (size_t k = 0; k < i; ++k)
      if (strategies[i] == strategies[k]) throw ParseError("--strategy names " + strategies[i] + " twice");
  if (several && !o.estimator.empty())
    throw ParseError(
        "--estimator names one estimator; with several strategies each tunes with its default "
        "(ensemble for gradient and evolutionary, gbt for annealing, none for random)");
  ops::OpGraph g = op_from_args(o.name, o.workload, o.params);
  // Under mpirun, the other ranks measure for rank 0 (docs/distributed.md).
  Ranks ranks = start_ranks(o.quiet);
  if (ranks.worker()) return ranks.serve();
  if (ranks.cluster && several)
    throw ParseError("a run on several ranks tunes with one strategy (--strategy names " +
                     std::to_string(strategies.size()) + ")");
  std::vector<Run> runs(strategies.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    Run& run = runs[i];
    run.strategy = search::make_strategy(strategies[i]);
    run.spec = o.estimator.empty() ? run.strategy->default_estimator() : o.estimator;
    run.est = run.spec.empty() ? nullptr : models::estimator_for_target(run.spec, o.target);
    run.records = several ? records_of(o.records, strategies[i]) : o.records;
    run.store = std::make_unique<search::RecordStore>(run.records);
  }

  search::TuneOptions to;
  to.target = o.target;
  to.precision = o.precision;
  to.budget = {o.trials, budget_seconds};
  to.batch = o.batch;
  to.seed = o.seed;
  to.timeout_seconds = o.timeout;
  to.compile_threads = o.compile_threads;
  to.max_instructions = o.max_instructions;
  to.slow_factor = o.slow_factor;
  to.stop_at_us = o.stop_at;
  to.confirm = o.confirm;
  to.label = o.workload.empty() ? sched::task_key(g) : o.workload;
  to.cluster = ranks.cluster.get();
  // One progress bar follows one run; interleaved runs log their rounds.
  const bool bar = !o.quiet && !several && isatty(STDERR_FILENO);
  to.log = tuning_log(o.quiet, bar);
  if (bar) to.progress = draw_progress;
  if (several) {
    std::vector<search::Contender> contenders;
    for (Run& run : runs) contenders.push_back({run.strategy.get(), run.est.get(), run.store.get()});
    std::vector<search::TuneResult> results = search::tune_interleaved(g, contenders, to);
    for (size_t i = 0; i < runs.size(); ++i) runs[i].result = std::move(results[i]);
  } else {
    runs[0].result = search::tune_task(g, *runs[0].store, *runs[0].strategy, runs[0].est.get(), to);
  }
  if (bar) std::cerr << "\r\033[K" << std::flush;
  for (Run& run : runs) run.json = result_json(o, g, run);
  const search::TuneResult& first = runs[0].result;
  ranks.report(runs[0].json, first.measured, first.measure_seconds - first.wait_seconds, o.quiet);
  if (o.compare) compare(g, runs);

  if (o.json) {
    if (several) {
      nlohmann::json j = {{"interleaved", true}, {"runs", nlohmann::json::array()}};
      for (const Run& run : runs) j["runs"].push_back(run.json);
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << runs[0].json.dump(2) << "\n";
    }
  } else {
    for (size_t i = 0; i < runs.size(); ++i) {
      if (i > 0) std::printf("\n");
      print_run(o, runs[i]);
    }
  }
  for (const Run& run : runs)
    if (!run.result.best) return 4;
  return 0;
}

}  // namespace

void add_tune_op_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<TuneOpOptions>();
  auto* cmd = app.add_subcommand("tune-op", "tune one operator with a search strategy; resumable from its records");
  cmd->add_option("name", o->name, "operator name (`basin ops` lists them)");
  cmd->add_option("--workload", o->workload, "a named workload instead of NAME and --param (`basin workloads`)");
  cmd->add_option("--param", o->params, "operator parameter K=V (repeatable)")->take_all();
  cmd->add_option("--target", o->target, "llvm (the CPU) or cuda (GPU 0; needs a GPU)")
      ->check(CLI::IsMember({"llvm", "cuda"}));
  add_precision_option(cmd, o->precision);
  cmd->add_option("--strategy", o->strategy,
                  "gradient, annealing, evolutionary or random, with options as NAME:KEY=VALUE (`basin strategies`); "
                  "several, comma-separated (gradient,annealing): "
                  "tuned at once, a round of each in turn, each with its own records file (FILE with the "
                  "strategy's name before its extension) and its own clock")
      ->required()
      ->check([](const std::string& list) {
        std::vector<std::string> names = split_strategies(list);
        if (names.empty()) return std::string("no strategy named");
        for (const std::string& n : names)
          if (std::string why = check_strategy_spec(n); !why.empty()) return why;
        return std::string();
      });
  cmd->add_option("--trials", o->trials, "stop when the task has N measured programs in the records file");
  cmd->add_option("--budget", o->budget, "stop after this wall time (90s, 5m, 1h)");
  cmd->add_option("--records", o->records, "the records file (SQLite; created if missing)")->required();
  cmd->add_option(
      "--estimator", o->estimator,
      "mlp (pretrained), gbt, ensemble (the pretrained MLP and trees), roofline, gpu_roofline or a file (.pt "
      "TorchScript, or one written by basin estimator train); "
      "default: ensemble, gbt for annealing, none for random");
  cmd->add_flag("--no-calibrate", o->no_calibrate,
                "mlp and ensemble: the shipped weights, not this machine's calibration of them");
  add_seed_option(cmd, o->seed, "seed of the search (one seed, one run)");
  cmd->add_option("--batch", o->batch, "programs measured per round (default 32)");
  add_timeout_option(cmd, o->timeout);
  add_compile_options(cmd, o->compile_threads, o->max_instructions);
  add_slow_factor_option(cmd, o->slow_factor);
  cmd->add_option("--confirm", o->confirm,
                  "measure a program that would become the best N more times, after others, and keep the median "
                  "(default 2; 0: the first measurement decides)");
  cmd->add_option("--stop-at-latency", o->stop_at, "also stop once a program runs in this many microseconds");
  cmd->add_flag("--compare", o->compare, "time the best program and LibTorch's kernel again in the same run");
  cmd->add_flag("--quiet", o->quiet, "no progress bar or round lines on stderr");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([&run, o] { run = [o] { return run_tune_op(*o); }; });
}

}  // namespace basin::tools
