#include "core/util/hardware.h"
#include "core/util/io.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "core/util/error.h"
#include "core/util/host.h"
#include "core/util/output_file.h"

namespace basin {

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

namespace {

using Clock = std::chrono::steady_clock;

#if defined(__x86_64__)
// 16 independent accumulators hide the FMA latency; returns the flops done.
__attribute__((target("avx512f"))) double fma_avx512(float seed, int64_t iterations) {
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t n = 0; n < iterations; ++n)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
  __m512 s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, a[i]);
  float out[16];
  _mm512_storeu_ps(out, s);  // not _mm512_reduce_add_ps, whose GCC 12 header warns
  volatile float sink = out[0];
  (void)sink;
  return 2.0 * 16 * 16 * static_cast<double>(iterations);
}

__attribute__((target("avx2,fma"))) double fma_avx2(float seed, int64_t iterations) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t n = 0; n < iterations; ++n)
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
  float out[8];
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  _mm256_storeu_ps(out, s);
  volatile float sink = out[0];
  (void)sink;
  return 2.0 * 8 * 12 * static_cast<double>(iterations);
}
#endif

// Runs fn(i) on `threads` threads at once: the seconds until the last ends, and the
// least share of its own wall time that one thread ran on a CPU.
struct Timed {
  double seconds = 0;
  double on_cpu = 1;
};

template <class F>
Timed timed_on_threads(int threads, F fn) {
  std::vector<std::thread> th;
  std::vector<double> share(static_cast<size_t>(threads), 1.0);
  const auto t0 = Clock::now();
  for (int i = 0; i < threads; ++i)
    th.emplace_back([&fn, &share, i] {
      const auto w0 = Clock::now();
      const double c0 = thread_cpu_seconds();
      fn(i);
      const double cpu = thread_cpu_seconds() - c0;
      const double wall = std::chrono::duration<double>(Clock::now() - w0).count();
      share[static_cast<size_t>(i)] = wall > 0 ? std::min(1.0, cpu / wall) : 1.0;
    });
  for (auto& t : th) t.join();
  return {std::chrono::duration<double>(Clock::now() - t0).count(), *std::min_element(share.begin(), share.end())};
}

double log2p1(double x) { return std::log2(1.0 + std::max(0.0, x)); }

}  // namespace

double measure_peak_gflops(int threads, int64_t iterations, int passes) {
  return measure_peak(threads, iterations, passes).gflops;
}

PeakMeasurement measure_peak(int threads, int64_t iterations, int passes) {
  PeakMeasurement best;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx512 && !avx2) return best;
  threads = std::max(1, threads);
  for (int p = 0; p < std::max(1, passes); ++p) {
    std::vector<double> flops(static_cast<size_t>(threads));
    const Timed t = timed_on_threads(threads, [&](int i) {
      const float seed = 1.0f + static_cast<float>(i);
      flops[static_cast<size_t>(i)] = avx512 ? fma_avx512(seed, iterations) : fma_avx2(seed, iterations);
    });
    double total = 0;
    for (double f : flops) total += f;
    if (t.seconds > 0 && total / t.seconds / 1e9 > best.gflops) best = {total / t.seconds / 1e9, t.on_cpu};
  }
#else
  (void)threads;
  (void)iterations;
  (void)passes;
#endif
  return best;
}

namespace {

int64_t measure_effective_cache_bytes() {
  const int64_t reported = last_level_cache_bytes() > 0 ? last_level_cache_bytes() : int64_t{32} << 20;
  const int64_t far = std::min<int64_t>(std::max<int64_t>(4 * reported, int64_t{64} << 20), int64_t{256} << 20);
  const double far_gbs = measure_read_bandwidth_gbs(1, far);
  int64_t found = 0;
  for (int64_t size = int64_t{1} << 20; size < far && size <= reported; size *= 2) {
    if (measure_read_bandwidth_gbs(1, size) < 1.25 * far_gbs) break;
    found = size;
  }
  // No buffer faster than the far one: every size in the cache, or none; the report stands.
  return found > 0 ? found : reported;
}

// Where the measured cache is kept beside the machine's description: its first
// measurement stays, so that which networks are timed cold does not move between runs.
std::string effective_cache_path() {
  std::string p = hardware_cache_path();
  if (p.size() > 5 && p.compare(p.size() - 5, 5, ".json") == 0) p.resize(p.size() - 5);
  return p + ".cache.json";
}

void save_effective_cache(int64_t bytes) {
  std::filesystem::create_directories(cache_dir() + "/machines");
  const nlohmann::json j{{"host", this_host().describe()}, {"effective_cache_bytes", bytes}};
  write_output_file(effective_cache_path(), [&](OutputFile& out) { out.write(j.dump() + "\n"); });
}

// What basin's cache keeps at `path` for this machine, `read` from the file's text
// (nothing: of another machine, or not to be kept), else `measure()` and `save` it there.
// A damaged file is measured again; a cache that cannot be written costs a measurement
// per process.
template <typename T>
T kept_or_measured(const std::string& path, const std::function<std::optional<T>(const std::string&)>& read,
                   const std::function<T()>& measure, const std::function<void(const T&)>& save) {
  try {
    std::ifstream f;
    if (regular_file(path)) f.open(path);
    if (f) {
      std::stringstream text;
      text << f.rdbuf();
      if (std::optional<T> kept = read(text.str())) return *kept;
    }
  } catch (const std::exception&) {
    // Damaged, or of another version: measured again below.
  }
  T fresh = measure();
  try {
    save(fresh);
  } catch (const std::exception&) {
  }
  return fresh;
}

}  // namespace

int64_t effective_cache_bytes() {
  static const int64_t bytes = kept_or_measured<int64_t>(
      effective_cache_path(),
      [](const std::string& text) -> std::optional<int64_t> {
        const nlohmann::json j = nlohmann::json::parse(text);
        const int64_t b = j.at("effective_cache_bytes").get<int64_t>();
        if (j.at("host").get<std::string>() != this_host().describe() || b < (int64_t{1} << 20)) return std::nullopt;
        return b;
      },
      measure_effective_cache_bytes, save_effective_cache);
  return bytes;
}

double measure_read_bandwidth_gbs(int threads, int64_t bytes, int passes) {
  threads = std::max(1, threads);
  const size_t words = static_cast<size_t>(std::max<int64_t>(bytes, 1 << 20)) / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[words]);
  const size_t per = (words + static_cast<size_t>(threads) - 1) / static_cast<size_t>(threads);
  auto range = [&](int i) {
    const size_t lo = std::min(words, per * static_cast<size_t>(i));
    return std::pair<size_t, size_t>{lo, std::min(words, lo + per)};
  };
  // Each thread touches its own part first, so that its pages are mapped where it runs.
  timed_on_threads(threads, [&](int i) {
    auto [lo, hi] = range(i);
    for (size_t k = lo; k < hi; ++k) buf[k] = k;
  });
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  double best = 0;
  for (int p = 0; p < std::max(1, passes); ++p) {
    const double s = timed_on_threads(threads, [&](int i) {
                       auto [lo, hi] = range(i);
                       // Four independent sums, so that the loads, not an add chain, set the pace.
                       uint64_t a = 0, b = 0, c = 0, d = 0;
                       size_t k = lo;
                       for (; k + 4 <= hi; k += 4) {
                         a += buf[k];
                         b += buf[k + 1];
                         c += buf[k + 2];
                         d += buf[k + 3];
                       }
                       for (; k < hi; ++k) a += buf[k];
                       sums[static_cast<size_t>(i)] = a + b + c + d;
                     }).seconds;
    if (s > 0) best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / s / 1e9);
  }
  volatile uint64_t sink = 0;
  for (uint64_t v : sums) sink = sink + v;
  (void)sink;
  return best;
}

int64_t data_cache_bytes(int level) {
  int64_t bytes = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(dir + "level"), size(dir + "size"), type(dir + "type");
    int l = 0;
    std::string sz, kind;
    if (!(lv >> l) || l != level || !(size >> sz) || sz.empty()) continue;
    type >> kind;
    if (kind == "Instruction") continue;
    int64_t unit = 1;
    if (sz.back() == 'K') unit = 1024;
    else if (sz.back() == 'M') unit = 1024 * 1024;
    else if (sz.back() == 'G') unit = int64_t{1} << 30;
    if (unit != 1) sz.pop_back();
    bytes = std::max(bytes, static_cast<int64_t>(std::atoll(sz.c_str())) * unit);
  }
  return bytes;
}

bool busy_measurement(double all_threads, double one_thread, int threads, double on_cpu) {
  return (all_threads > 0 && on_cpu < kQuietShare) ||
         (threads > 1 && one_thread > 0 && all_threads < 0.75 * threads * one_thread);
}

Hardware measure_hardware() {
  const HostInfo& h = this_host();
  Hardware hw;
  hw.host = h.describe();
  hw.vector_isa = h.vector_isa;
  const VectorFile vf = vector_file(h.vector_isa);
  hw.vector_bits = vf.bytes * 8;
  hw.vector_registers = vf.registers;
  hw.l1d_bytes = data_cache_bytes(1);
  hw.l2_bytes = data_cache_bytes(2);
  hw.l3_bytes = data_cache_bytes(3);
  hw.cores = h.cores;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const PeakMeasurement all = measure_peak(h.cores);
    hw.peak_gflops = all.gflops;
    hw.threads_on_cpu = all.on_cpu;
    const double one = h.cores < 2 ? 0 : measure_peak_gflops(1);
    hw.busy = busy_measurement(hw.peak_gflops, one, h.cores, all.on_cpu);
    if (!hw.busy) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const int64_t llc = std::max({hw.l1d_bytes, hw.l2_bytes, hw.l3_bytes});
  hw.bandwidth_gbs = measure_read_bandwidth_gbs(
      h.cores, std::min<int64_t>(std::max<int64_t>(4 * llc, int64_t{64} << 20), int64_t{1} << 30));
  return hw;
}

std::string Hardware::to_json() const {
  nlohmann::json j{{"version", kVersion},
                   {"host", host},
                   {"vector_isa", vector_isa},
                   {"vector_bits", vector_bits},
                   {"vector_registers", vector_registers},
                   {"l1d_bytes", l1d_bytes},
                   {"l2_bytes", l2_bytes},
                   {"l3_bytes", l3_bytes},
                   {"cores", cores},
                   {"peak_gflops", peak_gflops},
                   {"bandwidth_gbs", bandwidth_gbs}};
  if (busy) j["busy"] = true;
  if (threads_on_cpu >= 0) j["threads_on_cpu"] = threads_on_cpu;
  return j.dump();
}

Hardware Hardware::from_json(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("version").get<int>() != kVersion)
      throw Error("a machine description of version " + j.at("version").dump() + ", this basin reads " +
                  std::to_string(kVersion));
    Hardware hw;
    hw.host = j.at("host").get<std::string>();
    hw.vector_isa = j.at("vector_isa").get<std::string>();
    hw.vector_bits = j.at("vector_bits").get<int>();
    hw.vector_registers = j.at("vector_registers").get<int>();
    hw.l1d_bytes = j.at("l1d_bytes").get<int64_t>();
    hw.l2_bytes = j.at("l2_bytes").get<int64_t>();
    hw.l3_bytes = j.at("l3_bytes").get<int64_t>();
    hw.cores = j.at("cores").get<int>();
    hw.peak_gflops = j.at("peak_gflops").get<double>();
    hw.bandwidth_gbs = j.at("bandwidth_gbs").get<double>();
    hw.busy = j.value("busy", false);
    hw.threads_on_cpu = j.value("threads_on_cpu", -1.0);
    if (hw.host.empty() || hw.vector_bits < 0 || hw.vector_registers < 0 || hw.l1d_bytes < 0 || hw.l2_bytes < 0 ||
        hw.l3_bytes < 0 || hw.cores < 1 || !(hw.peak_gflops >= 0) || !(hw.bandwidth_gbs >= 0))
      throw Error("a machine description with a missing host or a negative number");
    return hw;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not a machine description: ") + e.what());
  }
}

const std::vector<std::string>& hardware_feature_names() {
  static const std::vector<std::string> names = {
      "vector_bits", "vector_registers", "l1d_bytes", "l2_bytes", "l3_bytes", "cores", "peak_gflops", "bandwidth_gbs"};
  return names;
}

std::vector<double> Hardware::numbers() const {
  return {static_cast<double>(vector_bits),
          static_cast<double>(vector_registers),
          static_cast<double>(l1d_bytes),
          static_cast<double>(l2_bytes),
          static_cast<double>(l3_bytes),
          static_cast<double>(cores),
          peak_gflops,
          bandwidth_gbs};
}

std::vector<float> Hardware::features() const {
  std::vector<float> f;
  for (double x : numbers()) f.push_back(static_cast<float>(log2p1(x)));
  return f;
}

std::string cache_dir() {
  if (const char* d = std::getenv("BASIN_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/basin";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/basin";
  return std::filesystem::temp_directory_path().string() + "/basin-cache";
}

std::string file_slug(const std::string& text) {
  std::string s;
  for (char c : text) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    if (keep) s += c;
    else if (!s.empty() && s.back() != '_') s += '_';
  }
  while (!s.empty() && s.back() == '_') s.pop_back();
  return s.empty() ? "unknown" : s;
}

std::string hardware_cache_path() { return cache_dir() + "/machines/" + file_slug(this_host().describe()) + ".json"; }

namespace {
void save_hardware(const Hardware& hw) {
  std::filesystem::create_directories(cache_dir() + "/machines");
  write_output_file(hardware_cache_path(), [&](OutputFile& out) { out.write(hw.to_json() + "\n"); });
}
}  // namespace

Hardware remeasure_hardware() {
  Hardware hw = measure_hardware();
  try {
    save_hardware(hw);
    save_effective_cache(measure_effective_cache_bytes());
  } catch (const std::filesystem::filesystem_error& e) {
    throw Error("cannot keep the machine's description in " + hardware_cache_path() + ": " + e.what());
  }
  return hw;
}

bool kept_description_stands(const Hardware& kept) {
  // A description measured busy is measured again, and so is one measured before its
  // threads' time on a CPU was checked (every core shared passed for quiet then).
  return kept.host == this_host().describe() && !kept.busy && kept.threads_on_cpu >= 0;
}

const Hardware& this_hardware() {
  static const Hardware hw = kept_or_measured<Hardware>(
      hardware_cache_path(),
      [](const std::string& text) -> std::optional<Hardware> {
        Hardware cached = Hardware::from_json(text);
        if (!kept_description_stands(cached)) return std::nullopt;
        return cached;
      },
      measure_hardware, save_hardware);
  return hw;
}

}  // namespace basin
