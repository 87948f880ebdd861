// A TorchScript module given by path (docs/estimators.md): a researcher trains in
// Python and swaps it in without rebuilding. Contract: forward(features: float32
// [B, S, F], mask: float32 [B, S]) -> float32 [B], lower = faster; an integer
// attribute `feature_version` equal to basin's feature-set version.
#include <torch/script.h>
#include <torch/torch.h>

#include <sstream>

#include "core/util/error.h"
#include "core/util/output_file.h"
#include "models/estimator.h"
#include "models/plugin_call.h"
#include "relax/features.h"

namespace basin::models {

namespace {

class TorchScript final : public DifferentiableEstimator {
 public:
  explicit TorchScript(const std::string& path) : path_(path), calls_("TorchScript estimator " + path + ": forward") {
    try {
      module_ = torch::jit::load(path);
    } catch (const c10::Error& e) {
      throw Error(path + " is not a loadable TorchScript module (" + first_line(e.what_without_backtrace()) + ")");
    }
    if (!module_.hasattr("feature_version"))
      throw Error(path + ": the module has no integer attribute feature_version (docs/estimators.md)");
    c10::IValue v = module_.attr("feature_version");
    if (!v.isInt()) throw Error(path + ": feature_version must be an integer");
    if (v.toInt() != relax::kFeatureVersion)
      throw Error(path + ": trained on feature set version " + std::to_string(v.toInt()) +
                  ", but this basin computes version " + std::to_string(relax::kFeatureVersion));
    module_.eval();
  }

  std::string kind() const override { return "torchscript"; }
  bool trainable() const override { return false; }
  void train(const std::vector<Sample>&, const TrainOptions&) override {
    throw Error(path_ + ": a TorchScript estimator is trained in Python (docs/estimators.md), not by basin");
  }
  void update(const std::vector<Sample>&, const TrainOptions&) override {}

  std::vector<double> predict(const FeatureBatch& b) override { return detail::predict_by_forward(*this, b); }

  at::Tensor forward(const at::Tensor& features, const at::Tensor& mask) override {
    // On the plug-in's own thread, bounded in time (models/plugin_call.h): the job holds
    // copies of the inputs and a handle of the module, so that a call given up as stuck
    // reads nothing of its caller's. Autograd's mode is the caller's.
    auto out_holder = std::make_shared<c10::IValue>();
    torch::jit::Module module = module_;
    const bool grad = at::GradMode::is_enabled();
    at::Tensor f = features.clone(), m = mask.clone();
    try {
      calls_.run([module, grad, f, m, out_holder]() mutable {
        at::AutoGradMode mode(grad);
        *out_holder = module.forward({f, m});
      });
    } catch (const c10::Error& e) {
      throw Error(path_ + ": forward failed (" + first_line(e.what_without_backtrace()) + ")");
    } catch (const Error&) {
      throw;  // the time bound's
    } catch (const std::exception& e) {
      // An exception raised by the module's own code (torch::jit::JITException): its
      // message is a TorchScript traceback whose last line names the error.
      throw Error(path_ + ": forward raised " + last_line(e.what()));
    }
    c10::IValue out = *out_holder;
    if (!out.isTensor()) throw Error(path_ + ": forward must return a tensor of scores");
    torch::Tensor s = out.toTensor();
    if (s.dim() == 2 && s.size(1) == 1) s = s.squeeze(1);
    if (s.dim() != 1 || s.size(0) != features.size(0))
      throw Error(path_ + ": forward must return one score per program ([" + std::to_string(features.size(0)) + "])");
    return s;
  }

  // By the output-file rules (core/util/output_file.h), as every file basin writes.
  void save(const std::string& path) const override {
    std::ostringstream bytes;
    const_cast<torch::jit::Module&>(module_).save(bytes);
    write_output_file(path, [&](OutputFile& f) { f.write(bytes.str()); });
  }

 private:
  static std::string first_line(const char* s) {
    std::string t(s);
    return t.substr(0, t.find('\n'));
  }
  static std::string last_line(const char* s) {
    std::string t(s);
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
  }
  std::string path_;
  torch::jit::Module module_;
  BoundedCalls calls_;
};

}  // namespace

namespace detail {
std::unique_ptr<Estimator> load_torchscript(const std::string& path) { return std::make_unique<TorchScript>(path); }

std::vector<double> predict_by_forward(DifferentiableEstimator& e, const FeatureBatch& b) {
  if (b.batch == 0) return {};
  torch::NoGradGuard no_grad;
  torch::Tensor x =
      torch::from_blob(const_cast<float*>(b.values.data()), {b.batch, b.stores, b.features}, torch::kFloat32);
  torch::Tensor m = torch::from_blob(const_cast<float*>(b.mask.data()), {b.batch, b.stores}, torch::kFloat32);
  torch::Tensor s = e.forward(x, m).to(torch::kFloat64).contiguous();
  return std::vector<double>(s.data_ptr<double>(), s.data_ptr<double>() + b.batch);
}
}  // namespace detail

}  // namespace basin::models
