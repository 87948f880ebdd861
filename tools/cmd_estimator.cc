// `basin estimator dataset|train|eval` and `basin records export`: the estimators'
// data and training (docs/estimators.md).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "models/dataset.h"
#include "tools/commands.h"

namespace basin::tools {

namespace {

struct DatasetOptions {
  std::string records, tasks = "suite", target = "llvm";
  int per_task = 100;
  uint64_t seed = 1;
  double timeout = 10;
  bool json = false;
};

int run_dataset(const DatasetOptions& o) {
  if (o.per_task < 1) throw Error("--per-task must be at least 1");
  std::vector<std::string> tasks = models::dataset_tasks(o.tasks);
  search::RecordStore store(o.records);
  models::CollectOptions co;
  co.per_task = o.per_task;
  co.seed = o.seed;
  co.timeout_seconds = o.timeout;
  co.target = o.target;
  auto t0 = std::chrono::steady_clock::now();
  int failed = 0;
  co.progress = [&](const std::string& task, int done, int total, const search::Record& r) {
    failed += !r.ok();
    if (done == total || done % 25 == 0)
      std::fprintf(stderr, "[dataset] %s: %d/%d measured (%.0f s)\n", task.c_str(), done, total,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  int measured = models::collect_random(store, tasks, co);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    std::cout << nlohmann::json{{"records", o.records}, {"tasks", tasks.size()}, {"measured", measured},
                                {"failed", failed}, {"total_records", store.count()}, {"seconds", secs}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("measured %d programs of %zu tasks in %.1f s (%d failed); %s holds %lld records\n", measured,
                tasks.size(), secs, failed, o.records.c_str(), static_cast<long long>(store.count()));
  }
  return 0;
}

struct ExportOptions {
  std::string records, out, target = "llvm";
};

int run_export(const ExportOptions& o) {
  if (!std::filesystem::exists(o.records)) throw Error("records file " + o.records + " does not exist");
  search::RecordStore store(o.records);
  int skipped = 0;
  std::vector<models::Sample> samples = models::samples_from_records(store.all(), o.target, &skipped);
  if (o.out.empty() || o.out == "-") {
    models::export_samples(samples, std::cout);
  } else {
    std::ofstream f(o.out);
    if (!f) throw Error("cannot write " + o.out);
    models::export_samples(samples, f);
    std::fprintf(stderr, "wrote %zu samples to %s (%d records skipped)\n", samples.size(), o.out.c_str(), skipped);
  }
  return 0;
}

}  // namespace

void add_records_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("records", "inspect and export a records file");
  cmd->require_subcommand(1);
  auto e = std::make_shared<ExportOptions>();
  auto* ex = cmd->add_subcommand("export", "write measured programs' features and latencies as JSON lines");
  ex->add_option("--records", e->records, "the records file")->required();
  ex->add_option("--out", e->out, "output file (default: standard output)");
  ex->add_option("--target", e->target, "target of the records to export");
  ex->callback([&run, e] { run = [e] { return run_export(*e); }; });
}

void add_estimator_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("estimator", "latency estimators: collect data, train, evaluate");
  cmd->require_subcommand(1);
  auto d = std::make_shared<DatasetOptions>();
  auto* ds = cmd->add_subcommand("dataset", "measure random configurations of a task list into a records file");
  ds->add_option("--records", d->records, "the records file (created if missing; a rerun resumes)")->required();
  ds->add_option("--tasks", d->tasks, "suite, workloads, networks, zoo:NAME or workload names, separated by commas");
  ds->add_option("--per-task", d->per_task, "measured configurations per task");
  ds->add_option("--seed", d->seed, "random seed");
  ds->add_option("--timeout", d->timeout, "seconds per candidate before it counts as a hang");
  ds->add_flag("--json", d->json, "print one JSON object");
  ds->callback([&run, d] { run = [d] { return run_dataset(*d); }; });
  add_estimator_train_eval(cmd, run);
}

}  // namespace basin::tools
