#include "models/calibrate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>

#include "codegen/measure.h"
#include "codegen/version.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "core/util/hardware.h"
#include "core/util/host.h"
#include "core/util/io.h"
#include "core/util/output_file.h"
#include "models/dataset.h"

namespace basin::models {

namespace {

std::atomic<bool> g_use_calibration{true};

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string shipped_file(const std::string& kind) {
  return kind == "ensemble" ? pretrained_cpu_path("cpu_ensemble.bin")
         : kind == "mlp"    ? pretrained_cpu_path("cpu_mlp.bin")
                            : "";
}

// The shipped file's header line (its kind, feature version, size and checksum): what
// a calibration was made from.
std::string header_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string line;
  std::getline(f, line);
  return line;
}

std::string meta_path(const std::string& kind) { return calibration_dir() + "/" + kind + ".json"; }

}  // namespace

std::string calibration_dir() {
  return cache_dir() + "/calibration/" +
         file_slug(machine_description("llvm") + " " + codegen::codegen_version("llvm"));
}

void set_use_calibration(bool on) { g_use_calibration = on; }
bool use_calibration() { return g_use_calibration; }

std::string calibrated_estimator_path(const std::string& kind) {
  if (!use_calibration() || (kind != "ensemble" && kind != "mlp")) return "";
  const std::string file = calibration_dir() + "/" + kind + ".bin", base = shipped_file(kind);
  if (base.empty() || !regular_file(file) || !regular_file(meta_path(kind))) return "";
  try {
    std::ifstream f(meta_path(kind));
    nlohmann::json meta = nlohmann::json::parse(f);
    // Made here, by this code generation, from the weights installed now.
    if (meta.at("host") != machine_description("llvm") || meta.at("codegen") != codegen::codegen_version("llvm") ||
        meta.at("base") != header_of(base))
      return "";
  } catch (const std::exception&) {
    return "";
  }
  return file;
}

bool shipped_weights_know_this_host() {
  const std::string list = pretrained_cpu_path("hosts.txt");
  if (list.empty()) return false;
  const std::string here = this_host().cpu() + ", " + this_host().vector_isa;
  std::ifstream f(list);
  for (std::string line; std::getline(f, line);)
    if (line == here) return true;
  return false;
}

std::string task_family(const std::string& key) {
  std::vector<std::string> ops;
  const size_t open = key.find('(');
  const std::string op = key.substr(0, open);
  if (op == "subgraph") {
    static const std::regex node("=([a-z0-9_]+)\\(");
    for (auto it = std::sregex_iterator(key.begin(), key.end(), node); it != std::sregex_iterator(); ++it)
      ops.push_back((*it)[1]);
  } else {
    ops.push_back(op);
  }
  auto any = [&](const char* part) {
    return std::any_of(ops.begin(), ops.end(), [&](const std::string& o) { return o.find(part) != std::string::npos; });
  };
  if (any("attention")) return "attention";
  if (any("conv_transpose")) return "conv_transpose2d";
  if (any("depthwise")) return "depthwise_conv2d";
  if (any("conv")) {
    // A graph's convolution names its groups: more than one is depthwise (or grouped).
    static const std::regex groups("groups=([0-9]+)");
    std::smatch m;
    if (std::regex_search(key, m, groups) && m[1] != "1") return "depthwise_conv2d";
    return "conv2d";
  }
  if (any("batch_matmul")) return "batch_matmul";
  if (any("matmul")) return "matmul";
  if (any("dense") || any("gemm") || any("linear")) return "dense";
  if (any("softmax")) return "softmax";
  if (any("norm")) return "norm";
  if (any("pool")) return "pool";
  if (any("sum") || any("mean") || any("reduce") || any("max") || any("min")) return "reduction";
  return "elementwise";
}

CalibrateResult calibrate(const CalibrateOptions& opt) {
  if (opt.kind != "ensemble" && opt.kind != "mlp")
    throw Error("calibration adapts the shipped 'ensemble' or 'mlp', not '" + opt.kind + "'");
  const std::string base = shipped_file(opt.kind);
  if (base.empty()) throw Error("no shipped " + opt.kind + " weights to calibrate (models/weights)");
  if (opt.budget_seconds <= 0) throw Error("the calibration budget must be positive");
  auto log = [&](const std::string& line) {
    if (opt.log) opt.log(line);
  };
  const auto t0 = Clock::now();
  CalibrateResult res;
  std::filesystem::create_directories(calibration_dir());
  std::unique_ptr<search::RecordStore> own;
  search::RecordStore* store = opt.store;
  if (!store) {
    own = std::make_unique<search::RecordStore>(calibration_dir() + "/records.db");
    store = own.get();
  }
  res.records = store->path();
  res.out = opt.out.empty() ? calibration_dir() + "/" + opt.kind + ".bin" : opt.out;
  std::unique_ptr<Estimator> est = load_estimator(base);
  if (opt.kind == "ensemble" && est->kind() != "ensemble") est = detail::make_ensemble(std::move(est));

  // Tasks in an order that takes one of each family before a second of any.
  std::map<std::string, std::vector<std::string>> by_family;
  std::vector<std::string> family_order;
  const std::vector<std::string> listed = opt.task_keys.empty() ? dataset_tasks(opt.tasks) : opt.task_keys;
  for (const std::string& k : listed) {
    const std::string f = task_family(k);
    if (!by_family.count(f)) family_order.push_back(f);
    by_family[f].push_back(k);
  }
  std::vector<std::string> tasks;
  for (size_t round = 0;; ++round) {
    size_t added = 0;
    for (const std::string& f : family_order)
      if (round < by_family[f].size()) {
        tasks.push_back(by_family[f][round]);
        ++added;
      }
    if (added == 0) break;
  }
  const std::string host = machine_description("llvm"), codegen = codegen::codegen_version("llvm");
  FeatureExtractor fx;
  std::set<std::string> families_done;
  for (size_t t = 0; t < tasks.size(); ++t) {
    const double left = opt.budget_seconds - since(t0);
    if (left <= 1) break;
    const double share = left / static_cast<double>(tasks.size() - t);
    const auto task_start = Clock::now();
    const std::string& key = tasks[t];
    ops::OpGraph task = sched::task_from_key(key);
    std::vector<sched::Sketch> sketches = sched::sketches_for(task, "llvm");
    if (sketches.empty()) continue;
    // The pool: random valid programs not measured here yet, ranked by the estimator.
    std::mt19937_64 rng(opt.seed ^ std::hash<std::string>()(key));
    std::vector<Sample> pool;
    std::vector<std::pair<const sched::Sketch*, sched::Config>> programs;
    std::set<std::string> drawn;
    for (int misses = 0; static_cast<int>(pool.size()) < opt.pool && misses < 200;) {
      const sched::Sketch& s = sketches[std::uniform_int_distribution<size_t>(0, sketches.size() - 1)(rng)];
      sched::Config c = sched::random_config(s, rng);
      std::string json = sched::config_to_json(s, c);
      if (!drawn.insert(s.name + "\n" + json).second || store->contains(key, "llvm", s.name, json, host, codegen)) {
        ++misses;
        continue;
      }
      try {
        pool.push_back(fx.features(key, s.name, json));
      } catch (const Error&) {
        ++misses;  // a program whose features cannot be computed is not measured
        continue;
      }
      misses = 0;
      programs.emplace_back(&s, std::move(c));
    }
    if (pool.size() < 2) continue;
    std::vector<double> score = est->predict(FeatureBatch::of(pool));
    std::vector<size_t> order(pool.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
    // Picks in an order whose every prefix is a balanced sample: the best-ranked
    // programs (where a search measures) in turn with programs spread over the rest of
    // the ranking, at positions that halve the gaps left (0.5, 0.25, 0.75, ...).
    const size_t top = std::min<size_t>(16, std::max<size_t>(1, pool.size() / 4));
    std::vector<size_t> picks;
    std::set<size_t> taken;
    for (size_t k = 0; picks.size() < std::min<size_t>(32, pool.size()) && k < pool.size(); ++k) {
      if (k < top && taken.insert(k).second) picks.push_back(order[k]);
      double q = 0;
      for (size_t bits = k + 1, f = 2; bits > 0; bits >>= 1, f *= 2) q += static_cast<double>(bits & 1) / f;
      const size_t at = top + std::min(pool.size() - top - 1, static_cast<size_t>(q * (pool.size() - top)));
      if (pool.size() > top && taken.insert(at).second) picks.push_back(order[at]);
    }
    codegen::MeasureOptions mo;
    mo.timeout_seconds = opt.timeout_seconds;
    mo.target = "llvm";
    codegen::MeasurePool measurer(task, sketches, mo);
    auto candidate = [&](size_t p) {
      // The pool's sketch pointers index `sketches`; the measurer holds its own copy.
      const size_t si = static_cast<size_t>(programs[p].first - sketches.data());
      return codegen::Candidate{&measurer.sketches()[si], programs[p].second};
    };
    // Compiled ahead a few at a time, until the task's share of the budget is spent
    // (at least two programs each: a pair to learn from).
    int measured = 0;
    constexpr size_t kChunk = 4;
    for (size_t at = 0; at < picks.size(); at += kChunk) {
      if (measured >= 2 && since(task_start) >= share) break;
      std::vector<codegen::Candidate> chunk;
      for (size_t i = at; i < std::min(picks.size(), at + kChunk); ++i) chunk.push_back(candidate(picks[i]));
      measurer.prepare(chunk);
      for (size_t i = 0; i < chunk.size(); ++i) {
        search::Record r =
            measure_record(measurer, key, "llvm", chunk[i], pool[picks[at + i]].config, opt.seed, "calibration");
        store->add(r);
        ++measured;
      }
    }
    res.measured += measured;
    ++res.tasks;
    families_done.insert(task_family(key));
    log("[calibrate] " + std::to_string(t + 1) + "/" + std::to_string(tasks.size()) + " " + task_family(key) + ": " +
        std::to_string(measured) + " programs (" + std::to_string(static_cast<int>(since(t0))) + " s)");
  }
  res.families = static_cast<int>(families_done.size());
  res.measure_seconds = since(t0);
  if (res.measured == 0) throw Error("calibration measured nothing in " + std::to_string(opt.budget_seconds) + " s");

  // Every program this machine's code generation measured in the records: earlier
  // calibrations' too.
  std::vector<search::Record> mine;
  for (const search::Record& r : store->all())
    if (r.target == "llvm" && r.host == host && r.codegen == codegen) mine.push_back(r);
  std::vector<Sample> samples = samples_from_records(mine, "llvm");
  if (samples.size() < 2) throw Error("calibration has fewer than two measured programs to learn from");
  res.samples = static_cast<int>(samples.size());
  const auto t1 = Clock::now();
  res.before = evaluate(*est, samples).pairwise_accuracy;
  TrainOptions to;
  to.seed = opt.seed;
  to.epochs = opt.epochs;
  to.tree_eta = 0.2;
  to.tree_pair_samples = 4;
  est->update(samples, to);
  res.after = evaluate(*est, samples).pairwise_accuracy;
  est->save(res.out);
  if (opt.out.empty()) {
    nlohmann::json meta = {{"host", host},
                           {"codegen", codegen},
                           {"base", header_of(base)},
                           {"base_file", base},
                           {"measured", res.measured},
                           {"samples", res.samples},
                           {"tasks", res.tasks},
                           {"seconds", res.measure_seconds},
                           {"epochs", opt.epochs}};
    write_output_file(meta_path(opt.kind), [&](OutputFile& f) { f.write(meta.dump(2) + "\n"); });
  }
  res.train_seconds = since(t1);
  return res;
}

}  // namespace basin::models
