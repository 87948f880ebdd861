#include "models/dataset.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <set>
#include <sstream>

#include "codegen/measure.h"
#include "codegen/version.h"
#include "core/graph/fusion.h"
#include "core/graph/layout.h"
#include "core/graph/passes.h"
#include "core/graph/zoo.h"
#include "core/ops/workloads.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "core/util/hardware.h"
#include "core/util/host.h"
#include "core/util/parquet.h"
#include "core/util/parse.h"
#include "models/calibrate.h"
#include "relax/features.h"
#include "relax/relaxed_sketch.h"

namespace basin::models {

struct FeatureExtractor::Entry {
  ops::OpGraph task;
  std::vector<sched::Sketch> sketches;
  std::map<std::string, std::unique_ptr<relax::RelaxedSketch>> exact;
};

FeatureExtractor::FeatureExtractor() = default;
FeatureExtractor::~FeatureExtractor() = default;

Sample FeatureExtractor::features(const std::string& task_key, const std::string& sketch,
                                  const std::string& config_json, const std::string& target) {
  auto it = cache_.find(target + "|" + task_key);
  if (it == cache_.end()) {
    auto e = std::make_unique<Entry>();
    e->task = sched::task_from_key(task_key);
    e->sketches = sched::sketches_of_every_precision(e->task, target);
    it = cache_.emplace(target + "|" + task_key, std::move(e)).first;
  }
  Entry& e = *it->second;
  const sched::Sketch* s = nullptr;
  sched::Config c =
      sched::config_from_json(config_json, e.sketches, "the configuration of a " + task_key + " record", &s);
  if (s->name != sketch)
    throw Error("a " + task_key + " record names sketch " + sketch + " but its configuration " + s->name);
  auto& rs = e.exact[s->name];
  if (!rs) rs = std::make_unique<relax::RelaxedSketch>(e.task, *s, relax::TapeMode::Exact);
  Eigen::VectorXd x = rs->space().point_of(c);
  std::vector<double> f(static_cast<size_t>(rs->num_stores()) * rs->num_features());
  rs->evaluate(x.data(), 1, f.data());
  Sample out;
  out.task = task_key;
  out.sketch = sketch;
  out.config = config_json;
  out.stores = rs->num_stores();
  out.features.assign(f.begin(), f.end());
  return out;
}

namespace {

// The machines' descriptions by host; a description this basin cannot read (another
// version) is left out: its machine counts as not described.
std::map<std::string, Hardware> parsed_machines(const std::map<std::string, std::string>& machines) {
  std::map<std::string, Hardware> out;
  for (const auto& [host, text] : machines) try {
      out.emplace(host, Hardware::from_json(text));
    } catch (const Error&) {
    }
  return out;
}

}  // namespace

std::vector<Sample> samples_from_records(const std::vector<search::Record>& records, const std::string& target,
                                         int* skipped, const std::map<std::string, std::string>& machines) {
  FeatureExtractor fx;
  std::vector<Sample> out;
  int skip = 0;
  std::map<std::string, std::vector<float>> described;
  for (const auto& [host, hw] : parsed_machines(machines)) described[host] = hw.features();
  for (const search::Record& r : records) {
    if (r.target != target || !r.ok()) continue;
    try {
      Sample s = fx.features(r.task_key, r.sketch, r.config, target);
      s.latency_us = r.latency_us();
      s.measurements_us = {r.min_latency_us()};
      s.measurements_us.insert(s.measurements_us.end(), r.confirm_us.begin(), r.confirm_us.end());
      s.host = r.host;
      s.codegen = r.codegen;
      if (auto d = described.find(r.host); d != described.end()) s.machine = d->second;
      out.push_back(std::move(s));
    } catch (const Error&) {
      ++skip;
    }
  }
  if (skipped) *skipped = skip;
  return out;
}

namespace {
// The distinct tasks of the samples, sorted, then shuffled by the seed: the order both
// splits draw their held-out tasks from.
std::vector<std::string> shuffled_tasks(const std::vector<Sample>& samples, uint64_t seed) {
  std::set<std::string> distinct;
  for (const Sample& s : samples) distinct.insert(s.task);
  std::vector<std::string> tasks(distinct.begin(), distinct.end());
  std::mt19937_64 rng(seed);
  std::shuffle(tasks.begin(), tasks.end(), rng);
  return tasks;
}
}  // namespace

Split split_by_task(const std::vector<Sample>& samples, double test_fraction, uint64_t seed) {
  std::vector<std::string> tasks = shuffled_tasks(samples, seed);
  size_t n_test = static_cast<size_t>(test_fraction * static_cast<double>(tasks.size()) + 0.5);
  // A positive fraction holds out at least one task and keeps one for training; 0
  // trains on every task (the shipped weights).
  if (test_fraction > 0 && tasks.size() >= 2) n_test = std::clamp<size_t>(n_test, 1, tasks.size() - 1);
  else n_test = 0;
  Split sp;
  std::set<std::string> test(tasks.begin(), tasks.begin() + static_cast<std::ptrdiff_t>(n_test));
  sp.test_tasks.assign(test.begin(), test.end());
  for (const Sample& s : samples) (test.count(s.task) ? sp.test : sp.train).push_back(s);
  return sp;
}

std::vector<Split> task_folds(const std::vector<Sample>& samples, int k, uint64_t seed) {
  std::vector<std::string> tasks = shuffled_tasks(samples, seed);
  if (k < 2 || static_cast<size_t>(k) > tasks.size())
    throw Error(std::to_string(k) + " folds of " + std::to_string(tasks.size()) +
                " tasks: give at least 2 folds and at most one per task");
  std::vector<Split> folds(k);
  std::map<std::string, int> fold_of;
  for (size_t i = 0; i < tasks.size(); ++i) {
    fold_of[tasks[i]] = static_cast<int>(i % k);
    folds[i % k].test_tasks.push_back(tasks[i]);
  }
  for (Split& f : folds) std::sort(f.test_tasks.begin(), f.test_tasks.end());
  for (const Sample& s : samples) {
    const int f = fold_of.at(s.task);
    for (int g = 0; g < k; ++g) (g == f ? folds[g].test : folds[g].train).push_back(s);
  }
  return folds;
}

namespace {

std::string key_of(const std::string& op, const std::map<std::string, std::string>& params) {
  return sched::task_key(ops::build_op(op, params));
}

using OpParams = std::pair<std::string, std::map<std::string, std::string>>;

const std::vector<OpParams>& suite_ops() {
  static const std::vector<OpParams> suite = {
      {"conv2d",
       {{"in_channels", "32"},
        {"out_channels", "64"},
        {"height", "28"},
        {"width", "28"},
        {"kernel", "3"},
        {"padding", "1"}}},
      {"conv2d",
       {{"in_channels", "64"},
        {"out_channels", "64"},
        {"height", "14"},
        {"width", "14"},
        {"kernel", "3"},
        {"padding", "1"}}},
      {"conv2d",
       {{"in_channels", "64"},
        {"out_channels", "128"},
        {"height", "28"},
        {"width", "28"},
        {"kernel", "1"},
        {"padding", "0"},
        {"stride", "2"}}},
      {"conv2d",
       {{"in_channels", "16"},
        {"out_channels", "32"},
        {"height", "56"},
        {"width", "56"},
        {"kernel", "3"},
        {"padding", "1"},
        {"stride", "2"}}},
      {"conv2d",
       {{"in_channels", "128"},
        {"out_channels", "128"},
        {"height", "7"},
        {"width", "7"},
        {"kernel", "3"},
        {"padding", "1"}}},
      {"conv2d",
       {{"in_channels", "3"},
        {"out_channels", "32"},
        {"height", "64"},
        {"width", "64"},
        {"kernel", "5"},
        {"padding", "2"},
        {"stride", "2"}}},
      {"conv2d_bias_relu",
       {{"in_channels", "32"},
        {"out_channels", "32"},
        {"height", "28"},
        {"width", "28"},
        {"kernel", "3"},
        {"padding", "1"}}},
      {"conv2d_bias_relu",
       {{"in_channels", "64"},
        {"out_channels", "96"},
        {"height", "14"},
        {"width", "14"},
        {"kernel", "1"},
        {"padding", "0"}}},
      {"depthwise_conv2d", {{"channels", "64"}, {"height", "56"}, {"width", "56"}}},
      {"depthwise_conv2d", {{"channels", "128"}, {"height", "28"}, {"width", "28"}, {"stride", "2"}}},
      {"dense", {{"M", "64"}, {"K", "512"}, {"N", "512"}}},
      {"dense", {{"M", "128"}, {"K", "256"}, {"N", "1024"}}},
      {"dense", {{"M", "197"}, {"K", "384"}, {"N", "384"}}},
      {"dense", {{"M", "32"}, {"K", "1024"}, {"N", "1000"}}},
      {"dense_bias_gelu", {{"M", "128"}, {"K", "384"}, {"N", "768"}}},
      {"matmul", {{"M", "256"}, {"K", "256"}, {"N", "256"}}},
      {"matmul", {{"M", "384"}, {"K", "128"}, {"N", "512"}}},
      {"matmul", {{"M", "96"}, {"K", "768"}, {"N", "96"}}},
      {"batch_matmul", {{"B", "12"}, {"M", "64"}, {"K", "64"}, {"N", "64"}}},
      {"batch_matmul", {{"B", "8"}, {"M", "128"}, {"K", "32"}, {"N", "128"}}},
      {"softmax", {{"shape", "64,512"}}},
      {"softmax", {{"shape", "12,197,197"}}},
      {"layer_norm", {{"shape", "128,768"}}},
      {"layer_norm", {{"shape", "197,384"}}},
      {"rms_norm", {{"shape", "256,512"}}},
      {"max_pool2d", {{"channels", "64"}, {"height", "56"}, {"width", "56"}}},
      {"avg_pool2d", {{"channels", "32"}, {"height", "28"}, {"width", "28"}}},
      {"global_avg_pool2d", {{"channels", "512"}, {"height", "7"}, {"width", "7"}}},
      {"sum", {{"shape", "64,1024"}, {"axes", "1"}}},
      {"batch_norm", {{"shape", "1,64,28,28"}}},
  };
  return suite;
}

std::vector<std::string> suite_tasks() {
  std::vector<std::string> keys;
  for (const auto& [op, p] : suite_ops()) keys.push_back(key_of(op, p));
  return keys;
}

// The first n of one fixed sequence of suite operators with other shapes: each extent
// (channels, height, width, M, K, N, B and every dimension of a shape, not kernels,
// strides or axes) of a drawn suite entry scaled by one of 1/2, 2/3, 3/4, 1, 4/3, 3/2.
// More tasks of the kinds the suite has, for training data; repeats are skipped.
std::vector<std::string> shape_variants(int n) {
  static const std::set<std::string> extents = {
      "in_channels", "out_channels", "height", "width", "channels", "M", "K", "N", "B", "shape"};
  static const double factors[] = {0.5, 2.0 / 3, 0.75, 1.0, 4.0 / 3, 1.5};
  std::mt19937_64 rng(20261123);
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const std::string& k : suite_tasks()) seen.insert(k);
  for (int attempt = 0; static_cast<int>(keys.size()) < n && attempt < 100 * n; ++attempt) {
    auto [op, params] = suite_ops()[std::uniform_int_distribution<size_t>(0, suite_ops().size() - 1)(rng)];
    for (auto& [name, value] : params) {
      if (!extents.count(name)) continue;
      std::istringstream is(value);
      std::string dim, scaled;
      while (std::getline(is, dim, ',')) {
        const double f = factors[std::uniform_int_distribution<int>(0, 5)(rng)];
        const long v = std::max(1L, std::lround(std::stol(dim) * f));
        scaled += (scaled.empty() ? "" : ",") + std::to_string(v);
      }
      value = scaled;
    }
    std::string key = key_of(op, params);
    if (seen.insert(key).second) keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace

std::vector<std::string> dataset_tasks(const std::string& which) {
  std::vector<std::string> keys;
  auto add_workload = [&](const ops::Workload& w) { keys.push_back(key_of(w.op, w.params)); };
  // The tasks of a network, after the graph passes and fusion (as `basin tune` sees them).
  auto add_graph = [&](const graph::Graph& g) {
    for (const graph::NetworkTask& t : graph::partition(graph::optimize(g, graph::layout_lanes("llvm"))).tasks)
      keys.push_back(t.key);
  };
  auto add_network = [&](const std::string& net) { add_graph(graph::zoo_network(net)); };
  // The range of "PREFIX:N" (the first N: [0, N)) or "PREFIX:A-B" (the A+1-th to the
  // B-th: what PREFIX:B adds to PREFIX:A), 0 <= A < B <= max; or nothing.
  auto range_of = [](const std::string& list, size_t prefix, int64_t max) -> std::optional<std::pair<int, int>> {
    std::string spec = list.substr(prefix);
    size_t dash = spec.find('-', 1);  // not a leading minus sign
    std::optional<int64_t> from =
        dash == std::string::npos ? std::optional<int64_t>(0) : parse_int(spec.substr(0, dash));
    std::optional<int64_t> to = parse_int(dash == std::string::npos ? spec : spec.substr(dash + 1));
    if (!from || !to || *from < 0 || *to <= *from || *to > max) return std::nullopt;
    return std::pair<int, int>(static_cast<int>(*from), static_cast<int>(*to));
  };
  std::istringstream is(which);
  std::string name;
  while (std::getline(is, name, ',')) {
    if (name == "suite") {
      for (const std::string& k : suite_tasks()) keys.push_back(k);
    } else if (name == "workloads") {
      for (const ops::Workload& w : ops::all_workloads())
        if (w.name != "gemm-2048" && w.name != "gemm-4096") add_workload(w);
    } else if (name == "networks") {
      for (const graph::ZooEntry& z : graph::zoo_networks()) add_network(z.name);
    } else if (name.rfind("zoo:", 0) == 0) {
      add_network(name.substr(4));
    } else if (name.rfind("shapes:", 0) == 0) {
      auto r = range_of(name, 7, std::numeric_limits<int>::max());
      if (!r)
        throw Error("task list '" + name + "': give shapes:N with N a positive count, or shapes:A-B with 0 <= A < B");
      std::vector<std::string> v = shape_variants(r->second);
      for (size_t i = r->first; i < v.size(); ++i) keys.push_back(std::move(v[i]));
    } else if (name.rfind("nets:", 0) == 0) {
      auto r = range_of(name, 5, 100000);
      if (!r)
        throw Error("task list '" + name +
                    "': give nets:N with N a count from 1 to 100000, or nets:A-B with 0 <= A < B <= 100000");
      for (int i = r->first; i < r->second; ++i) add_graph(graph::random_network(static_cast<uint64_t>(i)));
    } else {
      add_workload(ops::find_workload(name));
    }
  }
  // A task named twice (two networks share a layer) is measured once, in first-seen order.
  std::vector<std::string> unique;
  std::set<std::string> seen;
  for (const std::string& k : keys)
    if (seen.insert(k).second) unique.push_back(k);
  return unique;
}

search::Record record_of(const RecordSource& src, const codegen::MeasureResult& m) {
  search::Record r;
  r.task_key = src.task_key;
  r.target = src.target;
  r.sketch = src.sketch;
  r.config = src.config_json;
  r.seed = src.seed;
  r.estimator_version = src.estimator_version;
  r.host = src.host;
  r.codegen = src.codegen;
  r.started_at = src.started_at;
  r.finished_at = src.finished_at;
  r.latencies_us = m.latencies_us;
  r.error = m.error;
  r.compile_seconds = m.compile_seconds;
  return r;
}

search::Record measure_record(codegen::MeasurePool& pool, const std::string& key, const std::string& target,
                              const codegen::Candidate& program, const std::string& config_json, uint64_t seed,
                              const std::string& estimator_version) {
  auto now = [] { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); };
  RecordSource src{key,
                   target,
                   program.sketch->name,
                   config_json,
                   seed,
                   estimator_version,
                   machine_description(target),
                   codegen::codegen_version(target)};
  src.started_at = now();
  const codegen::MeasureResult m = pool.measure_one(program);
  src.finished_at = now();
  return record_of(src, m);
}

int collect_random(search::RecordStore& store, const std::vector<std::string>& task_keys, const CollectOptions& opt) {
  int measured = 0;
  for (const std::string& key : task_keys) {
    // Only the records measured here count: another machine's, or another code
    // generation's, are measured again.
    int have = 0, unrepeated = 0;
    for (const search::Record& r : store.task_records(key, opt.target))
      if (r.measured_here()) {
        ++have;
        unrepeated += r.ok() && static_cast<int>(r.confirm_us.size()) < opt.repeat;
      }
    if (have >= opt.per_task && unrepeated == 0) continue;
    ops::OpGraph task = sched::task_from_key(key);
    std::vector<sched::Sketch> sketches = sched::sketches_for(task, opt.target);
    if (sketches.empty()) continue;  // no GPU sketch for this task yet
    codegen::MeasureOptions mo;
    mo.timeout_seconds = opt.timeout_seconds;
    mo.target = opt.target;
    mo.max_instructions = opt.max_instructions;
    mo.compile_threads = opt.compile_threads;
    codegen::MeasurePool pool(task, sketches, mo);
    std::mt19937_64 rng(opt.seed ^ std::hash<std::string>()(key));
    // The task's new programs drawn first, then compiled ahead on every core and
    // measured one at a time (codegen/measure.h), each stored as it is measured.
    int duplicates = 0;
    std::vector<codegen::Candidate> batch;
    std::vector<std::string> jsons;
    std::set<std::string> drawn;
    while (have + static_cast<int>(batch.size()) < opt.per_task && duplicates < 200) {
      const sched::Sketch& s = pool.sketches()[std::uniform_int_distribution<size_t>(0, sketches.size() - 1)(rng)];
      sched::Config c = sched::random_config(s, rng);
      std::string json = sched::config_to_json(s, c);
      if (store.contains(key, opt.target, s.name, json, machine_description(opt.target),
                         codegen::codegen_version(opt.target)) ||
          !drawn.insert(s.name + "\n" + json).second) {
        ++duplicates;  // small spaces run out of new programs
        continue;
      }
      duplicates = 0;
      batch.push_back({&s, std::move(c)});
      jsons.push_back(std::move(json));
    }
    pool.prepare(batch);
    for (size_t i = 0; i < batch.size(); ++i) {
      search::Record r = measure_record(pool, key, opt.target, batch[i], jsons[i], opt.seed, "random");
      store.add(r);
      ++have;
      ++measured;
      if (opt.progress) opt.progress(key, have, opt.per_task, r);
    }
    // The repeats: one pass over the task's programs each, every measurement stored
    // as it is taken (a killed run keeps them and a rerun goes on).
    struct Program {
      search::Record record;
      codegen::Candidate candidate;
    };
    std::vector<Program> again;
    if (opt.repeat > 0)
      for (search::Record& r : store.task_records(key, opt.target)) {
        if (!r.measured_here() || !r.ok() || static_cast<int>(r.confirm_us.size()) >= opt.repeat) continue;
        codegen::Candidate c;
        try {
          c.config = sched::config_from_json(r.config, pool.sketches(), store.path(), &c.sketch);
        } catch (const Error&) {
          continue;  // a program of sketches this basin no longer generates
        }
        again.push_back({std::move(r), std::move(c)});
      }
    for (int k = 1; k <= opt.repeat; ++k) {
      std::vector<Program*> pass;
      std::vector<codegen::Candidate> ahead;
      for (Program& p : again)
        if (static_cast<int>(p.record.confirm_us.size()) < k) {
          pass.push_back(&p);
          ahead.push_back(p.candidate);
        }
      pool.prepare(ahead);
      for (Program* p : pass) {
        search::Record& r = p->record;
        codegen::MeasureResult m = pool.measure_one(p->candidate);
        // A program that fails now (a timeout on a loaded machine) counts at its minimum.
        r.confirm_us.push_back(m.ok() && !m.latencies_us.empty() ? m.min_us() : r.min_latency_us());
        store.confirm(r.id, r.confirm_us);
      }
    }
  }
  return measured;
}

namespace {

// The feature set of samples: CPU, or GPU (the CPU features and more) for samples of
// the cuda target.
relax::FeatureSet feature_set_of(const std::vector<Sample>& samples) {
  const bool gpu = !samples.empty() && samples[0].stores > 0 &&
                   samples[0].features.size() ==
                       static_cast<size_t>(samples[0].stores) * relax::num_features(relax::FeatureSet::Gpu);
  return gpu ? relax::FeatureSet::Gpu : relax::FeatureSet::Cpu;
}
int feature_version_of(relax::FeatureSet set) {
  return set == relax::FeatureSet::Gpu ? relax::kGpuFeatureVersion : relax::kFeatureVersion;
}

}  // namespace

void export_samples(const std::vector<Sample>& samples, std::ostream& out,
                    const std::map<std::string, std::string>& machines) {
  const relax::FeatureSet set = feature_set_of(samples);
  nlohmann::json described = nlohmann::json::object();
  for (const auto& [host, hw] : parsed_machines(machines)) described[host] = nlohmann::json::parse(hw.to_json());
  nlohmann::json head = {{"feature_version", feature_version_of(set)},
                         {"feature_set", set == relax::FeatureSet::Gpu ? "gpu" : "cpu"},
                         {"feature_names", relax::feature_names(set)},
                         {"samples", samples.size()},
                         {"machines", described}};
  out << head.dump() << "\n";
  int nf = relax::num_features(set);
  for (const Sample& s : samples) {
    nlohmann::json f = nlohmann::json::array();
    for (int st = 0; st < s.stores; ++st)
      f.push_back(std::vector<float>(s.features.begin() + st * nf, s.features.begin() + (st + 1) * nf));
    out << nlohmann::json{{"task", s.task}, {"sketch", s.sketch},   {"config", s.config}, {"latency_us", s.latency_us},
                          {"host", s.host}, {"codegen", s.codegen}, {"stores", s.stores}, {"features", f}}
               .dump()
        << "\n";
  }
}

namespace {
// A CSV field: quoted when it holds a comma, a quote or a line break, quotes doubled.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
std::string number(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

// The rows of the CSV and Parquet exports, one per store of each program, walked in
// order: `row` gets the sample, its index, its family, its store and the machine's
// description (null when the records hold none).
void for_each_row(const std::vector<Sample>& samples, const std::map<std::string, Hardware>& machines,
                  const std::function<void(const Sample&, size_t, const std::string&, int, const Hardware*)>& row) {
  std::map<std::string, std::string> families;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    auto fam = families.find(s.task);
    if (fam == families.end()) fam = families.emplace(s.task, task_family(s.task)).first;
    auto m = machines.find(s.host);
    for (int st = 0; st < s.stores; ++st) row(s, i, fam->second, st, m == machines.end() ? nullptr : &m->second);
  }
}

std::string measurements_text(const Sample& s) {
  std::string measured;
  for (double m : s.measurements_us) measured += (measured.empty() ? "" : " ") + number(m);
  return measured;
}

}  // namespace

std::vector<std::string> export_machine_columns() {
  std::vector<std::string> out;
  for (const std::string& n : hardware_feature_names()) out.push_back("machine." + n);
  return out;
}

void export_samples_csv(const std::vector<Sample>& samples, std::ostream& out,
                        const std::map<std::string, std::string>& machines) {
  const relax::FeatureSet set = feature_set_of(samples);
  const int version = feature_version_of(set);
  const int nf = relax::num_features(set);
  out << "program,task,family,host,codegen,sketch,config,latency_us,measurements_us,feature_version,stores,store";
  for (const std::string& name : export_machine_columns()) out << "," << name;
  for (const std::string& name : relax::feature_names(set)) out << "," << csv_field(name);
  out << "\n";
  for_each_row(samples, parsed_machines(machines),
               [&](const Sample& s, size_t i, const std::string& family, int st, const Hardware* hw) {
                 out << i << "," << csv_field(s.task) << "," << family << "," << csv_field(s.host) << ","
                     << csv_field(s.codegen) << "," << csv_field(s.sketch) << "," << csv_field(s.config) << ","
                     << number(s.latency_us) << "," << measurements_text(s) << "," << version << "," << s.stores << ","
                     << st;
                 if (hw) {
                   for (double v : hw->numbers()) out << "," << number(v);
                 } else {
                   for (size_t k = 0; k < hardware_feature_names().size(); ++k) out << ",";
                 }
                 for (int f = 0; f < nf; ++f) out << "," << number(s.features[static_cast<size_t>(st) * nf + f]);
                 out << "\n";
               });
}

std::string export_samples_parquet(const std::vector<Sample>& samples,
                                   const std::map<std::string, std::string>& machines) {
  const relax::FeatureSet set = feature_set_of(samples);
  const int version = feature_version_of(set);
  const int nf = relax::num_features(set);
  using T = ParquetColumn::Type;
  std::vector<ParquetColumn> cols;
  auto add = [&](const std::string& name, T type) {
    ParquetColumn c;
    c.name = name;
    c.type = type;
    cols.push_back(std::move(c));
  };
  add("program", T::Int64);
  for (const char* name : {"task", "family", "host", "codegen", "sketch", "config"}) add(name, T::String);
  add("latency_us", T::Double);
  add("measurements_us", T::String);
  for (const char* name : {"feature_version", "stores", "store"}) add(name, T::Int64);
  const size_t first_machine = cols.size();
  for (const std::string& name : export_machine_columns()) add(name, T::Double);
  const size_t first_feature = cols.size();
  for (const std::string& name : relax::feature_names(set)) add(name, T::Float);
  const size_t nm = first_feature - first_machine;
  for_each_row(
      samples, parsed_machines(machines),
      [&](const Sample& s, size_t i, const std::string& family, int st, const Hardware* hw) {
        cols[0].i64.push_back(static_cast<int64_t>(i));
        cols[1].str.push_back(s.task);
        cols[2].str.push_back(family);
        cols[3].str.push_back(s.host);
        cols[4].str.push_back(s.codegen);
        cols[5].str.push_back(s.sketch);
        cols[6].str.push_back(s.config);
        cols[7].f64.push_back(s.latency_us);
        cols[8].str.push_back(measurements_text(s));
        cols[9].i64.push_back(version);
        cols[10].i64.push_back(s.stores);
        cols[11].i64.push_back(st);
        const std::vector<double> numbers = hw ? hw->numbers() : std::vector<double>(nm, 0.0);
        for (size_t k = 0; k < nm; ++k) {
          cols[first_machine + k].f64.push_back(numbers[k]);
          cols[first_machine + k].present.push_back(hw != nullptr);
        }
        for (int f = 0; f < nf; ++f)
          cols[first_feature + static_cast<size_t>(f)].f32.push_back(s.features[static_cast<size_t>(st) * nf + f]);
      });
  // A table of no rows keeps the machine columns optional.
  if (samples.empty())
    for (size_t k = 0; k < nm; ++k) cols[first_machine + k].present.clear();
  return parquet_file(cols, {{"basin.feature_version", std::to_string(version)},
                             {"basin.feature_set", set == relax::FeatureSet::Gpu ? "gpu" : "cpu"},
                             {"basin.schema", "docs/estimators.md, \"Exporting records\""}});
}

}  // namespace basin::models
