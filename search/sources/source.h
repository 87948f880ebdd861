// Proposal sources: each adds programs to a batch of the gradient search that the Felix
// descent (search/descent.h) rarely reaches, for a reason measured on real tasks and
// stated at its definition. A source is one file: a class implementing ProposalSource
// and one BASIN_REGISTER_SOURCE line; the gradient strategy (search/gradient.cc) makes
// every registered source and composes its batch from them (docs/search.md, "Adding a
// source").
//
// Two kinds of contribution, and a source may make both:
//  - the ranked pool: candidates added before the estimator ranks the pool, beside the
//    descent's rounded points (add_to_pool);
//  - places of their own: the source asks for places per kind of pick (places_wanted);
//    the driver grants each kind at most a quarter of the batch, calls propose with
//    what it granted and what the sources before it took, and keeps at most that many
//    of the programs returned, dropping those measured or taken already, and never
//    more than the batch less one place in all (the ranked pool's best, the descent's,
//    always has one). The driver owns the slot arithmetic and de-duplication; a source
//    only chooses.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "search/strategy.h"

namespace basin::search {

// What a source sees of the batch being made.
struct SourceContext {
  SearchState& state;
  const std::vector<const Measured*>& good;  // the measured programs that ran, fastest first
  int n = 0;                                 // the batch's size
  // The ranked pool, predicted (propose only): a source may take programs out of it.
  std::vector<Candidate>* ranked = nullptr;
  // The value of any option of the strategy (every source's and the strategy's own) by
  // key: a source reading another's setting (the tile follow-up's mutations are the
  // local moves'). Throws for an unknown key.
  std::function<double(const std::string&)> option;
};

class ProposalSource {
 public:
  virtual ~ProposalSource() = default;
  // The name it is registered under.
  virtual std::string name() const = 0;
  // Its options: key (unique across the strategy), the field it sets, the values
  // allowed and help, in one place; `gradient:KEY=VALUE` sets them.
  virtual std::vector<detail::OptionField> fields() { return {}; }
  // Candidates into the ranked pool (keyed by their json), none of them measured.
  virtual void add_to_pool(SourceContext& ctx, std::map<std::string, Candidate>& pool) {
    (void)ctx;
    (void)pool;
  }
  // The places it asks for, per kind of pick (each granted at most a quarter of the batch).
  virtual std::vector<int> places_wanted() const { return {}; }
  // Up to the sum of `places` (as granted, per kind) programs, best first, none measured
  // or among `taken` (the programs the sources before it took this batch).
  virtual std::vector<Candidate> propose(SourceContext& ctx, const std::vector<Candidate>& taken,
                                         const std::vector<int>& places) {
    (void)ctx;
    (void)taken;
    (void)places;
    return {};
  }
};

// The places a batch of n gives a kind of pick that asks for `want`: at most a quarter
// of the batch.
int granted_places(int want, int n);

using SourceFactory = std::function<std::unique_ptr<ProposalSource>()>;
// Registers a source under `name`; `order` places it among the others (lower first:
// the pool's sources add in that order, and the places of their own are taken in that
// order, each later source seeing what the earlier took). A repeated name is an error
// at start-up.
struct SourceRegistration {
  SourceRegistration(const std::string& name, int order, SourceFactory make);
};
// Every registered source, made, in order.
std::vector<std::unique_ptr<ProposalSource>> make_sources();
// The registered sources' names, in order.
std::vector<std::string> source_names();

// Every registered source, made, with their options: what a strategy holds to use them
// (the gradient search always; annealing and evolutionary search with `sources=1`).
class SourceSet {
 public:
  SourceSet();
  // A strategy's own options, then every source's in order (pointers into the sources:
  // valid while the set lives).
  std::vector<detail::OptionField> fields_after(std::vector<detail::OptionField> own);
  // A strategy's own options as it lists them, then every source's, each named by its source.
  std::vector<StrategyOption> describe_after(std::vector<StrategyOption> own) const;
  // The measured programs that ran, fastest first (SourceContext::good).
  static std::vector<const Measured*> fastest(const SearchState& state);
  // Every source's candidates into the ranked pool, in order.
  void add_to_pool(SourceContext& ctx, std::map<std::string, Candidate>& pool);
  // The places of their own of one batch (own_places).
  std::vector<Candidate> places(SourceContext& ctx) const;

 private:
  std::vector<std::unique_ptr<ProposalSource>> sources_;
};

// The places of their own of one batch: each source in order, granted its places,
// what it returns cut to them and de-duplicated, at most n - 1 in all; the batch lists
// the last source's programs first.
std::vector<Candidate> own_places(const std::vector<std::unique_ptr<ProposalSource>>& sources, SourceContext& ctx);

}  // namespace basin::search

#define BASIN_SOURCE_CONCAT2(a, b) a##b
#define BASIN_SOURCE_CONCAT(a, b) BASIN_SOURCE_CONCAT2(a, b)
// BASIN_REGISTER_SOURCE("name", order, Class): Class default-constructible.
#define BASIN_REGISTER_SOURCE(name, order, Class)                                                \
  static const ::basin::search::SourceRegistration BASIN_SOURCE_CONCAT(basin_source_, __LINE__)( \
      name, order, [] { return std::unique_ptr<::basin::search::ProposalSource>(new Class()); })
