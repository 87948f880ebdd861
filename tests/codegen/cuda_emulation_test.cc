// The printed CUDA kernels run as real concurrent threads on the CPU, without a GPU:
// the kernel text print_cuda writes, compiled by the host C++ compiler under a small
// SIMT emulation (each CUDA thread a std::thread, __syncthreads a std::barrier,
// __shared__ arrays shared by the block's threads, registers each thread's own), then
// compared with the loop-IR interpreter running the same program. The interpreter runs
// a block's threads one after another, phase by phase; here they interleave freely, so
// a missing barrier, a per-thread buffer shared by mistake or a wrong index in the
// printer shows up as a mismatch. This checks the CUDA printer and the phase model
// (docs/gpu.md) on every GPU rule; a GPU then only adds its compiler and hardware.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <random>

#include "codegen/c_printer.h"
#include "codegen/op_check.h"
#include "core/ops/registry.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "tests/ops/op_cases.h"
#include "tests/tools/run_basin.h"

namespace basin {
namespace {

const char* kEmulation = R"(#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>
struct basin_dim3 { unsigned x = 0, y = 0, z = 0; };
static thread_local basin_dim3 threadIdx, blockIdx;
static std::barrier<>* basin_block_barrier = nullptr;
static inline void __syncthreads() { basin_block_barrier->arrive_and_wait(); }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
// The tensor cores: a warp's 32 threads meet in the mma (each deposits its fragments,
// waits for the others, computes its own 4 elements of C in the interpreter's order:
// q = 0..7 added one product at a time, then waits until every lane has read).
#define BASIN_EMULATED_MMA
struct basin_warp { std::barrier<> bar{32}; float a[32][8], b[32][4]; double x[32]; };
static basin_warp* basin_warps = nullptr;
static inline float basin_tf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t u; std::memcpy(&u, &x, 4); u = (u + 0x1000u) & 0xffffe000u; std::memcpy(&x, &u, 4); return x;
}
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float basin_fp16(float x) { return (float)(_Float16)x; }
static inline float basin_bf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t u; std::memcpy(&u, &x, 4); u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; std::memcpy(&x, &u, 4);
  return x;
}
// m16n8k16 (FP16 and BF16 inputs, already rounded): a_i = A[g + 8((i/2)%2)][2c + i%2 + 8(i/4)],
// b_i = B[2c + i%2 + 8(i/2)][g]; the products added in the interpreter's order.
static inline void basin_mma_m16n8k16(float& c0, float& c1, float& c2, float& c3, const float* a, const float* b) {
  basin_warp& w = basin_warps[threadIdx.x / 32];
  const unsigned l = threadIdx.x % 32;
  for (int i = 0; i < 8; ++i) w.a[l][i] = a[i];
  for (int i = 0; i < 4; ++i) w.b[l][i] = b[i];
  w.bar.arrive_and_wait();
  float* c[4] = {&c0, &c1, &c2, &c3};
  for (unsigned r = 0; r < 4; ++r) {
    const unsigned row = l / 4 + 8 * (r / 2), col = 2 * (l % 4) + r % 2;
    float s = *c[r];
    for (unsigned q = 0; q < 16; ++q)
      s = s + w.a[4 * (row % 8) + (q % 8) / 2][q % 2 + 2 * (row / 8) + 4 * (q / 8)] *
                  w.b[4 * col + (q % 8) / 2][q % 2 + 2 * (q / 8)];
    *c[r] = s;
  }
  w.bar.arrive_and_wait();
}
#define BASIN_EMULATED_K16(T)                                                                                     \
  static inline void basin_mma_m16n8k16_##T(float& c0, float& c1, float& c2, float& c3, float a0, float a1,       \
                                            float a2, float a3, float a4, float a5, float a6, float a7, float b0, \
                                            float b1, float b2, float b3) {                                       \
    const float a[8] = {a0, a1, a2, a3, a4, a5, a6, a7}, b[4] = {b0, b1, b2, b3};                                 \
    basin_mma_m16n8k16(c0, c1, c2, c3, a, b);                                                                     \
  }
BASIN_EMULATED_K16(fp16)
BASIN_EMULATED_K16(bf16)
static inline void basin_mma_m16n8k8_tf32(float& c0, float& c1, float& c2, float& c3, float a0, float a1, float a2,
                                          float a3, float b0, float b1) {
  basin_warp& w = basin_warps[threadIdx.x / 32];
  const unsigned l = threadIdx.x % 32;
  w.a[l][0] = a0; w.a[l][1] = a1; w.a[l][2] = a2; w.a[l][3] = a3; w.b[l][0] = b0; w.b[l][1] = b1;
  w.bar.arrive_and_wait();
  float* c[4] = {&c0, &c1, &c2, &c3};
  for (unsigned r = 0; r < 4; ++r) {
    const unsigned row = l / 4 + 8 * (r / 2), col = 2 * (l % 4) + r % 2;
    float s = *c[r];
    for (unsigned q = 0; q < 8; ++q)  // a_i: A[g + 8(i%2)][tq + 4(i/2)]; b_i: B[tq + 4i][g]
      s = s + w.a[4 * (row % 8) + q % 4][2 * (q / 4) + row / 8] * w.b[4 * col + q % 4][q / 4];
    *c[r] = s;
  }
  w.bar.arrive_and_wait();
}
// Warp shuffles: each lane deposits its value, waits for the others, reads its source
// lane's (its own past the warp's end), then waits until every lane has read.
template <typename T>
static inline T basin_exchange(T v, unsigned from) {
  basin_warp& w = basin_warps[threadIdx.x / 32];
  w.x[threadIdx.x % 32] = (double)v;
  w.bar.arrive_and_wait();
  const T r = (T)w.x[from];
  w.bar.arrive_and_wait();
  return r;
}
template <typename T>
static inline T __shfl_down_sync(unsigned, T v, unsigned d) {
  const unsigned l = threadIdx.x % 32;
  return basin_exchange(v, l + d < 32 ? l + d : l);
}
template <typename T>
static inline T __shfl_sync(unsigned, T v, int lane) { return basin_exchange(v, (unsigned)lane); }
template <typename T>
static inline T __shfl_xor_sync(unsigned, T v, int m) { return basin_exchange(v, (threadIdx.x % 32) ^ (unsigned)m); }
// The memory path: 128-bit and 64-bit accesses (checked aligned, as the GPU requires),
// and cp.async copies deferred until a wait retires their group, so that a kernel
// reading a stage before waiting for it reads stale data.
#define __align__(n) __attribute__((aligned(n)))
struct alignas(16) float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct alignas(8) float2 { float x, y; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline void basin_aligned(const void* p, unsigned n) {
  if (reinterpret_cast<uintptr_t>(p) % n != 0) { std::fprintf(stderr, "misaligned %u-byte access\n", n); std::abort(); }
}
static inline float4 basin_ld4(const float* p) { basin_aligned(p, 16); float4 v; std::memcpy(&v, p, 16); return v; }
static inline void basin_st4(float* p, float4 v) { basin_aligned(p, 16); std::memcpy(p, &v, 16); }
static inline void basin_st2(float* p, float2 v) { basin_aligned(p, 8); std::memcpy(p, &v, 8); }
struct basin_copy { float* dst; const float* src; unsigned bytes; bool full; };
static thread_local std::vector<std::vector<basin_copy>> basin_groups;
static thread_local std::vector<basin_copy> basin_open_group;
static inline void basin_cp_async4(float* d, const float* s, bool full) {
  basin_aligned(d, 4); basin_open_group.push_back({d, s, 4, full});
}
static inline void basin_cp_async16(float* d, const float* s, bool full) {
  basin_aligned(d, 16); if (full) basin_aligned(s, 16); basin_open_group.push_back({d, s, 16, full});
}
static inline void basin_cp_async_commit() { basin_groups.push_back(std::move(basin_open_group)); basin_open_group.clear(); }
template <int N>
static inline void basin_cp_async_wait() {
  while (basin_groups.size() > (size_t)N) {
    for (const basin_copy& c : basin_groups.front())
      if (c.full) std::memcpy(c.dst, c.src, c.bytes); else std::memset(c.dst, 0, c.bytes);
    basin_groups.erase(basin_groups.begin());
  }
}
template <typename... P, size_t... I>
void basin_call_with(void (*k)(P...), void** a, std::index_sequence<I...>) { k(static_cast<P>(a[I])...); }
template <typename... P>
void basin_call(void (*k)(P...), void** a) { basin_call_with(k, a, std::index_sequence_for<P...>{}); }
)";

// A launcher `basin_launch_<f.name>` for f's kernel: the grid block by block, each block
// as blockDim threads; the arguments cast to the kernel's own parameter types.
std::string launcher(const LoweredFunc& f) {
  const codegen::GpuLaunch l = codegen::gpu_launch(f);
  const std::string k = codegen::cuda_kernel_name(f);
  return "extern \"C\" void basin_launch_" + k +
         "(void** args) {\n"
         "  std::barrier<> bar(" +
         std::to_string(l.block[0]) +
         ");\n"
         "  basin_block_barrier = &bar;\n"
         "  std::vector<basin_warp> warps(" +
         std::to_string((l.block[0] + 31) / 32) +
         ");\n"
         "  basin_warps = warps.data();\n"
         "  for (unsigned b = 0; b < " +
         std::to_string(l.grid[0]) +
         "u; ++b) {\n"
         "    std::vector<std::thread> ts;\n"
         "    for (unsigned t = 0; t < " +
         std::to_string(l.block[0]) +
         "u; ++t)\n"
         "      ts.emplace_back([=] { blockIdx.x = b; threadIdx.x = t; basin_call(" +
         k +
         ", args); });\n"
         "    for (auto& th : ts) th.join();\n"
         "  }\n}\n";
}

// The kernels' translation unit for the host compiler: print_cuda_unit's text without
// its integer typedefs (the host has <cstdint>), under the emulation, with launchers.
std::string emulated(const std::vector<LoweredFunc>& fs) {
  std::string cu = codegen::print_cuda_unit(fs), src = kEmulation;
  size_t at = 0;
  while (at < cu.size()) {
    size_t nl = cu.find('\n', at);
    std::string line = cu.substr(at, nl == std::string::npos ? std::string::npos : nl - at + 1);
    if (line.rfind("typedef ", 0) != 0) src += line;
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  for (const LoweredFunc& f : fs) src += launcher(f);
  return src;
}

class CudaEmulation : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = "/tmp/basin_simt_" + std::to_string(::getpid()); }
  void TearDown() override { (void)testing::capture("rm -rf " + dir_); }

  // Runs each of fs (distinct names) under the emulation, one compilation for all; the
  // outputs of each.
  std::vector<std::vector<NDArray>> run(const std::vector<LoweredFunc>& fs, const ops::OpGraph& g,
                                        std::vector<NDArray>& in) {
    // A fresh path each time: a library with thread-local data may stay loaded after
    // dlclose, and dlopen of the same path would return it.
    static int n = 0;
    std::string base = dir_ + "/k" + std::to_string(n++);
    (void)testing::capture("mkdir -p " + dir_);
    std::ofstream(base + ".cc") << emulated(fs);
    auto r = testing::capture("c++ -std=c++20 -O1 -w -shared -fPIC -o " + base + ".so " + base + ".cc -pthread 2>&1");
    if (r.code != 0) throw Error("the emulated kernels do not compile: " + r.out);
    void* lib = dlopen((base + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw Error(std::string("dlopen: ") + dlerror());
    std::vector<std::vector<NDArray>> all;
    for (const LoweredFunc& f : fs) {
      auto launch =
          reinterpret_cast<void (*)(void**)>(dlsym(lib, ("basin_launch_" + codegen::cuda_kernel_name(f)).c_str()));
      if (!launch) throw Error("no launcher for " + f.name);
      std::vector<NDArray> out = codegen::fresh_outputs(g);
      std::vector<void*> args;
      for (NDArray* a : codegen::program_args(in, out)) args.push_back(a->data());
      launch(args.data());
      all.push_back(std::move(out));
    }
    dlclose(lib);
    return all;
  }

  // The default and n - 1 random configurations of s (each with at most a few thousand
  // threads in all: each is an OS thread here), run under the emulation in one
  // compilation and compared with the interpreter; how many ran.
  int check_configs(const ops::OpGraph& g, const sched::Sketch& s, std::vector<NDArray>& in, int n,
                    std::mt19937_64& rng, const std::string& label) {
    std::vector<LoweredFunc> fs;
    std::vector<std::string> configs;
    std::vector<std::vector<NDArray>> want;
    for (int i = 0; i < n; ++i) {
      sched::Config cfg;
      LoweredFunc f;
      for (int attempt = 0; attempt < 100; ++attempt) {
        cfg = i == 0 ? sched::default_config(s) : sched::random_config(s, rng);
        f = sched::lower_config(g, s, cfg);
        codegen::GpuLaunch l = codegen::gpu_launch(f);
        if (l.grid[0] * l.block[0] <= 4096) break;
      }
      f.name = "k" + std::to_string(i);
      want.push_back(codegen::interpret_outputs(f, g, in));
      fs.push_back(f);
      configs.push_back(sched::config_to_json(s, cfg));
    }
    std::vector<std::vector<NDArray>> got = run(fs, g, in);
    for (size_t i = 0; i < fs.size(); ++i)
      for (size_t o = 0; o < want[i].size(); ++o)
        EXPECT_LE(compare_arrays(got[i][o], want[i][o]).max_rel, 1e-5) << label << " " << configs[i] << "\n"
                                                                       << codegen::print_cuda(fs[i]);
    return static_cast<int>(fs.size());
  }

  std::string dir_;
};

TEST_F(CudaEmulation, PrintedKernelsRunAsConcurrentThreadsAndMatchTheInterpreter) {
  const std::vector<std::pair<std::string, std::string>> suite = {
      {"dense", "M=24 K=40 N=32"},
      {"conv2d", "in_channels=4 out_channels=8 height=10 width=10 kernel=3 padding=1"},
      {"conv2d", "in_channels=4 out_channels=8 height=9 width=9 kernel=3 stride=2 padding=1"},
      {"conv2d_bias_relu", "in_channels=4 out_channels=8 height=8 width=8 kernel=3 padding=1"},
      {"depthwise_conv2d", "channels=8 height=10 width=10"},
      {"batch_matmul", "B=2 M=8 K=12 N=16"},
      {"softmax", "shape=6,40"},
      {"log_softmax", "shape=5,37"},
      {"layer_norm", "shape=4,48"},
      {"max_pool2d", "kernel=3 stride=2 padding=1 height=13 width=13"},
      {"add", ""},
      // Tensor-core sketches (gpu.mma.tf32): rows by 16, columns by 8, k by 8.
      {"dense", "M=32 K=24 N=16"},
      {"batch_matmul", "B=2 M=16 K=16 N=24"},
      {"conv2d", "in_channels=8 out_channels=16 height=8 width=8 kernel=3 padding=1"},
      {"conv2d_bias_relu", "in_channels=16 out_channels=32 height=6 width=8 kernel=3 stride=1 padding=1"},
      // Padded fragments: 7 columns of 8, 20 rows of 32, a k of 13.
      {"conv2d", "in_channels=8 out_channels=16 height=7 width=7 kernel=3 padding=1"},
      {"dense", "M=20 K=13 N=27"},
      // 18 columns: stored 2 at a time.
      {"dense", "M=16 K=24 N=18"},
  };
  std::mt19937_64 rng(12);
  int programs = 0, mma_programs = 0, shuffle_programs = 0, async_programs = 0, vector_programs = 0, vector_stores = 0,
      exchanged_stores = 0;
  for (const auto& [op, params] : suite) {
    ops::OpGraph g = ops::build_op(op, parse(params));
    std::vector<NDArray> in = codegen::random_inputs(g, 7);
    for (const sched::Sketch& s : sched::gpu_sketches(g)) {
      const int k = check_configs(g, s, in, 3, rng, op + " " + params);
      programs += k;
      mma_programs += k * (s.rule == sched::SketchRule::GpuMma);
      shuffle_programs += k * s.warp_shuffle;
      async_programs += k * (s.mma_stages > 1);
      vector_programs += k * (s.rule == sched::SketchRule::GpuMma && (s.mma_vector[0] || s.mma_vector[1]));
      vector_stores += k * (s.rule == sched::SketchRule::GpuMma && s.mma_store_lanes > 1);
      exchanged_stores += k * (s.rule == sched::SketchRule::GpuMma && s.mma_store_lanes == 4);
    }
  }
  std::printf(
      "%d programs ran under the SIMT emulation, %d on tensor cores (%d pipelined by cp.async, %d with vector "
      "fills, %d with vector stores, %d of them 128-bit by lane exchanges), %d with warp shuffles\n",
      programs, mma_programs, async_programs, vector_programs, vector_stores, exchanged_stores, shuffle_programs);
  EXPECT_GE(programs, 40);
  EXPECT_GE(mma_programs, 20);
  EXPECT_GE(async_programs, 30);    // .async2 and .async3 of the six tensor-core cases
  EXPECT_GE(vector_programs, 20);   // dense, batch_matmul
  EXPECT_GE(vector_stores, 36);     // even columns: all but the 7 x 7 convolution and N=27
  EXPECT_GE(exchanged_stores, 27);  // columns by 4: all but those and N=18
  EXPECT_GE(shuffle_programs, 9);   // softmax, log_softmax, layer_norm
}

// st with `edit` applied to every barrier and pragma (through sequences, loops,
// allocations and pragmas); edit returns its argument to keep it.
Stmt edit_stmts(const Stmt& st, const std::function<Stmt(const Stmt&)>& edit) {
  const StmtNode& n = *st;
  switch (n.kind) {
    case StmtKind::Barrier:
      return edit(st);
    case StmtKind::Seq: {
      std::vector<Stmt> items;
      for (const Stmt& x : n.body) items.push_back(edit_stmts(x, edit));
      return make_seq(items);
    }
    case StmtKind::For:
      return make_for(n.var, n.min, n.extent, n.for_kind, edit_stmts(n.body[0], edit));
    case StmtKind::Allocate:
      return make_allocate(n.buffer, edit_stmts(n.body[0], edit));
    case StmtKind::Pragma:
      return edit(make_pragma(n.key, n.pragma_value, edit_stmts(n.body[0], edit)));
    default:
      return st;
  }
}

// FP16 and BF16 fragments (m16n8k16, 8 values of A and 4 of B per lane) under the
// emulation: every tensor-core sketch of three GEMMs, padded ones among them.
TEST_F(CudaEmulation, HalfPrecisionFragmentsMatchTheInterpreter) {
  std::mt19937_64 rng(21);
  int programs = 0;
  for (const std::string precision : {"fp16", "bf16"})
    for (const auto& [op, params] : std::vector<std::pair<std::string, std::string>>{
             {"dense", "M=32 K=48 N=16"},
             {"conv2d", "in_channels=16 out_channels=16 height=7 width=7 kernel=3 padding=1"},
             {"batch_matmul", "B=2 M=16 K=40 N=24"}}) {
      ops::OpGraph g = ops::build_op(op, parse(params));
      std::vector<NDArray> in = codegen::random_inputs(g, 9);
      for (const sched::Sketch& s : sched::gpu_sketches(g, precision))
        if (s.rule == sched::SketchRule::GpuMma) programs += check_configs(g, s, in, 2, rng, op + " " + s.name);
    }
  std::printf("%d FP16 and BF16 programs ran under the SIMT emulation\n", programs);
  EXPECT_EQ(programs, 36);  // 2 precisions x 3 tasks x 3 sketches x 2 configurations
}

// The emulation is strict enough to catch what it is for: a kernel whose barrier is
// dropped reads shared tiles before the other threads have written them.
TEST_F(CudaEmulation, AMissingBarrierIsCaught) {
  ops::OpGraph g = ops::build_op("dense", parse("M=64 K=64 N=64"));
  sched::Sketch s = sched::gpu_sketches(g).at(0);
  sched::Config c = sched::default_config(s);
  LoweredFunc f = sched::lower_config(g, s, c);
  LoweredFunc racy = f;
  racy.body = edit_stmts(f.body, [](const Stmt& st) { return st.kind() == StmtKind::Barrier ? make_seq({}) : st; });
  ASSERT_EQ(codegen::print_cuda(racy).find("__syncthreads"), std::string::npos);
  racy.name = "racy";
  std::vector<NDArray> in = codegen::random_inputs(g, 3);
  int wrong = 0;
  for (int rep = 0; rep < 5 && wrong == 0; ++rep) {
    std::vector<std::vector<NDArray>> r = run({f, racy}, g, in);
    wrong += compare_arrays(r[1][0], r[0][0]).max_rel > 1e-5;
  }
  EXPECT_GT(wrong, 0) << "five racy runs matched: the emulation does not interleave the threads";
}

// A pipeline that does not wait for a stage's copies before computing on it (each wait
// letting one more group stay pending) reads the tiles of an earlier step: the
// emulation's copies land only when a wait retires them, as on the GPU they may.
TEST_F(CudaEmulation, APipelineThatDoesNotWaitForItsCopiesIsCaught) {
  ops::OpGraph g = ops::build_op("dense", parse("M=32 K=64 N=32"));
  std::vector<NDArray> in = codegen::random_inputs(g, 4);
  for (const sched::Sketch& s : sched::gpu_sketches(g)) {
    if (s.mma_stages < 2) continue;
    SCOPED_TRACE(s.name);
    LoweredFunc f = sched::lower_config(g, s, sched::default_config(s));
    LoweredFunc early = f;
    int groups = 0;
    early.body = edit_stmts(f.body, [&](const Stmt& st) {
      if (st.kind() != StmtKind::Pragma || st->key != sched::kAsyncCopyPragma) return st;
      ++groups;
      return make_pragma(st->key, Expr(int64_t{s.mma_stages}), st->body[0]);
    });
    ASSERT_EQ(groups, s.mma_stages);  // the prologue's S - 1 and the loop's
    early.name = "early";
    std::vector<std::vector<NDArray>> r = run({f, early}, g, in);
    EXPECT_LE(compare_arrays(r[0][0], codegen::interpret_outputs(f, g, in)[0]).max_rel, 1e-5);
    EXPECT_GT(compare_arrays(r[1][0], r[0][0]).max_rel, 1e-3) << "computing before the copies landed went unseen";
  }
}

}  // namespace
}  // namespace basin
