// What the machine is made of, as numbers: the description an estimator reads beside a
// program's features so that one model trained on several machines' measurements can
// predict for another (docs/estimators.md, "The machine's description"). basin measures
// it once per machine (HostInfo::describe(): the CPU, its cores and vector set) and keeps
// it in its cache; records files store the description of every machine whose records
// they hold (search::RecordStore::machines).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace basin {

// The calling thread's CPU time so far (CLOCK_THREAD_CPUTIME_ID): unlike wall time, it
// does not grow while another thread holds its core.
double thread_cpu_seconds();
// The least share of its wall time a thread that never waits spends on a CPU on a quiet
// machine: the kernel's own threads take a few percent (DAMON's sampling thread took 4%
// of one core on the 2-core guests); other work on the cores takes time slices. Below
// it, a measurement ran beside other work (busy_measurement, codegen::disturbed_timing).
inline constexpr double kQuietShare = 0.9;

struct Hardware {
  // The version of this description's fields and of how they are measured: a cached
  // description of another version is measured again.
  static constexpr int kVersion = 1;
  std::string host;  // HostInfo::describe() of the machine it describes
  std::string vector_isa;
  int vector_bits = 0;       // the widest vector register's bits (HostInfo::vector_isa)
  int vector_registers = 0;  // how many there are (vector_file)
  // Data cache sizes as the kernel's sysfs lists them for CPU 0 (0: unknown). Under a
  // hypervisor they are what the guest is told.
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
  int cores = 1;  // the threads kernels run on (HostInfo::cores)
  // Measured: independent vector FMAs on `cores` threads, and a read stream over a
  // buffer four times the last-level cache (at least 64 MiB) on `cores` threads, the
  // best of three passes.
  double peak_gflops = 0;
  double bandwidth_gbs = 0;
  // The machine was busy while measured (its threads together reached less than 3/4 of
  // their number times one thread's peak, three times): the figures are low, and
  // this_hardware() measures again in the next process. In the JSON only when true.
  bool busy = false;
  // The least share of its wall time that a thread of the peak's measurement ran on a
  // CPU (its CPU time over its wall time): below kQuietShare the threads were preempted by
  // other work, which slows one thread and several alike (busy). -1: a description
  // measured before this was recorded, which this_hardware() measures again.
  double threads_on_cpu = -1;

  std::string to_json() const;
  // Throws basin::Error on anything but a description of this version.
  static Hardware from_json(const std::string& text);

  // The numbers, in the order of hardware_feature_names() (the exports' columns).
  std::vector<double> numbers() const;
  // The description as estimator input: log2(1 + x) of each of numbers(), like the
  // program features.
  std::vector<float> features() const;
};

// The names of Hardware::features(): vector_bits, vector_registers, l1d_bytes, l2_bytes,
// l3_bytes, cores, peak_gflops, bandwidth_gbs.
const std::vector<std::string>& hardware_feature_names();

// Whether a peak measured on `threads` threads together (`all_threads` GFLOP/s) says the
// machine was busy: less than 3/4 of `threads` times one thread's peak (a neighbour on
// some of the cores), or its threads on a CPU for less than kQuietShare of the time (`on_cpu`:
// the machine's every core shared, which slows one thread as much as all of them).
bool busy_measurement(double all_threads, double one_thread, int threads, double on_cpu = 1);
// Measures this machine now (about half a second; run it while nothing else runs). One
// thread's peak is measured too: on a machine whose other cores are busy (tests run two
// at a time), the threads together fall short of their number times it, and the
// measurement is tried again, up to three times, then returned with `busy` set.
Hardware measure_hardware();
// Whether a description kept in the cache stands for this machine: of this host, not
// measured busy, and measured with its threads' time on a CPU checked.
bool kept_description_stands(const Hardware& kept);
// This machine's description: read from basin's cache (hardware_cache_path()), else
// measured and saved there (a description measured busy is measured again); once per
// process.
const Hardware& this_hardware();
// Where this machine's description is kept: cache_dir()/machines/SLUG.json.
std::string hardware_cache_path();
// Measures this machine now and saves the result where this_hardware() reads it (a
// failure to save is an error naming the file); `basin machine --measure`.
Hardware remeasure_hardware();

// GFLOP/s of independent vector FMAs on `threads` threads, `iterations` steps of 16
// (AVX-512) or 12 (AVX2) vector FMAs each, the best of `passes` (a shared host's
// neighbours slow some; a kernel timed in a quiet moment must not exceed the peak); 0 on
// a CPU with neither.
double measure_peak_gflops(int threads, int64_t iterations = 10'000'000, int passes = 5);
// The same, with the least share of the fastest pass's wall time that one of its
// threads ran on a CPU (Hardware::threads_on_cpu).
struct PeakMeasurement {
  double gflops = 0;
  double on_cpu = 1;
};
PeakMeasurement measure_peak(int threads, int64_t iterations = 10'000'000, int passes = 5);
// GB/s of `threads` threads reading a `bytes` buffer (the best of `passes`).
double measure_read_bandwidth_gbs(int threads, int64_t bytes, int passes = 3);
// The data cache of `level` (1: the L1 data cache) of CPU 0, in bytes; 0 where sysfs
// lists none.
int64_t data_cache_bytes(int level);
// The last-level cache this process finds its data in again, in bytes, measured once
// per machine (about half a second; kept beside the machine's description, measured
// again by remeasure_hardware): the largest buffer, doubling from 1 MiB, that one
// thread re-reads at least 1.25 times as fast as one beyond the reported last-level
// cache (at most 256 MiB), never more than the size reported (last_level_cache_bytes; 32
// MiB where unknown); the reported size when no buffer reads that much faster (all of
// them in the cache, or none). A guest is told its host's cache: an Intel VM that
// reported 480 MiB re-read 16 MiB at cache speed and 32 MiB at memory speed.
int64_t effective_cache_bytes();

// basin's cache: BASIN_CACHE_DIR, else $XDG_CACHE_HOME/basin, else $HOME/.cache/basin
// (created when something is written there).
std::string cache_dir();
// `text` as a file or directory name: letters, digits, '.' and '-' kept, every other
// run of characters one '_' ("AMD EPYC (family 25 model 1), 2 cores, avx2" becomes
// "AMD_EPYC_family_25_model_1_2_cores_avx2").
std::string file_slug(const std::string& text);

}  // namespace basin
