// `basin estimator dataset|train|eval` and `basin records export|merge|relabel|describe`: the
// estimators' data and training (docs/estimators.md), and records files.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <nlohmann/json.hpp>

#include "codegen/cuda.h"
#include "codegen/measure.h"
#include "core/util/error.h"
#include "core/util/hardware.h"
#include "core/util/host.h"
#include "core/util/output_file.h"
#include "models/calibrate.h"
#include "models/dataset.h"
#include "records/records.h"
#include "tools/commands.h"

namespace basin::tools {

namespace {

struct DatasetOptions {
  std::string records, tasks = "suite", target = "llvm";
  int per_task = 100, repeat = 0, compile_threads = 0;
  int64_t max_instructions = codegen::kMaxInstructions;
  uint64_t seed = 1;
  double timeout = 10;
  bool json = false;
};

int run_dataset(const DatasetOptions& o) {
  if (o.per_task < 1) throw Error("--per-task must be at least 1");
  if (o.repeat < 0) throw Error("--repeat must be 0 or more");
  std::vector<std::string> tasks = models::dataset_tasks(o.tasks);
  // Before the records file is made: a GPU dataset needs a GPU here.
  std::string why;
  if (o.target == "cuda" && !codegen::cuda_available(&why)) throw Error("the cuda target is unavailable: " + why);
  search::RecordStore store(o.records);
  models::CollectOptions co;
  co.per_task = o.per_task;
  co.seed = o.seed;
  co.timeout_seconds = o.timeout;
  co.target = o.target;
  co.repeat = o.repeat;
  co.max_instructions = o.max_instructions;
  co.compile_threads = o.compile_threads;
  auto t0 = std::chrono::steady_clock::now();
  int failed = 0;
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < tasks.size(); ++i) position.emplace(tasks[i], i + 1);
  std::fprintf(stderr, "[dataset] %zu task%s, %d program%s each, into %s\n", tasks.size(), tasks.size() == 1 ? "" : "s",
               o.per_task, o.per_task == 1 ? "" : "s", o.records.c_str());
  co.progress = [&](const std::string& task, int done, int total, const search::Record& r) {
    failed += !r.ok();
    if (done == total || done % 25 == 0)
      std::fprintf(stderr, "[dataset] task %zu/%zu %s: %d/%d measured (%.0f s)\n", position.at(task), tasks.size(),
                   task.c_str(), done, total,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  int measured = models::collect_random(store, tasks, co);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    std::cout << nlohmann::json{{"records", o.records}, {"tasks", tasks.size()},          {"measured", measured},
                                {"failed", failed},     {"total_records", store.count()}, {"seconds", secs}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("measured %d programs of %zu tasks in %.1f s (%d failed); %s holds %lld records\n", measured,
                tasks.size(), secs, failed, o.records.c_str(), static_cast<long long>(store.count()));
  }
  return 0;
}

struct CalibrateCliOptions {
  std::string budget = "2m", estimator = "ensemble", tasks = "suite", records, out;
  uint64_t seed = 1;
  int epochs = 2;
  bool json = false;
};

int run_calibrate(const CalibrateCliOptions& o) {
  models::CalibrateOptions co;
  co.budget_seconds = parse_duration(o.budget);
  co.kind = o.estimator;
  co.tasks = o.tasks;
  co.seed = o.seed;
  co.epochs = o.epochs;
  co.out = o.out;
  if (co.epochs < 1) throw Error("--epochs must be at least 1");
  if (!o.out.empty()) check_output_path(o.out, {o.records});  // never the records; before the work
  std::unique_ptr<search::RecordStore> store;
  if (!o.records.empty()) {
    store = std::make_unique<search::RecordStore>(o.records);
    co.store = store.get();
  }
  if (!o.json) co.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  std::fprintf(stderr, "[calibrate] %s on %s for %s\n", o.estimator.c_str(), machine_description("llvm").c_str(),
               o.budget.c_str());
  models::CalibrateResult r = models::calibrate(co);
  if (o.json) {
    std::cout << nlohmann::json{{"estimator", r.out},
                                {"records", r.records},
                                {"measured", r.measured},
                                {"samples", r.samples},
                                {"tasks", r.tasks},
                                {"families", r.families},
                                {"measure_seconds", r.measure_seconds},
                                {"train_seconds", r.train_seconds},
                                {"pairwise_before", r.before},
                                {"pairwise_after", r.after}}
                     .dump(2)
              << "\n";
  } else {
    std::printf(
        "measured %d programs of %d tasks (%d operator families) in %.1f s; fine-tuned on %d programs of this "
        "machine in %.1f s\n"
        "pairwise accuracy on them (in-sample): %.3f shipped, %.3f calibrated\n"
        "calibrated estimator: %s%s\n",
        r.measured, r.tasks, r.families, r.measure_seconds, r.samples, r.train_seconds, r.before, r.after,
        r.out.c_str(), o.out.empty() ? " (tuning on this machine uses it; --no-calibrate does not)" : "");
  }
  return 0;
}

struct ExportOptions {
  std::string records, out, target = "llvm", format;
};

int run_export(const ExportOptions& o) {
  search::RecordStore store(o.records, search::RecordStore::ReadOnly::Yes);
  int skipped = 0;
  std::vector<models::Sample> samples = models::samples_from_records(store.all(), o.target, &skipped);
  const std::map<std::string, std::string> machines = store.machines();
  // The format named, else the output file's extension: .csv is CSV, .parquet Parquet,
  // anything else JSON lines.
  auto ends_with = [&](const std::string& ext) {
    return o.out.size() >= ext.size() && o.out.compare(o.out.size() - ext.size(), ext.size(), ext) == 0;
  };
  const std::string format = !o.format.empty()       ? o.format
                             : ends_with(".csv")     ? "csv"
                             : ends_with(".parquet") ? "parquet"
                                                     : "jsonl";
  const bool to_stdout = o.out.empty() || o.out == "-";
  if (format == "parquet" && to_stdout) throw Error("--format parquet writes a file: name it with --out FILE.parquet");
  if (!to_stdout) check_output_path(o.out, {o.records});
  std::string bytes;
  if (format == "parquet") {
    bytes = models::export_samples_parquet(samples, machines);
  } else {
    std::ostringstream text;
    if (format == "csv") models::export_samples_csv(samples, text, machines);
    else models::export_samples(samples, text, machines);
    bytes = text.str();
  }
  if (to_stdout) {
    std::cout << bytes;
  } else {
    write_output_file(o.out, [&](OutputFile& f) { f.write(bytes); }, {o.records});
    std::fprintf(stderr, "wrote %zu samples to %s (%d records skipped; %zu machines described)\n", samples.size(),
                 o.out.c_str(), skipped, machines.size());
  }
  return 0;
}

struct MergeOptions {
  std::string into;
  std::vector<std::string> from;
  bool json = false;
};

// Copies every record of the inputs into `into` (created if missing), skipping programs
// it already holds (same task, target, sketch and configuration), so merging twice adds
// nothing. Each input is checked before anything is written.
int run_merge(const MergeOptions& o) {
  std::vector<std::unique_ptr<search::RecordStore>> inputs;
  for (const std::string& f : o.from) {
    inputs.push_back(std::make_unique<search::RecordStore>(f, search::RecordStore::ReadOnly::Yes));  // f exists
    if (std::filesystem::exists(o.into) && std::filesystem::equivalent(f, o.into))
      throw Error("cannot merge " + f + " into itself");
  }
  search::RecordStore out(o.into);
  int64_t added = 0, skipped = 0;
  // The same program measured on two machines, or by two code generations, is two
  // records. Checked and added under the write lock a chunk at a time (RecordStore::
  // add_new): a merge into the same file at once adds each program once, and a tuner
  // writing to it waits for one chunk only.
  constexpr size_t kChunk = 256;
  for (const auto& in : inputs) {
    const std::vector<search::Record> all = in->all();
    for (size_t at = 0; at < all.size(); at += kChunk) {
      const std::vector<search::Record> chunk(
          all.begin() + static_cast<std::ptrdiff_t>(at),
          all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), at + kChunk)));
      const int64_t n = out.add_new(chunk);
      added += n;
      skipped += static_cast<int64_t>(chunk.size()) - n;
    }
  }
  // The machines' descriptions come along; a description the file has stays.
  for (const auto& in : inputs)
    for (const auto& [host, description] : in->machines()) try {
        out.describe_machine(host, description);
      } catch (const Error& e) {
        std::fprintf(stderr, "basin: warning: %s: the description of '%s' is left out: %s\n", in->path().c_str(),
                     host.c_str(), e.what());
      }
  if (o.json) {
    std::cout
        << nlohmann::json{{"records", o.into}, {"added", added}, {"skipped", skipped}, {"total", out.count()}}.dump()
        << "\n";
  } else {
    std::printf("added %lld records to %s (%lld already there); it holds %lld\n", static_cast<long long>(added),
                o.into.c_str(), static_cast<long long>(skipped), static_cast<long long>(out.count()));
  }
  return 0;
}

// The machines a records file names, with their records: " 'A': 3 records; 'B': 1
// records", or " none (the file is empty)".
std::string machines_listing(const std::map<std::string, int64_t>& hosts) {
  std::string names;
  for (const auto& [h, n] : hosts) names += (names.empty() ? " '" : "; '") + h + "': " + std::to_string(n) + " records";
  return hosts.empty() ? " none (the file is empty)" : names;
}

struct RelabelOptions {
  std::string records, from, to;
  bool from_set = false, json = false;
};

// Names `to` the machine of the records measured on `from`: the migration for records
// whose description cannot tell their machine from another (core/util/host.h,
// same_host). Refuses a file that does not exist and a `from` no record has, listing
// the machines the file does name.
int run_relabel(const RelabelOptions& o) {
  if (!std::filesystem::exists(o.records)) throw Error("records file " + o.records + " does not exist");
  if (o.to.empty()) throw Error("--to must name a machine (as `basin records relabel` prints them)");
  if (o.from == o.to) throw Error("--from and --to are the same machine, '" + o.to + "'");
  search::RecordStore store(o.records);
  const std::map<std::string, int64_t> hosts = store.hosts();
  if (!o.from_set || !hosts.count(o.from))
    throw Error((o.from_set ? "no record of " + o.records + " was measured on '" + o.from + "'"
                            : std::string("--from must name the machine to relabel")) +
                "; the file's machines:" + machines_listing(hosts));
  const int64_t n = store.relabel_host(o.from, o.to);
  if (o.json)
    std::cout << nlohmann::json{{"records", o.records}, {"from", o.from}, {"to", o.to}, {"relabelled", n}}.dump()
              << "\n";
  else
    std::printf("%lld records of %s now name '%s' (were '%s')\n", static_cast<long long>(n), o.records.c_str(),
                o.to.c_str(), o.from.c_str());
  return 0;
}

struct DescribeOptions {
  std::string records;
  bool json = false;
};

// Stores this machine's description (basin machine; measured on the threads the
// records name, BASIN_NUM_THREADS) for the records it measured: a file written
// before records kept descriptions, or one whose description was measured wrongly,
// gets the machine's as `basin machine` has it. Refuses a file that does not exist and
// one with no record of this machine, listing the machines the file does name.
int run_describe(const DescribeOptions& o) {
  if (!std::filesystem::exists(o.records)) throw Error("records file " + o.records + " does not exist");
  search::RecordStore store(o.records);
  const std::string here = machine_description("llvm");
  const std::map<std::string, int64_t> hosts = store.hosts();
  auto it = hosts.find(here);
  if (it == hosts.end())
    throw Error("no record of " + o.records + " was measured on this machine ('" + here +
                "'; BASIN_NUM_THREADS sets the threads it names); the file's machines:" + machines_listing(hosts));
  const Hardware& hw = this_hardware();
  const bool replaced = store.machines().count(here) > 0;
  store.set_machine(here, hw.to_json());
  if (o.json)
    std::cout << nlohmann::json{{"records", o.records},
                                {"host", here},
                                {"described", it->second},
                                {"replaced", replaced},
                                {"machine", nlohmann::json::parse(hw.to_json())}}
                     .dump()
              << "\n";
  else
    std::printf("%s: %lld records of '%s' described (%s): %.1f GFLOP/s peak, %.1f GB/s\n", o.records.c_str(),
                static_cast<long long>(it->second), here.c_str(),
                replaced ? "the description they had replaced" : "they had none", hw.peak_gflops, hw.bandwidth_gbs);
  return 0;
}

}  // namespace

void add_records_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("records", "inspect, export, merge, relabel and describe records files");
  cmd->require_subcommand(1);
  auto e = std::make_shared<ExportOptions>();
  auto* ex = cmd->add_subcommand(
      "export", "write measured programs' features, latencies and machines as JSON lines, CSV or Parquet");
  ex->add_option("--records", e->records, "the records file")->required();
  ex->add_option("--out", e->out, "output file (default: standard output)");
  ex->add_option("--target", e->target, "target of the records to export");
  ex->add_option("--format", e->format,
                 "jsonl (a header line, then one JSON object per program), csv or parquet (a row per store of "
                 "each program); default: csv for an --out ending in .csv, parquet for .parquet, else jsonl")
      ->check(CLI::IsMember({"jsonl", "csv", "parquet"}));
  ex->callback([&run, e] { run = [e] { return run_export(*e); }; });
  auto m = std::make_shared<MergeOptions>();
  auto* mg = cmd->add_subcommand("merge", "copy the records of other files into one, each program once");
  mg->add_option("--into", m->into, "the records file to add to (created if missing)")->required();
  mg->add_option("inputs", m->from, "records files to copy from")->required();
  mg->add_flag("--json", m->json, "print one JSON object");
  mg->callback([&run, m] { run = [m] { return run_merge(*m); }; });
  auto rl = std::make_shared<RelabelOptions>();
  auto* rel = cmd->add_subcommand("relabel",
                                  "name the machine that measured records (for records whose "
                                  "description cannot tell two machines apart)");
  rel->add_option("--records", rl->records, "the records file")->required();
  auto* from = rel->add_option("--from", rl->from, "the machine the records name now (\"\" for an unknown one)");
  rel->add_option("--to", rl->to, "the machine to name instead, e.g. 'AMD EPYC (family 25 model 17), 1 core, avx512'")
      ->required();
  rel->add_flag("--json", rl->json, "print one JSON object");
  rel->callback([&run, rl, from] {
    rl->from_set = from->count() > 0;
    run = [rl] { return run_relabel(*rl); };
  });
  auto ds = std::make_shared<DescribeOptions>();
  auto* desc = cmd->add_subcommand("describe",
                                   "store this machine's description (basin machine) for the records it measured in "
                                   "a file: one written before records kept descriptions");
  desc->add_option("--records", ds->records, "the records file")->required();
  desc->add_flag("--json", ds->json, "print one JSON object");
  desc->callback([&run, ds] { run = [ds] { return run_describe(*ds); }; });
}

namespace {

struct MachineOptions {
  bool measure = false, json = false;
};

std::string bytes_text(int64_t b) {
  if (b <= 0) return "unknown";
  if (b % (1 << 20) == 0) return std::to_string(b >> 20) + " MiB";
  if (b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
  return std::to_string(b) + " B";
}

int run_machine(const MachineOptions& o) {
  const Hardware hw = o.measure ? remeasure_hardware() : this_hardware();
  if (o.json) {
    nlohmann::json j = nlohmann::json::parse(hw.to_json());
    j["file"] = hardware_cache_path();
    j["busy"] = hw.busy;  // to_json has it only when true
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf(
      "machine: %s\n"
      "vector registers: %d of %d bits (%s)\n"
      "data caches: L1 %s, L2 %s, L3 %s\n"
      "peak: %.1f GFLOP/s of FP32 FMAs on %d thread%s\n"
      "memory: %.1f GB/s read on %d thread%s\n"
      "kept in %s%s\n",
      hw.host.c_str(), hw.vector_registers, hw.vector_bits, hw.vector_isa.c_str(), bytes_text(hw.l1d_bytes).c_str(),
      bytes_text(hw.l2_bytes).c_str(), bytes_text(hw.l3_bytes).c_str(), hw.peak_gflops, hw.cores,
      hw.cores == 1 ? "" : "s", hw.bandwidth_gbs, hw.cores, hw.cores == 1 ? "" : "s", hardware_cache_path().c_str(),
      o.measure ? " (measured now)" : " (measured once per machine; --measure measures it again)");
  if (hw.busy)
    std::printf(
        "note: the machine was busy while measured (its threads together fell short of one thread's peak times "
        "their number, or ran on a CPU for less than 0.9 of the time: %.2f): these figures are low; measure again "
        "when it is quiet\n",
        hw.threads_on_cpu);
  return 0;
}

}  // namespace

void add_machine_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<MachineOptions>();
  auto* cmd = app.add_subcommand("machine",
                                 "this machine's description: vector registers, caches, measured peak and memory "
                                 "bandwidth (stored with records, read by estimators)");
  cmd->add_flag("--measure", o->measure, "measure it again now (run it while nothing else runs) and keep the result");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([&run, o] { run = [o] { return run_machine(*o); }; });
}

void add_estimator_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("estimator", "latency estimators: collect data, train, evaluate");
  cmd->require_subcommand(1);
  auto d = std::make_shared<DatasetOptions>();
  auto* ds = cmd->add_subcommand("dataset", "measure random configurations of a task list into a records file");
  ds->add_option("--records", d->records, "the records file (created if missing; a rerun resumes)")->required();
  ds->add_option("--tasks", d->tasks,
                 "suite, workloads, networks, zoo:NAME, shapes:N, nets:N (or shapes:A-B, nets:A-B: what N=B adds to "
                 "N=A) or workload names, separated by commas");
  ds->add_option("--per-task", d->per_task, "measured configurations per task");
  ds->add_option("--target", d->target, "llvm (the CPU, default) or cuda (GPU 0: the tasks' GPU sketches)")
      ->check(CLI::IsMember({"llvm", "cuda"}));
  add_seed_option(ds, d->seed, "random seed");
  ds->add_option("--repeat", d->repeat,
                 "measure each program N more times, after the task's others; its latency is the median, and "
                 "`estimator eval` reports how well a second measurement agrees with the first");
  ds->add_option("--timeout", d->timeout, "seconds per candidate before it counts as a hang");
  add_compile_options(ds, d->compile_threads, d->max_instructions);
  ds->add_flag("--json", d->json, "print one JSON object");
  ds->callback([&run, d] { run = [d] { return run_dataset(*d); }; });
  auto c = std::make_shared<CalibrateCliOptions>();
  auto* cal = cmd->add_subcommand(
      "calibrate", "measure a designed sample of programs on this machine and adapt the shipped estimator to it");
  cal->add_option("--budget", c->budget, "measuring time: 90, 90s, 2m (default 2m)");
  cal->add_option("--estimator", c->estimator, "the shipped estimator to adapt")
      ->check(CLI::IsMember({"ensemble", "mlp"}));
  cal->add_option("--tasks", c->tasks, "the task list the sample is drawn from (as for dataset; default suite)");
  cal->add_option("--records", c->records,
                  "records file for the measured programs (default: the calibration's own, in basin's cache)");
  cal->add_option("--out", c->out,
                  "write the calibrated estimator here instead of this machine's calibration in basin's cache");
  cal->add_option("--epochs", c->epochs, "passes of the update over the sample (default 2)");
  add_seed_option(cal, c->seed, "random seed");
  cal->add_flag("--json", c->json, "print one JSON object");
  cal->callback([&run, c] { run = [c] { return run_calibrate(*c); }; });
  add_estimator_train_eval(cmd, run);
}

}  // namespace basin::tools
