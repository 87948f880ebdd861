// bench/update_replay: the tuning loop's estimator updates, replayed on tuning runs'
// records in the order the runs measured them. For each task of each file, the
// estimator (--estimator, default the shipped ensemble) is updated as the tuning loop
// updates it (models::train_for_tuning on the programs measured so far) after every
// --batch programs, and each update is judged on the batch measured next: the share
// of its pairs of programs the updated estimator orders as they ran (the tuning
// loop's "batch accuracy"). It prints the update seconds (their sum over the run: the
// figure in a tuning run's overhead), the pooled next-batch pairwise accuracy, and
// the seconds the updated estimator takes to score 1000 programs (the proposal's
// ranking cost, which grows as the trees gain rounds).
//
//   build/bin/update_replay --records RUN.db [--records RUN2.db ...] [--estimator SPEC] [--batch 32] [--json]
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/machine.h"
#include "models/dataset.h"
#include "models/estimator.h"
#include "records/records.h"

using namespace basin;

int main(int argc, char** argv) {
  std::vector<std::string> files;
  std::string spec = "ensemble";
  int batch = 32;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "update_replay: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--records") files.push_back(next());
    else if (a == "--estimator") spec = next();
    else if (a == "--batch") batch = std::stoi(next());
    else if (a == "--json") json = true;
    else {
      std::cerr << "update_replay: unknown argument " << a << "\n";
      return 2;
    }
  }
  if (files.empty() || batch < 2) {
    std::cerr << "update_replay: --records RUN.db (at least one) is required, and --batch must be at least 2\n";
    return 2;
  }
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  nlohmann::json out = {{"machine", {{"cpu", bench::cpu_model()}, {"cores", bench::cores()}}},
                        {"estimator", spec},
                        {"batch", batch},
                        {"runs", nlohmann::json::array()}};
  double all_agree = 0, all_pairs = 0, all_update = 0;
  for (const std::string& file : files) {
    search::RecordStore store(file);
    std::map<std::string, std::vector<models::Sample>> by_task;  // each task's programs in the order measured
    for (models::Sample& s : models::samples_from_records(store.all(), "llvm")) by_task[s.task].push_back(std::move(s));
    for (const auto& [task, v] : by_task) {
      std::unique_ptr<models::Estimator> e = models::estimator_from_spec(spec);
      // The ranking cost: 1000 programs (the task's, repeated) scored at once.
      std::vector<const models::Sample*> thousand;
      for (size_t i = 0; thousand.size() < 1000; i = (i + 1) % v.size()) thousand.push_back(&v[i]);
      double update_s = 0, predict_s = 0, agree = 0, pairs = 0;
      int updates = 0;
      for (size_t k = static_cast<size_t>(batch); k < v.size(); k += static_cast<size_t>(batch)) {
        std::vector<models::Sample> seen(v.begin(), v.begin() + static_cast<long>(k));
        auto t0 = clock::now();
        models::train_for_tuning(*e, seen, /*seed=*/1);
        update_s += seconds(t0);
        ++updates;
        std::vector<const models::Sample*> next;
        std::vector<double> latency;
        for (size_t i = k; i < std::min(v.size(), k + static_cast<size_t>(batch)); ++i) {
          next.push_back(&v[i]);
          latency.push_back(v[i].latency_us);
        }
        models::PairCounts c = models::count_ordered_pairs(e->predict(models::FeatureBatch::of(next)), latency);
        agree += c.agree;
        pairs += c.pairs;
        t0 = clock::now();
        e->predict(models::FeatureBatch::of(thousand));  // the batch built as the tuner builds one
        predict_s += seconds(t0);
      }
      if (updates == 0) continue;
      all_agree += agree;
      all_pairs += pairs;
      all_update += update_s;
      const double acc = agree / std::max(1.0, pairs);
      out["runs"].push_back({{"records", file},
                             {"task", task},
                             {"programs", v.size()},
                             {"updates", updates},
                             {"update_seconds", update_s},
                             {"next_batch_pairwise", acc},
                             {"predict_1000_seconds", predict_s / updates}});
      if (!json)
        std::printf("%s: %zu programs, %d updates: update %.2f s, next-batch pairwise %.3f, 1000 scored in %.1f ms\n",
                    file.c_str(), v.size(), updates, update_s, acc, 1e3 * predict_s / updates);
    }
  }
  out["update_seconds"] = all_update;
  out["next_batch_pairwise"] = all_agree / std::max(1.0, all_pairs);
  if (json) std::cout << out.dump(2) << "\n";
  else
    std::printf("all: update %.2f s, next-batch pairwise %.4f (%.0f pairs)\n", all_update,
                all_agree / std::max(1.0, all_pairs), all_pairs);
  return 0;
}
