#include "bench/machine.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "core/util/host.h"

namespace basin::bench {

std::string cpu_model() { return this_host().cpu(); }

int cores() { return this_host().cores; }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

namespace {

constexpr int64_t kIters = 100'000'000;

// 16 independent accumulators hide the FMA latency; returns flops done.
__attribute__((target("avx512f"))) double fma_avx512(float seed) {
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(seed + i);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t n = 0; n < kIters; ++n)
    for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(a[i], x, y);
  __m512 s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, a[i]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return 2.0 * 16 * 16 * kIters;
}

__attribute__((target("avx2,fma"))) double fma_avx2(float seed) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(seed + i);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t n = 0; n < kIters; ++n)
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], x, y);
  float out[8];
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  _mm256_storeu_ps(out, s);
  volatile float sink = out[0];
  (void)sink;
  return 2.0 * 8 * 12 * kIters;
}

}  // namespace

double measured_peak_gflops() {
  bool avx512 = __builtin_cpu_supports("avx512f");
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx512 && !avx2) return 0;
  int n = cores();
  std::vector<double> flops(n);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> th;
  for (int i = 0; i < n; ++i)
    th.emplace_back([&, i] { flops[i] = avx512 ? fma_avx512(1.0f + i) : fma_avx2(1.0f + i); });
  for (auto& t : th) t.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double total = 0;
  for (double f : flops) total += f;
  return total / s / 1e9;
}

}  // namespace basin::bench
