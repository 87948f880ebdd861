// `basin estimator train` and `basin estimator eval`: train an estimator on the
// records of some tasks and evaluate it on held-out tasks (split by task, never by
// row; the same --seed and --test-fraction give the same split in both commands).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/util/error.h"
#include "core/util/output_file.h"
#include "models/calibrate.h"
#include "models/estimator.h"
#include "tools/commands.h"

namespace basin::tools {

namespace {

struct TrainEvalOptions {
  std::string records, out, estimator = "mlp", target = "llvm", loss = "rank", predictions, from;
  int epochs = 40;
  double test_fraction = 0.2, learning_rate = 1e-3, tree_eta = 0.1;
  int pair_samples = 16;
  uint64_t seed = 1;
  bool all = false, json = false, verbose = false, no_calibrate = false;
};

models::Split load_split(const TrainEvalOptions& o, int* skipped) {
  search::RecordStore store(o.records, search::RecordStore::ReadOnly::Yes);
  std::vector<models::Sample> samples = models::samples_from_records(store.all(), o.target, skipped, store.machines());
  if (samples.empty()) throw Error(o.records + " holds no successful " + o.target + " records");
  if (o.test_fraction < 0 || o.test_fraction >= 1) throw Error("--test-fraction must be in [0, 1)");
  return models::split_by_task(samples, o.test_fraction, o.seed);
}

nlohmann::json eval_json(const models::EvalResult& r) {
  nlohmann::json j = {{"samples", r.samples},
                      {"tasks", r.tasks},
                      {"pairwise_accuracy", r.pairwise_accuracy},
                      {"top1_recall", r.top1_recall},
                      {"top5_recall", r.top5_recall},
                      {"r2_log_latency", r.r2_log_latency},
                      {"predict_seconds", r.predict_seconds},
                      {"repeated", r.repeated},
                      {"best_tenth_recall", r.best_tenth_recall},
                      {"top5_ratio", r.top5_ratio}};
  if (r.repeatability >= 0) {
    j["repeatability"] = r.repeatability;
    j["of_repeatability"] = r.of_repeatability;
  }
  nlohmann::json fam = nlohmann::json::object();
  for (const auto& [name, f] : r.families)
    fam[name] = {{"tasks", f.tasks},
                 {"samples", f.samples},
                 {"pairs", f.pairs},
                 {"pairwise_accuracy", f.pairwise_accuracy},
                 {"top5_ratio", f.top5_ratio}};
  j["families"] = fam;
  return j;
}

void print_eval(const char* what, const models::EvalResult& r) {
  std::printf(
      "%s: %d programs of %d tasks: pairwise accuracy %.3f, top-1 recall %.2f, top-5 recall %.2f, R^2 (log latency, "
      "per task) %.3f\n",
      what, r.samples, r.tasks, r.pairwise_accuracy, r.top1_recall, r.top5_recall, r.r2_log_latency);
  std::printf(
      "%s: of each task's measured best tenth, %.2f ranked in its predicted best tenth; the fastest of the predicted "
      "best five is %.3f times the task's fastest (geometric mean)\n",
      what, r.best_tenth_recall, r.top5_ratio);
  if (r.repeatability >= 0)
    std::printf(
        "%s: %d programs measured twice: their second measurement orders them like their first in %.3f of pairs "
        "(the measurements' own noise); pairwise accuracy / repeatability %.3f\n",
        what, r.repeated, r.repeatability, r.of_repeatability);
  if (r.families.size() > 1)
    for (const auto& [name, f] : r.families)
      std::printf("%s: %-17s %3d tasks %6d programs  pairwise accuracy %.3f, the fastest of the predicted best five %.3fx\n",
                  what, name.c_str(), f.tasks, f.samples, f.pairwise_accuracy, f.top5_ratio);
}

int run_train(const TrainEvalOptions& o) {
  if (o.loss != "rank" && o.loss != "mse") throw Error("--loss must be rank or mse");
  if (!(o.tree_eta > 0 && o.tree_eta <= 1)) throw Error("--tree-eta must be in (0, 1]");
  if (o.pair_samples < 1) throw Error("--pair-samples must be at least 1");
  if (!o.out.empty()) check_output_path(o.out, {o.records, o.from});  // never an input; before the work
  int skipped = 0;
  models::Split sp = load_split(o, &skipped);
  // --from: an estimator fine-tuned (its update) instead of one trained from scratch.
  std::unique_ptr<models::Estimator> e =
      o.from.empty() ? models::make_estimator(o.estimator) : models::load_estimator(o.from);
  if (!e->trainable()) throw Error("the " + e->kind() + " estimator needs no training");
  // An estimator that reads the machine trains on the programs of described machines
  // only: another machine's program read with this machine's description would teach it
  // the wrong thing.
  int undescribed = 0;
  if (e->kind().rfind("machine+", 0) == 0) {
    std::vector<models::Sample> kept;
    for (models::Sample& s : sp.train)
      if (s.machine.empty()) ++undescribed;
      else kept.push_back(std::move(s));
    sp.train = std::move(kept);
    if (sp.train.empty())
      throw Error(o.records +
                  " describes none of the machines that measured its training programs (records of a "
                  "basin before machine descriptions): the " +
                  e->kind() + " estimator has nothing to learn from");
    if (!o.json && undescribed > 0)
      std::fprintf(stderr, "basin: %d training programs of machines the records do not describe left out\n",
                   undescribed);
  }
  models::TrainOptions to;
  to.loss = o.loss;
  to.epochs = o.epochs;
  to.learning_rate = o.learning_rate;
  to.tree_eta = o.tree_eta;
  to.tree_pair_samples = o.pair_samples;
  to.seed = o.seed;
  to.verbose = o.verbose;
  auto t0 = std::chrono::steady_clock::now();
  if (o.from.empty()) e->train(sp.train, to);
  else e->update(sp.train, to);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.out.empty()) e->save(o.out);
  models::EvalResult train_eval = models::evaluate(*e, sp.train);
  models::EvalResult test_eval = models::evaluate(*e, sp.test);
  if (o.json) {
    nlohmann::json j = {{"estimator", o.estimator},
                        {"loss", o.loss},
                        {"undescribed_left_out", undescribed},
                        {"train_seconds", secs},
                        {"train", eval_json(train_eval)},
                        {"test_tasks", sp.test_tasks},
                        {"saved", o.out}};
    if (!sp.test.empty()) j["test"] = eval_json(test_eval);
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%s %s (%s loss) on %zu programs in %.1f s%s\n", o.from.empty() ? "trained" : "fine-tuned",
                e->kind().c_str(), o.loss.c_str(), sp.train.size(), secs,
                o.out.empty() ? "" : (", saved to " + o.out).c_str());
    print_eval("training tasks", train_eval);
    if (!sp.test.empty()) print_eval("held-out tasks", test_eval);
  }
  return 0;
}

// One JSON object per line and program: its task, machine, sketch, configuration,
// measured latency and the estimator's score (lower = predicted faster; compare
// scores within a task only).
void write_predictions(const std::string& path, const std::vector<models::Sample>& data,
                       const std::vector<double>& scores, const std::vector<std::string>& inputs) {
  write_output_file(
      path,
      [&](OutputFile& f) {
        for (size_t i = 0; i < data.size(); ++i) {
          const models::Sample& s = data[i];
          nlohmann::json j = {{"task", s.task},
                              {"host", s.host},
                              {"sketch", s.sketch},
                              {"config", nlohmann::json::parse(s.config)},
                              {"latency_us", s.latency_us},
                              {"score", scores[i]}};
          f.write(j.dump() + "\n");
        }
      },
      inputs);
}

int run_eval(const TrainEvalOptions& o) {
  const std::vector<std::string> reads = {o.records, o.estimator};
  if (!o.predictions.empty()) check_output_path(o.predictions, reads);  // before the work
  int skipped = 0;
  models::Split sp = load_split(o, &skipped);
  if (o.no_calibrate) models::set_use_calibration(false);
  std::unique_ptr<models::Estimator> e = models::estimator_from_spec(o.estimator);
  std::vector<models::Sample> data = sp.test;
  if (o.all) data.insert(data.end(), sp.train.begin(), sp.train.end());
  if (data.empty()) throw Error("no held-out tasks: use --all or a larger --test-fraction");
  models::EvalResult r = models::evaluate(*e, data);
  if (!o.predictions.empty()) write_predictions(o.predictions, data, r.scores, reads);
  if (o.json) {
    nlohmann::json j = eval_json(r);
    j["estimator"] = o.estimator;
    j["estimator_file"] = models::estimator_file(o.estimator, o.target);
    j["kind"] = e->kind();
    j["held_out"] = !o.all;
    if (!o.all) j["test_tasks"] = sp.test_tasks;
    std::cout << j.dump(2) << "\n";
  } else {
    if (std::string f = models::estimator_file(o.estimator, o.target); !f.empty() && f != o.estimator)
      std::printf("estimator %s: %s\n", o.estimator.c_str(), f.c_str());
    print_eval(o.all ? "all tasks" : "held-out tasks", r);
  }
  return 0;
}

void common(CLI::App* c, TrainEvalOptions& o) {
  c->add_option("--records", o.records, "the records file")->required();
  c->add_option("--target", o.target, "target of the records");
  c->add_option("--test-fraction", o.test_fraction, "share of the tasks held out for evaluation");
  add_seed_option(c, o.seed, "seed of the split (and of training)");
  c->add_flag("--json", o.json, "print one JSON object");
}

}  // namespace

void add_estimator_train_eval(CLI::App* estimator, Runner& run) {
  auto t = std::make_shared<TrainEvalOptions>();
  auto* tr = estimator->add_subcommand("train", "train an estimator on records, report held-out-task accuracy");
  common(tr, *t);
  tr->add_option("--estimator", t->estimator,
                 "mlp, gbt or ensemble; machine+mlp, machine+gbt or machine+ensemble read the description of the "
                 "machine that measured each program too");
  tr->add_option("--from", t->from,
                 "fine-tune this estimator file (its online update: the MLP's step kept, trees added) instead of "
                 "training a new one");
  tr->add_option("--out", t->out, "write the trained estimator here");
  tr->add_option("--loss", t->loss, "rank (pairwise, within a task) or mse (log latency)");
  tr->add_option("--epochs", t->epochs, "training epochs (gbt: epochs / eta boosting rounds)");
  tr->add_option("--lr", t->learning_rate, "learning rate (mlp; decays along a cosine)");
  tr->add_option("--tree-eta", t->tree_eta, "boosting step of the trees (gbt, ensemble), in (0, 1]");
  tr->add_option("--pair-samples", t->pair_samples, "pairs sampled per program and round (gbt, ensemble; rank loss)");
  tr->add_flag("--verbose", t->verbose, "one line per epoch");
  tr->callback([&run, t] { run = [t] { return run_train(*t); }; });

  auto e = std::make_shared<TrainEvalOptions>();
  auto* ev = estimator->add_subcommand("eval", "pairwise accuracy, top-1/top-5 recall and R^2 on held-out tasks");
  common(ev, *e);
  ev->add_option("--estimator", e->estimator,
                 "mlp (the pretrained weights), gbt, ensemble, roofline, gpu_roofline, or a file (.bin, .pt)");
  ev->add_flag("--all", e->all, "evaluate on every task, not only the held-out ones");
  ev->add_flag("--no-calibrate", e->no_calibrate,
               "mlp and ensemble: the shipped weights, not this machine's calibration of them");
  ev->add_option("--predictions", e->predictions,
                 "write each evaluated program's measured latency and score here, one JSON object per line");
  ev->callback([&run, e] { run = [e] { return run_eval(*e); }; });
}

}  // namespace basin::tools
