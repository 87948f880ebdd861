#include "codegen/measure.h"

#include <poll.h>
#include <time.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>
#include <nlohmann/json.hpp>
#include <set>

#include "codegen/c_printer.h"
#include "codegen/cuda.h"
#include "codegen/llvm_jit.h"
#include "codegen/op_check.h"
#include "codegen/torch_reference.h"
#include "core/ir/lower.h"
#include "core/schedule/lower_sketch.h"
#include "core/util/error.h"
#include "core/util/hardware.h"

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
  } else {
    // The CPU's description (its measured FMA peak and bandwidth among it), stored with
    // the records this pool's measurements become, is measured once per machine before
    // any worker or compiling thread shares the cores with it.
    this_hardware();
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
    throw Error(
        "the cuda measurer forks its workers, and this process has initialized the CUDA driver already "
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
  ahead_.clear();  // the programs compiled ahead were the worker's
  if (!worker_) return 0;
  ::close(worker_->to);  // a live worker exits on EOF
  if (kill) ::kill(worker_->pid, SIGKILL);
  int status = 0;
  ::waitpid(worker_->pid, &status, 0);
  ::close(worker_->from);
  worker_.reset();
  return status;
}

namespace {

// A program lowered and compiled in the worker (CPU or GPU), with its times, or the
// error that stopped it.
struct Compiled {
  LoweredFunc func;
  std::unique_ptr<LlvmKernel> cpu;
  std::optional<ConstantPrologue> prologue;  // MeasureOptions::constant_inputs
  CudaBinary gpu;
  double lower_seconds = 0, compile_seconds = 0, compile_cpu_seconds = 0;
  double tolerance = 0;   // the largest relative error its sketch's arithmetic allows
  std::string error;      // lowering or compilation failed
  bool poisoned = false;  // a CUDA error that leaves the context unusable
};

// The programs a worker compiled, by request text, kept for their next measurements (a
// round's best confirmed, a settling contest): the kKept most recently used, and
// besides them the kKeptFastest fastest measured, which are the ones measured again.
class KeptPrograms {
 public:
  static constexpr size_t kKept = 24, kKeptFastest = 4;
  std::shared_ptr<Compiled> find(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = kept_.find(key);
    if (it == kept_.end()) return nullptr;
    it->second.last_use = ++clock_;
    return it->second.program;
  }
  void keep(const std::string& key, std::shared_ptr<Compiled> p) {
    std::lock_guard<std::mutex> l(mu_);
    Entry& e = kept_[key];
    e.program = std::move(p);
    e.last_use = ++clock_;
    while (kept_.size() > kKept + kKeptFastest) drop_one();
  }
  void timed(const std::string& key, double min_us) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = kept_.find(key);
    if (it != kept_.end() && min_us > 0) it->second.fastest_us = std::min(it->second.fastest_us, min_us);
  }

 private:
  struct Entry {
    std::shared_ptr<Compiled> program;
    uint64_t last_use = 0;
    double fastest_us = HUGE_VAL;
  };
  // Drops the least recently used program that is not one of the kKeptFastest fastest.
  void drop_one() {
    using It = std::map<std::string, Entry>::iterator;
    std::vector<It> all;
    for (It it = kept_.begin(); it != kept_.end(); ++it) all.push_back(it);
    const size_t fastest = std::min(kKeptFastest, all.size() - 1);
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(fastest), all.end(),
                      [](It a, It b) { return a->second.fastest_us < b->second.fastest_us; });
    It victim = all[fastest];
    for (size_t i = fastest; i < all.size(); ++i)
      if (all[i]->second.last_use < victim->second.last_use) victim = all[i];
    kept_.erase(victim);
  }
  std::mutex mu_;
  std::map<std::string, Entry> kept_;
  uint64_t clock_ = 0;
};

// The text naming a request's program (sketch, factors, unroll), by which the worker
// keeps it.
std::string program_key(const nlohmann::json& j) {
  return nlohmann::json{{"sketch", j["sketch"]}, {"factors", j["factors"]}, {"unroll", j["unroll"]}}.dump();
}

// The worker's request for candidate c (its text names the program).
nlohmann::json request(const std::vector<sched::Sketch>& sketches, const Candidate& c) {
  size_t index = static_cast<size_t>(c.sketch - sketches.data());
  BASIN_CHECK(index < sketches.size()) << "the candidate's sketch is not one of the pool's";
  return {{"sketch", index}, {"factors", c.config.factors}, {"unroll", c.config.unroll}};
}

}  // namespace

void MeasurePool::worker_main(int in_fd, int out_fd) {
  signal(SIGPIPE, SIG_IGN);
  // Ctrl-C at a terminal reaches the whole process group: the tuner decides whether to
  // stop (and then closes the pipe), so a program being timed is never recorded as a
  // crash by an interrupt meant for the tuner.
  signal(SIGINT, SIG_IGN);
  const bool cuda = opt_.target == "cuda";
  std::mutex send_mu;  // one message at a time
  // Lowers and compiles the request's program (on any thread). The cubin is loaded,
  // and the CPU kernel linked, outside the compile time.
  auto compile = [&](const nlohmann::json& j) {
    Compiled out;
    try {
      const sched::Sketch& s = sketches_.at(j["sketch"].get<size_t>());
      sched::Config c;
      c.factors = j["factors"].get<std::vector<std::vector<int64_t>>>();
      c.unroll = j["unroll"].get<int64_t>();
      auto t0 = std::chrono::steady_clock::now();
      double cpu0 = thread_cpu_seconds();
      out.func = sched::lower_config(task_, s, c);
      out.tolerance = sched::storage_tolerance(task_, sched::result_tolerance(s, opt_.tolerance));
      out.lower_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (opt_.program_hook) out.func = opt_.program_hook(out.func);
      if (cuda) out.gpu = compile_cuda(print_cuda(out.func), out.func.name, opt_.cuda_arch);
      else {
        LlvmOptions lo;
        lo.max_instructions = opt_.max_instructions;
        if (!opt_.constant_inputs.empty())
          out.prologue = compile_constant_prologue(&out.func, opt_.constant_inputs, lo);
        out.cpu = compile_llvm(out.func, lo);
      }
      out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out.compile_cpu_seconds = thread_cpu_seconds() - cpu0;
    } catch (const CudaError& e) {
      out.error = e.what();
      out.poisoned = e.poisoned();
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    return out;
  };
  // Runs a compiled program once, checks its outputs and times it: the result message.
  // On the CPU, a program whose check run and warm-up call both take more than slow_us
  // (0: no limit) is timed by those calls alone (TimingOptions::slow_us).
  // Returns false when the GPU context is poisoned (the worker must go).
  // A program compiled earlier (reused) reports no compile time: none was spent on it.
  auto run = [&](Compiled& p, bool reused, nlohmann::json& res, double slow_us) {
    res["lower_seconds"] = reused ? 0.0 : p.lower_seconds;
    if (!p.error.empty()) {
      res["error"] = p.error;
      if (p.poisoned) res["poisoned"] = true;
      return !p.poisoned;
    }
    res["compile_seconds"] = reused ? 0.0 : p.compile_seconds;
    res["compile_cpu_seconds"] = reused ? 0.0 : p.compile_cpu_seconds;
    if (reused) res["reused"] = true;
    try {
      std::vector<NDArray> out = fresh_outputs(task_);
      std::vector<NDArray*> args = program_args(inputs_, out);
      NDArray packed;
      if (p.prologue) {  // once, untimed, as a compiled network does when it is compiled
        packed = NDArray(p.prologue->dtype, p.prologue->shape);
        p.prologue->kernel->run({args.at(static_cast<size_t>(p.prologue->param)), &packed});
        args[static_cast<size_t>(p.prologue->param)] = &packed;
        res["constant_stage"] = true;
      }
      std::unique_ptr<CudaKernel> gpu;
      double check_us = 0;  // the CPU's check run, which may make the timing brief
      // The first timing's window opens before the check run, whose time may make it brief.
      double cpu0 = thread_cpu_seconds();
      auto window0 = std::chrono::steady_clock::now();
      if (cuda) {
        gpu = std::make_unique<CudaKernel>(p.gpu, p.func);
        gpu->run(args);
      } else {
        auto t0 = std::chrono::steady_clock::now();
        p.cpu->run(args);
        check_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      }
      double worst = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        const ErrorStats e = compare_arrays(out[i], reference_[i]);
        // Quantized (8-bit) outputs may differ by one step where the float value before
        // rounding lies at a tie and the program sums in another order than the reference.
        worst = std::max(worst, out[i].dtype().is_byte() && e.max_abs <= 1 ? 0.0 : e.max_rel);
      }
      if (!(worst <= p.tolerance)) {
        res["error"] = "wrong result: max relative error " + std::to_string(worst) + " against the reference";
        return true;
      }
      std::vector<double> rounds;
      std::vector<void*> raw;
      for (NDArray* a : args) raw.push_back(a->data());
      TimingOptions timing = opt_.timing;
      timing.slow_us = slow_us;
      if (!cuda && opt_.cold_constants && !opt_.constant_inputs.empty())
        timing.before_call = [&] {
          for (int i : opt_.constant_inputs) {
            const NDArray* a = args.at(static_cast<size_t>(i));
            evict_from_caches(a->data(), a->nbytes());
          }
        };
      Timing t;
      if (cuda) {
        t = gpu->time(opt_.timing, opt_.flush_l2, &rounds);
      } else {
        // A timing during which another process took the cores (disturbed_timing) is
        // repeated, up to kTimingAttempts in all; the fastest attempt is kept (sharing
        // a core only slows a program down), and it is reported disturbed when every
        // attempt was.
        int disturbed = 0;
        for (int attempt = 0; attempt < kTimingAttempts; ++attempt) {
          if (attempt > 0) {
            cpu0 = thread_cpu_seconds();
            window0 = std::chrono::steady_clock::now();
          }
          std::vector<double> these;
          Timing a = time_function([&] { p.cpu->run_raw(raw.data()); }, timing, &these, attempt == 0 ? check_us : 0);
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - window0).count();
          const bool busy = disturbed_timing(thread_cpu_seconds() - cpu0, seconds);
          if (attempt == 0 || a.min_us < t.min_us) {
            t = a;
            rounds = these;
          }
          if (!busy) break;
          ++disturbed;
        }
        if (disturbed > 0) res["disturbed"] = disturbed;
      }
      res["latencies_us"] = rounds;
      res["median_us"] = t.median_us;
      if (t.brief) res["brief"] = true;
    } catch (const CudaError& e) {
      res["error"] = e.what();
      if (e.poisoned()) {
        res["poisoned"] = true;  // the context is unusable: the pool starts a fresh worker
        return false;
      }
    } catch (const std::exception& e) {
      res["error"] = e.what();
    }
    return true;
  };
  KeptPrograms kept;
  // The request's program: kept from an earlier compilation, or compiled now and kept.
  struct Slot {
    std::shared_ptr<Compiled> program;
    bool reused = false;
    std::string key;
  };
  auto obtain = [&](const nlohmann::json& j) {
    Slot s;
    s.key = program_key(j);
    if (opt_.keep_programs && (s.program = kept.find(s.key))) {
      s.reused = true;
      return s;
    }
    s.program = std::make_shared<Compiled>(compile(j));
    if (opt_.keep_programs && s.program->error.empty()) kept.keep(s.key, s.program);
    return s;
  };
  auto measure = [&](Slot& s, nlohmann::json& res, double slow_us) {
    const bool alive = run(*s.program, s.reused, res, slow_us);
    if (!res.contains("error") && res.contains("latencies_us")) {
      const std::vector<double> rounds = res["latencies_us"].get<std::vector<double>>();
      if (!rounds.empty()) kept.timed(s.key, *std::min_element(rounds.begin(), rounds.end()));
    }
    return alive;
  };
  std::vector<Slot> ahead;  // the prepared batch, by slot
  std::string req;
  while (recv_msg(in_fd, &req, std::chrono::steady_clock::time_point::max()) == 0) {
    nlohmann::json j = nlohmann::json::parse(req, nullptr, false);
    if (j.contains("prepare")) {
      // Every program of the batch, on `threads` threads: "start" and "done" for each
      // (the pool times each compilation), then "prepared". A program listed again in
      // the batch (measured in turn) is compiled once, its other slots reuse it.
      const nlohmann::json& batch = j["prepare"];
      ahead.clear();
      ahead.resize(batch.size());
      std::vector<size_t> first(batch.size());
      std::map<std::string, size_t> first_of;
      for (size_t i = 0; i < batch.size(); ++i)
        first[i] = opt_.keep_programs ? first_of.emplace(program_key(batch[i]), i).first->second : i;
      std::atomic<size_t> next{0};
      auto work = [&] {
        for (size_t i; (i = next++) < batch.size();) {
          if (first[i] != i) continue;
          {
            std::lock_guard<std::mutex> l(send_mu);
            send_msg(out_fd, nlohmann::json{{"start", i}}.dump());
          }
          ahead[i] = obtain(batch[i]);
          std::lock_guard<std::mutex> l(send_mu);
          send_msg(out_fd, nlohmann::json{{"done", i}}.dump());
        }
      };
      std::vector<std::thread> threads;
      for (int t = 1; t < j["threads"].get<int>(); ++t) threads.emplace_back(work);
      work();
      for (std::thread& t : threads) t.join();
      for (size_t i = 0; i < batch.size(); ++i) {
        if (first[i] == i) continue;
        ahead[i] = ahead[first[i]];
        ahead[i].reused = true;
        send_msg(out_fd, nlohmann::json{{"start", i}}.dump());
        send_msg(out_fd, nlohmann::json{{"done", i}}.dump());
      }
      if (!send_msg(out_fd, nlohmann::json{{"prepared", batch.size()}}.dump())) break;
      continue;
    }
    nlohmann::json res;
    bool alive;
    const double slow_us = j.value("slow_us", 0.0);
    if (j.contains("slot")) {
      Slot& s = ahead.at(j["slot"].get<size_t>());
      alive = measure(s, res, slow_us);
      s.program.reset();  // measured: its code is freed unless it is kept
    } else {
      Slot s = obtain(j);
      alive = measure(s, res, slow_us);
    }
    if (!send_msg(out_fd, res.dump()) || !alive) break;
  }
  _exit(0);
}

std::chrono::milliseconds MeasurePool::timeout_duration() const {
  return std::chrono::milliseconds(static_cast<int64_t>(opt_.timeout_seconds * 1000));
}

int MeasurePool::compile_threads() const {
  if (opt_.compile_threads > 0) return opt_.compile_threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void MeasurePool::prepare(const std::vector<Candidate>& batch) {
  ahead_.clear();
  ahead_failed_.clear();
  if (opt_.target != "llvm" || compile_threads() < 2) return;
  std::vector<nlohmann::json> requests;
  std::vector<std::string> keys;
  for (const Candidate& c : batch) {
    requests.push_back(request(sketches_, c));
    keys.push_back(requests.back().dump());
  }
  // The batch's programs to compile (indices into keys): all, and after a worker killed
  // for a compilation past the timeout, all but the programs that ran past it.
  std::vector<size_t> todo(batch.size());
  for (size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  using Clock = std::chrono::steady_clock;
  const auto timeout = timeout_duration();
  while (!todo.empty()) {
    const int threads = std::min<int>(compile_threads(), static_cast<int>(todo.size()));
    if (threads < 2) return;
    nlohmann::json list = nlohmann::json::array();
    for (size_t i : todo) list.push_back(requests[i]);
    if (!worker_) spawn();
    if (!send_msg(worker_->to, nlohmann::json{{"prepare", list}, {"threads", threads}}.dump())) {
      stop_worker(false);
      spawn();
      return;
    }
    // Each program must finish compiling within the timeout of its start. Slots are
    // positions in `todo`.
    std::map<size_t, Clock::time_point> running;
    std::vector<size_t> done;
    Clock::time_point deadline;
    int rc = 0;
    for (;;) {
      deadline = Clock::now() + timeout;
      for (const auto& [slot, start] : running) deadline = std::min(deadline, start + timeout);
      std::string reply;
      rc = recv_msg(worker_->from, &reply, deadline);
      if (rc != 0) break;
      nlohmann::json m = nlohmann::json::parse(reply);
      if (m.contains("start")) {
        running[m["start"].get<size_t>()] = Clock::now();
      } else if (m.contains("done")) {
        running.erase(m["done"].get<size_t>());
        done.push_back(m["done"].get<size_t>());
      } else {
        break;  // "prepared"
      }
    }
    if (rc == 0) {
      std::sort(done.begin(), done.end());
      for (size_t slot : done) ahead_.emplace(keys[todo[slot]], static_cast<int>(slot));
      return;
    }
    // Hung or dead: the worker is replaced. The programs compiling past the timeout are
    // their own errors, and the others are compiled ahead again by the next worker. A
    // worker that died (or hung without a program past the timeout) leaves the batch to
    // be compiled one program at a time, so that the crash falls on its program.
    std::vector<size_t> rest;
    if (rc == 1) {
      std::set<size_t> late;
      for (const auto& [slot, start] : running)
        if (start + timeout <= deadline) late.insert(slot);
      for (size_t slot : late)
        ahead_failed_.emplace(keys[todo[slot]], "timeout: not compiled within " + std::to_string(opt_.timeout_seconds) +
                                                    " s (the worker was killed)");
      if (!late.empty())
        for (size_t slot = 0; slot < todo.size(); ++slot)
          if (!late.count(slot)) rest.push_back(todo[slot]);
    }
    stop_worker(rc == 1);
    spawn();
    todo = std::move(rest);
  }
}

MeasureResult MeasurePool::run_in_worker(const Candidate& c, double slow_us) {
  MeasureResult r;
  nlohmann::json req = request(sketches_, c);
  const std::string key = req.dump();
  if (auto f = ahead_failed_.lower_bound(key); f != ahead_failed_.end() && f->first == key) {
    r.error = f->second;
    ahead_failed_.erase(f);
    return r;
  }
  if (auto a = ahead_.lower_bound(key); a != ahead_.end() && a->first == key) {
    req = {{"slot", a->second}};
    ahead_.erase(a);
    ++measured_ahead_;
  }
  if (slow_us > 0) req["slow_us"] = slow_us;
  if (!worker_) spawn();
  auto deadline = std::chrono::steady_clock::now() + timeout_duration();
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
  r.brief = j.value("brief", false);
  r.disturbed = j.value("disturbed", 0);
  r.constant_stage = j.value("constant_stage", false);
  r.reused = j.value("reused", false);
  if (j.contains("poisoned")) stop_worker(false);  // it has exited; the next candidate starts a new one
  return r;
}

MeasureResult MeasurePool::measure_one(const Candidate& c, double slow_us) { return run_in_worker(c, slow_us); }

std::vector<MeasureResult> MeasurePool::measure(const std::vector<Candidate>& batch) {
  prepare(batch);
  std::vector<MeasureResult> out;
  for (const Candidate& c : batch) out.push_back(run_in_worker(c));
  return out;
}

}  // namespace basin::codegen
