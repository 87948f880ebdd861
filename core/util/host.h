// The machine basin runs on, as records name it: the CPU's model (name, family and
// model number), the cores its kernels run on and its widest vector instruction set. Latencies are only comparable
// between programs measured on one such machine; a records file carries each record's
// host so that tuning, training and evaluation never mix two machines' latencies.
#pragma once

#include <cstdint>
#include <string>

namespace basin {

struct HostInfo {
  std::string cpu_model;  // /proc/cpuinfo's "model name" ("unknown" when absent)
  // "family 26 model 2": /proc/cpuinfo's "cpu family" and "model" numbers, empty where
  // the CPU reports none. Under a hypervisor the name can hide the generation: a Zen 4
  // and a Zen 5 EPYC both read "AMD EPYC" there, and the numbers tell them apart.
  std::string cpu_id;
  // The threads parallel loops use: BASIN_NUM_THREADS when set (a kernel limited to
  // one core is another machine's program as far as latencies go), else the online
  // cores (std::thread::hardware_concurrency).
  int cores = 1;
  // "avx512", "avx2", "sse" (x86) or the architecture's name: the widest vector
  // instructions the CPU has, or the narrower set BASIN_VECTOR_ISA names (kernels are
  // compiled for it, and records name it: a kernel held to AVX2 is another machine's
  // program as far as latencies go).
  std::string vector_isa;
  // Whether kernels may use AVX512-BF16's vdpbf16ps (pairs of bfloat16 products summed
  // into float32): the CPU has it and vector_isa is avx512.
  bool bf16_dot = false;
  // Whether kernels may use vpdpbusd (groups of 4 products of unsigned by signed bytes
  // summed into int32): AVX512-VNNI with vector_isa avx512, AVX-VNNI with avx2.
  bool int8_dot = false;
  // Whether kernels may use AMX-BF16 tiles (tdpbf16ps: a 16 x 16 float32 tile plus 16
  // rows of 32 bfloat16 times 16 pairs of 16 columns): the CPU has AMX-TILE and
  // AMX-BF16, vector_isa is avx512, and the kernel let this process use the tile
  // registers (arch_prctl's ARCH_REQ_XCOMP_PERM, asked for once by probe_host;
  // processes forked after it inherit the permission).
  bool amx_bf16 = false;
  // Whether kernels may use AMX-INT8 tiles (tdpbusd: a 16 x 16 int32 tile plus 16 rows of
  // 64 unsigned bytes times 16 groups of 4 rows of 16 columns' signed bytes): the CPU has
  // AMX-TILE and AMX-INT8, vector_isa is avx512 with int8_dot, and the process may use
  // the tile registers (as for amx_bf16).
  bool amx_int8 = false;
  // "AMD EPYC (family 26 model 2)": the name, and the numbers where there are some.
  std::string cpu() const;
  // "AMD EPYC (family 26 model 2), 2 cores, avx512": the form stored in records.
  std::string describe() const;
};

// The vector registers of a CPU whose widest vector instruction set is `isa`
// (HostInfo::vector_isa), and the bytes each holds: with AVX-512 32 of 64 bytes, with
// AVX2 16 of 32, with SSE 16 of 16; any other (AArch64's NEON) 32 of 16.
struct VectorFile {
  int registers = 0, bytes = 0;
};
VectorFile vector_file(const std::string& isa);

// The description `machine` had before descriptions named the CPU's family and model
// ("AMD EPYC, 2 cores, avx512"): `machine` without its " (family F model M)".
std::string legacy_host_description(const std::string& machine);
// True when a record measured on `recorded` counts as measured on `machine`: the same
// description; an unknown machine (empty: a file written before records named their
// machine); or `machine`'s legacy description (a record written before descriptions
// named the family and model, which may come from another model of the same name: those
// records could not tell them apart, and `basin records relabel` names theirs).
bool same_host(const std::string& recorded, const std::string& machine);

// This machine, read now (from /proc/cpuinfo, the CPU, BASIN_NUM_THREADS and
// BASIN_VECTOR_ISA).
HostInfo probe_host();
// Throws basin::Error naming the value when BASIN_NUM_THREADS is set to anything but
// a whole number of at least 1 (probe_host ignores such a value; the command line
// refuses it, since records would name every core while the user meant fewer).
// Likewise for BASIN_PARALLEL_CHUNKS (parallel_chunks_setting), BASIN_LAYOUT
// (blocked_layout_setting), and for
// BASIN_VECTOR_ISA set to anything but an x86 CPU's vector instruction set no wider than
// this CPU's ("avx512", "avx2", "sse").
void check_settings();
// The widest vector instruction set this CPU has (HostInfo::vector_isa without
// BASIN_VECTOR_ISA).
std::string cpu_vector_isa();
// BASIN_LAYOUT: 1 when a network's values between convolutions may be held in the
// blocked layout NCHWc (unset, or "nchwc"), 0 for "nchw", -1 for anything else
// (check_settings refuses it).
int blocked_layout_setting();
// BASIN_WINOGRAD: which 3x3 convolutions of a blocked network are computed by
// Winograd's F(m x m, 3 x 3) (core/ops/winograd.cc): 1 for the layout plan's own choice
// (unset, or "auto"), 0 for none ("off"), 2 or 4 for every one that can, with that m;
// -1 for anything else (check_settings refuses it).
int winograd_setting();
// BASIN_PLUGIN_TIMEOUT: the seconds one call of a plug-in (a TorchScript estimator's
// forward, a Python estimator's method) may take before it is given up as stuck; a whole
// number from 1 to 86400, 120 when unset (check_settings refuses anything else).
int plugin_timeout_seconds();
// The size of the CPU's last-level cache (the largest level sysfs lists for CPU 0),
// in bytes; 0 where it is unknown.
int64_t last_level_cache_bytes();
// Chunks per thread that a parallel loop is cut into (codegen/cpu_runtime.h): the
// threads claim them in turn, so a thread that starts late or runs slow leaves its
// share to the others. BASIN_PARALLEL_CHUNKS when set to a whole number from 1 (one
// contiguous chunk per thread, the static split) to kMaxParallelChunks, else
// kDefaultParallelChunks.
inline constexpr int kDefaultParallelChunks = 4;
inline constexpr int kMaxParallelChunks = 64;
int parallel_chunks_setting();
// This machine (probe_host, read once).
const HostInfo& this_host();
// this_host().describe().
const std::string& host_description();
// The machine whose speed a target's latencies measure, as records name it
// (search::Record::host): this host for the CPU's targets; for "cuda", GPU 0
// ("NVIDIA H200 (sm_90)"), which the CUDA backend describes (set_gpu_describer), or ""
// where there is no GPU or no backend. Two GPUs' latencies differ as two CPUs' do,
// whatever CPU drives them. Read once per process.
const std::string& machine_description(const std::string& target);
// Called by the CUDA backend when it is linked in (codegen/cuda.cc), before main.
void set_gpu_describer(std::string (*describe)());

}  // namespace basin
