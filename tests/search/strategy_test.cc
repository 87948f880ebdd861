// The four strategies behind one interface: distinct unmeasured proposals, options,
// the GPU space, and each of the gradient search's proposal sources.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <unistd.h>

#include "codegen/version.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/util/error.h"
#include "core/util/host.h"
#include "models/dataset.h"
#include "models/estimator.h"
#include "relax/features.h"
#include "relax/relaxed_sketch.h"
#include "records/records.h"
#include "search/tuner.h"
#include "tests/codegen/fault_hooks.h"
#include "tests/search/search_test_util.h"

using namespace basin;
using namespace basin::search_test;

namespace {

// Each strategy: n distinct, valid, unmeasured candidates; the same rng seed gives the
// same ones; the model-guided ones propose programs the estimator prefers to random ones.
TEST(Strategies, ProposeDistinctUnmeasuredCandidatesReproducibly) {
  ops::OpGraph g = ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}});
  search::TaskSpace space(g);
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::unique_ptr<models::Estimator> roofline = models::make_estimator("roofline");
  ASSERT_TRUE(mlp->ready()) << "the pretrained CPU MLP is missing";
  std::mt19937_64 r0(11);
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (int i = 0; i < 20; ++i) {
    search::Candidate c = space.random(r0);
    if (measured.insert(c.json).second) history.push_back({c, 100.0 + i});
  }
  std::vector<search::Candidate> baseline;
  for (int i = 0; i < 200; ++i) baseline.push_back(space.random(r0));
  for (const std::string& name : search::strategy_names()) {
    models::Estimator* est = name == "gradient" ? mlp.get() : name == "random" ? nullptr : roofline.get();
    std::vector<std::string> first;
    for (int rep = 0; rep < 2; ++rep) {
      std::unique_ptr<search::Strategy> s = search::make_strategy(name);
      EXPECT_EQ(s->name(), name);
      std::mt19937_64 rng(42);
      search::SearchState state{space, est, history, measured, rng};
      std::vector<search::Candidate> got = s->propose(state, 16);
      ASSERT_EQ(got.size(), 16u) << name;
      std::vector<std::string> jsons;
      std::set<std::string> distinct;
      for (const search::Candidate& c : got) {
        EXPECT_FALSE(measured.count(c.json)) << name;
        EXPECT_TRUE(distinct.insert(c.json).second) << name;
        EXPECT_EQ(sched::invalid_reason(space.sketches()[c.sketch], c.config), "") << name;
        jsons.push_back(c.json);
      }
      if (rep == 0) first = jsons;
      else EXPECT_EQ(jsons, first) << name << " is not reproducible";
      if (est) {
        std::vector<search::Candidate> base = baseline;
        space.predict(*est, base);
        space.predict(*est, got);
        double mean_base = 0, mean_got = 0;
        for (const search::Candidate& c : base) mean_base += c.predicted / base.size();
        for (int i = 0; i < 12; ++i) mean_got += got[i].predicted / 12;  // the ranked part of the batch
        EXPECT_LT(mean_got, mean_base) << name << " does not follow its estimator";
      }
    }
  }
  EXPECT_THROW(search::make_strategy("hillclimb"), NotFoundError);
}

// Options by spec: the strategy runs with them, is named by its spec, and lists the
// values it runs with; a bad spec is a ParseError naming what is wrong.
TEST(Strategies, OptionsSetBySpec) {
  auto value = [](const search::Strategy& s, const std::string& key) {
    for (const search::StrategyOption& o : s.options())
      if (o.key == key) return o.value;
    return std::string("missing");
  };
  std::unique_ptr<search::Strategy> g = search::make_strategy("gradient:tile_slots=0:epsilon=0.25");
  EXPECT_EQ(g->name(), "gradient:tile_slots=0:epsilon=0.25");
  EXPECT_EQ(value(*g, "tile_slots"), "0");
  EXPECT_EQ(value(*g, "epsilon"), "0.25");
  EXPECT_EQ(value(*g, "unroll_slots"), "2");  // not set: the default
  EXPECT_EQ(value(*search::make_strategy("gradient"), "tile_slots"), "2");
  std::unique_ptr<search::Strategy> a = search::make_strategy("annealing:plan_size=7");
  EXPECT_EQ(a->plan_size(), 7);
  EXPECT_EQ(search::make_strategy("annealing")->plan_size(), 64);
  EXPECT_EQ(value(*search::make_strategy("evolutionary:population=12"), "population"), "12");
  EXPECT_TRUE(search::make_strategy("random")->options().empty());
  for (const char* bad : {"gradient:", "gradient:tile_slots", "gradient:=1", "gradient:tile_slots=", ":tile_slots=1",
                          "gradient:tile_slot=1", "gradient:tile_slots=x", "gradient:tile_slots=1.5",
                          "gradient:tile_slots=-1", "gradient:epsilon=1.5", "gradient:epsilon=nan",
                          "gradient:tile_slots=1:tile_slots=2", "random:epsilon=0.1", "annealing:plan_size=0"})
    EXPECT_THROW(search::make_strategy(bad), ParseError) << bad;
  EXPECT_THROW(search::make_strategy("hillclimb:steps=3"), NotFoundError);
  // Options change what a strategy proposes: annealing with epsilon 1 proposes
  // random programs only, which its estimator ranks below its usual batch.
  ops::OpGraph op = ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}});
  search::TaskSpace space(op);
  std::unique_ptr<models::Estimator> roofline = models::make_estimator("roofline");
  std::mt19937_64 r0(5);
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (int i = 0; i < 20; ++i) {
    search::Candidate c = space.random(r0);
    if (measured.insert(c.json).second) history.push_back({c, 100.0 + i});
  }
  auto mean_predicted = [&](const std::string& spec) {
    std::mt19937_64 rng(9);
    search::SearchState state{space, roofline.get(), history, measured, rng};
    std::vector<search::Candidate> got = search::make_strategy(spec)->propose(state, 16);
    space.predict(*roofline, got);
    double mean = 0;
    for (const search::Candidate& c : got) mean += c.predicted / got.size();
    return mean;
  };
  EXPECT_LT(mean_predicted("annealing"), mean_predicted("annealing:epsilon=1"));
}

// The cuda target's space, without a GPU: GPU sketches, the GPU feature set (training
// and search features agree), an MLP trained on it, and every strategy proposing valid
// GPU configurations (the gradient search through the GPU constraints). The latencies
// are synthetic: a made-up cost of the configuration's threads and register tile.
TEST(Strategies, SearchTheGpuSpace) {
  const int gpu_features = relax::num_features(relax::FeatureSet::Gpu);
  for (const ops::OpGraph& g : {ops::build_op("dense", {{"M", "256"}, {"N", "256"}, {"K", "256"}}),
                                ops::build_op("conv2d", {{"in_channels", "16"},
                                                         {"out_channels", "32"},
                                                         {"height", "14"},
                                                         {"width", "14"},
                                                         {"kernel", "3"},
                                                         {"padding", "1"}}),
                                ops::build_op("softmax", std::map<std::string, std::string>{{"shape", "64,197"}})}) {
    search::TaskSpace space(g, "cuda");
    for (const sched::Sketch& s : space.sketches()) EXPECT_TRUE(sched::is_gpu_rule(s.rule)) << s.name;
    std::mt19937_64 r0(2);
    std::vector<search::Candidate> cs;
    std::unordered_set<std::string> seen;
    while (cs.size() < 80) {
      search::Candidate c = space.random(r0);
      if (seen.insert(c.json).second) cs.push_back(c);
    }
    models::FeatureBatch b = space.features(cs);
    ASSERT_EQ(b.features, gpu_features);
    models::FeatureExtractor fx;
    std::vector<models::Sample> samples;
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    for (int i = 0; i < b.batch; ++i) {
      models::Sample smp = fx.features(space.key(), space.sketches()[cs[i].sketch].name, cs[i].json, "cuda");
      ASSERT_EQ(smp.features.size(), static_cast<size_t>(smp.stores) * gpu_features);
      for (int st = 0; st < smp.stores; ++st)
        for (int f = 0; f < gpu_features; ++f)
          EXPECT_EQ(b.values[(static_cast<size_t>(i) * b.stores + st) * b.features + f],
                    smp.features[st * gpu_features + f]);
      const sched::Sketch& sk = space.sketches()[cs[i].sketch];
      double threads = sk.rule == sched::SketchRule::GpuTile ? sched::gpu_tile_use(sk, cs[i].config).threads
                                                             : cs[i].config.factors[0][0];
      smp.latency_us = 10 + std::abs(std::log2(threads / 256.0)) + (i % 7) * 0.1;
      samples.push_back(smp);
      if (i < 20) {
        history.push_back({cs[i], smp.latency_us});
        measured.insert(cs[i].json);
      }
    }
    std::unique_ptr<models::Estimator> mlp = models::make_estimator("mlp");
    models::TrainOptions to;
    to.epochs = 5;
    mlp->train(samples, to);
    // A CPU estimator cannot read GPU features.
    EXPECT_THROW(models::estimator_from_spec("mlp")->predict(b), Error);
    for (const std::string& name : search::strategy_names()) {
      std::mt19937_64 rng(42);
      search::SearchState state{space, name == "random" ? nullptr : mlp.get(), history, measured, rng};
      std::vector<search::Candidate> got = search::make_strategy(name)->propose(state, 12);
      EXPECT_EQ(got.size(), 12u) << name << " " << space.key();
      std::set<std::string> distinct;
      for (const search::Candidate& c : got) {
        EXPECT_TRUE(distinct.insert(c.json).second) << name;
        EXPECT_FALSE(measured.count(c.json)) << name;
        EXPECT_EQ(sched::invalid_reason(space.sketches()[c.sketch], c.config), "") << name;
      }
    }
  }
  EXPECT_THROW(search::TaskSpace(ops::build_op("dense"), "opencl"), Error);
}

// On a GPU no estimator weights ship: the trainable estimators start behind the GPU's
// roofline (models::with_gpu_prior), which ranks the first rounds (tensor cores ahead
// of the same tile on FP32, a GPU filled ahead of an idle one) and which the gradient
// search descends on; the learned estimator takes over once trained on 8 programs.
TEST(Strategies, TheGpuPriorRanksUntilTheEstimatorIsTrained) {
  search::TaskSpace space(ops::build_op("dense", {{"M", "1024"}, {"N", "1024"}, {"K", "1024"}}), "cuda");
  ASSERT_EQ(space.sketches().size(), 4u);  // gpu.tile, gpu.mma.tf32, .async2, .async3
  ASSERT_EQ(space.sketches()[1].rule, sched::SketchRule::GpuMma);
  ASSERT_EQ(space.sketches()[2].mma_stages, 2);
  std::unique_ptr<models::Estimator> est = models::estimator_for_target("ensemble", "cuda");
  EXPECT_TRUE(est->ready());
  EXPECT_EQ(est->kind(), "ensemble");
  std::unique_ptr<models::Estimator> roof = models::make_gpu_roofline();
  // The tensor-core default against a one-warp tensor-core program and the SIMT default.
  sched::Config mma = sched::default_config(space.sketches()[1]), one_warp = mma;
  one_warp.factors = {{1, 1}, {1, 1}, {1}};
  ASSERT_EQ(sched::invalid_reason(space.sketches()[2], mma), "");
  std::vector<search::Candidate> cs = {space.make(1, mma), space.make(1, one_warp),
                                       space.make(0, sched::default_config(space.sketches()[0])), space.make(2, mma)};
  models::FeatureBatch b = space.features(cs);
  std::vector<double> p = est->predict(b), r = roof->predict(b);
  EXPECT_EQ(p, r);
  EXPECT_LT(r[0], r[2]) << "tensor cores ahead of FP32";
  EXPECT_LT(r[0], r[1]) << "64 x 64 tiles ahead of one warp's 16 x 8 (8 times the global traffic)";
  EXPECT_LT(r[3], r[0]) << "the same tiles double buffered: copies overlapped with the fragments";
  // The gradient search descends on the prior, proposing valid programs.
  std::mt19937_64 rng(3), r0(4);
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (int i = 0; i < 20; ++i) {
    search::Candidate c = space.random(r0);
    if (measured.insert(c.json).second) history.push_back({c, 100.0 + i});
  }
  search::SearchState state{space, est.get(), history, measured, rng};
  std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, 16);
  EXPECT_EQ(got.size(), 16u);
  for (const search::Candidate& c : got) EXPECT_EQ(sched::invalid_reason(space.sketches()[c.sketch], c.config), "");
  // Trained on enough programs, the learned estimator scores instead.
  models::FeatureExtractor fx;
  std::vector<models::Sample> samples;
  for (int i = 0; i < 12; ++i) {
    search::Candidate c = space.random(r0);
    models::Sample s = fx.features(space.key(), space.sketches()[c.sketch].name, c.json, "cuda");
    s.latency_us = 50.0 + 3 * i;
    samples.push_back(s);
  }
  models::train_for_tuning(*est, std::vector<models::Sample>(samples.begin(), samples.begin() + 4), 1);
  EXPECT_EQ(est->predict(b), r) << "trained on 4 programs: still the prior";
  models::train_for_tuning(*est, samples, 1);
  EXPECT_NE(est->predict(b), r) << "trained on 12 programs: the learned estimator";
}

// The gradient search measures, in each batch, the best-predicted program of two
// sketches in turn, so that over a few rounds every sketch is tried with the estimator's
// choice (resnet18-c12's best sketch was missed without it).
TEST(Strategies, GradientVisitsEverySketchInTurn) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  const int n_sketches = static_cast<int>(space.sketches().size());
  ASSERT_GE(n_sketches, 4);
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::mt19937_64 r0(5);
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  std::set<int> explored;
  const int n = 16;
  // From the second batch (the first compares every sketch: the next test).
  for (int round = 1; round <= (n_sketches + 1) / 2; ++round) {
    while (static_cast<int>(history.size()) < round * n) {  // the round is the history's length in batches
      search::Candidate c = space.random(r0);
      if (measured.insert(c.json).second) history.push_back({c, 100.0 + history.size()});
    }
    std::mt19937_64 rng(round);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    for (int k = 0; k < 2; ++k) {
      const int want = (round * 2 + k) % n_sketches;
      EXPECT_EQ(got[n - 2 + k].sketch, want) << "round " << round;
      explored.insert(got[n - 2 + k].sketch);
    }
  }
  EXPECT_EQ(static_cast<int>(explored.size()), n_sketches);
}

// An MLP trained (40 epochs) on `programs` to prefer one sketch ten times over: the
// `liked` sketch's programs at 10 us, the others' at 100 us (plus 0 to 4 us).
std::unique_ptr<models::Estimator> mlp_that_prefers(const search::TaskSpace& space,
                                                    const std::vector<search::Candidate>& programs, int liked) {
  models::FeatureExtractor fx;
  std::vector<models::Sample> samples;
  for (size_t i = 0; i < programs.size(); ++i) {
    const search::Candidate& c = programs[i];
    models::Sample smp = fx.features(space.key(), space.sketches()[c.sketch].name, c.json, "llvm");
    smp.latency_us = (c.sketch == liked ? 10.0 : 100.0) + static_cast<double>(i % 5);
    samples.push_back(smp);
  }
  std::unique_ptr<models::Estimator> mlp = models::make_estimator("mlp");
  models::TrainOptions to;
  to.epochs = 40;
  mlp->train(samples, to);
  return mlp;
}

// The first batch, with nothing measured, gives every sketch the same number of
// programs (within one): the estimator picks among random programs of one sketch, not
// across sketches (Zen 5, resnet18-c6 and -c12: the shipped ensemble's order of the
// sketch families sent 85 to 95% of the programs to the `vec=w` sketches while the
// packed ones held both strategies' best). Here the MLP is trained to like one sketch
// ten times over, and the batch still compares them all; the next batch, with the
// first measured, gives it at least twice as many.
TEST(Strategies, GradientFirstBatchComparesEverySketch) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  const int n_sketches = static_cast<int>(space.sketches().size());
  ASSERT_GE(n_sketches, 4);
  const int liked = 1;
  std::mt19937_64 r0(9);
  std::vector<search::Candidate> train;
  std::unordered_set<std::string> seen;
  while (train.size() < 120) {
    search::Candidate c = space.random(r0);
    if (seen.insert(c.json).second) train.push_back(c);
  }
  std::unique_ptr<models::Estimator> mlp = mlp_that_prefers(space, train, liked);
  const int n = 2 * n_sketches + 3;
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  auto propose = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    return search::make_strategy("gradient")->propose(state, n);
  };
  std::vector<search::Candidate> first = propose(3);
  ASSERT_EQ(first.size(), static_cast<size_t>(n));
  std::map<int, int> per_sketch;
  std::set<std::string> distinct;
  for (const search::Candidate& c : first) {
    ++per_sketch[c.sketch];
    distinct.insert(c.json);
  }
  EXPECT_EQ(distinct.size(), first.size());
  EXPECT_EQ(static_cast<int>(per_sketch.size()), n_sketches);
  // The default sketch's untuned program comes besides its turns.
  const int d = static_cast<int>(sched::default_sketch(space.sketches()));
  for (const auto& [sketch, count] : per_sketch) {
    EXPECT_GE(count, 2) << "sketch " << sketch;
    EXPECT_LE(count, sketch == d ? 4 : 3) << "sketch " << sketch;
  }
  std::vector<search::Candidate> again = propose(3);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i].json, again[i].json) << "not reproducible";
  // Once programs are measured, the estimator's preference ranks the batch.
  for (const search::Candidate& c : first) {
    history.push_back({c, c.sketch == liked ? 10.0 : 100.0});
    measured.insert(c.json);
  }
  int liked_next = 0;
  for (const search::Candidate& c : propose(4)) liked_next += c.sketch == liked;
  EXPECT_GE(liked_next, 2 * per_sketch[liked]) << "the trained MLP does not prefer the sketch: the test checks nothing";
}

// The gradient search measures the fastest program's tiling in its nearest sibling
// sketches (resnet18-c2, -c6 and -c9 ended in a sibling of the sketch they settled on
// first, 150 to 250 trials later), and the next program's once those are measured.
TEST(Strategies, GradientTriesTheFastestTilingInSiblingSketches) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  measure_random(space, 11, 48, history, measured);
  // The fastest program: one with siblings.
  size_t fast = history.size();
  for (size_t i = 0; i < history.size() && fast == history.size(); ++i) {
    search::Candidate out;
    for (int s = 0; s < static_cast<int>(space.sketches().size()); ++s)
      if (space.transplant(history[i].candidate, s, &out)) fast = i;
  }
  ASSERT_LT(fast, history.size()) << "no program has a sibling: the test checks nothing";
  history[fast].latency_us = 50;
  const search::Candidate best = history[fast].candidate;
  auto siblings_in = [&](const std::vector<search::Candidate>& got) {
    std::vector<search::Candidate> sib;
    for (const search::Candidate& c : got)
      if (c.sketch != best.sketch && c.config.factors == best.config.factors && c.config.unroll == best.config.unroll)
        sib.push_back(c);
    return sib;
  };
  std::mt19937_64 rng(2);
  search::SearchState state{space, mlp.get(), history, measured, rng};
  const int n = 16;
  std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, n);
  ASSERT_EQ(got.size(), static_cast<size_t>(n));
  std::vector<search::Candidate> sib = siblings_in(got);
  ASSERT_GE(sib.size(), 2u);
  // The nearest first: no sibling of the batch is farther than one left out.
  int farthest = 0;
  for (const search::Candidate& c : sib) farthest = std::max(farthest, space.sketch_distance(best.sketch, c.sketch));
  for (int s = 0; s < static_cast<int>(space.sketches().size()); ++s) {
    search::Candidate out;
    if (!space.transplant(best, s, &out) ||
        std::any_of(sib.begin(), sib.end(), [&](const search::Candidate& c) { return c.sketch == s; }))
      continue;
    EXPECT_GE(space.sketch_distance(best.sketch, s), farthest) << space.sketches()[s].name;
  }
  // Once every sibling is measured, none is proposed again.
  for (int s = 0; s < static_cast<int>(space.sketches().size()); ++s) {
    search::Candidate out;
    if (space.transplant(best, s, &out) && measured.insert(out.json).second) history.push_back({out, 400.0});
  }
  std::mt19937_64 rng2(3);
  search::SearchState again{space, mlp.get(), history, measured, rng2};
  std::vector<search::Candidate> next = search::make_strategy("gradient")->propose(again, n);
  EXPECT_TRUE(siblings_in(next).empty());
  for (const search::Candidate& c : next) EXPECT_FALSE(measured.count(c.json)) << c.json;
}

// 47 random programs of a 256^3 matmul with no unroll depth of 16 (200 us and up) and
// the fastest, at 50 us: one of their tilings at depth 16, measured with no other depth.
struct UnrollHistory {
  search::TaskSpace space{ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}})};
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  search::Candidate fast;
  UnrollHistory() {
    std::mt19937_64 r0(13);
    while (history.size() < 48) {
      search::Candidate c = space.random(r0);
      if (c.config.unroll == 16 || !measured.insert(c.json).second) continue;
      history.push_back({c, 200.0 + history.size()});
    }
    sched::Config fast_config = history[7].candidate.config;
    fast_config.unroll = 16;
    fast = space.make(history[7].candidate.sketch, fast_config);
    measured.erase(history[7].candidate.json);
    history.erase(history.begin() + 7);
    measured.insert(fast.json);
    history.push_back({fast, 50.0});
  }
  // The unroll depths of the fastest program's tiling among `got`.
  std::set<int64_t> depths_in(const std::vector<search::Candidate>& got) const {
    std::set<int64_t> d;
    for (const search::Candidate& c : got)
      if (c.sketch == fast.sketch && c.config.factors == fast.config.factors) d.insert(c.config.unroll);
    return d;
  }
};

// The gradient search measures the fastest program with other unroll depths, the
// nearest in the menu first (resnet18-c6, seed 1: after a first batch whose unroll-64
// programs had slow tilings, 90% of the programs had unroll 16, 15% behind), and the
// farther ones once those are measured.
TEST(Strategies, GradientTriesTheFastestProgramWithOtherUnrollDepths) {
  UnrollHistory u;
  search::TaskSpace& space = u.space;
  std::vector<search::Measured>& history = u.history;
  std::unordered_set<std::string>& measured = u.measured;
  const search::Candidate& fast = u.fast;
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  const std::vector<int64_t>& menu = space.sketches()[static_cast<size_t>(fast.sketch)].unroll_menu;
  ASSERT_EQ(menu, (std::vector<int64_t>{0, 16, 64, 512, 1024})) << "the test assumes the default menu";
  auto depths_in = [&](const std::vector<search::Candidate>& got) { return u.depths_in(got); };
  const int n = 16;
  std::mt19937_64 rng(2);
  search::SearchState state{space, mlp.get(), history, measured, rng};
  std::set<int64_t> first = depths_in(search::make_strategy("gradient")->propose(state, n));
  EXPECT_TRUE(first.count(0) && first.count(64))
      << "the nearest depths, 0 and 64; got " << ::testing::PrintToString(first);
  // Those measured (slower), the farther ones follow.
  for (int64_t u : {0, 64}) {
    sched::Config c = fast.config;
    c.unroll = u;
    search::Candidate m = space.make(fast.sketch, c);
    if (measured.insert(m.json).second) history.push_back({m, 300.0});
  }
  std::mt19937_64 rng2(3);
  search::SearchState again{space, mlp.get(), history, measured, rng2};
  std::set<int64_t> next = depths_in(search::make_strategy("gradient")->propose(again, n));
  EXPECT_TRUE(next.count(512) && next.count(1024)) << "the farther depths, 512 and 1024";
  EXPECT_FALSE(next.count(0) || next.count(64)) << "measured already";
}

// Annealing and evolutionary search take the proposal sources by option (sources=1):
// the unroll source's places end their batches (the fastest program at the nearest
// other depths, 0 and 64), which without it neither proposes; the batch stays n
// distinct unmeasured programs, reproducible for a seed.
TEST(Strategies, AnnealingAndEvolutionaryTakeTheSourcesByOption) {
  UnrollHistory u;
  search::TaskSpace& space = u.space;
  const std::vector<search::Measured>& history = u.history;
  const std::unordered_set<std::string>& measured = u.measured;
  std::unique_ptr<models::Estimator> roofline = models::make_estimator("roofline");
  auto unroll_variants = [&](const std::vector<search::Candidate>& got) { return u.depths_in(got); };
  const std::string only_unroll =
      ":sketch_slots=0:sibling_slots=0:block_slots=0:tile_slots=0:fill_slots=0:unroll_slots=2";
  for (const std::string name : {"annealing", "evolutionary"}) {
    std::vector<std::string> first;
    for (int rep = 0; rep < 2; ++rep) {
      std::mt19937_64 rng(2);
      search::SearchState state{space, roofline.get(), history, measured, rng};
      const std::vector<search::Candidate> got =
          search::make_strategy(name + ":sources=1" + only_unroll)->propose(state, 16);
      ASSERT_EQ(got.size(), 16u) << name;
      std::set<std::string> distinct;
      std::vector<std::string> jsons;
      for (const search::Candidate& c : got) {
        EXPECT_FALSE(measured.count(c.json)) << name;
        EXPECT_TRUE(distinct.insert(c.json).second) << name;
        jsons.push_back(c.json);
      }
      const std::set<int64_t> depths = unroll_variants({got.end() - 2, got.end()});
      EXPECT_EQ(depths, (std::set<int64_t>{0, 64})) << name << ": the last places are the unroll source's";
      if (rep == 0) first = jsons;
      else EXPECT_EQ(jsons, first) << name << " is not reproducible";
    }
    std::mt19937_64 rng(2);
    search::SearchState state{space, roofline.get(), history, measured, rng};
    const std::set<int64_t> without = unroll_variants(search::make_strategy(name)->propose(state, 16));
    EXPECT_FALSE(without.count(0) && without.count(64)) << name << " proposed both depths without the sources";
  }
  // The gradient search without its sources: no unroll variant at the end of the batch.
  {
    std::mt19937_64 rng(2);
    std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
    search::SearchState state{space, mlp.get(), history, measured, rng};
    const std::vector<search::Candidate> with = search::make_strategy("gradient" + only_unroll)->propose(state, 16);
    EXPECT_EQ(unroll_variants({with.end() - 2, with.end()}), (std::set<int64_t>{0, 64}));
    std::mt19937_64 rng2(2);
    search::SearchState again{space, mlp.get(), history, measured, rng2};
    const std::vector<search::Candidate> without =
        search::make_strategy("gradient:sources=0" + only_unroll)->propose(again, 16);
    ASSERT_EQ(without.size(), 16u);
    EXPECT_NE(unroll_variants({without.end() - 2, without.end()}), (std::set<int64_t>{0, 64}));
  }
  EXPECT_THROW(search::make_strategy("annealing:sources=2"), ParseError);
  EXPECT_THROW(search::make_strategy("random:sources=1"), ParseError);
}

// The gradient search measures the fastest program with other factors of a one-level
// split (a GEMM's k block), each the farthest from the factors measured with that
// sketch and register tile (gemm-1024 on an Intel host: its programs had
// k blocks of 256 to 1024, annealing's best 16), and the gaps between them after.
TEST(Strategies, GradientProbesTheFastestProgramsReductionBlock) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> all;
  std::unordered_set<std::string> ignored;
  measure_random(space, 23, 48, all, ignored);
  // The fastest: a program with k block 256; nothing else of its sketch and tile.
  const sched::Sketch* sketch = nullptr;
  search::Candidate fast;
  size_t k = 0;
  for (const search::Measured& m : all) {
    const sched::Sketch& s = space.sketches()[static_cast<size_t>(m.candidate.sketch)];
    for (size_t i = 0; i < s.splits.size(); ++i)
      if (s.splits[i].parts == 1 && s.splits[i].name == "k" && !sketch) {
        sched::Config c = m.candidate.config;
        c.factors[i] = {256};
        if (!sched::invalid_reason(s, c).empty()) continue;
        sketch = &s;
        k = i;
        fast = space.make(m.candidate.sketch, c);
      }
  }
  ASSERT_TRUE(sketch) << "no program with a one-level k split";
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (const search::Measured& m : all)
    if ((m.candidate.sketch != fast.sketch || space.register_tile(m.candidate) != space.register_tile(fast)) &&
        m.candidate.json != fast.json && measured.insert(m.candidate.json).second)
      history.push_back(m);
  ASSERT_TRUE(measured.insert(fast.json).second);
  history.push_back({fast, 50.0});
  auto blocks_in = [&](const std::vector<search::Candidate>& got) {
    std::set<int64_t> b;
    for (const search::Candidate& c : got) {
      if (c.sketch != fast.sketch) continue;
      sched::Config same = c.config;
      same.factors[k] = fast.config.factors[k];
      if (same.factors == fast.config.factors && same.unroll == fast.config.unroll) b.insert(c.config.factors[k][0]);
    }
    return b;
  };
  const int n = 16;
  std::mt19937_64 rng(2);
  search::SearchState state{space, mlp.get(), history, measured, rng};
  std::set<int64_t> first = blocks_in(search::make_strategy("gradient")->propose(state, n));
  EXPECT_TRUE(first.count(1) && first.count(16))
      << "1, the farthest from 256, then 16 between; got " << ::testing::PrintToString(first);
  for (int64_t b : {1, 16}) {  // measured, slower
    sched::Config c = fast.config;
    c.factors[k] = {b};
    search::Candidate m = space.make(fast.sketch, c);
    if (measured.insert(m.json).second) history.push_back({m, 300.0});
  }
  std::mt19937_64 rng2(3);
  search::SearchState again{space, mlp.get(), history, measured, rng2};
  std::set<int64_t> next = blocks_in(search::make_strategy("gradient")->propose(again, n));
  EXPECT_TRUE(next.count(4) && next.count(64)) << "the middles of the gaps; got " << ::testing::PrintToString(next);
  EXPECT_FALSE(next.count(1) || next.count(16)) << "measured already";
}

// The gradient search measures the fastest program with other register tiles, tiles
// that no measured program of its sketch has (gemm-1024: the search stayed with an
// 8x16 tile in two seeds, 4% behind 4x64), and other tiles once those are measured.
TEST(Strategies, GradientTriesOtherRegisterTilesOfTheFastestProgram) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  measure_random(space, 19, 48, history, measured);
  history[5].latency_us = 50;
  const search::Candidate fast = history[5].candidate;
  auto tiles_of = [&](const std::vector<search::Measured>& h) {
    std::set<std::vector<int64_t>> t;
    for (const search::Measured& m : h)
      if (m.candidate.sketch == fast.sketch) t.insert(space.register_tile(m.candidate));
    return t;
  };
  const int n = 16;
  for (int round = 0; round < 3; ++round) {
    std::mt19937_64 rng(round + 2);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    const std::set<std::vector<int64_t>> before = tiles_of(history);
    std::vector<search::Candidate> r = reshapes_in(space, fast, got);
    ASSERT_GE(r.size(), 2u) << "round " << round;
    std::set<std::vector<int64_t>> new_tiles;
    for (const search::Candidate& c : r) {
      const std::vector<int64_t> t = space.register_tile(c);
      if (!before.count(t)) new_tiles.insert(t);
    }
    EXPECT_GE(new_tiles.size(), 2u) << "round " << round << ": two tiles not measured before";
    for (const search::Candidate& c : got) {
      EXPECT_FALSE(measured.count(c.json)) << c.json;
      if (measured.insert(c.json).second) history.push_back({c, 300.0});  // all slower
    }
  }
}

// The gradient search also measures another sketch's fastest program with other
// register tiles, in a place of its own (resnet18-c12: the unpacked sketch
// was fastest with a 2x7 tile, the packed one with 1x7, and the search held the packed
// 1x7 program and never measured the unpacked 2x7). Here sketch B's fastest program is
// within the margin of the best, in another sketch, and so is sketch C's; each round
// measures a reshape of each into a tile no measured program of its sketch has (two
// places a batch: with one, resnet18-c12 held `vec=w` programs 20%
// behind for 300 trials on four seeds of four), and still two reshapes of the fastest.
TEST(Strategies, GradientTriesOtherRegisterTilesOfAnotherSketchsFastestProgram) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  measure_random(space, 29, 48, history, measured);
  history[5].latency_us = 50;
  size_t b = 6;
  while (b < history.size() && history[b].candidate.sketch == history[5].candidate.sketch) ++b;
  ASSERT_LT(b, history.size());
  history[b].latency_us = 60;  // within the margin (0.5 by default); every other program is at 200 or more
  size_t c = b + 1;
  while (c < history.size() && (history[c].candidate.sketch == history[5].candidate.sketch ||
                                history[c].candidate.sketch == history[b].candidate.sketch))
    ++c;
  ASSERT_LT(c, history.size());
  history[c].latency_us = 65;
  const search::Candidate fast = history[5].candidate;
  const int n = 16;
  for (int round = 0; round < 3; ++round) {
    std::map<int, std::set<std::vector<int64_t>>> before;  // sketch -> its measured tiles
    for (const search::Measured& m : history) before[m.candidate.sketch].insert(space.register_tile(m.candidate));
    std::mt19937_64 rng(round + 7);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    for (size_t k : {b, c}) {
      const search::Candidate& other = history[k].candidate;
      int new_tiles = 0;
      for (const search::Candidate& r : reshapes_in(space, other, got))
        new_tiles += !before[other.sketch].count(space.register_tile(r));
      EXPECT_GE(new_tiles, 1) << "round " << round << ": no reshape of sketch " << other.sketch << "'s fastest program";
    }
    EXPECT_GE(reshapes_in(space, fast, got).size(), 2u) << "round " << round << ": the fastest program lost a reshape";
    for (const search::Candidate& c : got)
      if (measured.insert(c.json).second) history.push_back({c, 300.0});  // all slower
  }
}

// Register-filling tiles (docs/search.md; resnet18-c12 and -c9 on Zen 4:
// the fastest programs' tiles took 28 of 32 AVX-512 registers, in a sketch whose
// random programs measured among the slowest). The first batch gives every sketch a
// program whose tile fills at least half the registers allowed; each later batch gives
// two sketches in turn their fastest program with one of the fullest tiles that no
// measured program of the sketch has, and every sketch gets its turn.
TEST(Strategies, GradientTriesRegisterFillingTilesOfSketchesInTurn) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  const int n_sketches = static_cast<int>(space.sketches().size());
  ASSERT_GE(n_sketches, 4);
  const int vb = vector_file(this_host().vector_isa).bytes;
  const int registers = 16;  // AVX2's file, whatever this host's
  const std::string spec = "gradient:fill_registers=" + std::to_string(registers);
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  {
    std::mt19937_64 rng(4);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::map<int, int> filling;  // per sketch, its first batch's programs with a register-filling tile
    for (const search::Candidate& c : search::make_strategy(spec)->propose(state, 2 * n_sketches + 3)) {
      const int64_t r = space.tile_registers(c, vb);
      filling[c.sketch] += space.live_registers(c, vb) <= registers && 2 * r >= registers - 4;
    }
    ASSERT_EQ(static_cast<int>(filling.size()), n_sketches);
    for (const auto& [sketch, count] : filling)
      EXPECT_GE(count, 1) << "sketch " << sketch << ": no register-filling tile in the first batch";
  }
  measure_random(space, 31, 48, history, measured);
  const int n = 16;
  std::set<int> filled;
  for (int round = 0; round <= n_sketches / 2; ++round) {
    const int turn = static_cast<int>(history.size()) / n;
    std::mt19937_64 rng(round + 11);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    const std::vector<search::Candidate> got = search::make_strategy(spec)->propose(state, n);
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    std::set<std::string> jsons;
    for (const search::Candidate& c : got) jsons.insert(c.json);
    for (int k = 0; k < 2; ++k) {
      const int sketch = (turn * 2 + k) % n_sketches;
      const search::Measured* fastest = nullptr;
      std::set<std::vector<int64_t>> tiles;  // the sketch's measured tiles
      for (const search::Measured& m : history)
        if (m.candidate.sketch == sketch) {
          tiles.insert(space.register_tile(m.candidate));
          if (!fastest || m.latency_us < fastest->latency_us) fastest = &m;
        }
      ASSERT_NE(fastest, nullptr);
      // The first of the filled tiles (the fastest paced, then the fullest, then the
      // fewest loads) that no measured program has, and those as full with as few loads.
      std::vector<search::Candidate> unmeasured;
      for (search::Candidate& f : space.filled_tiles(fastest->candidate, registers, vb))
        if (!tiles.count(space.register_tile(f))) unmeasured.push_back(std::move(f));
      ASSERT_FALSE(unmeasured.empty());
      const int64_t top = space.tile_registers(unmeasured.front(), vb);
      const int64_t leanest = space.tile_loads(unmeasured.front(), vb);
      // Such a tile in the batch: the filling place's program, or, where another source
      // took a program of the sketch with that register tile first in this batch, that
      // one (the place then skips the tile: on AVX2's 16 registers the fullest tiles are
      // few and another source's reshapes reach them too).
      bool found = false;
      for (const search::Candidate& f : unmeasured) {
        if (space.tile_registers(f, vb) != top || space.tile_loads(f, vb) != leanest) continue;
        found |= jsons.count(f.json) > 0;
        for (const search::Candidate& c : got)
          found |= c.sketch == sketch && space.register_tile(c) == space.register_tile(f);
      }
      EXPECT_TRUE(found) << "round " << round << ": sketch " << sketch
                         << "'s fastest program with a full tile of the fewest loads";
      filled.insert(sketch);
    }
    for (const search::Candidate& c : got)
      if (measured.insert(c.json).second) history.push_back({c, 300.0});  // all slower
  }
  EXPECT_EQ(static_cast<int>(filled.size()), n_sketches);
}

// The first batch measures the untuned program (the default sketch's default
// configuration) even where it is smaller than the task's sketches: a network's first
// programs are shared by its tasks, a few each.
TEST(Strategies, GradientFirstBatchMeasuresTheUntunedProgram) {
  const ops::Workload& w = ops::find_workload("resnet18-c12");
  search::TaskSpace space(ops::build_op(w.op, w.params));
  ASSERT_GT(space.sketches().size(), 3u);  // more sketches than the batch's places
  const int d = static_cast<int>(sched::default_sketch(space.sketches()));
  const std::string untuned = space.make(d, sched::default_config(space.sketches()[static_cast<size_t>(d)])).json;
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    std::mt19937_64 rng(seed);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    const std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, 3);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_TRUE(std::any_of(got.begin(), got.end(), [&](const search::Candidate& c) { return c.json == untuned; }))
        << "seed " << seed;
  }
}

// With fill_whole, every sketch's second program in the first batch has the fullest
// register-filling tile with no partial tile (on AVX2 the fastest 1 x 7
// tiles of resnet18-c10 and -c12 were never the fullest, 12 with partial tiles).
TEST(Strategies, GradientFirstBatchGivesEverySketchAWholeFillingTile) {
  const ops::Workload& w = ops::find_workload("resnet18-c12");
  search::TaskSpace space(ops::build_op(w.op, w.params));
  const int vb = vector_file(this_host().vector_isa).bytes;
  const int registers = 12;
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  auto whole_fills = [&](const std::string& spec) {
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    std::mt19937_64 rng(5);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    std::set<int> sketches;  // those with a program whose tile is the fullest whole one
    const int n = 2 * static_cast<int>(space.sketches().size()) + 1;  // + the untuned program
    for (const search::Candidate& c : search::make_strategy(spec)->propose(state, n)) {
      // c's tile among the fullest whole ones its own configuration makes.
      const std::vector<search::Candidate> top = space.filled_tiles(c, registers, vb, true, /*whole_only=*/true);
      if (std::any_of(top.begin(), top.end(),
                      [&](const search::Candidate& t) { return space.register_tile(t) == space.register_tile(c); }))
        sketches.insert(c.sketch);
    }
    return sketches;
  };
  int anchors = 0;
  for (const sched::Sketch& s : space.sketches()) anchors += s.rule == sched::SketchRule::Anchor;
  ASSERT_GE(anchors, 4);
  const std::string spec = "gradient:fill_registers=" + std::to_string(registers);
  EXPECT_EQ(static_cast<int>(whole_fills(spec).size()), anchors);
  EXPECT_LT(static_cast<int>(whole_fills(spec + ":fill_whole=0").size()), anchors);
}

// A register tile measured once, close to the best, gets follow-ups: its program with
// other outer levels, reduction tile or unroll depth (gemm-1024, seed 2: a first 4x64
// program with a k tile of 1 was 0.7% behind the best and never measured again).
TEST(Strategies, GradientFollowsUpATileCloseToTheBest) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  measure_random(space, 23, 48, history, measured);
  using Tile = std::pair<int, std::vector<int64_t>>;
  auto tile_of = [&](const search::Candidate& c) { return Tile{c.sketch, space.register_tile(c)}; };
  history[3].latency_us = 50;
  // The close one: the first program with a tile no other program has.
  std::map<Tile, int> count;
  for (const search::Measured& m : history) ++count[tile_of(m.candidate)];
  size_t close = history.size();
  for (size_t i = 4; i < history.size() && close == history.size(); ++i)
    if (count[tile_of(history[i].candidate)] == 1) close = i;
  ASSERT_LT(close, history.size());
  history[close].latency_us = 50.5;
  const Tile want = tile_of(history[close].candidate);
  std::mt19937_64 rng(4);
  search::SearchState state{space, mlp.get(), history, measured, rng};
  std::vector<search::Candidate> got = search::make_strategy("gradient")->propose(state, 16);
  int follow_ups = 0;
  for (const search::Candidate& c : got) follow_ups += tile_of(c) == want;
  EXPECT_GE(follow_ups, 1) << "no new program with the close tile";
  // The follow-up has a place of its own: both reshapes of the fastest program into
  // new tiles are still there (sharing one place, and on gemm-1024 the close
  // tiles kept taking it).
  std::set<std::string> reshapes;
  for (const search::Candidate& c : space.reshaped_tiles(history[3].candidate))
    if (!count.count(tile_of(c))) reshapes.insert(c.json);
  std::set<Tile> new_tiles;
  for (const search::Candidate& c : got)
    if (reshapes.count(c.json)) new_tiles.insert(tile_of(c));
  EXPECT_GE(new_tiles.size(), 2u) << "a reshape lost its place to the follow-up";
}

// The gradient search caps a sketch whose measured programs are all much slower than
// the best, however much its estimator likes it (resnet18-c12 spent 300 trials in
// such sketches): here an MLP trained to prefer one sketch, and measurements that put
// that sketch 2x behind. With the same MLP and the sketch measured fast, the batch is
// mostly that sketch, so the cap is what keeps it out.
TEST(Strategies, GradientCapsSketchesMeasuredSlow) {
  search::TaskSpace space(ops::build_op("matmul", {{"M", "256"}, {"N", "256"}, {"K", "256"}}));
  ASSERT_GE(space.sketches().size(), 4u);
  const int liked = 1;
  std::mt19937_64 r0(9);
  std::vector<search::Candidate> train, liked_cs, other_cs;
  std::unordered_set<std::string> seen;
  while (liked_cs.size() < 12 || other_cs.size() < 24 || train.size() < 120) {
    search::Candidate c = space.random(r0);
    if (!seen.insert(c.json).second) continue;
    if (train.size() < 120) train.push_back(c);
    else if (c.sketch == liked && liked_cs.size() < 12) liked_cs.push_back(c);
    else if (c.sketch != liked && other_cs.size() < 24) other_cs.push_back(c);
  }
  std::unique_ptr<models::Estimator> mlp = mlp_that_prefers(space, train, liked);
  auto liked_in_batch = [&](double liked_latency) {
    std::vector<search::Measured> history;
    std::unordered_set<std::string> measured;
    for (const search::Candidate& c : liked_cs) history.push_back({c, liked_latency});
    for (const search::Candidate& c : other_cs) history.push_back({c, 100.0});
    for (const search::Measured& m : history) measured.insert(m.candidate.json);
    std::mt19937_64 rng(4);
    search::SearchState state{space, mlp.get(), history, measured, rng};
    const int n = 16;
    // Without the other sketches' reshape place, which would take one of the ranked places counted here.
    std::vector<search::Candidate> got = search::make_strategy("gradient:tile_sketch_slots=0")->propose(state, n);
    EXPECT_EQ(got.size(), static_cast<size_t>(n));
    int count = 0;
    for (int i = 0; i < n - 4; ++i) count += got[i].sketch == liked;  // then two sibling and two sketch slots
    return count;
  };
  EXPECT_GE(liked_in_batch(90.0), 8) << "the trained MLP does not prefer the sketch: the test checks nothing";
  // Capped: 2 ranked, and at most the 2 random programs of the batch.
  EXPECT_LE(liked_in_batch(200.0), 4);
}

// The capped sketches share two ranked places, and the more programs a sketch has had
// measured, the smaller the margin that caps it (on resnet18-c12 four
// `vec=w` sketches 12% behind the packed ones, with 60 to 170 programs each, kept two
// ranked places each, a quarter of the trials after the first 300).
TEST(Strategies, SketchCapsShareTwoPlacesAndTheMarginShrinksWithEvidence) {
  auto program = [](int sketch, int k) {
    search::Candidate c;
    c.sketch = sketch;
    c.json = std::to_string(sketch) + "/" + std::to_string(k);
    c.predicted = k;
    return c;
  };
  // Sketch 0 the best (100 us); 1 and 2 at 112 us; 3 at 140 us; 4 failed only.
  auto history = [&](int per_sketch) {
    std::vector<search::Measured> h;
    for (int k = 0; k < per_sketch; ++k) {
      h.push_back({program(0, k), 100.0 + k});
      h.push_back({program(1, k), 112.0 + k});
      h.push_back({program(2, k), 112.0 + k});
      h.push_back({program(3, k), 140.0 + k});
      h.push_back({program(4, k), 0.0});
    }
    return h;
  };
  const search::detail::SketchCap cap;  // 25% at 8 programs, down to 5%
  using Caps = std::vector<bool>;
  // Too little evidence: nothing capped.
  EXPECT_EQ(search::detail::capped_sketches(history(7), 5, cap), Caps({false, false, false, false, false}));
  // 8 programs: the margin is 25%, only sketch 3 (40% behind) is capped.
  EXPECT_EQ(search::detail::capped_sketches(history(8), 5, cap), Caps({false, false, false, true, false}));
  // 16 programs: 12.5%, 12% behind is still within it.
  EXPECT_EQ(search::detail::capped_sketches(history(16), 5, cap), Caps({false, false, false, true, false}));
  // 20 programs: 10%, now 1 and 2 are capped too; a sketch of failures never is.
  EXPECT_EQ(search::detail::capped_sketches(history(20), 5, cap), Caps({false, true, true, true, false}));
  // The floor: 5% however many programs.
  search::detail::SketchCap close = cap;
  close.margin_floor = 0.15;
  EXPECT_EQ(search::detail::capped_sketches(history(200), 5, close), Caps({false, false, false, true, false}));

  // Two places in all for the capped sketches, their best predicted; the others keep all.
  std::vector<search::Candidate> ranked;
  for (int k = 0; k < 4; ++k)
    for (int s = 0; s < 4; ++s) ranked.push_back(program(s, 10 * k + s));
  search::detail::cap_ranked(ranked, {false, true, true, false}, 2);
  std::vector<std::string> got;
  for (const search::Candidate& c : ranked) got.push_back(c.json);
  EXPECT_EQ(got,
            std::vector<std::string>({"0/0", "1/1", "2/2", "3/3", "0/10", "3/13", "0/20", "3/23", "0/30", "3/33"}));
  // Nothing capped: nothing cut.
  search::detail::cap_ranked(ranked, {false, false, false, false}, 2);
  EXPECT_EQ(ranked.size(), 10u);
}

// Regression: in tiny spaces (the small CNN of the C++ example's test) the gradient
// batch's random programs repeated a sketch pick, and the tuner stopped on "strategy
// gradient proposed a measured program". Every strategy, round after round, proposes
// distinct unmeasured programs until the space runs out.
TEST(Strategies, SmallSpacesNeverRepeatAProgram) {
  std::unique_ptr<models::Estimator> mlp = models::estimator_from_spec("mlp");
  std::unique_ptr<models::Estimator> roofline = models::make_estimator("roofline");
  for (const ops::OpGraph& task : {ops::build_op("conv2d", {{"in_channels", "3"},
                                                            {"out_channels", "4"},
                                                            {"height", "8"},
                                                            {"width", "8"},
                                                            {"kernel", "3"},
                                                            {"padding", "1"}}),
                                   ops::build_op("dense", {{"M", "1"}, {"K", "64"}, {"N", "10"}}),
                                   ops::build_op("max_pool2d", {{"channels", "4"}, {"height", "8"}, {"width", "8"}})})
    for (const std::string& name : search::strategy_names()) {
      search::TaskSpace space(task);
      models::Estimator* est = name == "gradient" ? mlp.get() : name == "random" ? nullptr : roofline.get();
      std::unique_ptr<search::Strategy> s = search::make_strategy(name);
      std::vector<search::Measured> history;
      std::unordered_set<std::string> measured;
      std::mt19937_64 rng(3);
      for (int round = 0; round < 12; ++round) {
        search::SearchState state{space, est, history, measured, rng};
        std::vector<search::Candidate> got = s->propose(state, 32);
        if (got.empty()) break;
        for (const search::Candidate& c : got) {
          ASSERT_TRUE(measured.insert(c.json).second) << name << " round " << round << " repeats " << c.json;
          history.push_back({c, 1.0 + static_cast<double>(std::hash<std::string>()(c.json) % 1000)});
        }
      }
    }
}

TEST(Strategies, UntrainedEstimatorFallsBackToRandom) {
  search::TaskSpace space(small_gemm());
  std::unique_ptr<models::Estimator> gbt = models::make_estimator("gbt");
  ASSERT_FALSE(gbt->ready());
  std::vector<search::Measured> history;
  std::unordered_set<std::string> measured;
  for (const char* name : {"annealing", "evolutionary", "gradient"}) {
    std::mt19937_64 rng(1);
    search::SearchState state{space, gbt.get(), history, measured, rng};
    EXPECT_EQ(search::make_strategy(name)->propose(state, 8).size(), 8u) << name;
  }
}

}  // namespace
