#include "search/strategy.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <tuple>

#include "core/util/error.h"
#include "core/util/registry.h"

namespace basin::search {

namespace {

struct StrategyEntry {
  std::string name;
  int order = 0;
  StrategyFactory make;
};

Registry<StrategyEntry>& strategy_registry() {
  static Registry<StrategyEntry> r("search strategies");
  return r;
}

// A spec's name and options (ParseError when malformed; the name and keys are checked
// by make_strategy and set_options).
std::pair<std::string, StrategyOptions> parse_strategy_spec(const std::string& spec) {
  std::vector<std::string> parts;
  std::stringstream in(spec);
  for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
  if (!spec.empty() && spec.back() == ':') parts.emplace_back();
  if (parts.empty() || parts[0].empty())
    throw ParseError("strategy '" + spec + "': no strategy named before its options");
  StrategyOptions set;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == parts[i].size())
      throw ParseError("strategy '" + spec + "': '" + parts[i] + "' is not KEY=VALUE");
    set.emplace_back(parts[i].substr(0, eq), parts[i].substr(eq + 1));
  }
  return {parts[0], set};
}

}  // namespace

StrategyRegistration::StrategyRegistration(const std::string& name, int order, StrategyFactory make) {
  strategy_registry().add({name, order, std::move(make)});
}

std::vector<std::string> strategy_names() { return strategy_registry().names(); }

std::unique_ptr<Strategy> make_strategy(const std::string& spec) {
  const auto [name, set] = parse_strategy_spec(spec);
  if (const StrategyEntry* e = strategy_registry().find(name)) return e->make(set);
  std::string names;
  for (const std::string& n : strategy_names()) names += (names.empty() ? "" : ", ") + n;
  throw NotFoundError("unknown search strategy '" + name + "' (" + names + ")");
}

namespace detail {

void set_options(const std::string& strategy, const std::vector<OptionField>& fields, const StrategyOptions& set) {
  auto keys = [&] {
    if (fields.empty()) return std::string(" (it takes none)");
    std::string out = " (its options: ";
    for (size_t i = 0; i < fields.size(); ++i) out += (i ? ", " : "") + fields[i].key;
    return out + ")";
  };
  std::set<std::string> seen;
  for (const auto& [key, value] : set) {
    auto f = std::find_if(fields.begin(), fields.end(), [&](const OptionField& o) { return o.key == key; });
    if (f == fields.end()) throw ParseError("the " + strategy + " strategy has no option '" + key + "'" + keys());
    if (!seen.insert(key).second) throw ParseError("the " + strategy + " strategy's option '" + key + "' is set twice");
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    const bool number = end && *end == '\0' && errno == 0 && std::isfinite(v);
    const bool integral = std::floor(v) == v;
    if (!number || (f->integer && !integral) || v < f->lo || v > f->hi) {
      std::ostringstream why;
      why << "the " << strategy << " strategy's option '" << key << "' must be "
          << (f->integer ? "an integer" : "a number") << " from " << f->lo << " to " << f->hi << ", not '" << value
          << "'";
      throw ParseError(why.str());
    }
    if (f->integer) *f->integer = static_cast<int>(v);
    else *f->real = v;
  }
}

double option_value(const std::vector<OptionField>& fields, const std::string& key, const std::string& strategy) {
  for (const OptionField& f : fields)
    if (f.key == key) return f.integer ? static_cast<double>(*f.integer) : *f.real;
  throw Error("the " + strategy + " strategy has no option " + key);
}

std::vector<StrategyOption> describe_options(const std::vector<OptionField>& fields) {
  std::vector<StrategyOption> out;
  for (const OptionField& f : fields) {
    std::ostringstream value;
    if (f.integer) value << *f.integer;
    else value << *f.real;
    out.push_back({f.key, value.str(), f.help});
  }
  return out;
}

std::string spec_of(const std::string& name, const StrategyOptions& set) {
  std::string out = name;
  for (const auto& [key, value] : set) out += ":" + key + "=" + value;
  return out;
}

bool guided(const SearchState& state) { return state.estimator && state.estimator->ready(); }

std::vector<Candidate> random_batch(SearchState& state, int n) {
  std::vector<Candidate> out;
  fill_random(state, n, out);
  return out;
}

double prediction_spread(const std::vector<Candidate>& cs) {
  double mean = 0, var = 0;
  for (const Candidate& c : cs) mean += c.predicted;
  mean /= cs.size();
  for (const Candidate& c : cs) var += (c.predicted - mean) * (c.predicted - mean);
  return std::max(std::sqrt(var / cs.size()), 1e-9);
}

void fill_random(SearchState& state, int n, std::vector<Candidate>& out, const std::vector<Candidate>& reserved) {
  std::unordered_set<std::string> taken;
  for (const Candidate& c : out) taken.insert(c.json);
  for (const Candidate& c : reserved) taken.insert(c.json);
  int misses = 0;
  while (static_cast<int>(out.size()) < n && misses < 500) {
    Candidate c = state.space.random(state.rng);
    if (state.measured.count(c.json) || !taken.insert(c.json).second) {
      ++misses;
      continue;
    }
    misses = 0;
    out.push_back(std::move(c));
  }
}

std::vector<Candidate> select_batch(SearchState& state, std::vector<Candidate> ranked, int n, double epsilon,
                                    const std::vector<Candidate>& reserved) {
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Candidate& a, const Candidate& b) { return a.predicted < b.predicted; });
  const int n_random = static_cast<int>(std::floor(epsilon * n + 0.5));
  std::vector<Candidate> out;
  std::unordered_set<std::string> taken;
  for (const Candidate& c : reserved) taken.insert(c.json);
  for (Candidate& c : ranked) {
    if (static_cast<int>(out.size()) >= n - n_random) break;
    if (state.measured.count(c.json) || !taken.insert(c.json).second) continue;
    out.push_back(std::move(c));
  }
  fill_random(state, n, out, reserved);
  return out;
}

std::vector<Candidate> diverse_cover(std::vector<Candidate> pool, int n) {
  using KnobValue = std::tuple<int, int, std::vector<int64_t>>;
  auto values = [](const Candidate& c) {
    std::vector<KnobValue> v;
    for (size_t k = 0; k < c.config.factors.size(); ++k)
      v.emplace_back(c.sketch, static_cast<int>(k), c.config.factors[k]);
    v.emplace_back(c.sketch, -1, std::vector<int64_t>{c.config.unroll});
    return v;
  };
  std::set<KnobValue> covered;
  std::vector<Candidate> out;
  std::vector<bool> used(pool.size(), false);
  while (static_cast<int>(out.size()) < n) {
    int pick = -1, pick_gain = -1;
    for (size_t i = 0; i < pool.size(); ++i) {
      if (used[i]) continue;
      int gain = 0;
      for (const KnobValue& kv : values(pool[i])) gain += covered.count(kv) ? 0 : 1;
      if (gain > pick_gain) pick = static_cast<int>(i), pick_gain = gain;
    }
    if (pick < 0) break;
    used[static_cast<size_t>(pick)] = true;
    for (KnobValue& kv : values(pool[static_cast<size_t>(pick)])) covered.insert(std::move(kv));
    out.push_back(std::move(pool[static_cast<size_t>(pick)]));
  }
  return out;
}

std::vector<bool> capped_sketches(const std::vector<Measured>& history, size_t n_sketches, const SketchCap& cap) {
  std::vector<double> best(n_sketches, 0);
  std::vector<int> count(n_sketches, 0);
  double best_all = 0;
  for (const Measured& m : history) {
    if (!m.ok()) continue;
    const size_t s = static_cast<size_t>(m.candidate.sketch);
    if (s >= n_sketches) continue;
    ++count[s];
    if (best[s] == 0 || m.latency_us < best[s]) best[s] = m.latency_us;
    if (best_all == 0 || m.latency_us < best_all) best_all = m.latency_us;
  }
  std::vector<bool> capped(n_sketches, false);
  for (size_t s = 0; s < n_sketches; ++s) {
    if (count[s] < std::max(cap.evidence, 1)) continue;
    const double margin = std::max(cap.margin_floor, cap.margin * std::max(cap.evidence, 1) / count[s]);
    capped[s] = best[s] > best_all * (1 + margin);
  }
  return capped;
}

void cap_ranked(std::vector<Candidate>& ranked, const std::vector<bool>& capped, int places) {
  if (std::none_of(capped.begin(), capped.end(), [](bool c) { return c; })) return;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Candidate& a, const Candidate& b) { return a.predicted < b.predicted; });
  int kept = 0;
  std::vector<Candidate> out;
  for (Candidate& c : ranked) {
    const size_t s = static_cast<size_t>(c.sketch);
    if (s < capped.size() && capped[s] && kept++ >= places) continue;
    out.push_back(std::move(c));
  }
  ranked = std::move(out);
}

namespace {

class RandomSearch final : public Strategy {
 public:
  std::string name() const override { return "random"; }
  std::string default_estimator() const override { return ""; }
  std::vector<Candidate> propose(SearchState& state, int n) override { return random_batch(state, n); }
};

}  // namespace

std::unique_ptr<Strategy> make_random(const StrategyOptions& set) {
  set_options("random", {}, set);
  return std::make_unique<RandomSearch>();
}

}  // namespace detail

BASIN_REGISTER_STRATEGY("random", 30, detail::make_random);

}  // namespace basin::search
