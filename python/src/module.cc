// basin._basin: the C++ API of <basin/basin.h> for Python (pybind11). Only conversions
// live here: NumPy arrays in and out without copies, the GIL released while basin works,
// Ctrl-C and the callbacks' exceptions turned into a clean stop of a tuning run. The
// Pythonic layer (argument parsing, progress bars, torch) is python/basin/*.py.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <basin/basin.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace {

// basin's dtype names for NumPy's, and back.
// (Read through Python attributes: pybind11 before 2.12 reads the descriptor's C struct,
// whose layout NumPy 2 changed.)
std::string dtype_of(const py::dtype& d) {
  const std::string k = d.attr("kind").cast<std::string>();
  const char kind = k.empty() ? '?' : k[0];
  const auto size = d.attr("itemsize").cast<int>();
  if (kind == 'f' && size == 4) return "float32";
  if (kind == 'f' && size == 8) return "float64";
  if (kind == 'i' && size == 4) return "int32";
  if (kind == 'i' && size == 8) return "int64";
  if (kind == 'b' && size == 1) return "bool";
  throw py::value_error("basin: arrays of " + d.attr("name").cast<std::string>() +
                        " are not supported (float32, float64, int32, int64 or bool)");
}

py::dtype numpy_dtype(const std::string& dtype) {
  if (dtype == "float32") return py::dtype::of<float>();
  if (dtype == "float64") return py::dtype::of<double>();
  if (dtype == "int32") return py::dtype::of<int32_t>();
  if (dtype == "int64") return py::dtype::of<int64_t>();
  if (dtype == "bool") return py::dtype::of<bool>();
  throw py::value_error("basin: a tensor of " + dtype + " has no NumPy type");
}

// A NumPy array (C-contiguous, as the caller made it) as a tensor over its memory; the
// array stays referenced while the tensor lives (dropped with the GIL held).
basin::Tensor borrow(const py::array& a) {
  if (!(a.flags() & py::array::c_style)) throw py::value_error("basin: arrays must be C-contiguous");
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  auto* keep = new py::object(a);
  std::shared_ptr<void> owner(keep, [](void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<py::object*>(p);
  });
  return basin::Tensor::borrow(dtype_of(a.dtype()), shape, const_cast<void*>(a.data()), std::move(owner));
}

std::vector<basin::Tensor> borrow_all(const std::vector<py::array>& arrays) {
  std::vector<basin::Tensor> out;
  for (const py::array& a : arrays) out.push_back(borrow(a));
  return out;
}

// C-order strides of `shape` for elements of `itemsize` bytes. Arrays are made with their
// strides given: pybind11 before 2.12 would compute them from the descriptor's C struct,
// whose layout NumPy 2 changed.
std::vector<py::ssize_t> c_strides(const std::vector<py::ssize_t>& shape, py::ssize_t itemsize) {
  std::vector<py::ssize_t> strides(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = itemsize;
    itemsize *= std::max<py::ssize_t>(shape[i], 1);
  }
  return strides;
}

// A tensor as a NumPy array over the same memory, which the array keeps alive.
py::array to_numpy(const basin::Tensor& t) {
  auto* keep = new basin::Tensor(t);
  py::capsule owner(keep, [](void* p) { delete static_cast<basin::Tensor*>(p); });
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  const std::string dt = t.dtype();
  const py::ssize_t size = dt == "float64" || dt == "int64" ? 8 : dt == "bool" ? 1 : 4;  // numpy_dtype's types
  return py::array(numpy_dtype(t.dtype()), shape, c_strides(shape, size), keep->data(), owner);
}

py::dict spec_dict(const basin::TensorSpec& s) {
  py::dict d;
  d["name"] = s.name;
  d["dtype"] = s.dtype;
  d["shape"] = py::tuple(py::cast(s.shape));
  d["index_bound"] = s.index_bound;
  d["divisor"] = s.divisor;
  if (!s.dims.empty()) d["dims"] = py::tuple(py::cast(s.dims));
  return d;
}
py::list spec_list(const std::vector<basin::TensorSpec>& specs) {
  py::list l;
  for (const auto& s : specs) l.append(spec_dict(s));
  return l;
}

// A pending Python exception: the first one a callback or the estimator raised, raised
// again once the tuning run has returned.
using Pending = std::optional<py::error_already_set>;

// A copy of a batch's features as NumPy arrays (the estimator may keep them: update()
// collects training data).
template <class T>
py::array_t<T> copy_array(const T* data, const std::vector<py::ssize_t>& shape) {
  py::array_t<T> a(shape, c_strides(shape, sizeof(T)));
  size_t n = 1;
  for (py::ssize_t e : shape) n *= static_cast<size_t>(e);
  if (n) std::memcpy(a.mutable_data(), data, n * sizeof(T));
  return a;
}

// A NumPy array (or what NumPy makes one of) of T, flattened.
template <class T>
std::vector<T> flat(const py::object& o) {
  auto a = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(o);
  if (!a) throw py::error_already_set();
  return std::vector<T>(a.data(), a.data() + a.size());
}

// The Python estimator (basin.estimators' bridge over the user's object) as a
// basin::Estimator: each call takes the GIL; an exception the user's code raises is kept
// (Pending) and stops the run as a basin error, then raised as it was.
class PyEstimator final : public basin::Estimator {
 public:
  PyEstimator(py::object bridge, Pending* pending) : bridge_(std::move(bridge)), pending_(pending) {
    name_ = bridge_.attr("name").cast<std::string>();
    differentiable_ = bridge_.attr("differentiable").cast<bool>();
  }
  ~PyEstimator() override {
    py::gil_scoped_acquire gil;
    bridge_ = py::object();
  }
  std::string name() const override { return name_; }
  bool differentiable() const override { return differentiable_; }
  bool ready() const override {
    return call("ready", [&] { return bridge_.attr("_ready")().cast<bool>(); });
  }
  std::vector<double> predict(const basin::FeatureBatch& x) override {
    return call("predict", [&] { return flat<double>(bridge_.attr("_predict")(values(x), mask(x))); });
  }
  std::vector<float> gradient(const basin::FeatureBatch& x) override {
    return call("gradient", [&] { return flat<float>(bridge_.attr("_gradient")(values(x), mask(x))); });
  }
  void update(const basin::FeatureBatch& x, const std::vector<double>& latencies_us) override {
    call("update", [&] {
      bridge_.attr("_update")(values(x), mask(x),
                              copy_array(latencies_us.data(), {static_cast<py::ssize_t>(latencies_us.size())}));
      return 0;
    });
  }

 private:
  static py::array_t<float> values(const basin::FeatureBatch& x) {
    return copy_array(x.values, {x.batch, x.stores, x.features});
  }
  static py::array_t<float> mask(const basin::FeatureBatch& x) { return copy_array(x.mask, {x.batch, x.stores}); }
  template <class F>
  auto call(const char* what, F f) const -> decltype(f()) {
    py::gil_scoped_acquire gil;
    if (*pending_) throw std::runtime_error("basin: the estimator's earlier error stops the run");
    Watchdog watchdog(basin::plugin_call_bound_seconds());
    try {
      return f();
    } catch (py::error_already_set& e) {
      if (watchdog.fired() && e.matches(PyExc_TimeoutError)) {
        const std::string msg = "the estimator '" + name_ + "' did not return from " + what + " within " +
                                std::to_string(basin::plugin_call_bound_seconds()) +
                                " s (BASIN_PLUGIN_TIMEOUT sets the bound on a plug-in's call)";
        PyErr_SetString(PyExc_TimeoutError, msg.c_str());
        pending_->emplace(py::error_already_set());
        throw std::runtime_error("basin: " + msg);
      }
      const std::string msg = e.what();
      pending_->emplace(std::move(e));
      throw std::runtime_error("basin: the estimator '" + name_ + "' raised in " + what + ": " + msg);
    } catch (const py::cast_error& e) {
      throw std::runtime_error("basin: the estimator '" + name_ + "': " + what + " returned " + e.what());
    }
  }
  // A time bound on one call of the estimator's Python code, which runs on the calling
  // thread with the GIL: past it, a thread of its own raises TimeoutError in that code
  // (PyThreadState_SetAsyncExc, delivered between two bytecodes). It acts only under the
  // GIL and only while the call runs (done is set before the GIL is let go), so it never
  // reaches code after the call.
  class Watchdog {
   public:
    explicit Watchdog(int seconds) : target_(PyThread_get_thread_ident()) {
      thread_ = std::thread([this, seconds] {
        std::unique_lock<std::mutex> lock(mu_);
        if (cv_.wait_for(lock, std::chrono::seconds(seconds), [&] { return done_; })) return;
        lock.unlock();
        py::gil_scoped_acquire gil;
        lock.lock();
        if (done_) return;
        fired_ = true;
        PyThreadState_SetAsyncExc(target_, PyExc_TimeoutError);
      });
    }
    ~Watchdog() {
      {
        std::lock_guard<std::mutex> lock(mu_);
        done_ = true;
        // (A TimeoutError raised as the call returned, not yet delivered, is taken back.)
        if (fired_) PyThreadState_SetAsyncExc(target_, nullptr);
      }
      cv_.notify_all();
      py::gil_scoped_release release;  // the watchdog may be waiting for the GIL
      thread_.join();
    }
    bool fired() {
      std::lock_guard<std::mutex> lock(mu_);
      return fired_;
    }

   private:
    unsigned long target_;
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false, fired_ = false;
    std::thread thread_;
  };
  py::object bridge_;
  Pending* pending_;
  std::string name_;
  bool differentiable_ = false;
};

// A tuning run (`run` with the GIL released). The callbacks take the GIL back; an
// exception one of them raises, or Ctrl-C (Python's signal handler, run by
// PyErr_CheckSignals on the main thread), stops the run cleanly and is raised once the
// run has returned: every program measured is in the records. An exception of the
// estimator ends the run there (the records kept) and is raised as it was.
template <class Run>
auto tune_with(basin::TuneOptions o, py::object estimator, std::function<void(py::dict)> on_progress,
               std::function<void(std::string)> on_log, Run run) {
  Pending pending;
  auto fail = [&pending](py::error_already_set& e) {
    if (!pending) pending.emplace(std::move(e));
  };
  if (!estimator.is_none()) o.custom_estimator = std::make_shared<PyEstimator>(estimator, &pending);
  if (on_progress)
    o.on_progress = [&](const basin::Progress& p) {
      py::gil_scoped_acquire gil;
      if (pending) return;
      py::dict d;
      d["trials"] = p.trials;
      d["trial_budget"] = p.trial_budget;
      d["seconds"] = p.seconds;
      d["budget_seconds"] = p.budget_seconds;
      d["estimated_latency_us"] = p.estimated_latency_us;
      try {
        on_progress(d);
      } catch (py::error_already_set& e) {
        fail(e);
      }
    };
  if (on_log)
    o.on_log = [&](const std::string& line) {
      py::gil_scoped_acquire gil;
      if (pending) return;
      try {
        on_log(line);
      } catch (py::error_already_set& e) {
        fail(e);
      }
    };
  o.stop = [&]() {
    py::gil_scoped_acquire gil;
    if (!pending && PyErr_CheckSignals() != 0) {
      py::error_already_set e;
      fail(e);
    }
    return pending.has_value();
  };
  try {
    py::gil_scoped_release release;
    auto r = run(o);
    return std::make_pair(std::move(r), std::move(pending));
  } catch (const std::exception&) {
    if (pending) throw std::move(*pending);
    throw;
  }
}

py::dict tune(const basin::Model& model, basin::TuneOptions o, py::object estimator,
              std::function<void(py::dict)> on_progress, std::function<void(std::string)> on_log) {
  auto [r, pending] = tune_with(std::move(o), std::move(estimator), std::move(on_progress), std::move(on_log),
                                [&](const basin::TuneOptions& to) { return basin::TuningSession(model, to).run(); });
  if (pending) throw std::move(*pending);
  py::dict d;
  d["trials"] = r.trials;
  d["measured"] = r.measured;
  d["resumed"] = r.resumed;
  d["seconds"] = r.seconds;
  d["overhead_fraction"] = r.overhead_fraction;
  d["estimated_latency_us"] = r.estimated_latency_us;
  d["tasks_without_program"] = r.tasks_without_program;
  d["stopped"] = r.stopped;
  return d;
}

py::dict tune_operator(const basin::OperatorSpec& spec, basin::TuneOptions o, py::object estimator,
                       std::function<void(py::dict)> on_progress, std::function<void(std::string)> on_log) {
  auto [r, pending] = tune_with(std::move(o), std::move(estimator), std::move(on_progress), std::move(on_log),
                                [&](const basin::TuneOptions& to) { return basin::tune_operator(spec, to); });
  if (pending) throw std::move(*pending);
  py::dict d;
  d["task"] = r.task;
  d["trials"] = r.trials;
  d["measured"] = r.measured;
  d["resumed"] = r.resumed;
  d["errors"] = r.errors;
  d["seconds"] = r.seconds;
  d["best_latency_us"] = r.best_latency_us;
  d["best_sketch"] = r.best_sketch;
  d["best_config"] = r.best_config;
  d["estimator"] = r.estimator;
  d["stopped"] = r.stopped;
  return d;
}

basin::TuneOptions tune_options(const std::string& records, double budget_seconds, int trials, int batch,
                                int first_batch, const std::string& strategy, const std::string& estimator,
                                const std::string& target, const std::string& precision, uint64_t seed) {
  basin::TuneOptions o;
  o.records = records;
  o.budget_seconds = budget_seconds;
  o.trials = trials;
  o.batch = batch;
  o.first_batch = first_batch;
  o.strategy = strategy;
  o.estimator = estimator;
  o.target = target;
  o.precision = precision;
  o.seed = seed;
  return o;
}

}  // namespace

PYBIND11_MODULE(_basin, m) {
  m.doc() = "basin's C++ API (<basin/basin.h>); use the basin package, not this module";
  static py::exception<std::runtime_error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const py::builtin_exception& e) {  // ValueError and the like: as raised
      e.set_error();
    } catch (const std::runtime_error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  m.def("feature_names", &basin::feature_names, py::arg("target"));

  py::class_<basin::Model>(m, "Model")
      .def_static(
          "load",
          [](const std::string& path, const std::map<std::string, std::vector<int64_t>>& shapes,
             const std::map<std::string, std::pair<int64_t, int64_t>>& ranges) {
            basin::LoadOptions lo;
            lo.shapes = shapes;
            lo.ranges = ranges;
            py::gil_scoped_release release;
            return basin::Model::load(path, lo);
          },
          py::arg("path"), py::arg("shapes") = std::map<std::string, std::vector<int64_t>>(),
          py::arg("ranges") = std::map<std::string, std::pair<int64_t, int64_t>>())
      .def_property_readonly("name", &basin::Model::name)
      .def_property_readonly("inputs", [](const basin::Model& mo) { return spec_list(mo.inputs()); })
      .def_property_readonly("tasks", &basin::Model::tasks);

  m.def(
      "tune",
      [](const basin::Model& model, const std::string& records, double budget_seconds, int trials, int batch,
         int first_batch, const std::string& strategy, const std::string& estimator_spec, py::object estimator,
         const std::string& target, const std::string& precision, uint64_t seed,
         std::function<void(py::dict)> on_progress, std::function<void(std::string)> on_log) {
        return tune(model,
                    tune_options(records, budget_seconds, trials, batch, first_batch, strategy, estimator_spec, target,
                                 precision, seed),
                    std::move(estimator), std::move(on_progress), std::move(on_log));
      },
      py::arg("model"), py::arg("records"), py::arg("budget_seconds"), py::arg("trials"), py::arg("batch"),
      py::arg("first_batch"), py::arg("strategy"), py::arg("estimator_spec"), py::arg("estimator").none(true),
      py::arg("target"), py::arg("precision"), py::arg("seed"), py::arg("on_progress").none(true),
      py::arg("on_log").none(true));

  m.def(
      "tune_operator",
      [](const std::string& workload, const std::string& op, const std::map<std::string, std::string>& params,
         const std::string& records, double budget_seconds, int trials, int batch, const std::string& strategy,
         const std::string& estimator_spec, py::object estimator, const std::string& target,
         const std::string& precision, uint64_t seed, std::function<void(py::dict)> on_progress,
         std::function<void(std::string)> on_log) {
        basin::OperatorSpec spec;
        spec.workload = workload;
        spec.op = op;
        spec.params = params;
        return tune_operator(
            spec,
            tune_options(records, budget_seconds, trials, batch, 0, strategy, estimator_spec, target, precision, seed),
            std::move(estimator), std::move(on_progress), std::move(on_log));
      },
      py::arg("workload"), py::arg("op"), py::arg("params"), py::arg("records"), py::arg("budget_seconds"),
      py::arg("trials"), py::arg("batch"), py::arg("strategy"), py::arg("estimator_spec"),
      py::arg("estimator").none(true), py::arg("target"), py::arg("precision"), py::arg("seed"),
      py::arg("on_progress").none(true), py::arg("on_log").none(true));

  py::class_<basin::Network>(m, "Network")
      .def_static(
          "compile",
          [](const basin::Model& model, const std::string& records, const std::string& target,
             const std::string& precision) {
            py::gil_scoped_release release;
            return basin::Network::compile(model, records, target, precision);
          },
          py::arg("model"), py::arg("records"), py::arg("target"), py::arg("precision"))
      .def_static(
          "load",
          [](const std::string& path) {
            py::gil_scoped_release release;
            return basin::Network::load(path);
          },
          py::arg("path"))
      .def("save", &basin::Network::save, py::arg("path"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("inputs", [](const basin::Network& n) { return spec_list(n.inputs()); })
      .def_property_readonly("outputs", [](const basin::Network& n) { return spec_list(n.outputs()); })
      .def_property_readonly("untuned_tasks", &basin::Network::untuned_tasks)
      .def_property_readonly("bf16_kernels", &basin::Network::bf16_kernels)
      .def_property_readonly("target", &basin::Network::target)
      .def_property_readonly("accuracy",
                             [](const basin::Network& n) {
                               basin::Accuracy a = n.accuracy();
                               py::dict d;
                               d["measured"] = a.measured;
                               d["note"] = a.note;
                               d["max_rel_error"] = a.max_rel_error;
                               d["max_abs_error"] = a.max_abs_error;
                               d["top1_agree"] = a.top1_agree;
                               d["top1_rows"] = a.top1_rows;
                               return d;
                             })
      .def(
          "run",
          [](basin::Network& n, const std::vector<py::array>& inputs) {
            std::vector<basin::Tensor> in = borrow_all(inputs);
            std::vector<basin::Tensor> out;
            {
              py::gil_scoped_release release;
              out = n.run(in);
            }
            py::list l;
            for (const basin::Tensor& t : out) l.append(to_numpy(t));
            return l;
          },
          py::arg("inputs"))
      .def(
          "time_us",
          [](basin::Network& n, const std::vector<py::array>& inputs) {
            std::vector<basin::Tensor> in = borrow_all(inputs);
            py::gil_scoped_release release;
            return n.time_us(in);
          },
          py::arg("inputs"))
      .def(
          "profile",
          [](basin::Network& n, const std::vector<py::array>& inputs, int rounds) {
            std::vector<basin::Tensor> in = borrow_all(inputs);
            basin::Profile p;
            {
              py::gil_scoped_release release;
              p = n.profile(in, rounds);
            }
            py::list rows;
            for (const basin::LaunchProfile& k : p.launches) {
              py::dict d;
              d["task"] = k.task;
              d["kernel"] = k.kernel;
              d["us"] = k.us;
              d["flops"] = k.flops;
              d["bytes"] = k.bytes;
              d["precision"] = k.precision;
              rows.append(d);
            }
            py::dict d;
            d["launches"] = rows;
            d["run_us"] = p.run_us;
            d["kernels_us"] = p.kernels_us;
            return d;
          },
          py::arg("inputs"), py::arg("rounds"));
}
