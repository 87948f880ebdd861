#include "codegen/measure.h"

#include <poll.h>
#include <time.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

#include "codegen/c_printer.h"
#include "codegen/cuda.h"
#include "codegen/llvm_jit.h"
#include "codegen/op_check.h"
#include "codegen/torch_reference.h"
#include "core/ir/lower.h"
#include "core/schedule/lower_sketch.h"
#include "core/util/error.h"

namespace basin::codegen {

namespace {

// Messages on the pipes: a 4-byte length, then the bytes.
bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
bool send_msg(int fd, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  return write_all(fd, &n, 4) && write_all(fd, s.data(), s.size());
}

// Reads exactly n bytes, waiting until `deadline`. 0: done, 1: timeout, 2: EOF/error.
int read_all(int fd, void* p, size_t n, std::chrono::steady_clock::time_point deadline) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return 1;
      pollfd pf{fd, POLLIN, 0};
      int r = ::poll(&pf, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return 1;
    }
    ssize_t got = ::read(fd, c, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 2;
    c += got;
    n -= static_cast<size_t>(got);
  }
  return 0;
}
int recv_msg(int fd, std::string* s, std::chrono::steady_clock::time_point deadline) {
  uint32_t n = 0;
  if (int r = read_all(fd, &n, 4, deadline)) return r;
  s->resize(n);
  return read_all(fd, s->data(), n, deadline);
}

// CPU time of the calling thread: unlike wall time, not inflated while the thread waits
// for a core that another process holds.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

}  // namespace

struct MeasurePool::Worker {
  pid_t pid = -1;
  int to = -1;    // requests
  int from = -1;  // results
};

MeasurePool::MeasurePool(const ops::OpGraph& task, std::vector<sched::Sketch> sketches, MeasureOptions opt)
    : task_(task), sketches_(std::move(sketches)), opt_(std::move(opt)) {
  if (opt_.target == "cuda") {
    // Asked of a child process: this one must not initialize the driver before it
    // forks the worker that uses it.
    std::string why;
    if (!cuda_available(&why)) throw Error("the cuda target is unavailable: " + why);
    if (opt_.cuda_arch.empty()) opt_.cuda_arch = cuda_device_arch();
  } else if (opt_.target != "llvm") {
    throw Error("unknown measuring target '" + opt_.target + "' (llvm or cuda)");
  } else if (!llvm_enabled()) {
    throw Error("measuring needs the llvm target, and basin was built without LLVM");
  }
  inputs_ = random_inputs(task_, opt_.input_seed);
  if (has_torch_reference(task_.op)) {
    reference_ = torch_reference(task_, inputs_);
  } else {
    reference_ = interpret_outputs(lower_default(task_.op, task_.inputs, task_.outputs), task_, inputs_);
  }
  spawn();
}

MeasurePool::~MeasurePool() { stop_worker(false); }

void MeasurePool::spawn() {
  if (opt_.target == "cuda" && cuda_driver_initialized_here())
    throw Error("the cuda measurer forks its workers, and this process has initialized the CUDA driver already "
                "(it ran a kernel): a forked child cannot use the GPU then; measure before running kernels in "
                "this process, or in another process");
  int req[2], res[2];
  if (pipe(req) != 0 || pipe(res) != 0) throw Error(std::string("measure: cannot create pipes: ") + strerror(errno));
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) throw Error(std::string("measure: cannot fork a worker: ") + strerror(errno));
  if (pid == 0) {
    // The worker keeps its own two pipe ends and nothing else it inherited: an end of
    // another pool's pipe held here would keep that pool's worker from ever seeing EOF
    // (a network's tuners each fork one), and the parent's files are not its to touch.
    const int lo = std::min(req[0], res[1]), hi = std::max(req[0], res[1]);
    for (int fd = 3; fd < hi; ++fd)
      if (fd != lo) ::close(fd);
    ::close_range(static_cast<unsigned>(hi) + 1, ~0U, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the tuner
    worker_main(req[0], res[1]);
  }
  ::close(req[0]);
  ::close(res[1]);
  worker_ = std::make_unique<Worker>();
  worker_->pid = pid;
  worker_->to = req[1];
  worker_->from = res[0];
  ++started_;
}

int MeasurePool::stop_worker(bool kill) {
  if (!worker_) return 0;
  ::close(worker_->to);  // a live worker exits on EOF
  if (kill) ::kill(worker_->pid, SIGKILL);
  int status = 0;
  ::waitpid(worker_->pid, &status, 0);
  ::close(worker_->from);
  worker_.reset();
  return status;
}

void MeasurePool::worker_main(int in_fd, int out_fd) {
  signal(SIGPIPE, SIG_IGN);
  std::string req;
  while (recv_msg(in_fd, &req, std::chrono::steady_clock::time_point::max()) == 0) {
    nlohmann::json res;
    try {
      nlohmann::json j = nlohmann::json::parse(req);
      const sched::Sketch& s = sketches_.at(j["sketch"].get<size_t>());
      sched::Config c;
      c.factors = j["factors"].get<std::vector<std::vector<int64_t>>>();
      c.unroll = j["unroll"].get<int64_t>();
      auto t0 = std::chrono::steady_clock::now();
      double cpu0 = thread_cpu_seconds();
      LoweredFunc f = sched::lower_config(task_, s, c);
      res["lower_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (opt_.program_hook) f = opt_.program_hook(f);
      std::vector<NDArray> out = fresh_outputs(task_);
      std::vector<NDArray*> args = program_args(inputs_, out);
      auto check_outputs = [&] {
        double worst = 0;
        for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, compare_arrays(out[i], reference_[i]).max_rel);
        if (!(worst <= opt_.tolerance))
          res["error"] = "wrong result: max relative error " + std::to_string(worst) + " against the reference";
        return worst <= opt_.tolerance;
      };
      // Compiled (the cubin loaded after the compile time is taken), run once, checked,
      // timed: on the GPU with events, on the CPU by the wall clock.
      const bool cuda = opt_.target == "cuda";
      CudaBinary bin;
      std::unique_ptr<LlvmKernel> cpu;
      if (cuda) bin = compile_cuda(print_cuda(f), f.name, opt_.cuda_arch);
      else cpu = compile_llvm(f);
      res["compile_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      res["compile_cpu_seconds"] = thread_cpu_seconds() - cpu0;
      std::unique_ptr<CudaKernel> gpu;
      if (cuda) gpu = std::make_unique<CudaKernel>(bin, f);
      if (cuda) gpu->run(args);
      else cpu->run(args);
      if (check_outputs()) {
        std::vector<double> rounds;
        std::vector<void*> raw;
        for (NDArray* a : args) raw.push_back(a->data());
        Timing t = cuda ? gpu->time(opt_.timing, opt_.flush_l2, &rounds)
                        : time_function([&] { cpu->run_raw(raw.data()); }, opt_.timing, &rounds);
        res["latencies_us"] = rounds;
        res["median_us"] = t.median_us;
      }
    } catch (const CudaError& e) {
      res["error"] = e.what();
      if (e.poisoned()) {
        // The context is unusable: report, and let the pool start a fresh worker.
        res["poisoned"] = true;
        send_msg(out_fd, res.dump());
        break;
      }
    } catch (const std::exception& e) {
      res["error"] = e.what();
    }
    if (!send_msg(out_fd, res.dump())) break;
  }
  _exit(0);
}

MeasureResult MeasurePool::run_in_worker(const Candidate& c) {
  MeasureResult r;
  size_t index = static_cast<size_t>(c.sketch - sketches_.data());
  BASIN_CHECK(index < sketches_.size()) << "the candidate's sketch is not one of the pool's";
  nlohmann::json req = {{"sketch", index}, {"factors", c.config.factors}, {"unroll", c.config.unroll}};
  if (!worker_) spawn();
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(opt_.timeout_seconds * 1000));
  std::string reply;
  int rc = send_msg(worker_->to, req.dump()) ? recv_msg(worker_->from, &reply, deadline) : 2;
  if (rc == 1) {
    stop_worker(true);
    r.error = "timeout: no result within " + std::to_string(opt_.timeout_seconds) + " s (the worker was killed)";
    spawn();
    return r;
  }
  if (rc == 2) {
    r.error = "the worker died: " + describe_status(stop_worker(false));
    spawn();
    return r;
  }
  nlohmann::json j = nlohmann::json::parse(reply);
  if (j.contains("error")) r.error = j["error"].get<std::string>();
  if (j.contains("compile_seconds")) r.compile_seconds = j["compile_seconds"].get<double>();
  if (j.contains("lower_seconds")) r.lower_seconds = j["lower_seconds"].get<double>();
  if (j.contains("compile_cpu_seconds")) r.compile_cpu_seconds = j["compile_cpu_seconds"].get<double>();
  if (j.contains("latencies_us")) r.latencies_us = j["latencies_us"].get<std::vector<double>>();
  if (j.contains("median_us")) r.median_us = j["median_us"].get<double>();
  if (j.contains("poisoned")) stop_worker(false);  // it has exited; the next candidate starts a new one
  return r;
}

MeasureResult MeasurePool::measure_one(const Candidate& c) { return run_in_worker(c); }

std::vector<MeasureResult> MeasurePool::measure(const std::vector<Candidate>& batch) {
  std::vector<MeasureResult> out;
  for (const Candidate& c : batch) out.push_back(run_in_worker(c));
  return out;
}

}  // namespace basin::codegen
