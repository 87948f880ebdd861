// The subcommands of the `basin` driver, one file each. Each adds itself to the app
// and returns the exit status of its run through `run`.
#pragma once

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/ops/registry.h"

namespace basin::tools {

using Runner = std::function<int()>;

// The operator instance a command names: NAME with --param K=V values, or a named
// --workload (not both). Throws ParseError on a bad combination or a malformed K=V,
// and the operator library's errors on unknown names and bad values.
ops::OpGraph op_from_args(const std::string& name, const std::string& workload, const std::vector<std::string>& params);

// The largest --batch of the tuning commands: a round is proposed whole before its
// budget is checked again, and proposing takes time in proportion to its size.
constexpr int kMaxBatch = 1024;

// "90", "90s", "5m", "1.5h" -> seconds; ParseError otherwise.
double parse_duration(const std::string& text);
// The progress bar of tuning, on stderr: trials done, the trial budget (0: none),
// seconds, and the best latency so far.
void draw_progress(int done, int total, double seconds, double best_us);
// Ctrl-C while a tuning run is under way: the first stops the run cleanly
// (interrupted() turns true; the records keep every program measured, and the same
// command resumes), a second ends the process at once. The handler is restored when
// the object goes.
class InterruptStops {
 public:
  InterruptStops();
  ~InterruptStops();
  InterruptStops(const InterruptStops&) = delete;
  InterruptStops& operator=(const InterruptStops&) = delete;
  static bool interrupted();

 private:
  struct sigaction old_;
};
// The log lines of tuning on stderr, "basin: LINE", each clearing the progress bar's
// line first when a bar is drawn; null when quiet.
std::function<void(const std::string&)> tuning_log(bool quiet, bool bar);
// The measuring options of `tune-op`, `tune` and `estimator dataset`: --compile-threads
// and --max-instructions (codegen::MeasureOptions).
void add_compile_options(CLI::App* cmd, int& compile_threads, int64_t& max_instructions);
// The tuning commands' --slow-factor (search::TuneOptions::slow_factor).
void add_slow_factor_option(CLI::App* cmd, double& slow_factor);
// --timeout: finite, above 0, at most an hour (0, a negative or NaN would store every
// program as a timeout, never measured again).
void add_timeout_option(CLI::App* cmd, double& timeout);

// --seed: an integer from 0 to 2^64 - 1, written in decimal digits; anything else
// (negative, larger, not a number) is an error naming the flag, never clamped.
void add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& description);

// --precision (sched::resolve_precision): the same help on every command.
void add_precision_option(CLI::App* cmd, std::string& precision);
// Checks `precision` on `target` (one error line for one it cannot run) and, unless
// quiet, prints sched::precision_note's line where there is one (bf16 on a CPU without
// AVX512-BF16).
void check_precision_option(const std::string& target, const std::string& precision, bool quiet);

// "" when `spec` names a strategy with valid options (search::make_strategy), else why
// not: a CLI11 validator's answer.
std::string check_strategy_spec(const std::string& spec);

// Adds a subcommand; its callback stores the runner to call after parsing.
void add_ops_command(CLI::App& app, Runner& run);
void add_workloads_command(CLI::App& app, Runner& run);
void add_strategies_command(CLI::App& app, Runner& run);
void add_estimators_command(CLI::App& app, Runner& run);
void add_op_command(CLI::App& app, Runner& run);
void add_records_command(CLI::App& app, Runner& run);
// `basin machine`: this machine's description (core/util/hardware.h).
void add_machine_command(CLI::App& app, Runner& run);
void add_tune_op_command(CLI::App& app, Runner& run);
// `tune`, `compile`, `run` and `compare` of whole networks (cmd_network.cc).
void add_network_commands(CLI::App& app, Runner& run);
void add_estimator_command(CLI::App& app, Runner& run);
// `estimator train` and `estimator eval` (cmd_estimator_train.cc).
void add_estimator_train_eval(CLI::App* estimator, Runner& run);

}  // namespace basin::tools
