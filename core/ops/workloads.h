// The named workloads of BENCHMARKS.md: an operator and its parameters under a short
// name (gemm-1024, bert-768x3072, resnet18-c7, ...), for `basin op --workload`,
// `basin tune-op --workload` and the benchmarks.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace basin::ops {

struct Workload {
  std::string name;
  std::string op;
  std::map<std::string, std::string> params;
  std::string description;
};

const std::vector<Workload>& all_workloads();
// Throws NotFoundError naming the workload.
const Workload& find_workload(const std::string& name);

}  // namespace basin::ops
