// The registry of proposal sources and the driver of their places (source.h).
#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

#include "core/util/error.h"
#include "core/util/registry.h"
#include "search/sources/source.h"

namespace basin::search {

namespace {

struct Entry {
  std::string name;
  int order = 0;
  SourceFactory make;
};

Registry<Entry>& registry() {
  static Registry<Entry> r("proposal sources");
  return r;
}

}  // namespace

int granted_places(int want, int n) { return std::max(0, std::min(want, n / 4)); }

SourceRegistration::SourceRegistration(const std::string& name, int order, SourceFactory make) {
  registry().add({name, order, std::move(make)});
}

std::vector<std::unique_ptr<ProposalSource>> make_sources() {
  std::vector<std::unique_ptr<ProposalSource>> out;
  for (const Entry* e : registry().ordered()) {
    out.push_back(e->make());
    BASIN_CHECK(out.back() && out.back()->name() == e->name)
        << "the proposal source registered as " << e->name << " names itself "
        << (out.back() ? out.back()->name() : std::string("(none)"));
  }
  return out;
}

std::vector<std::string> source_names() { return registry().names(); }

std::vector<Candidate> own_places(const std::vector<std::unique_ptr<ProposalSource>>& sources, SourceContext& ctx) {
  std::vector<Candidate> own;
  std::set<std::string> taken;
  // The ranked pool's best (the descent's) always has a place.
  const size_t max_own = static_cast<size_t>(std::max(ctx.n - 1, 0));
  for (const auto& src : sources) {
    std::vector<int> places;
    size_t total = 0;
    for (int want : src->places_wanted()) {
      places.push_back(granted_places(want, ctx.n));
      total += static_cast<size_t>(places.back());
    }
    if (places.empty()) continue;
    std::vector<Candidate> got = src->propose(ctx, own, places);
    std::vector<Candidate> kept;
    for (Candidate& c : got) {
      if (kept.size() >= total || own.size() + kept.size() >= max_own) break;
      if (ctx.state.measured.count(c.json) || !taken.insert(c.json).second) continue;
      kept.push_back(std::move(c));
    }
    own.insert(own.begin(), std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
  }
  return own;
}

SourceSet::SourceSet() : sources_(make_sources()) {}

std::vector<detail::OptionField> SourceSet::fields_after(std::vector<detail::OptionField> own) {
  for (const auto& src : sources_)
    for (detail::OptionField& f : src->fields()) own.push_back(std::move(f));
  return own;
}

std::vector<StrategyOption> SourceSet::describe_after(std::vector<StrategyOption> own) const {
  for (const auto& src : sources_)
    for (StrategyOption& o : detail::describe_options(src->fields())) {
      o.source = src->name();
      own.push_back(std::move(o));
    }
  return own;
}

std::vector<const Measured*> SourceSet::fastest(const SearchState& state) {
  std::vector<const Measured*> good;
  for (const Measured& m : state.history)
    if (m.ok()) good.push_back(&m);
  std::sort(good.begin(), good.end(),
            [](const Measured* a, const Measured* b) { return a->latency_us < b->latency_us; });
  return good;
}

void SourceSet::add_to_pool(SourceContext& ctx, std::map<std::string, Candidate>& pool) {
  for (const auto& src : sources_) src->add_to_pool(ctx, pool);
}

std::vector<Candidate> SourceSet::places(SourceContext& ctx) const { return own_places(sources_, ctx); }

}  // namespace basin::search
