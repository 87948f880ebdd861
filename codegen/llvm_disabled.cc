// The LLVM backend's entry points when basin is built without LLVM: the CPU target
// reports itself unavailable with a clear error.
#include "codegen/llvm_jit.h"
#include "core/util/error.h"

namespace basin::codegen {

struct LlvmKernel::Impl {};
LlvmKernel::LlvmKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlvmKernel::~LlvmKernel() = default;
void LlvmKernel::run(const std::vector<NDArray*>&) const {}
void LlvmKernel::run_raw(void* const*) const {}
const std::string& LlvmKernel::llvm_ir() const {
  static const std::string none;
  return none;
}
const std::string& LlvmKernel::assembly() const { return llvm_ir(); }
double LlvmKernel::compile_seconds() const { return 0; }
int64_t LlvmKernel::emitted_instructions() const { return 0; }
const std::string& LlvmKernel::object() const { return llvm_ir(); }

bool llvm_enabled() { return false; }

std::unique_ptr<LlvmKernel> compile_llvm(const LoweredFunc&, const LlvmOptions&) {
  throw Error(
      "the llvm target is unavailable: basin was built without LLVM (configure with LLVM 16 installed "
      "and BASIN_WITH_LLVM=ON)");
}

std::unique_ptr<LlvmKernel> load_llvm_object(const std::string&) {
  throw Error("the llvm target is unavailable: basin was built without LLVM");
}

std::string llvm_host_cpu() { return "none"; }

std::vector<std::string> missing_cpu_features(const std::string& compiled_for) {
  return {"cpu:" + llvm_cpu_name(compiled_for)};
}

}  // namespace basin::codegen
