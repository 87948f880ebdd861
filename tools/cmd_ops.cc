// `basin ops`, `basin workloads`, `basin strategies` and `basin estimators`: what basin knows.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "models/estimator.h"
#include "search/strategy.h"
#include "tools/commands.h"

namespace basin::tools {

namespace {

nlohmann::json attr_json(const ops::AttrValue& v) {
  if (auto p = std::get_if<int64_t>(&v)) return *p;
  if (auto p = std::get_if<double>(&v)) return *p;
  if (auto p = std::get_if<std::string>(&v)) return *p;
  return std::get<std::vector<int64_t>>(v);
}

}  // namespace

void add_ops_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("ops", "list operators and their parameters");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->callback([&run, json] {
    run = [json] {
      if (*json) {
        nlohmann::json out, list = nlohmann::json::array();
        for (const ops::OpDef& d : ops::all_ops()) {
          nlohmann::json params = nlohmann::json::array();
          for (const ops::ParamSpec& p : d.params)
            params.push_back({{"name", p.name},
                              {"type", ops::param_type_name(p.type)},
                              {"default", attr_json(p.default_value)},
                              {"doc", p.doc}});
          list.push_back({{"name", d.name}, {"family", d.family}, {"summary", d.summary}, {"params", params}});
        }
        out["operators"] = list;
        out["count"] = list.size();
        std::cout << out.dump(2) << "\n";
        return 0;
      }
      std::string family;
      for (const ops::OpDef& d : ops::all_ops()) {
        if (d.family != family) {
          family = d.family;
          std::cout << (family.empty() ? "" : "\n") << "[" << family << "]\n";
        }
        std::cout << "  " << d.name << ": " << d.summary << "\n";
        for (const ops::ParamSpec& p : d.params)
          std::cout << "      " << p.name << " (" << ops::param_type_name(p.type) << ", default "
                    << ops::attr_to_string(p.default_value) << "): " << p.doc << "\n";
      }
      return 0;
    };
  });
}

void add_workloads_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("workloads", "list the named workloads of the benchmarks");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->callback([&run, json] {
    run = [json] {
      nlohmann::json list = nlohmann::json::array();
      for (const ops::Workload& w : ops::all_workloads()) {
        if (*json) {
          list.push_back({{"name", w.name}, {"op", w.op}, {"params", w.params}, {"description", w.description}});
          continue;
        }
        std::cout << w.name << "  (" << w.op;
        for (const auto& [k, v] : w.params) std::cout << " " << k << "=" << v;
        std::cout << ")\n    " << w.description << "\n";
      }
      if (*json) std::cout << nlohmann::json{{"workloads", list}}.dump(2) << "\n";
      return 0;
    };
  });
}

void add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& description) {
  cmd->add_option("--seed", seed, description)->check([](const std::string& v) -> std::string {
    const std::string max = "18446744073709551615";  // 2^64 - 1
    bool digits = !v.empty() && v.size() <= max.size();
    for (char c : v) digits = digits && c >= '0' && c <= '9';
    if (!digits || (v.size() == max.size() && v > max))
      return "'" + v + "' is not an integer from 0 to 18446744073709551615";
    return "";
  });
}

void add_precision_option(CLI::App* cmd, std::string& precision) {
  cmd->add_option("--precision", precision,
                  "f32 (float32 programs only) or bf16 (the matrix products and convolutions may multiply bfloat16 "
                  "inputs, float32 sums: AVX512-BF16 on the CPU, tensor cores on cuda; float32 where that is faster); "
                  "on cuda also tf32 (its default) or fp16; for networks on the CPU also int8 (the ONNX model "
                  "quantized first, with --calibrate). Default: the target's (llvm f32, cuda tf32)");
}

void check_precision_option(const std::string& target, const std::string& precision, bool quiet) {
  sched::resolve_precision(target, precision);
  const std::string note = sched::precision_note(target, precision);
  if (!note.empty() && !quiet) std::fprintf(stderr, "basin: %s\n", note.c_str());
}

std::string check_strategy_spec(const std::string& spec) {
  try {
    search::make_strategy(spec);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

void add_strategies_command(CLI::App& app, Runner& run) {
  auto* cmd =
      app.add_subcommand("strategies", "list the search strategies and their options (--strategy NAME:KEY=VALUE)");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->callback([&run, json] {
    run = [json] {
      nlohmann::json list = nlohmann::json::array();
      for (const std::string& name : search::strategy_names()) {
        std::unique_ptr<search::Strategy> s = search::make_strategy(name);
        const std::string est = s->default_estimator().empty() ? "none" : s->default_estimator();
        if (*json) {
          nlohmann::json options = nlohmann::json::array();
          for (const search::StrategyOption& o : s->options()) {
            nlohmann::json j = {{"key", o.key}, {"default", o.value}, {"doc", o.help}};
            if (!o.source.empty()) j["source"] = o.source;
            options.push_back(j);
          }
          list.push_back({{"name", name}, {"default_estimator", est}, {"options", options}});
          continue;
        }
        std::cout << name << "  (estimator " << est << (s->options().empty() ? "; no options" : "") << ")\n";
        std::string source;
        for (const search::StrategyOption& o : s->options()) {
          if (o.source != source) {
            source = o.source;
            std::cout << "  proposal source " << source << ":\n";
          }
          std::cout << "    " << o.key << "=" << o.value << ": " << o.help << "\n";
        }
      }
      if (*json) std::cout << nlohmann::json{{"strategies", list}}.dump(2) << "\n";
      return 0;
    };
  });
}

void add_estimators_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("estimators", "list the latency estimators' kinds (--estimator KIND)");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print one JSON object");
  cmd->callback([&run, json] {
    run = [json] {
      const std::vector<models::EstimatorKind> kinds = models::estimator_kinds();
      // The forms built from the kinds, beside them.
      const std::vector<models::EstimatorKind> forms = {
          {"machine+KIND", "KIND (mlp, gbt or ensemble) reading the measuring machine's description too"},
          {"mlp-from-cpu", "on cuda: the shipped CPU MLP carried over to the GPU's features"},
          {"FILE", "an estimator file (basin estimator train --out) or a TorchScript module (*.pt)"}};
      if (*json) {
        nlohmann::json list = nlohmann::json::array(), more = nlohmann::json::array();
        for (const models::EstimatorKind& k : kinds) list.push_back({{"kind", k.kind}, {"doc", k.help}});
        for (const models::EstimatorKind& k : forms) more.push_back({{"form", k.kind}, {"doc", k.help}});
        std::cout << nlohmann::json{{"estimators", list}, {"forms", more}}.dump(2) << "\n";
        return 0;
      }
      for (const models::EstimatorKind& k : kinds) std::cout << k.kind << ": " << k.help << "\n";
      for (const models::EstimatorKind& k : forms) std::cout << k.kind << ": " << k.help << "\n";
      return 0;
    };
  });
}

}  // namespace basin::tools
