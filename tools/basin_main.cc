// The `basin` command-line driver. Every subcommand exits 0 on success and non-zero
// with one clear error line otherwise; with --json it prints one JSON object on stdout.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>

#include "core/util/blas.h"
#include "core/util/error.h"
#include "core/util/host.h"
#include "models/plugin_call.h"
#include "tools/commands.h"

namespace {

// Debian's LibTorch runs elementwise ops on OpenMP threads and GEMMs on OpenBLAS's own
// pthreads. By default OpenMP's threads spin after each parallel region and take the
// cores from the GEMM that follows: a network run op by op gets up to 3x slower
// (bert_base: 580 ms against 180 ms). The commands that time LibTorch as the peer run
// themselves again with OMP_WAIT_POLICY=PASSIVE, its fastest setting on every network
// measured (docs/PERFORMANCE.md@6bf7154), unless the user chose a policy. libgomp reads the
// variable when it loads, before main, hence the exec.
//
// The same for OpenBLAS's kernels: version 0.3.21 does not know newer CPUs (this
// project's Intel host, model 207) and falls back to its SSE3 "Prescott" kernels, 4.8x
// slower than its AVX-512 ones on a 1024 GEMM (31.4 against 6.6 ms on two threads).
// Unless the user chose a core, the commands that run LibTorch (the peer, and the
// estimators of tuning and training) run with the kernels of the CPU's vector
// instructions (SkylakeX for AVX-512, Haswell for AVX2). OpenBLAS reads
// OPENBLAS_CORETYPE when it loads.
void give_libtorch_its_best_settings(char** argv) {
  if (!argv[1]) return;
  bool times_torch = false;
  for (char** a = argv + 1; *a; ++a)
    times_torch |= std::strcmp(*a, "compare") == 0 || std::strcmp(*a, "--compare") == 0;
  const std::string command = argv[1];
  const bool runs_an_estimator = command == "tune-op" || command == "tune" || command == "estimator";
  if (times_torch || runs_an_estimator) basin::exec_with_torch_settings(argv, times_torch);
}

// An error as one line of at most about 2,000 characters: its first line, the rest (a
// LibTorch backtrace, a nested report) only with BASIN_DEBUG=1; a longer line (a
// model's names can be megabytes) keeps its beginning and end.
std::string one_line(const std::string& what) {
  const char* debug = std::getenv("BASIN_DEBUG");
  if (debug && std::strcmp(debug, "0") != 0) return what;
  const size_t nl = what.find('\n');
  std::string line = what.substr(0, nl);
  constexpr size_t kHead = 1500, kTail = 400;
  const bool cut = line.size() > kHead + kTail + 100;
  if (cut)
    line = line.substr(0, kHead) + " [... " + std::to_string(line.size() - kHead - kTail) + " characters ...] " +
           line.substr(line.size() - kTail);
  if (nl == std::string::npos && !cut) return line;
  return line + " (BASIN_DEBUG=1 prints the details)";
}

}  // namespace

int main(int argc, char** argv) {
  give_libtorch_its_best_settings(argv);
  CLI::App app{"basin: a tensor-program optimizer"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "basin 0.1.0");
  basin::tools::Runner run;
  basin::tools::add_ops_command(app, run);
  basin::tools::add_workloads_command(app, run);
  basin::tools::add_strategies_command(app, run);
  basin::tools::add_estimators_command(app, run);
  basin::tools::add_op_command(app, run);
  basin::tools::add_tune_op_command(app, run);
  basin::tools::add_network_commands(app, run);
  basin::tools::add_estimator_command(app, run);
  basin::tools::add_records_command(app, run);
  basin::tools::add_machine_command(app, run);
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known |= argc > 1 && sub->get_name() == argv[1];
  }
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "basin: error: unknown command '" << argv[1] << "' (commands: " << names << ")\n";
    return 2;
  }
  // A bad flag is one clear line too, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "basin: error: " + std::string(e.what()) + " (see --help)\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    basin::check_settings();
    return run ? run() : 0;
  } catch (const basin::Error& e) {
    std::cerr << "basin: error: " << one_line(e.what()) << "\n";
    // A plug-in's call left running (models/plugin_call.h): the process ends here, not
    // through exit handlers that would tear down what that call still uses.
    if (basin::models::plugin_stuck()) {
      std::cerr.flush();
      std::_Exit(1);
    }
    return 1;
  } catch (const basin::InternalError& e) {
    std::cerr << "basin: internal error (please report): " << one_line(e.what()) << "\n";
    return 70;
  } catch (const std::bad_alloc&) {
    std::cerr << "basin: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "basin: error: " << one_line(e.what()) << "\n";
    return 1;
  }
}
