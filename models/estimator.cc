#include "models/estimator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "codegen/cuda.h"
#include "core/util/error.h"
#include "core/util/registry.h"
#include "core/util/hash.h"
#include "core/util/io.h"
#include "core/util/output_file.h"
#include "core/util/parallel.h"
#include "models/calibrate.h"
#include "relax/features.h"

namespace basin::models {

FeatureBatch FeatureBatch::of(const std::vector<const Sample*>& samples) {
  FeatureBatch b;
  b.batch = static_cast<int>(samples.size());
  // The samples' feature set (CPU or GPU), from their width.
  b.features = relax::num_features();
  if (!samples.empty() && samples[0]->stores > 0)
    b.features = static_cast<int>(samples[0]->features.size()) / samples[0]->stores;
  for (const Sample* s : samples) b.stores = std::max(b.stores, s->stores);
  b.values.assign(static_cast<size_t>(b.batch) * b.stores * b.features, 0.0f);
  b.mask.assign(static_cast<size_t>(b.batch) * b.stores, 0.0f);
  bool described = false;
  for (const Sample* s : samples) described = described || !s->machine.empty();
  if (described) b.machines.resize(static_cast<size_t>(b.batch));
  for (int i = 0; i < b.batch; ++i) {
    const Sample& s = *samples[i];
    if (described) b.machines[static_cast<size_t>(i)] = s.machine;
    BASIN_CHECK(s.features.size() == static_cast<size_t>(s.stores) * b.features) << "a sample of " << s.task;
    std::copy(s.features.begin(), s.features.end(), b.values.begin() + static_cast<size_t>(i) * b.stores * b.features);
    std::fill_n(b.mask.begin() + static_cast<size_t>(i) * b.stores, s.stores, 1.0f);
  }
  return b;
}

FeatureBatch FeatureBatch::of(const std::vector<Sample>& samples) {
  std::vector<const Sample*> p;
  for (const Sample& s : samples) p.push_back(&s);
  return of(p);
}

void Estimator::save(const std::string& path) const { detail::write_file(path, kind(), payload()); }

std::string Estimator::payload() const {
  throw Error("the " + kind() + " estimator is not written in basin's estimator file format");
}

namespace {
constexpr const char* kMlpFromCpu = "mlp-from-cpu";
bool names_a_file(const std::string& spec) {
  return spec.find('/') != std::string::npos || spec.find('.') != std::string::npos;
}
// No GPU weights ship: on "cuda" the trainable kinds start untrained.
// GPU 0's architecture, or sm_90 where there is none (the prior's rates).
std::string gpu_arch() {
  static const std::string arch = [] {
    try {
      std::string why;
      return codegen::cuda_available(&why) ? codegen::cuda_device_arch() : std::string("sm_90");
    } catch (const Error&) {
      return std::string("sm_90");
    }
  }();
  return arch;
}

bool untrained_on(const std::string& spec, const std::string& target) {
  return target == "cuda" && (spec == "mlp" || spec == "gbt" || spec == "ensemble");
}
}  // namespace

std::unique_ptr<Estimator> estimator_for_target(const std::string& spec, const std::string& target) {
  if (spec == kMlpFromCpu) {
    if (target != "cuda")
      throw Error("the " + std::string(kMlpFromCpu) + " estimator is for the cuda target (on " + target +
                  " the CPU's MLP is `mlp`)");
    return with_gpu_prior(make_estimator(spec), gpu_arch());
  }
  if (untrained_on(spec, target)) return with_gpu_prior(make_estimator(spec), gpu_arch());
  return estimator_from_spec(spec);
}

std::string estimator_file(const std::string& spec, const std::string& target) {
  if (untrained_on(spec, target) || spec == kMlpFromCpu) return "";
  // This machine's calibration of the shipped weights, where one was made
  // (models/calibrate.h).
  if (spec == "mlp" || spec == "ensemble")
    if (std::string c = calibrated_estimator_path(spec); !c.empty()) return c;
  if (spec == "mlp") return pretrained_cpu_path();
  if (spec == "ensemble") {
    std::string p = pretrained_cpu_path("cpu_ensemble.bin");
    return p.empty() ? pretrained_cpu_path() : p;
  }
  return names_a_file(spec) ? spec : "";
}

namespace {

struct EstimatorEntry {
  std::string name;  // the kind
  int order = 0;
  EstimatorMaker make;
  EstimatorLoader load;
  std::string help;
};

Registry<EstimatorEntry>& estimator_registry() {
  static Registry<EstimatorEntry> r("estimator kinds");
  return r;
}

const EstimatorEntry* find_kind(const std::string& kind) { return estimator_registry().find(kind); }

}  // namespace

EstimatorRegistration::EstimatorRegistration(const std::string& kind, int order, EstimatorMaker make,
                                             EstimatorLoader load, const std::string& help) {
  BASIN_CHECK(kind.rfind("machine+", 0) != 0 && kind != kMlpFromCpu) << "the estimator kind " << kind << " is reserved";
  estimator_registry().add({kind, order, std::move(make), std::move(load), help});
}

std::vector<EstimatorKind> estimator_kinds() {
  std::vector<EstimatorKind> out;
  for (const EstimatorEntry* e : estimator_registry().ordered()) out.push_back({e->name, e->help});
  return out;
}

std::unique_ptr<Estimator> make_estimator(const std::string& kind) {
  if (kind.rfind("machine+", 0) == 0) {
    const std::string inner = kind.substr(8);
    if (inner != "mlp" && inner != "gbt" && inner != "ensemble")
      throw NotFoundError("unknown estimator '" + kind + "' (machine+mlp, machine+gbt or machine+ensemble)");
    return make_machine_input(make_estimator(inner));
  }
  if (kind == kMlpFromCpu) {
    const std::string cpu = pretrained_cpu_path();
    if (cpu.empty()) throw NotFoundError("no shipped CPU MLP (models/weights/cpu_mlp.bin) to transfer to the GPU");
    return transfer_to_gpu(*load_estimator(cpu));
  }
  if (const EstimatorEntry* e = find_kind(kind)) return e->make();
  std::string kinds;
  for (const EstimatorKind& k : estimator_kinds()) kinds += k.kind + ", ";
  throw NotFoundError("unknown estimator '" + kind + "' (estimators: " + kinds + "mlp-from-cpu, or a file)");
}

namespace {
bool is_torchscript(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".pt" || ext == ".pth";
}
void check_exists(const std::string& path) {
  if (!std::filesystem::exists(path)) throw Error("estimator file " + path + " does not exist");
}
std::unique_ptr<Estimator> load_contents(const detail::FileContents& f, const std::string& path) {
  return detail::load_payload(f.kind, f.payload, path);
}
// No shipped ensemble: the shipped MLP, its trees from the first update.
std::unique_ptr<Estimator> as_spec(std::unique_ptr<Estimator> e, const std::string& spec) {
  if (spec == "ensemble" && e->kind() != "ensemble") return detail::make_ensemble(std::move(e));
  return e;
}
}  // namespace

std::unique_ptr<Estimator> detail::load_payload(const std::string& kind, const std::string& payload,
                                                const std::string& path) {
  if (kind.rfind("machine+", 0) == 0) return detail::load_machine_input(payload, path);
  if (const EstimatorEntry* e = find_kind(kind)) return e->load(payload, path);
  throw Error(path + ": unknown estimator kind '" + kind + "'");
}

std::unique_ptr<Estimator> load_estimator(const std::string& path) {
  check_exists(path);
  if (is_torchscript(path)) return detail::load_torchscript(path);
  return load_contents(detail::read_file(path), path);
}

std::vector<std::unique_ptr<Estimator>> estimators_for_target(const std::string& spec, const std::string& target,
                                                              int n) {
  std::vector<std::unique_ptr<Estimator>> out(static_cast<size_t>(std::max(n, 0)));
  const std::string file = estimator_file(spec, target);
  if (file.empty() || is_torchscript(file)) {
    for (auto& e : out) e = estimator_for_target(spec, target);
    return out;
  }
  check_exists(file);
  const detail::FileContents f = detail::read_file(file);
  // Each estimator owns its weights (LibTorch tensors, an XGBoost booster) and loads
  // nothing shared: one per helper thread at a time.
  parallel_for(static_cast<int>(out.size()),
               [&](int i) { out[static_cast<size_t>(i)] = as_spec(load_contents(f, file), spec); });
  return out;
}

std::string pretrained_cpu_path(const std::string& file) {
  // BASIN_DATA_DIR first: the Python package's copy, wherever the wheel was installed.
  const char* env = std::getenv("BASIN_DATA_DIR");
  for (std::string dir : {std::string(env ? env : ""), std::string(BASIN_SOURCE_DIR "/models/weights"),
                          std::string(BASIN_INSTALL_DATADIR)}) {
    if (dir.empty()) continue;
    std::string p = dir + "/" + file;
    if (std::filesystem::exists(p)) return p;
  }
  return "";
}

std::unique_ptr<Estimator> estimator_from_spec(const std::string& spec) {
  // The file is estimator_file's: what tune-op reports is what loads.
  const std::string file = estimator_file(spec, "llvm");
  if (file.empty()) return make_estimator(spec);  // untrained; throws for an unknown kind
  return as_spec(load_estimator(file), spec);
}

void train_for_tuning(Estimator& e, const std::vector<Sample>& samples, uint64_t seed) {
  const bool from_scratch = !e.ready() || e.retrains_in_tuning();
  TrainOptions o;
  o.seed = seed;
  o.tree_eta = 0.2;
  o.tree_pair_samples = 1;
  // A fine-tuning update at 2 passes (the ensemble's trees: 10 rounds added): replayed
  // on 14 tuning runs' records (bench/update_replay), 6 passes and 30 rounds spent 2.4
  // times the seconds and ranked each next batch no better (0.7515 against 0.7521),
  // and the update's cost grows with the run (it passes over every program so far):
  // on a Zen 4 host it put the gradient search's overhead at 10.3%.
  o.epochs = from_scratch ? 10 : 2;
  // The fine-tuning window: replayed with batches of 16 on four 1000-trial runs and a
  // network's records of 3795 programs (docs/PERFORMANCE.md@6bf7154, "Bounded estimator updates"), updates on the
  // newest 128 programs took 8.9 s against 19.0 s on every program so far, and ranked
  // each next batch as well (pairwise 0.7361 against 0.7357; 64: 0.7318 in 6.5 s; 256:
  // 0.7326 in 12.8 s).
  if (from_scratch) e.train(samples, o);
  else if (samples.size() <= kTuningUpdateWindow) e.update(samples, o);
  else e.update(std::vector<Sample>(samples.end() - kTuningUpdateWindow, samples.end()), o);
}

PairCounts count_ordered_pairs(const std::vector<double>& score, const std::vector<double>& latency) {
  PairCounts c;
  for (size_t a = 0; a < latency.size(); ++a)
    for (size_t b = a + 1; b < latency.size(); ++b) {
      if (latency[a] == latency[b]) continue;
      c.pairs += 1;
      c.agree += (latency[a] < latency[b]) == (score[a] < score[b]);
    }
  return c;
}

EvalResult evaluate(Estimator& e, const std::vector<Sample>& samples) {
  EvalResult r;
  r.samples = static_cast<int>(samples.size());
  if (samples.empty()) return r;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<double> score;
  for (size_t at = 0; at < samples.size(); at += 4096) {
    std::vector<const Sample*> chunk;
    for (size_t i = at; i < std::min(samples.size(), at + 4096); ++i) chunk.push_back(&samples[i]);
    std::vector<double> s = e.predict(FeatureBatch::of(chunk));
    score.insert(score.end(), s.begin(), s.end());
  }
  r.predict_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, std::vector<size_t>> by_task;
  for (size_t i = 0; i < samples.size(); ++i) by_task[pair_group(samples[i])].push_back(i);
  r.tasks = static_cast<int>(by_task.size());
  double right = 0, pairs = 0, top1 = 0, top5 = 0, best_tenth = 0, log_top5_ratio = 0, ss_res = 0, ss_tot = 0,
         again_agree = 0, again_pairs = 0;
  for (const auto& [task, idx] : by_task) {
    std::vector<double> first, second;
    for (size_t i : idx)
      if (samples[i].measurements_us.size() >= 2) {
        first.push_back(samples[i].measurements_us[0]);
        second.push_back(samples[i].measurements_us[1]);
      }
    r.repeated += static_cast<int>(first.size());
    PairCounts again = count_ordered_pairs(first, second);
    again_agree += again.agree;
    again_pairs += again.pairs;
    std::vector<double> task_score, task_latency;
    for (size_t i : idx) {
      task_score.push_back(score[i]);
      task_latency.push_back(samples[i].latency_us);
    }
    PairCounts pc = count_ordered_pairs(task_score, task_latency);
    right += pc.agree;
    pairs += pc.pairs;
    size_t best = *std::min_element(idx.begin(), idx.end(),
                                    [&](size_t a, size_t b) { return samples[a].latency_us < samples[b].latency_us; });
    std::vector<size_t> order = idx;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
    top1 += order[0] == best;
    // The best tenth, measured and predicted.
    const size_t tenth = std::max<size_t>(1, idx.size() / 10);
    std::vector<size_t> fastest = idx;
    std::sort(fastest.begin(), fastest.end(),
              [&](size_t a, size_t b) { return samples[a].latency_us < samples[b].latency_us; });
    size_t found = 0;
    for (size_t i = 0; i < tenth; ++i)
      found += std::find(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(tenth), fastest[i]) !=
               order.begin() + static_cast<std::ptrdiff_t>(tenth);
    best_tenth += static_cast<double>(found) / static_cast<double>(tenth);
    EvalResult::Family& fam = r.families[task_family(samples[idx[0]].task)];
    fam.tasks += 1;
    fam.samples += static_cast<int>(idx.size());
    fam.pairs += pc.pairs;
    fam.pairwise_accuracy += pc.agree;  // divided by the pairs below
    auto top = order.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(5, order.size()));
    top5 += std::find(order.begin(), top, best) != top;
    double fastest_of_five = samples[order[0]].latency_us;
    for (auto it = order.begin(); it != top; ++it) fastest_of_five = std::min(fastest_of_five, samples[*it].latency_us);
    const double log_ratio = std::log(fastest_of_five / samples[best].latency_us);
    log_top5_ratio += log_ratio;
    fam.top5_ratio += log_ratio;  // a geometric mean below
    double mean_l = 0, mean_s = 0;
    for (size_t i : idx) {
      mean_l += std::log(samples[i].latency_us);
      mean_s += score[i];
    }
    mean_l /= idx.size();
    mean_s /= idx.size();
    for (size_t i : idx) {
      double y = std::log(samples[i].latency_us) - mean_l, p = score[i] - mean_s;
      ss_res += (y - p) * (y - p);
      ss_tot += y * y;
    }
  }
  r.pairwise_accuracy = pairs > 0 ? right / pairs : 0;
  r.pairs = pairs;
  r.top1_recall = top1 / r.tasks;
  r.top5_recall = top5 / r.tasks;
  r.r2_log_latency = ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
  r.repeatability = again_pairs > 0 ? again_agree / again_pairs : -1;
  r.of_repeatability = r.repeatability > 0 ? r.pairwise_accuracy / r.repeatability : -1;
  r.best_tenth_recall = best_tenth / r.tasks;
  r.top5_ratio = std::exp(log_top5_ratio / r.tasks);
  for (auto& [name, f] : r.families) {
    f.pairwise_accuracy = f.pairs > 0 ? f.pairwise_accuracy / f.pairs : 0;
    f.top5_ratio = std::exp(f.top5_ratio / f.tasks);
  }
  r.scores = std::move(score);
  return r;
}

namespace detail {

void write_file(const std::string& path, const std::string& kind, const std::string& payload) {
  char head[160];
  std::snprintf(head, sizeof head, "basin-estimator %s %d %zu %016llx\n", kind.c_str(), relax::kFeatureVersion,
                payload.size(), static_cast<unsigned long long>(fnv1a(payload)));
  write_output_file(path, [&](OutputFile& f) {
    f.write(std::string(head));
    f.write(payload);
  });
}

FileContents read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read estimator file " + path);
  std::string line;
  std::getline(f, line);
  std::istringstream is(line);
  std::string magic, kind, sum;
  int version = -1;
  size_t bytes = 0;
  if (!(is >> magic >> kind >> version >> bytes >> sum) || magic != "basin-estimator")
    throw Error(path + " is not a basin estimator file (a TorchScript module must end in .pt)");
  if (version != relax::kFeatureVersion)
    throw Error(path + ": trained on feature set version " + std::to_string(version) +
                ", but this basin computes version " + std::to_string(relax::kFeatureVersion) +
                " (retrain it: basin estimator train)");
  std::string payload = read_rest(f);  // a network's tasks each load the 5 MB ensemble
  if (payload.size() != bytes)
    throw Error(path + " is truncated or padded: " + std::to_string(payload.size()) +
                " bytes of payload, the header says " + std::to_string(bytes));
  char want[32];
  std::snprintf(want, sizeof want, "%016llx", static_cast<unsigned long long>(fnv1a(payload)));
  if (sum != want) throw Error(path + " is corrupt (checksum mismatch)");
  return {kind, std::move(payload)};
}

}  // namespace detail

}  // namespace basin::models
