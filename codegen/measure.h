// Measurement of candidate programs in isolated worker processes (on the CPU through
// LLVM, or on the GPU through NVRTC and the driver: MeasureOptions::target). A worker is forked
// from the tuner after the task, its random inputs and its reference outputs are
// built, so it holds them without any serialization; it lowers a (sketch,
// configuration), compiles it with LLVM, runs it once, checks the outputs against the
// reference, and times it. A kernel that crashes or hangs (per-candidate timeout)
// kills only its worker: the candidate becomes an error result, a new worker is
// forked, and measuring goes on. A wrong result is an error result too.
//
// A batch (measure, or prepare before measure_one) is first lowered and compiled in
// the worker on every core at once (MeasureOptions::compile_threads), and only then
// run and timed one program at a time, with nothing else running: compiling is most
// of a tuning run's measuring time, and one core would otherwise sit idle while the
// other compiles. A compilation past the timeout is its program's timeout error, and
// a new worker compiles the batch's other programs ahead again; a worker that crashes
// while compiling ahead leaves the batch to be compiled one program at a time, so that
// the crash falls on its own program.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "codegen/timing.h"
#include "core/ir/ndarray.h"
#include "core/ir/stmt.h"
#include "core/ops/registry.h"
#include "core/schedule/sketch.h"

namespace basin::codegen {

struct Candidate {
  const sched::Sketch* sketch = nullptr;  // one of the pool's sketches
  sched::Config config;
};

struct MeasureResult {
  std::vector<double> latencies_us;  // per-round times; empty on error
  double median_us = 0;
  double compile_seconds = 0;      // lowering and LLVM compilation
  double lower_seconds = 0;        // of which lowering (sketch to loop IR)
  double compile_cpu_seconds = 0;  // the same as CPU time of the worker's thread
  std::string error;               // empty when the program ran and matched the reference
  bool brief = false;              // slower than measure_one's slow_us: timed by its check run and one call
  bool constant_stage = false;     // a constant input's repacking ran once, untimed (MeasureOptions::constant_inputs)
  bool reused = false;             // run as compiled for an earlier measurement, kept in the worker (no compile time)
  // Timings another process disturbed (codegen::disturbed_timing), each timed again; at
  // kTimingAttempts the latencies kept are disturbed too (disturbed_kept()).
  int disturbed = 0;
  bool disturbed_kept() const;
  bool ok() const { return error.empty(); }
  double min_us() const {
    return latencies_us.empty() ? 0 : *std::min_element(latencies_us.begin(), latencies_us.end());
  }
};

// While tuning or collecting a dataset, a program emitted with more LLVM instructions
// than this is an error result without compiling it (MeasureOptions::max_instructions).
// LLVM's code generator is superlinear in a block's size: on resnet18-c6 the gradient
// search's first batch held a program of 163,873 instructions (an unrolled reduction
// over weights loaded one lane at a time) that LLVM compiled in 15.5 s, so that the
// measurer killed its worker at the 10 s timeout and compiled the batch's other
// programs again: 12 s before the run's first measurement, a third of a 200-trial
// run's time, for a program 20 times slower than the best. Of the programs of
// a week of tuning runs (docs/PERFORMANCE.md@6bf7154, "Programs too large to
// compile"), every one over 80,000 instructions ran at least 4.5 times slower than
// its task's best.
inline constexpr int64_t kMaxInstructions = 100000;

// A CPU timing that another process disturbed (codegen::disturbed_timing) is repeated,
// up to this many timings of a program in all.
inline constexpr int kTimingAttempts = 3;
inline bool MeasureResult::disturbed_kept() const { return disturbed >= kTimingAttempts; }

struct MeasureOptions {
  // Per candidate: lowering, compilation, check and timing. Every tuner passes its own
  // (TuneOptions::timeout_seconds, `--timeout`, 10 s); this default serves a pool made
  // directly (the tests, `tune-op`'s final comparison passes 120), where a program may
  // be large and the machine loaded.
  double timeout_seconds = 20;
  TimingOptions timing = TimingOptions::tuning();
  double tolerance = 1e-3;  // largest max relative error against the reference
  uint64_t input_seed = 1;
  // Where candidates run: "llvm" (this CPU), or "cuda": printed as CUDA C, compiled by
  // NVRTC for cuda_arch (empty: the GPU's own), run on GPU 0 and timed with events,
  // with flush_l2 the L2 flushed before each timed launch. A sticky CUDA error (an
  // illegal address) poisons the worker's context: that candidate is an error result
  // and the worker is replaced.
  std::string target = "llvm";
  // The precision the tasks' sketches were chosen for (sched::sketches_for): what a
  // worker that builds its own sketches asks (search/mpi.cc). A candidate's result is
  // checked against sched::result_tolerance(its sketch, tolerance) (at least
  // sched::storage_tolerance for a bfloat16 output).
  std::string precision;
  std::string cuda_arch;
  bool flush_l2 = true;
  // Threads that compile a batch ahead (prepare) in the worker: 0, every core of the
  // machine; 1, none ahead (each program compiled just before it runs). The llvm
  // target only (NVRTC's programs are compiled one at a time).
  int compile_threads = 0;
  // A program that LLVM would take too long to compile: more LLVM instructions than
  // this as emitted (LlvmOptions::max_instructions) is an error result, without
  // compiling it (0: no limit). The llvm target only; the tuner and dataset
  // collection set it to kMaxInstructions unless told otherwise
  // (search::TuneOptions::max_instructions, models::CollectOptions::max_instructions).
  int64_t max_instructions = 0;
  // The task's inputs (by index) that are constants where the task runs (a network's
  // weights, graph::NetworkTask::constant_inputs). On the CPU, a program's first stage
  // that only rearranges one of them (a sketch's weight repacking) is split off and run
  // once before the program's check and timing, as a compiled network runs it once
  // when it is compiled (core/ir/split_prologue.h): its time is not the kernel's.
  std::set<int> constant_inputs;
  // On the CPU, the constant inputs are evicted from the caches before every timed call
  // (TimingOptions::before_call): a network whose weights exceed the last-level cache
  // reads each kernel's weights from memory, where a kernel timed over and over would
  // find them cached (search::NetworkTuneOptions decides).
  bool cold_constants = false;
  // Test hook, run in the worker on each lowered program before compilation (fault
  // injection: a store out of bounds, an endless loop, a wrong value). It is called
  // from every compile thread at once, so it must be thread-safe; it is not serialized
  // here, as a lock held by one program's hook would stall the others' compilation
  // (see testing::one_at_a_time in tests/codegen/fault_hooks.h).
  std::function<LoweredFunc(const LoweredFunc&)> program_hook;
  // The worker keeps the programs it compiled for their next measurements (prepare).
  // Off, every measurement compiles its program again: a program_hook that changes a
  // program from one compilation to the next (a program fast only once, a program
  // wrong after its first measurement) then reaches every measurement.
  bool keep_programs = true;
};

class MeasurePool {
 public:
  // Builds the inputs and the reference outputs (LibTorch's kernel where the operator
  // has one, else the interpreter on the default schedule) and forks the worker.
  MeasurePool(const ops::OpGraph& task, std::vector<sched::Sketch> sketches, MeasureOptions opt = {});
  ~MeasurePool();
  MeasurePool(const MeasurePool&) = delete;
  MeasurePool& operator=(const MeasurePool&) = delete;

  const std::vector<sched::Sketch>& sketches() const { return sketches_; }
  // Measures candidates one at a time (timing needs every core), in order, after
  // compiling them ahead (prepare).
  std::vector<MeasureResult> measure(const std::vector<Candidate>& batch);
  // Lowers and compiles `batch` in the worker on compile_threads threads at once, and
  // keeps the programs there until measure_one asks for them (or until the next
  // prepare, which drops those not asked for). A candidate listed k times is compiled
  // once, for k measurements; and the worker keeps the programs it compiled (the most
  // recently used and the fastest measured), so that a program measured again (a
  // round's best confirmed, a settling contest) is not compiled again
  // (MeasureResult::reused). A program whose compilation runs past the timeout is
  // an error result when it is asked for (the others are compiled ahead again by a new
  // worker); a worker that dies while compiling leaves the batch to be compiled one
  // program at a time.
  void prepare(const std::vector<Candidate>& batch);
  // Measures one candidate: the program prepare compiled, or lowered and compiled now.
  // slow_us > 0 (the llvm target): when its check run and its warm-up call both take
  // longer, those calls are its only timing, one round, the faster of the two
  // (MeasureResult::brief; TimingOptions::slow_us), instead of the rounds of
  // MeasureOptions::timing. The tuner sets it to a multiple of its fastest program's
  // latency (search::TuneOptions::slow_factor).
  MeasureResult measure_one(const Candidate& c, double slow_us = 0);
  // Workers started so far (1 plus one per crash or hang).
  int workers_started() const { return started_; }
  // Programs measured from a prepared batch (compiled ahead) so far.
  int measured_ahead() const { return measured_ahead_; }

 private:
  struct Worker;
  void spawn();
  int stop_worker(bool kill);  // returns the worker's wait status
  [[noreturn]] void worker_main(int in_fd, int out_fd);
  MeasureResult run_in_worker(const Candidate& c, double slow_us = 0);
  int compile_threads() const;
  std::chrono::milliseconds timeout_duration() const;  // opt_.timeout_seconds

  ops::OpGraph task_;
  std::vector<sched::Sketch> sketches_;
  MeasureOptions opt_;
  std::vector<NDArray> inputs_, reference_;
  std::unique_ptr<Worker> worker_;
  int started_ = 0;
  // The prepared batch: each program's slots in the worker, by its request's text (a
  // program measured several times in turn has a slot per measurement, in order); and
  // the programs whose compilation ahead timed out, with their error.
  std::multimap<std::string, int> ahead_;
  std::multimap<std::string, std::string> ahead_failed_;
  int measured_ahead_ = 0;
};

}  // namespace basin::codegen
