// Latency estimators behind one interface (DESIGN.md, "Estimators"): a batch of
// programs' per-store features in, one score per program out, lower meaning faster
// (log-latency units where the estimator is calibrated). Trainable estimators train
// from scratch or update (fine-tune) on measured samples; differentiable ones expose
// a LibTorch forward for the gradient search. Files carry the feature-set version,
// and an estimator refuses features of another version.
//
// Implementations: "mlp" (LibTorch: per-store encoder, sum over stores, head; ranking
// or log-latency regression loss), "gbt" (XGBoost's C API), "roofline" (analytical, no
// training), "ensemble" (the MLP and the GBT averaged, each on its within-task scale),
// and a TorchScript module loaded from a path (docs/estimators.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/dataset.h"

namespace at {
class Tensor;
}

namespace basin::models {

// Programs' features padded to the batch's largest store count: values
// [batch][stores][features] (log2(1 + x)), mask [batch][stores] 1 for a real store.
struct FeatureBatch {
  int batch = 0, stores = 0, features = 0;
  std::vector<float> values, mask;
  // Per program, its machine's description (Sample::machine; empty: not described),
  // which only an estimator that reads the machine uses.
  std::vector<std::vector<float>> machines;
  static FeatureBatch of(const std::vector<Sample>& samples);
  static FeatureBatch of(const std::vector<const Sample*>& samples);
};

struct TrainOptions {
  std::string loss = "rank";    // "rank" (pairwise, within a task) or "mse" (log latency)
  int epochs = 40;              // passes over the data (MLP); the GBT's boosting rounds are epochs / tree_eta
  double learning_rate = 1e-3;  // the MLP's Adam step; from scratch it decays along a cosine to 0
  // The GBT's step (XGBoost's eta) and, for the rank loss, the pairs XGBoost samples per
  // program at each round (its num_pairsample). Offline training uses small steps and
  // many pairs (docs/estimators.md); the tuning loop retrains its trees at every update
  // and asks for AutoTVM's cheaper 0.2 and 1.
  double tree_eta = 0.1;
  int tree_pair_samples = 16;
  uint64_t seed = 1;
  bool verbose = false;  // one line per epoch on stderr
};

class Estimator {
 public:
  virtual ~Estimator() = default;
  virtual std::string kind() const = 0;
  // Scores for the batch, lower = predicted faster.
  virtual std::vector<double> predict(const FeatureBatch& batch) = 0;
  virtual bool trainable() const { return true; }
  // False while the scores mean nothing yet (an untrained MLP or GBT): the tuning loop
  // then proposes random configurations until it has measured enough to train it.
  virtual bool ready() const { return true; }
  // Trains from scratch on the samples (at least two, of at least one task).
  virtual void train(const std::vector<Sample>& samples, const TrainOptions& opt) = 0;
  // Continues training on new samples (the tuning loop's online update).
  virtual void update(const std::vector<Sample>& samples, const TrainOptions& opt) { train(samples, opt); }
  // Writes the estimator to `path`: by default basin's estimator file format (see
  // load_estimator) around payload(); a TorchScript module saves itself as a module.
  virtual void save(const std::string& path) const;
  // The kind's payload of the estimator file (what load_estimator hands the kind back).
  virtual std::string payload() const;
  virtual bool differentiable() const { return false; }
  // True where the tuning loop retrains it on every program so far at each update (trees,
  // as AutoTVM retrains its model each round) instead of updating it on the newest.
  virtual bool retrains_in_tuning() const { return false; }
};

// An estimator whose scores are differentiable in LibTorch: features [B, S, F] float32,
// mask [B, S] float32 -> scores [B], with autograd. Include <torch/torch.h> to use it.
class DifferentiableEstimator : public Estimator {
 public:
  bool differentiable() const override { return true; }
  virtual at::Tensor forward(const at::Tensor& features, const at::Tensor& mask) = 0;
};

// A new, untrained estimator of a registered kind (estimator_kinds(): "mlp", "gbt",
// "ensemble", "roofline" (ready to use), "gpu_roofline", and any other registered), or
// "machine+mlp", "machine+gbt", "machine+ensemble": the same reading the description of
// the machine that measured each program with its features (make_machine_input).
// Throws NotFoundError for another name.
std::unique_ptr<Estimator> make_estimator(const std::string& kind);

// Estimator kinds register themselves: one file, a class implementing Estimator (its
// kind() the registered name, its payload() what `load` reads back) and one
// BASIN_REGISTER_ESTIMATOR line (docs/estimators.md, "Adding an estimator"); then
// make_estimator, load_estimator, --estimator and `basin estimators` know it. `order`
// places it in estimator_kinds() (lower first); a repeated kind is an error at start-up.
using EstimatorMaker = std::function<std::unique_ptr<Estimator>()>;
using EstimatorLoader = std::function<std::unique_ptr<Estimator>(const std::string& payload, const std::string& path)>;
struct EstimatorRegistration {
  EstimatorRegistration(const std::string& kind, int order, EstimatorMaker make, EstimatorLoader load,
                        const std::string& help);
};
struct EstimatorKind {
  std::string kind, help;
};
// The registered kinds, in order.
std::vector<EstimatorKind> estimator_kinds();
// An estimator from a file: a TorchScript module (*.pt, *.pth) or a file written by
// Estimator::save. Throws basin::Error naming the file when it is missing, truncated,
// corrupt, of an unknown kind, or of another feature-set version.
std::unique_ptr<Estimator> load_estimator(const std::string& path);
// The estimator `spec` names for tuning on `target`: estimator_from_spec, except on
// "cuda", where "mlp", "gbt" and "ensemble" start untrained (no GPU weights ship yet)
// behind the GPU's roofline (with_gpu_prior, for GPU 0's architecture) until the tuning
// loop has trained them on the first measurements, and a file must hold GPU features.
std::unique_ptr<Estimator> estimator_for_target(const std::string& spec, const std::string& target);
// n estimators as estimator_for_target(spec, target) makes them, the file read and
// checked once and the estimators loaded from it on the helper threads: a network's
// tasks each fine-tune an estimator of their own.
std::vector<std::unique_ptr<Estimator>> estimators_for_target(const std::string& spec, const std::string& target,
                                                              int n);
// The file estimator_for_target(spec, target) loads: a shipped weights file for "mlp"
// and "ensemble" on the CPU, the path itself for a path; empty where none is loaded.
std::string estimator_file(const std::string& spec, const std::string& target);
// What `--estimator` accepts: a kind ("mlp" loads the shipped pretrained CPU weights
// when they exist, "gbt", "ensemble" (the shipped pretrained ensemble, or without it
// the shipped MLP and trees trained at the first update), "roofline") or a path.
std::unique_ptr<Estimator> estimator_from_spec(const std::string& spec);
// A shipped pretrained CPU estimator file (under $BASIN_DATA_DIR, which the Python
// package sets to its copy; models/weights/FILE under the source tree; share/basin
// under the install prefix): cpu_mlp.bin, the MLP; cpu_ensemble.bin, the
// MLP and trees. Empty when it is not found.
std::string pretrained_cpu_path(const std::string& file = "cpu_mlp.bin");

// Evaluation on samples with known latencies (docs/estimators.md):
struct EvalResult {
  int samples = 0, tasks = 0;
  double pairwise_accuracy = 0;  // over pairs of one task with different latencies
  double pairs = 0;              // how many such pairs there were
  double top1_recall = 0;        // share of tasks whose measured best is the predicted best
  double top5_recall = 0;        // ... is among the predicted 5 best
  double r2_log_latency = 0;     // R^2 of the scores against log latency, both centred per task
  double predict_seconds = 0;
  // How well a program's second measurement orders the programs of a task like its
  // first (pairwise, over the programs measured twice; -1 when fewer than two of a
  // task were): the measurements' own noise, a ceiling for any estimator's pairwise
  // accuracy against single measurements.
  double repeatability = -1;
  int repeated = 0;  // programs measured at least twice
  // pairwise_accuracy / repeatability: the share of what the measurements allow that
  // the estimator reaches (-1 without repeatability).
  double of_repeatability = -1;
  // The search's view: per task, the share of its measured best tenth (at least one
  // program) that the estimator also ranks in its best tenth, averaged over tasks.
  double best_tenth_recall = 0;
  // The fastest of the estimator's five best-ranked programs of a task, as a multiple
  // of the task's fastest (geometric mean over tasks; 1 when the five hold the
  // fastest): what a round of five picks costs against the best measured.
  double top5_ratio = 0;
  // Pairwise accuracy and top5_ratio per operator family (models::task_family): where
  // a search's first rounds lose (efficientnet_b0's depthwise convolutions ranked at
  // 1.55x against its 1x1 convolutions' 1.02x; docs/ROADMAP.md).
  struct Family {
    int tasks = 0, samples = 0;
    double pairs = 0, pairwise_accuracy = 0;
    double top5_ratio = 0;
  };
  std::map<std::string, Family> families;
  std::vector<double> scores;  // the estimator's score of each sample, in order
};
EvalResult evaluate(Estimator& e, const std::vector<Sample>& samples);

// Trains `e` on a task's measured programs as the tuning loop does at every update
// (search/tuner.cc; bench/estimator measures the same): trees, and any estimator not
// ready yet, from scratch at AutoTVM's cheap step (eta 0.2, one pair sample) for 10
// epochs (50 rounds); a ready MLP or ensemble fine-tuned for 2 passes (the ensemble's
// trees get 10 rounds added; bench/update_replay replays these updates on a run's
// records). A fine-tuning update reads the newest kTuningUpdateWindow samples only
// (the samples in the order they were measured), so that its cost stays bounded as a
// run, or a run resuming a large records file, grows.
inline constexpr size_t kTuningUpdateWindow = 128;
void train_for_tuning(Estimator& e, const std::vector<Sample>& samples, uint64_t seed);

// The pairs of programs (of one task) with different latencies, and how many of them
// the scores order the same way (the lower score, the lower latency).
struct PairCounts {
  double agree = 0, pairs = 0;
};
PairCounts count_ordered_pairs(const std::vector<double>& score, const std::vector<double>& latency);

// An estimator that reads, beside each store's features, the description of the
// machine that measured the program (basin::Hardware::features, appended to every
// store's features): `inner` (an MLP, trees or their ensemble) trained on several
// machines' records learns how a machine's vector width, caches, peak and bandwidth
// change which programs are fast. A program whose machine is not described
// (FeatureBatch::machines, Sample::machine empty), as the tuning loop's own are, reads
// this machine's (basin::this_hardware). Its kind is "machine+" and the inner kind.
std::unique_ptr<Estimator> make_machine_input(std::unique_ptr<Estimator> inner);

// The GPU's analytical estimator ("gpu_roofline", models/gpu_prior.cc): the roofline of
// each store on the data-sheet rates of `arch` (sm_80: A100; sm_90 and others: H100),
// tensor-core stores at the TF32 rate (twice it for FP16 and BF16 fragments), a
// pipeline's copies overlapping its fragments. Differentiable; reads the GPU feature set.
std::unique_ptr<Estimator> make_gpu_roofline(const std::string& arch = "sm_90");
// `learned` (untrained) scoring with gpu_roofline until it has trained on 8 programs;
// ready from the start, so the tuning loop's first rounds on a GPU are ranked by the
// roofline instead of drawn at random. Its kind is the learned one's.
std::unique_ptr<Estimator> with_gpu_prior(std::unique_ptr<Estimator> learned, const std::string& arch = "sm_90");

// The CPU-trained MLP carried over to the GPU feature set (whose first features are the
// CPU set's): their weights kept, the GPU-only features' starting at zero. Not ready
// until trained; training it fine-tunes from those weights instead of from random ones.
// Throws basin::Error for another kind or an MLP that is untrained or not over the CPU set.
// The estimator spec "mlp-from-cpu" (cuda target only): the shipped CPU MLP so carried
// over, behind gpu_roofline until trained on 8 programs (with_gpu_prior).
std::unique_ptr<Estimator> transfer_to_gpu(const Estimator& cpu_mlp);

namespace detail {
std::unique_ptr<Estimator> load_gpu_roofline(const std::string& payload, const std::string& path);
// An estimator of `kind` from its payload (load_estimator's dispatch).
std::unique_ptr<Estimator> load_payload(const std::string& kind, const std::string& payload, const std::string& path);
std::unique_ptr<Estimator> load_machine_input(const std::string& payload, const std::string& path);
// The estimator file: a header line "basin-estimator KIND FEATURE_VERSION BYTES
// CHECKSUM" and the kind's payload.
void write_file(const std::string& path, const std::string& kind, const std::string& payload);
struct FileContents {
  std::string kind, payload;
};
FileContents read_file(const std::string& path);
std::unique_ptr<Estimator> make_mlp();
std::unique_ptr<Estimator> load_mlp(const std::string& payload, const std::string& path);
std::unique_ptr<Estimator> make_gbt();
std::unique_ptr<Estimator> load_gbt(const std::string& payload, const std::string& path);
std::unique_ptr<Estimator> make_roofline();
std::unique_ptr<Estimator> load_roofline(const std::string& payload, const std::string& path);
std::unique_ptr<Estimator> load_torchscript(const std::string& path);
// A batch's scores through e.forward, without gradients (models/torchscript.cc).
std::vector<double> predict_by_forward(DifferentiableEstimator& e, const FeatureBatch& b);
// The ensemble of `mlp` (a new one when null) and new trees.
std::unique_ptr<Estimator> make_ensemble(std::unique_ptr<Estimator> mlp);
std::unique_ptr<Estimator> load_ensemble(const std::string& payload, const std::string& path);
}  // namespace detail

}  // namespace basin::models

#define BASIN_ESTIMATOR_CONCAT2(a, b) a##b
#define BASIN_ESTIMATOR_CONCAT(a, b) BASIN_ESTIMATOR_CONCAT2(a, b)
// BASIN_REGISTER_ESTIMATOR("kind", order, make, load, "help"): make() an untrained one,
// load(payload, path) one from its file's payload.
#define BASIN_REGISTER_ESTIMATOR(kind, order, make, load, help)                                           \
  static const ::basin::models::EstimatorRegistration BASIN_ESTIMATOR_CONCAT(basin_estimator_, __LINE__)( \
      kind, order, make, load, help)
