// The records store: one SQLite file holding one row per measured program (task key,
// target, sketch, configuration, latency samples, error, timestamps, seed, estimator
// version, the machine it was measured on, later re-measurements). Each record is
// committed as it is added, in WAL mode, so a killed process loses nothing already
// added and several processes can read (and write) one file at once. Tuning resumes
// from it; compilation picks the best valid record per task.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace basin::search {

// The median of `v`, the upper one of an even count (NaN when empty).
double upper_median(std::vector<double> v);

struct Record {
  int64_t id = 0;
  std::string task_key;
  std::string target;                // "llvm", "cuda"
  std::string sketch;
  std::string config;                // JSON (sched::config_to_json)
  std::vector<double> latencies_us;  // per-round samples; empty on error
  std::string error;                 // empty when the program ran and verified
  double compile_seconds = 0;
  double started_at = 0;             // seconds since the epoch
  double finished_at = 0;
  uint64_t seed = 0;
  std::string estimator_version;
  // The machine that measured it (basin::host_description(): "AMD EPYC (family 26
  // model 2), 2 cores, avx512"); empty in files written before schema 2, where it is
  // unknown.
  std::string host;
  // Measured on `machine`, on an unknown one (an old record) or on one described in the
  // legacy form of `machine` (basin::same_host).
  bool from_host(const std::string& machine) const;
  // The minimum of each later measurement of the same program (the tuner confirms a
  // program that would become its best by measuring it again after others).
  std::vector<double> confirm_us;
  // Nonzero once a tuner named it its task's best: the order of the namings of the
  // task's programs on its target (the largest names the current best). A tuner names
  // the winner of a side-by-side measurement (docs/search.md, "Confirmation"), which
  // need not be the program of lowest latency_us.
  int64_t best_seq = 0;
  bool ok() const { return error.empty() && !latencies_us.empty(); }
  // The minimum of the first measurement's rounds (infinity on error).
  double min_latency_us() const;
  // The program's latency: the first measurement's minimum, or once it was measured
  // again, the median of every measurement's minimum (the upper one of an even count).
  // A single measurement can catch a shared machine in a moment where it runs fast
  // (docs/PERFORMANCE.md, "Where the spread comes from"); the median of several less so.
  double latency_us() const;
  bool confirmed() const { return !confirm_us.empty(); }
};

class RecordStore {
 public:
  // Opens or creates the file. Throws basin::Error naming the file when it cannot be
  // opened or is not a basin records database.
  explicit RecordStore(const std::string& path);
  ~RecordStore();
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;

  const std::string& path() const { return path_; }
  // Adds and commits one record; returns its id.
  int64_t add(const Record& r);
  // Stores the re-measurements of record `id` (Record::confirm_us) and its latency.
  void confirm(int64_t id, const std::vector<double>& confirm_us);
  // Names record `id` its task's best on its target (Record::best_seq): returns the
  // number given.
  int64_t name_best(int64_t id);
  // Records of a task on a target, oldest first.
  std::vector<Record> task_records(const std::string& task_key, const std::string& target) const;
  // The best successful record of a task on a target measured on this machine (or on
  // an unknown one): the one a tuner named last (Record::best_seq), else the fastest
  // by Record::latency_us, a confirmed one when there is one; when there is none of
  // this machine, the same order over every machine.
  std::optional<Record> best(const std::string& task_key, const std::string& target) const;
  // True if this exact program was measured already (successfully or not): on any
  // machine when `host` is empty, else on that machine as Record::from_host counts it.
  bool contains(const std::string& task_key, const std::string& target, const std::string& sketch,
                const std::string& config, const std::string& host = "") const;
  // Names `to` the machine of every record measured on `from` (exactly that
  // description; "" for the records of an unknown machine): returns how many. For
  // records whose description cannot tell their machine from another (basin::same_host).
  int64_t relabel_host(const std::string& from, const std::string& to);
  // The machines the records name, each with its count of records.
  std::map<std::string, int64_t> hosts() const;
  int64_t count() const;
  // Every record, oldest first (export).
  std::vector<Record> all() const;

 private:
  struct Db;
  std::string path_;
  std::unique_ptr<Db> db_;
};

}  // namespace basin::search
