// bench/estimator: the estimators on held-out tasks of a records file (split by task,
// --test-fraction of the tasks, --seed), and the online update: for each held-out task
// with enough records, the MLP, the GBT and the ensemble are trained on its first
// --update records (the order a tuning run measures them) as the tuning loop trains
// them (models::train_for_tuning: the MLP and the ensemble fine-tuned, the GBT
// retrained on the task alone) and evaluated on the rest, before and after.
//
// With --update-records FILE the online update runs on that file's tasks instead (say,
// a tuning run's records, in the order it measured them; its tasks should be absent
// from --records).
//
// With --folds K it also runs K-fold cross-validation by task (every task held out
// once; the MLP, the GBT and their ensemble trained from scratch on the other folds)
// and prints the mean over the folds: a steadier figure than one split of a few tasks.
//
// With --extra-train FILE that file's programs join every training set and are never
// held out (tasks also in --records are dropped from it): the same held-out tasks,
// with more training data.
//
// --kinds LIST (of mlp, gbt, ensemble, roofline; all by default) runs those only.
//
// --weights MLP.bin and --ensemble ENSEMBLE.bin load those estimators instead of
// training them on the split (for the online update of a shipped estimator).
//
//   build/bin/estimator_bench --records FILE [--weights MLP.bin] [--ensemble E.bin] [--update 300]
//       [--update-records FILE]
//                            [--folds K] [--extra-train FILE] [--kinds LIST] [--json]
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "bench/machine.h"
#include "core/util/parse.h"
#include "models/estimator.h"

using namespace basin;

namespace {
nlohmann::json as_json(const models::EvalResult& r) {
  return {{"samples", r.samples},
          {"tasks", r.tasks},
          {"pairwise_accuracy", r.pairwise_accuracy},
          {"top1_recall", r.top1_recall},
          {"top5_recall", r.top5_recall},
          {"r2_log_latency", r.r2_log_latency}};
}
}  // namespace

int main(int argc, char** argv) {
  std::string records, weights, ensemble_weights, update_records, extra_train;
  int update = 300, folds = 0;
  double test_fraction = 0.2;
  uint64_t seed = 1;
  bool json = false;
  const std::set<std::string> all_kinds = {"mlp", "gbt", "ensemble", "roofline"};
  std::set<std::string> kinds = all_kinds;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "estimator_bench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--records") records = next();
    else if (a == "--weights") weights = next();
    else if (a == "--ensemble") ensemble_weights = next();
    else if (a == "--update") update = std::stoi(next());
    else if (a == "--update-records") update_records = next();
    else if (a == "--test-fraction") test_fraction = std::stod(next());
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--folds") folds = std::stoi(next());
    else if (a == "--extra-train") extra_train = next();
    else if (a == "--json") json = true;
    else if (a == "--kinds") {
      kinds.clear();
      for (const std::string& k : split_list(next())) {
        if (!all_kinds.count(k)) {
          std::cerr << "estimator_bench: --kinds takes mlp, gbt, ensemble and roofline, not '" << k << "'\n";
          return 2;
        }
        kinds.insert(k);
      }
    } else {
      std::cerr << "estimator_bench: unknown argument " << a << "\n";
      return 2;
    }
  }
  if (records.empty()) {
    std::cerr << "estimator_bench: --records FILE is required (basin estimator dataset makes one)\n";
    return 2;
  }
  search::RecordStore store(records);
  std::vector<models::Sample> samples = models::samples_from_records(store.all(), "llvm");
  models::Split sp = models::split_by_task(samples, test_fraction, seed);
  std::vector<models::Sample> extra;
  if (!extra_train.empty()) {
    std::set<std::string> tasks;
    for (const models::Sample& s : samples) tasks.insert(s.task);
    search::RecordStore xs(extra_train);
    for (models::Sample& s : models::samples_from_records(xs.all(), "llvm"))
      if (!tasks.count(s.task)) extra.push_back(std::move(s));
    sp.train.insert(sp.train.end(), extra.begin(), extra.end());
  }
  nlohmann::json out = {{"records", records},
                        {"machine", {{"cpu", bench::cpu_model()}, {"cores", bench::cores()}}},
                        {"train_samples", sp.train.size()},
                        {"extra_train", extra_train},
                        {"extra_train_samples", extra.size()},
                        {"test_samples", sp.test.size()},
                        {"test_tasks", sp.test_tasks},
                        {"estimators", nlohmann::json::object()}};
  using clock = std::chrono::steady_clock;
  std::map<std::string, std::unique_ptr<models::Estimator>> est;
  for (const std::string kind : {"mlp", "gbt", "ensemble", "roofline"}) {
    if (!kinds.count(kind)) continue;
    auto t0 = clock::now();
    std::unique_ptr<models::Estimator> e;
    const std::string file = kind == "mlp" ? weights : kind == "ensemble" ? ensemble_weights : "";
    const bool loaded = !file.empty();
    if (loaded) {
      e = models::load_estimator(file);
      if (e->kind() != kind) {
        std::cerr << "estimator_bench: " << file << " holds a " << e->kind() << " estimator, not an " << kind << "\n";
        return 2;
      }
    } else {
      e = models::make_estimator(kind);
      e->train(sp.train, {});
    }
    double train_s = std::chrono::duration<double>(clock::now() - t0).count();
    models::EvalResult r = models::evaluate(*e, sp.test);
    out["estimators"][kind] = as_json(r);
    out["estimators"][kind]["train_seconds"] = train_s;
    out["estimators"][kind]["pretrained"] = loaded;
    if (!json)
      std::printf(
          "%-9s held-out: pairwise %.4f  top-1 %.2f  top-5 %.2f  R^2 %.3f  (%d programs, %d tasks; %s %.1f s)\n",
          kind.c_str(), r.pairwise_accuracy, r.top1_recall, r.top5_recall, r.r2_log_latency, r.samples, r.tasks,
          loaded ? "loaded" : "trained", train_s);
    est[kind] = std::move(e);
  }
  // Online update, per held-out task.
  out["update"] = nlohmann::json::array();
  std::map<std::string, std::vector<models::Sample>> by_task;
  if (update_records.empty()) {
    for (const models::Sample& s : sp.test) by_task[s.task].push_back(s);
  } else {
    search::RecordStore us(update_records);
    for (const models::Sample& s : models::samples_from_records(us.all(), "llvm")) by_task[s.task].push_back(s);
  }
  for (auto& [task, v] : by_task) {
    if (static_cast<int>(v.size()) < update + 50) continue;
    std::vector<models::Sample> fresh(v.begin(), v.begin() + update), rest(v.begin() + update, v.end());
    for (const std::string kind : {"mlp", "gbt", "ensemble"}) {
      if (!kinds.count(kind)) continue;
      models::Estimator& e = *est[kind];
      // Updates change the estimator: evaluate on a copy made through a file.
      std::string tmp = "/tmp/estimator_bench_" + kind + ".bin";
      e.save(tmp);
      auto copy = models::load_estimator(tmp);
      double before = models::evaluate(*copy, rest).pairwise_accuracy;
      auto t0 = clock::now();
      models::train_for_tuning(*copy, fresh, /*seed=*/1);
      double secs = std::chrono::duration<double>(clock::now() - t0).count();
      double after = models::evaluate(*copy, rest).pairwise_accuracy;
      out["update"].push_back({{"task", task},
                               {"estimator", kind},
                               {"new_records", update},
                               {"eval_records", rest.size()},
                               {"before", before},
                               {"after", after},
                               {"update_seconds", secs}});
      if (!json)
        std::printf("update %-4s on %d records of %s: pairwise %.3f -> %.3f on its other %zu records, %.3f s\n",
                    kind.c_str(), update, task.c_str(), before, after, rest.size(), secs);
    }
  }
  // Cross-validation by task.
  if (folds > 0) {
    out["folds"] = nlohmann::json::object();
    for (const std::string kind : {"mlp", "gbt", "ensemble"}) {
      if (!kinds.count(kind)) continue;
      double pairs = 0, agree = 0, top1 = 0, top5 = 0;
      int tasks = 0;
      nlohmann::json per = nlohmann::json::array();
      for (const models::Split& f : models::task_folds(samples, folds, seed)) {
        auto e = models::make_estimator(kind);
        std::vector<models::Sample> train = f.train;
        train.insert(train.end(), extra.begin(), extra.end());
        e->train(train, {});
        models::EvalResult r = models::evaluate(*e, f.test);
        per.push_back(as_json(r));
        // Pooled over folds: every held-out pair and task counts once.
        pairs += r.pairs;
        agree += r.pairwise_accuracy * r.pairs;
        top1 += r.top1_recall * r.tasks;
        top5 += r.top5_recall * r.tasks;
        tasks += r.tasks;
      }
      double acc = agree / std::max(1.0, pairs);
      out["folds"][kind] = {{"folds", per},
                            {"pairwise_accuracy", acc},
                            {"top1_recall", top1 / std::max(1, tasks)},
                            {"top5_recall", top5 / std::max(1, tasks)},
                            {"tasks", tasks}};
      if (!json)
        std::printf("%-9s %d-fold by task: pairwise %.4f  top-1 %.2f  top-5 %.2f  (%d tasks, each held out once)\n",
                    kind.c_str(), folds, acc, top1 / std::max(1, tasks), top5 / std::max(1, tasks), tasks);
    }
  }
  if (json) std::cout << out.dump(2) << "\n";
  return 0;
}
