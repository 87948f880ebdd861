// The `basin` command-line driver. Every subcommand exits 0 on success and non-zero
// with one clear error line otherwise; with --json it prints one JSON object on stdout.
#include <iostream>

#include "core/util/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"basin: a tensor-program optimizer"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "basin 0.1.0");
  basin::tools::Runner run;
  basin::tools::add_ops_command(app, run);
  basin::tools::add_workloads_command(app, run);
  basin::tools::add_op_command(app, run);
  basin::tools::add_tune_op_command(app, run);
  basin::tools::add_network_commands(app, run);
  basin::tools::add_estimator_command(app, run);
  basin::tools::add_records_command(app, run);
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    return run ? run() : 0;
  } catch (const basin::Error& e) {
    std::cerr << "basin: error: " << e.what() << "\n";
    return 1;
  } catch (const basin::InternalError& e) {
    std::cerr << "basin: internal error (please report): " << e.what() << "\n";
    return 70;
  } catch (const std::exception& e) {
    std::cerr << "basin: error: " << e.what() << "\n";
    return 1;
  }
}
