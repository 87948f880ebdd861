#include "core/util/host.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <iterator>
#include <thread>

#include "core/util/error.h"

namespace basin {

namespace {

// More threads than this is a mistake, not a machine: thread creation fails long
// before (99999 aborted in std::thread).
constexpr int kMaxThreads = 1024;

// The value of the variable `name` when it is a whole number in [lo, hi]; 0 when it is
// unset or anything else.
int whole_number_setting(const char* name, int lo, int hi) {
  const char* s = std::getenv(name);
  if (!s) return 0;
  const std::string v = s;
  if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) return 0;
  const int n = std::stoi(v);
  return n >= lo && n <= hi ? n : 0;
}

// Throws basin::Error naming `name`'s value when it is set but not a whole number in
// [lo, hi]; `what` says what the number counts and what unsetting it gives.
void refuse_bad_setting(const char* name, int lo, int hi, const std::string& what) {
  const char* s = std::getenv(name);
  if (s && whole_number_setting(name, lo, hi) == 0)
    throw Error(std::string(name) + "='" + s + "' is not a number of " + what);
}

// x86's vector instruction sets, narrowest first.
const char* const kX86Isas[] = {"sse", "avx2", "avx512"};

// isa's place in kX86Isas; -1 when it is none of them.
int x86_rank(const std::string& isa) {
  for (int i = 0; i < static_cast<int>(std::size(kX86Isas)); ++i)
    if (isa == kX86Isas[i]) return i;
  return -1;
}

// BASIN_VECTOR_ISA when it names an x86 set no wider than the CPU's; "" when it is
// unset or anything else.
std::string vector_isa_setting() {
  const char* s = std::getenv("BASIN_VECTOR_ISA");
  if (!s) return "";
  const int want = x86_rank(s), have = x86_rank(cpu_vector_isa());
  return want >= 0 && have >= 0 && want <= have ? std::string(s) : "";
}

}  // namespace

int64_t last_level_cache_bytes() {
  int64_t best_level = 0, bytes = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), size(dir + "size");
    int64_t l = 0;
    std::string sz;
    if (!(level >> l) || !(size >> sz) || sz.empty()) continue;
    int64_t unit = 1;
    if (sz.back() == 'K') unit = 1024;
    else if (sz.back() == 'M') unit = 1024 * 1024;
    else if (sz.back() == 'G') unit = int64_t{1} << 30;
    if (unit != 1) sz.pop_back();
    int64_t v = std::atoll(sz.c_str()) * unit;
    if (l > best_level || (l == best_level && v > bytes)) {
      best_level = l;
      bytes = v;
    }
  }
  return bytes;
}

std::string cpu_vector_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
  return "sse";
#elif defined(__aarch64__)
  return "neon";
#else
  return "scalar";
#endif
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return (a >> 5) & 1u;  // CPUID.(EAX=7,ECX=1):EAX[5], AVX512_BF16
#else
  return false;
#endif
}

// AMX-TILE (CPUID.(EAX=7,ECX=0):EDX[24]) and the products of bit `product` of that EDX
// (22: AMX-BF16, 25: AMX-INT8), their state enabled by the OS (XCR0 bits 17 and 18), and
// the permission to use it granted to this process.
bool cpu_has_amx(unsigned product) {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1u) || !((d >> product) & 1u)) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1u)) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if (((lo >> 17) & 3u) != 3u) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  (void)product;
  return false;
#endif
}

bool cpu_has_int8_dot(const std::string& isa) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (isa == "avx512")
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((c >> 11) & 1u);  // CPUID.(EAX=7,ECX=0):ECX[11], AVX512_VNNI
  if (isa == "avx2")
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 4) & 1u);  // CPUID.(EAX=7,ECX=1):EAX[4], AVX-VNNI
  return false;
#else
  (void)isa;
  return false;
#endif
}

VectorFile vector_file(const std::string& isa) {
  if (isa == "avx512") return {32, 64};
  if (isa == "avx2") return {16, 32};
  if (isa == "sse") return {16, 16};
  return {32, 16};
}

HostInfo probe_host() {
  HostInfo h;
  h.cpu_model = "unknown";
  std::ifstream f("/proc/cpuinfo");
  std::string line, family, model;
  // The first processor's fields: the key before the colon, the value after it.
  while (std::getline(f, line) && !line.empty()) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 1);
    key.erase(key.find_last_not_of(" \t") + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "model name") h.cpu_model = value;
    else if (key == "cpu family") family = value;
    else if (key == "model") model = value;
  }
  if (!family.empty() && !model.empty()) h.cpu_id = "family " + family + " model " + model;
  h.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const int n = whole_number_setting("BASIN_NUM_THREADS", 1, kMaxThreads)) h.cores = n;
  h.vector_isa = cpu_vector_isa();
  if (std::string narrower = vector_isa_setting(); !narrower.empty()) h.vector_isa = narrower;
  h.bf16_dot = h.vector_isa == "avx512" && cpu_has_avx512_bf16();
  h.int8_dot = cpu_has_int8_dot(h.vector_isa);
  h.amx_bf16 = h.bf16_dot && cpu_has_amx(22);
  h.amx_int8 = h.vector_isa == "avx512" && h.int8_dot && cpu_has_amx(25);
  return h;
}

std::string HostInfo::cpu() const { return cpu_id.empty() ? cpu_model : cpu_model + " (" + cpu_id + ")"; }

std::string HostInfo::describe() const {
  return cpu() + ", " + std::to_string(cores) + (cores == 1 ? " core, " : " cores, ") + vector_isa;
}

std::string legacy_host_description(const std::string& machine) {
  const size_t open = machine.find(" (family ");
  if (open == std::string::npos) return machine;
  const size_t close = machine.find(')', open);
  if (close == std::string::npos) return machine;
  return machine.substr(0, open) + machine.substr(close + 1);
}

bool same_host(const std::string& recorded, const std::string& machine) {
  return recorded.empty() || recorded == machine || recorded == legacy_host_description(machine);
}

void check_settings() {
  refuse_bad_setting(
      "BASIN_NUM_THREADS", 1, kMaxThreads,
      "threads (a whole number from 1 to " + std::to_string(kMaxThreads) + "; unset it to use every core)");
  refuse_bad_setting("BASIN_PARALLEL_CHUNKS", 1, kMaxParallelChunks,
                     "chunks per thread (a whole number from 1 to " + std::to_string(kMaxParallelChunks) +
                         "; unset it for " + std::to_string(kDefaultParallelChunks) + ")");
  const char* isa = std::getenv("BASIN_VECTOR_ISA");
  if (isa && vector_isa_setting().empty()) {
    const std::string have = cpu_vector_isa();
    throw Error(std::string("BASIN_VECTOR_ISA='") + isa + "' is not " +
                (x86_rank(have) < 0
                     ? "available: only an x86 CPU's vector instructions can be narrowed, and this CPU's are " + have
                     : "a vector instruction set this CPU has (avx512, avx2 or sse, no wider than its own, " + have +
                           "; unset it for " + have + ")"));
  }
  refuse_bad_setting("BASIN_PLUGIN_TIMEOUT", 1, 86400,
                     "seconds a plug-in's call may take (a whole number from 1 to 86400; unset it for 120)");
  if (winograd_setting() < 0)
    throw Error(std::string("BASIN_WINOGRAD='") + std::getenv("BASIN_WINOGRAD") +
                "' is not a Winograd setting (auto, the default; off; 2 or 4, the output tile)");
  if (blocked_layout_setting() < 0)
    throw Error(std::string("BASIN_LAYOUT='") + std::getenv("BASIN_LAYOUT") +
                "' is not a layout plan (nchwc, the default, or nchw)");
}

int plugin_timeout_seconds() {
  const int n = whole_number_setting("BASIN_PLUGIN_TIMEOUT", 1, 86400);
  return n > 0 ? n : 120;
}

int winograd_setting() {
  const char* s = std::getenv("BASIN_WINOGRAD");
  if (!s || std::string(s) == "auto") return 1;
  const std::string v = s;
  return v == "off" ? 0 : v == "2" ? 2 : v == "4" ? 4 : -1;
}

int blocked_layout_setting() {
  const char* s = std::getenv("BASIN_LAYOUT");
  if (!s || std::string(s) == "nchwc") return 1;
  return std::string(s) == "nchw" ? 0 : -1;
}

int parallel_chunks_setting() {
  const int n = whole_number_setting("BASIN_PARALLEL_CHUNKS", 1, kMaxParallelChunks);
  return n > 0 ? n : kDefaultParallelChunks;
}

const HostInfo& this_host() {
  static const HostInfo h = probe_host();
  return h;
}

const std::string& host_description() {
  static const std::string d = this_host().describe();
  return d;
}

namespace {
std::string (*g_gpu_describer)() = nullptr;
}  // namespace

void set_gpu_describer(std::string (*describe)()) { g_gpu_describer = describe; }

const std::string& machine_description(const std::string& target) {
  if (target != "cuda") return host_description();
  static const std::string gpu = g_gpu_describer ? g_gpu_describer() : std::string();
  return gpu;
}

}  // namespace basin
