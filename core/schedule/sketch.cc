#include "core/schedule/sketch.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/util/error.h"

namespace basin::sched {

KnobValues concrete_knobs(const Config& c) {
  KnobValues k;
  for (const auto& f : c.factors) {
    std::vector<Expr> v;
    for (int64_t x : f) v.push_back(Expr(x));
    k.factors.push_back(v);
  }
  k.unroll = Expr(c.unroll);
  return k;
}

KnobValues symbolic_knobs(const Sketch& s) {
  KnobValues k;
  for (const SplitSpec& sp : s.splits) {
    std::vector<Expr> v;
    for (int l = 1; l <= sp.parts; ++l)
      v.push_back(Var(sp.name + "." + std::to_string(l), DType::index(), VarKind::Knob));
    k.factors.push_back(v);
  }
  k.unroll = Var("unroll", DType::index(), VarKind::Knob);
  return k;
}

VarMap knob_substitution(const KnobValues& symbolic, const Config& c) {
  VarMap m;
  BASIN_CHECK(symbolic.factors.size() == c.factors.size());
  for (size_t i = 0; i < c.factors.size(); ++i)
    for (size_t l = 0; l < c.factors[i].size(); ++l) m[Var(symbolic.factors[i][l]).id()] = Expr(c.factors[i][l]);
  m[Var(symbolic.unroll).id()] = Expr(c.unroll);
  return m;
}

std::vector<bool> vector_operand_splits(const Sketch& s) {
  std::vector<bool> out(s.splits.size(), false);
  for (int a : s.vector_operand_axes) out[static_cast<size_t>(a)] = true;
  for (size_t k = 0; k < s.splits.size(); ++k) out[k] = out[k] || s.splits[k].vectorized;
  return out;
}

const Sketch& find_sketch(const std::vector<Sketch>& sketches, const std::string& name) {
  for (const Sketch& s : sketches)
    if (s.name == name) return s;
  std::string names;
  for (const Sketch& s : sketches) names += (names.empty() ? "" : ", ") + s.name;
  throw NotFoundError("unknown sketch '" + name + "' (this task's sketches: " + names + ")");
}

std::vector<std::pair<int64_t, int>> factorize(int64_t n) {
  std::vector<std::pair<int64_t, int>> f;
  for (int64_t p = 2; p * p <= n; ++p) {
    int e = 0;
    while (n % p == 0) {
      n /= p;
      ++e;
    }
    if (e) f.push_back({p, e});
  }
  if (n > 1) f.push_back({n, 1});
  return f;
}

bool awkward_extent(int64_t n) {
  if (n <= 4) return false;
  int small = 0;
  for (int64_t d = 1; d <= std::min<int64_t>(n, 64); ++d) small += n % d == 0;
  return small <= 3;
}

SplitSpec make_split(std::string name, int64_t extent, int parts, bool vectorized) {
  return {std::move(name), extent, parts, vectorized, awkward_extent(extent)};
}

namespace {

std::vector<int64_t> primes_of(int64_t extent, bool guarded) {
  std::vector<int64_t> p;
  if (guarded) p = {2, 3};
  for (const auto& [q, e] : factorize(extent))
    if (std::find(p.begin(), p.end(), q) == p.end()) p.push_back(q);
  std::sort(p.begin(), p.end());
  return p;
}

// True if f is a product of the primes.
bool built_from(int64_t f, const std::vector<int64_t>& primes) {
  for (int64_t p : primes)
    while (f % p == 0) f /= p;
  return f == 1;
}

// The divisors of `extent`, or with `guarded` the products of primes_of(extent, true)
// up to the extent, in increasing order.
std::vector<int64_t> level_factors(int64_t extent, bool guarded) {
  const std::vector<int64_t> primes = primes_of(extent, guarded);
  std::vector<int64_t> out;
  for (int64_t f = 1; f <= extent; ++f)
    if (guarded ? built_from(f, primes) : extent % f == 0) out.push_back(f);
  return out;
}

// Every tuple of `parts` factors: the divisor tilings of `extent`, or with `guarded`,
// factors built from primes_of(extent, true) with a product at most the extent. Both
// walk the candidate factors in increasing order; floor division keeps a guarded
// product within the extent (a * b <= n iff b <= n / a). Cached.
const std::vector<std::vector<int64_t>>& tilings(int64_t extent, int parts, bool guarded) {
  static std::mutex mu;
  static std::map<std::tuple<int64_t, int, bool>, std::vector<std::vector<int64_t>>> cache;
  std::lock_guard<std::mutex> l(mu);
  auto key = std::make_tuple(extent, parts, guarded);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const std::vector<int64_t> candidates = level_factors(extent, guarded);
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> cur;
  std::function<void(int64_t)> rec = [&](int64_t left) {
    if (static_cast<int>(cur.size()) == parts) {
      out.push_back(cur);
      return;
    }
    for (int64_t f : candidates) {
      if (f > left) break;
      if (!guarded && left % f) continue;
      cur.push_back(f);
      rec(left / f);
      cur.pop_back();
    }
  };
  rec(extent);
  return cache.emplace(key, std::move(out)).first->second;
}

}  // namespace

std::vector<int64_t> factor_primes(const SplitSpec& sp) { return primes_of(sp.extent, sp.guarded); }

const std::vector<std::vector<int64_t>>& factorizations(int64_t extent, int parts) {
  return tilings(extent, parts, false);
}

const std::vector<std::vector<int64_t>>& split_factorizations(const SplitSpec& sp) {
  return tilings(sp.extent, sp.parts, sp.guarded);
}

std::vector<int64_t> split_factors(const SplitSpec& sp) { return level_factors(sp.extent, sp.guarded); }

namespace {

// Innermost (vector) factor of a split: the last level.
int64_t inner(const Config& c, size_t split) { return c.factors[split].back(); }

}  // namespace

std::string invalid_reason(const Sketch& s, const Config& c) {
  if (c.factors.size() != s.splits.size())
    return "expected " + std::to_string(s.splits.size()) + " splits, got " + std::to_string(c.factors.size());
  for (size_t i = 0; i < s.splits.size(); ++i) {
    const SplitSpec& sp = s.splits[i];
    if (static_cast<int>(c.factors[i].size()) != sp.parts)
      return "split '" + sp.name + "' takes " + std::to_string(sp.parts) + " factors";
    int64_t prod = 1;
    for (int64_t f : c.factors[i]) {
      if (f < 1) return "split '" + sp.name + "' has a factor below 1";
      if (f > sp.extent) return "split '" + sp.name + "' has a factor above its extent " + std::to_string(sp.extent);
      prod *= f;
      if (prod > sp.extent) break;
    }
    if (sp.guarded) {
      if (prod > sp.extent)
        return "the factors of split '" + sp.name + "' multiply to more than its extent " + std::to_string(sp.extent);
      const std::vector<int64_t> primes = factor_primes(sp);
      for (int64_t f : c.factors[i])
        if (!built_from(f, primes))
          return "the factors of guarded split '" + sp.name + "' are products of 2, 3 and the primes of " +
                 std::to_string(sp.extent) + ", not " + std::to_string(f);
      continue;
    }
    if (sp.extent % prod)
      return "the factors of split '" + sp.name + "' (product " + std::to_string(prod) + ") do not divide its extent " +
             std::to_string(sp.extent);
  }
  bool in_menu = false;
  for (int64_t u : s.unroll_menu) in_menu |= u == c.unroll;
  if (!in_menu) return "unroll " + std::to_string(c.unroll) + " is not in the menu";
  constexpr int64_t kMaxLanes = 64;
  for (size_t i = 0; i < s.splits.size(); ++i) {
    const SplitSpec& sp = s.splits[i];
    if (sp.vectorized && inner(c, i) > kMaxLanes) return "more than 64 vector lanes";
    const int64_t m = sp.lane_multiple, f = inner(c, i);
    if (sp.vectorized && m > 1 && (f >= m ? f % m != 0 : (f & (f - 1)) != 0))
      return "the vector factor of split '" + sp.name + "' is a multiple of " + std::to_string(m) +
             " lanes or a power of two below, not " + std::to_string(f);
  }
  if (is_gpu_rule(s.rule)) {
    // The tiles' use of the GPU; the rows' and reductions' threads are their one knob.
    const bool tiled = s.rule == SketchRule::GpuTile || s.rule == SketchRule::GpuMma;
    GpuTileUse u = tiled ? gpu_tile_use(s, c) : GpuTileUse{};
    if (!tiled) u.threads = c.factors.at(0).at(0) * (s.warp_shuffle ? kWarp : 1);
    if (u.threads > kMaxGpuThreads)
      return std::to_string(u.threads) + " threads per block (at most " + std::to_string(kMaxGpuThreads) + ")";
    if (u.vthreads > kMaxGpuVthreads)
      return std::to_string(u.vthreads) + " virtual threads (at most " + std::to_string(kMaxGpuVthreads) + ")";
    if (u.registers > kMaxGpuRegisterTile)
      return "an accumulator of " + std::to_string(u.registers) + " elements per thread (at most " +
             std::to_string(kMaxGpuRegisterTile) + ")";
    if (u.shared_bytes > kMaxGpuSharedBytes)
      return std::to_string(u.shared_bytes) + " bytes of shared memory per block (at most " +
             std::to_string(kMaxGpuSharedBytes) + ")";
    if (s.rule == SketchRule::GpuMma && mma_steps(s, c) < s.mma_stages)
      return std::to_string(mma_steps(s, c)) + " steps of k for a pipeline of " + std::to_string(s.mma_stages) +
             " stages";
  }
  if (s.rule == SketchRule::CpuAmx) {
    // Eight tile registers: TM x TN accumulators, TM A tiles and TN B tiles.
    const int64_t tm = c.factors[0][0], tn = c.factors[1][0];
    if (tm * tn + tm + tn > 8)
      return std::to_string(tm) + " x " + std::to_string(tn) + " accumulator tiles need " +
             std::to_string(tm * tn + tm + tn) + " tile registers (at most 8)";
  }
  if (s.rule == SketchRule::Anchor) {
    // The accumulator: its tiles of every spatial axis (the splits before the reductions).
    int64_t acc = 1;
    for (size_t i = 0; i < s.splits.size(); ++i) {
      if (s.splits[i].parts != 3) continue;
      acc *= c.factors[i][2] * (s.acc_level == 1 ? c.factors[i][1] : 1);
    }
    if (acc > (s.acc_level == 1 ? 65536 : 16384)) return "accumulator of " + std::to_string(acc) + " elements";
  }
  return "";
}

int64_t mma_steps(const Sketch& s, const Config& c) {
  const int64_t kf = c.factors.at(2).at(0);
  return (s.splits[2].extent + kf - 1) / kf * s.mma_other_reduce;
}

GpuTileUse gpu_tile_use(const Sketch& s, const Config& c) {
  GpuTileUse u;
  if (s.rule == SketchRule::GpuMma) {
    // Splits: rows (warps, fragments) of 16, columns (warps, fragments) of 8, k steps of 8.
    const int64_t wm = c.factors[0][0], fm = c.factors[0][1], wn = c.factors[1][0], fn = c.factors[1][1];
    const int64_t bm = kMmaM * wm * fm, bn = kMmaN * wn * fn, bk = mma_kdim(s) * c.factors[2][0];
    u.threads = kWarp * wm * wn;
    u.registers = fm * fn * 4;
    auto tile = [&](int op, int64_t other) {
      return s.mma_k_inner[op] ? other * (bk + kMmaPadKInner) : bk * (other + kMmaPadKOuter);
    };
    u.shared_bytes = 4 * s.mma_stages * (tile(0, bm) + tile(1, bn));
    // The blocks of one value of the other spatial axes (a guarded split's last tile partial).
    u.blocks = ((s.splits[0].extent + wm * fm - 1) / (wm * fm)) * ((s.splits[1].extent + wn * fn - 1) / (wn * fn));
    return u;
  }
  std::vector<int64_t> tile(s.splits.size(), 1);
  for (size_t i = 0; i < s.splits.size(); ++i) {
    for (int64_t f : c.factors[i]) tile[i] *= f;
    if (s.splits[i].parts != 3) continue;
    u.vthreads *= c.factors[i][0];
    u.threads *= c.factors[i][1];
    u.registers *= c.factors[i][0] * c.factors[i][2];
    u.blocks *= s.splits[i].extent / tile[i];
  }
  for (const SharedFootprint& fp : s.shared) {
    int64_t n = fp.elem_bytes;
    for (const auto& coef : fp.coef) {
      int64_t d = 1;
      for (size_t a = 0; a < coef.size(); ++a) d += coef[a] * (tile[a] - 1);
      n *= d;
    }
    u.shared_bytes += n;
  }
  return u;
}

Config random_config(const Sketch& s, std::mt19937_64& rng) {
  for (int attempt = 0; attempt < 10000; ++attempt) {
    Config c;
    for (const SplitSpec& sp : s.splits) {
      const auto& all = split_factorizations(sp);
      c.factors.push_back(all[std::uniform_int_distribution<size_t>(0, all.size() - 1)(rng)]);
    }
    c.unroll = s.unroll_menu[std::uniform_int_distribution<size_t>(0, s.unroll_menu.size() - 1)(rng)];
    if (invalid_reason(s, c).empty()) return c;
  }
  throw InternalError("sketch " + s.name + " has no valid configuration in 10000 samples");
}

namespace {
int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

// GpuTile: up to 256 threads, at most 32 along each spatial axis from the innermost
// out; a register tile of up to 4 along the two innermost axes with extent left; the
// first reduction axis 8 (or less) per shared-memory step, small ones whole. Made
// smaller until it fits the GPU's bounds.
Config default_gpu_tile(const Sketch& s) {
  Config c;
  c.unroll = 64;
  c.factors.resize(s.splits.size());
  int64_t budget = 256;
  int reg_axes = 0;
  bool first_reduce = true;
  for (size_t x = s.splits.size(); x-- > 0;) {
    const SplitSpec& sp = s.splits[x];
    if (sp.parts != 3) continue;
    int64_t t = largest_divisor_at_most(sp.extent, std::min<int64_t>(budget, 32));
    budget /= t;
    int64_t r = reg_axes < 2 ? largest_divisor_at_most(sp.extent / t, 4) : 1;
    reg_axes += r > 1;
    c.factors[x] = {1, t, r};
  }
  for (size_t x = 0; x < s.splits.size(); ++x) {
    const SplitSpec& sp = s.splits[x];
    if (sp.parts == 3) continue;
    c.factors[x] = {first_reduce ? largest_divisor_at_most(sp.extent, 8) : (sp.extent <= 7 ? sp.extent : 1)};
    first_reduce = false;
  }
  // Too big: the reduction steps first, then the register tiles, then the threads.
  for (int level : {-1, 2, 1})
    for (size_t x = 0; x < s.splits.size() && !invalid_reason(s, c).empty(); ++x) {
      if ((level == -1) != (s.splits[x].parts == 1)) continue;
      c.factors[x][level == -1 ? 0 : level] = 1;
    }
  return c;
}

// GpuMma: 2 x 2 warps, each 2 x 4 fragments (a 64 x 64 block tile), k steps of 32, where
// the extents allow; smaller until it fits the GPU's bounds.
Config default_gpu_mma(const Sketch& s) {
  Config c;
  c.unroll = 512;
  int64_t wm = largest_divisor_at_most(s.splits[0].extent, 2);
  int64_t wn = largest_divisor_at_most(s.splits[1].extent, 2);
  c.factors = {{wm, largest_divisor_at_most(s.splits[0].extent / wm, 2)},
               {wn, largest_divisor_at_most(s.splits[1].extent / wn, 4)},
               {largest_divisor_at_most(s.splits[2].extent, 4)}};
  for (int shrink = 0; shrink < 8 && !invalid_reason(s, c).empty(); ++shrink)
    c.factors[shrink % 3][shrink % 3 == 2 ? 0 : 1] = 1;
  return c;
}

}  // namespace

Config default_config(const Sketch& s) {
  if (s.rule == SketchRule::GpuTile) return default_gpu_tile(s);
  if (s.rule == SketchRule::GpuMma) return default_gpu_mma(s);
  if (s.rule == SketchRule::CpuAmx) {
    // 2 x 2 accumulator tiles where there are two of each.
    Config c;
    c.factors = {{std::min<int64_t>(2, s.splits[0].extent)}, {std::min<int64_t>(2, s.splits[1].extent)}};
    c.unroll = 0;
    return c;
  }
  Config c;
  for (size_t i = 0; i < s.splits.size(); ++i) {
    const SplitSpec& sp = s.splits[i];
    std::vector<int64_t> f(sp.parts, 1);
    // A guarded split takes a power of two that need not divide.
    auto pick = [&](int64_t cap) {
      if (!sp.guarded) return largest_divisor_at_most(sp.extent, cap);
      int64_t p = 1;
      while (p * 2 <= std::min(cap, sp.extent)) p *= 2;
      return p;
    };
    if (s.rule == SketchRule::Anchor && static_cast<int>(i) == s.vec_axis) f.back() = pick(8);
    else if (s.rule == SketchRule::Anchor && sp.parts == 3 && static_cast<int>(i) + 1 == s.vec_axis) f.back() = pick(4);
    else if (s.rule == SketchRule::Generic) f.back() = pick(s.tile_rows && i == 0 ? 4 : 8);  // rows.t: 4
    else if ((s.rule == SketchRule::GpuRows || s.rule == SketchRule::GpuReduce) && i == 0)
      f.back() = pick(s.warp_shuffle ? 256 / kWarp : 256);  // threads (warps) per block
    c.factors.push_back(f);
  }
  c.unroll = 64;
  return c;
}

std::string task_key(const ops::OpGraph& task) {
  std::string k = task.op + "(";
  bool first = true;
  for (const auto& [name, v] : task.attrs.values()) {
    k += (first ? "" : ",") + name + "=" + ops::attr_to_string(v);
    first = false;
  }
  return k + ")";
}

ops::OpGraph task_from_key(const std::string& key) {
  size_t open = key.find('(');
  if (open == std::string::npos || open == 0 || key.back() != ')')
    throw ParseError("not a task key: '" + key + "' (expected op(name=value,...))");
  std::string op = key.substr(0, open), body = key.substr(open + 1, key.size() - open - 2);
  // A fused task's one attribute holds its whole subgraph, '=' and ',' included.
  if (op == "subgraph" && body.rfind("graph=", 0) == 0) return ops::build_op(op, {{"graph", body.substr(6)}});
  // Values may hold commas (shape=12,197): a piece without '=' continues the last value.
  std::map<std::string, std::string> kv;
  std::string last, piece;
  std::istringstream is(body);
  while (std::getline(is, piece, ',')) {
    size_t eq = piece.find('=');
    if (eq != std::string::npos) {
      last = piece.substr(0, eq);
      kv[last] = piece.substr(eq + 1);
    } else if (!last.empty()) {
      kv[last] += "," + piece;
    } else {
      throw ParseError("not a task key: '" + key + "'");
    }
  }
  return ops::build_op(op, kv);
}

namespace {
// True if nlohmann's dump writes the name as it is between quotes.
bool plain_name(const std::string& n) {
  for (unsigned char ch : n)
    if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\') return false;
  return true;
}
}  // namespace

std::string config_to_json(const Sketch& s, const Config& c) {
  // The search makes this text for every program it visits (the records' key): written
  // directly, the same bytes as the JSON library's dump (tested); the dump was the
  // largest part of annealing's proposal time (docs/PERFORMANCE.md@6bf7154).
  bool plain = plain_name(s.name) && c.factors.size() == s.splits.size();
  for (const SplitSpec& sp : s.splits) plain &= plain_name(sp.name);
  if (plain) {
    std::string out = "{\"sketch\":\"" + s.name + "\",\"splits\":{";
    for (size_t i = 0; i < s.splits.size(); ++i) {
      out += (i ? ",\"" : "\"") + s.splits[i].name + "\":[";
      for (size_t k = 0; k < c.factors[i].size(); ++k) out += (k ? "," : "") + std::to_string(c.factors[i][k]);
      out += "]";
    }
    return out + "},\"unroll\":" + std::to_string(c.unroll) + "}";
  }
  nlohmann::ordered_json j;
  j["sketch"] = s.name;
  j["splits"] = nlohmann::ordered_json::object();
  for (size_t i = 0; i < s.splits.size(); ++i) j["splits"][s.splits[i].name] = c.factors[i];
  j["unroll"] = c.unroll;
  return j.dump();
}

std::optional<Config> fit_config(const Sketch& s, const std::string& json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("sketch") || j["sketch"] != s.name || !j.contains("splits") ||
      !j["splits"].is_object() || j["splits"].size() != s.splits.size() || !j.contains("unroll") ||
      !j["unroll"].is_number_integer())
    return std::nullopt;
  Config c;
  for (const SplitSpec& sp : s.splits) {
    if (!j["splits"].contains(sp.name) || !j["splits"][sp.name].is_array()) return std::nullopt;
    std::vector<int64_t> f;
    for (const auto& x : j["splits"][sp.name]) {
      if (!x.is_number_integer()) return std::nullopt;
      f.push_back(std::max<int64_t>(1, x.get<int64_t>()));
    }
    if (static_cast<int>(f.size()) != sp.parts) return std::nullopt;
    const std::vector<int64_t> primes = factor_primes(sp);
    int64_t inner = 1;  // the product of the factors fitted so far
    for (size_t k = f.size(); k-- > 0;) {
      int64_t v = std::min(f[k], sp.extent / inner);
      while (v > 1 && !(sp.guarded ? built_from(v, primes) : (sp.extent / inner) % v == 0)) --v;
      f[k] = std::max<int64_t>(v, 1);
      inner *= f[k];
    }
    c.factors.push_back(std::move(f));
  }
  const int64_t unroll = j["unroll"].get<int64_t>();
  c.unroll = s.unroll_menu.empty() ? unroll : s.unroll_menu.front();
  for (int64_t u : s.unroll_menu)
    if (std::llabs(u - unroll) < std::llabs(c.unroll - unroll)) c.unroll = u;
  if (!invalid_reason(s, c).empty()) return std::nullopt;
  return c;
}

Config config_from_json(const std::string& text, const std::vector<Sketch>& sketches, const std::string& source,
                        const Sketch** sketch) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw ParseError(source + ": not valid JSON (" + e.what() + ")");
  }
  auto fail = [&](const std::string& why) { throw ParseError(source + ": " + why); };
  if (!j.is_object() || !j.contains("sketch") || !j["sketch"].is_string())
    fail("expected an object with a \"sketch\" name, \"splits\" and \"unroll\"");
  const Sketch* s = nullptr;
  try {
    s = &find_sketch(sketches, j["sketch"].get<std::string>());
  } catch (const NotFoundError& e) {
    fail(e.what());
  }
  Config c;
  if (!j.contains("splits") || !j["splits"].is_object()) fail("missing \"splits\" object");
  for (const SplitSpec& sp : s->splits) {
    if (!j["splits"].contains(sp.name)) fail("missing split '" + sp.name + "'");
    const auto& v = j["splits"][sp.name];
    if (!v.is_array()) fail("split '" + sp.name + "' must be a list of integers");
    std::vector<int64_t> f;
    for (const auto& x : v) {
      if (!x.is_number_integer()) fail("split '" + sp.name + "' must be a list of integers");
      f.push_back(x.get<int64_t>());
    }
    c.factors.push_back(f);
  }
  for (const auto& [k, v] : j["splits"].items()) {
    bool known = false;
    for (const SplitSpec& sp : s->splits) known |= sp.name == k;
    if (!known) fail("unknown split '" + k + "' for sketch " + s->name);
  }
  if (!j.contains("unroll") || !j["unroll"].is_number_integer()) fail("missing integer \"unroll\"");
  c.unroll = j["unroll"].get<int64_t>();
  std::string why = invalid_reason(*s, c);
  if (!why.empty()) fail("invalid configuration for sketch " + s->name + ": " + why);
  if (sketch) *sketch = s;
  return c;
}

}  // namespace basin::sched
