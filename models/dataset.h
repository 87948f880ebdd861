// Training data for the estimators: measured programs (records/records.h) turned into
// per-store feature tensors (relax/features.h) and latencies, split by task, and
// collected by measuring random configurations of a list of tasks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/measure.h"
#include "records/records.h"

namespace basin::models {

// One measured program: its stores' features (log2(1 + x), [stores][num_features]
// row-major) and its latency.
struct Sample {
  std::string task;  // task key
  std::string sketch;
  std::string config;   // JSON
  std::string host;     // the machine that measured it (empty: unknown)
  std::string codegen;  // the code generation measured (search::Record::codegen; empty: unknown)
  int stores = 0;
  std::vector<float> features;
  double latency_us = 0;  // the record's latency (search::Record::latency_us)
  // The minimum of each measurement of the program, first first (more than one when it
  // was measured again: a confirmed best, or `basin estimator dataset --repeat`).
  std::vector<double> measurements_us;
  // The measuring machine's description as estimator input (basin::Hardware::features);
  // empty where the records do not describe it.
  std::vector<float> machine;
};

// The features of programs, with one exact evaluator per (task, sketch) kept.
class FeatureExtractor {
 public:
  FeatureExtractor();
  ~FeatureExtractor();
  // Throws basin::Error when the task, sketch or configuration is unknown or invalid.
  // `target` picks the sketches (and so the feature set): "llvm" or "cuda".
  Sample features(const std::string& task_key, const std::string& sketch, const std::string& config_json,
                  const std::string& target = "llvm");

 private:
  struct Entry;
  std::map<std::string, std::unique_ptr<Entry>> cache_;
};

// Which programs a ranking compares: those of one task measured on one machine (two
// machines' latencies do not order each other's programs). Splits stay by task.
inline std::string pair_group(const Sample& s) {
  return s.task + (s.host.empty() ? "" : "\n" + s.host) + (s.codegen.empty() ? "" : "\n" + s.codegen);
}

// The successful records of a target as samples (failed ones and ones whose task or
// configuration no longer parses are skipped and counted in *skipped). `machines`
// (search::RecordStore::machines) fills each sample's `machine` where its host is
// described.
std::vector<Sample> samples_from_records(const std::vector<search::Record>& records, const std::string& target,
                                         int* skipped = nullptr,
                                         const std::map<std::string, std::string>& machines = {});

// Splits by task, never by row: about `test_fraction` of the tasks (at least one when
// the fraction is positive and there are two or more; none for 0) go to the test
// side, chosen by `seed`.
struct Split {
  std::vector<Sample> train, test;
  std::vector<std::string> test_tasks;
};
Split split_by_task(const std::vector<Sample>& samples, double test_fraction, uint64_t seed);
// K-fold cross-validation by task: every task is held out in exactly one of the k
// splits (round-robin over the tasks in a seeded order). Throws basin::Error unless
// 2 <= k <= the number of tasks.
std::vector<Split> task_folds(const std::vector<Sample>& samples, int k, uint64_t seed);

// The built-in task lists of the dataset tool: "suite" (mid-size shapes of every
// operator family of the library), "workloads" (the named benchmark workloads up to
// 1024^3 FLOP-scale), "networks" (the tasks of every zoo network, as `basin tune`
// partitions them), "shapes:N" (N suite operators with other shapes: each extent
// scaled by 1/2 to 3/2, the first N of one fixed sequence), "nets:N" (the tasks of the
// first N graph::random_network networks: fused convolution and transformer tasks like
// the zoo's), or a comma-separated list of these, workload names and zoo:NAME. A task
// listed twice appears once.
std::vector<std::string> dataset_tasks(const std::string& which);

struct CollectOptions {
  int per_task = 100;  // measured configurations per task (records already there count)
  uint64_t seed = 1;
  double timeout_seconds = 10;  // per candidate
  std::string target = "llvm";
  // Programs emitted with more LLVM instructions are error records, not compiled, as
  // while tuning (codegen::kMaxInstructions; 0: no limit).
  int64_t max_instructions = codegen::kMaxInstructions;
  // Threads that compile each task's programs ahead of their measurement
  // (codegen::MeasureOptions::compile_threads): 0, every core; 1, none ahead.
  int compile_threads = 0;
  // Each of a task's programs (of this machine, already there or new) is measured this
  // many more times: a pass over the task's programs per repeat, so that other
  // programs run in between. Its latency becomes the median (search::Record::latency_us)
  // and `basin estimator eval` reports how well a second measurement orders the
  // programs like the first (EvalResult::repeatability).
  int repeat = 0;
  std::function<void(const std::string& task, int done, int total, const search::Record&)> progress;
};
// The record of one measured program: the one path by which the tuner, the dataset tool
// and calibration write records (task, target, the program's sketch and configuration,
// the seed and what chose it, the measurement, the machine and code generation that
// made it, and when).
struct RecordSource {
  std::string task_key, target, sketch, config_json;
  uint64_t seed = 0;
  std::string estimator_version;  // what chose the program
  std::string host, codegen;      // the machine and code generation that measured it
  double started_at = 0, finished_at = 0;
};
search::Record record_of(const RecordSource& src, const codegen::MeasureResult& m);
// Measures one program of `key` with the pool (codegen::MeasurePool::measure_one) and
// returns its record: measured on this machine by this code generation of the pool's
// target, timed from start to finish, its estimator_version as given (what chose it).
// The caller stores it.
search::Record measure_record(codegen::MeasurePool& pool, const std::string& key, const std::string& target,
                              const codegen::Candidate& program, const std::string& config_json, uint64_t seed,
                              const std::string& estimator_version);

// Measures uniformly random valid configurations (a uniform sketch, then a uniform
// configuration) of each task into the store, skipping programs it already holds:
// a killed run restarted with the same options continues where it stopped. Returns
// the number of programs measured now (first measurements; repeats are not counted).
int collect_random(search::RecordStore& store, const std::vector<std::string>& task_keys, const CollectOptions& opt);

// The exports (docs/estimators.md, "Exporting records"). `machines` are the records
// file's descriptions of the machines that measured the samples
// (search::RecordStore::machines: Hardware::to_json by host).
//
// JSON lines: a header line {"feature_version", "feature_set", "feature_names", "samples",
// "machines": {host: description}}, then {"task", "sketch", "config", "latency_us", "host",
// "codegen", "stores", "features": [[...], ...]} per program.
void export_samples(const std::vector<Sample>& samples, std::ostream& out,
                    const std::map<std::string, std::string>& machines = {});
// CSV (RFC 4180), one row per store of each program: program (its index), task, family
// (task_family), host, codegen, sketch, config (JSON), latency_us, measurements_us (each
// measurement's minimum, separated by spaces), feature_version, stores, store (0 to
// stores - 1), the machine's numbers (export_machine_columns; empty where the records
// do not describe the machine), then one column per feature named as
// relax::feature_names gives them.
void export_samples_csv(const std::vector<Sample>& samples, std::ostream& out,
                        const std::map<std::string, std::string>& machines = {});
// The same rows and columns as a Parquet file (its bytes): the texts UTF-8 strings,
// program, feature_version, stores and store INT64, latency_us DOUBLE, the machine's
// numbers optional DOUBLE (null where unknown), the features FLOAT.
std::string export_samples_parquet(const std::vector<Sample>& samples,
                                   const std::map<std::string, std::string>& machines = {});
// "machine.vector_bits" ... "machine.bandwidth_gbs": basin::hardware_feature_names
// with a prefix, the raw numbers of Hardware (not their logarithms).
std::vector<std::string> export_machine_columns();

}  // namespace basin::models
