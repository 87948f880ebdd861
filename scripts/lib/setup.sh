# Shared set-up of scripts/demo and scripts/test on Debian 12: installs the Debian
# packages basin needs (only those missing, so a second run installs nothing), then
# configures and builds with CMake. Sourced, not run.

BASIN_DEBIAN_PACKAGES=(
  build-essential cmake ninja-build pkg-config python3
  libtorch-dev                       # LibTorch 1.13: reference executor, estimators
  libopenblas0-pthread               # the BLAS LibTorch calls (the reference BLAS is ~40x slower)
  llvm-16-dev libzstd-dev            # CPU backend (LLVM's CMake config needs zstd)
  libboost-graph-dev libeigen3-dev   # network graph
  libgtest-dev libgmock-dev          # tests
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libsqlite3-dev                     # records
  libopenmpi-dev openmpi-bin         # tuning shared by several ranks (mpirun -n K basin tune)
  libxgboost-dev                     # gradient-boosted-tree estimator
  libonnx-dev                        # ONNX import
  python3-torch                      # the TorchScript estimator example (docs/estimators.md) and its test
  python3-torchvision python3-onnx   # tests export torchvision models to ONNX with PyTorch
  python3-matplotlib                 # bench/search.py's plots (without it a fresh machine draws none)
  python3-dev pybind11-dev python3-numpy python3-pytest python3-venv  # the Python package (python/) and its tests
)

# The sanitizer build's compiler (BUILD_TYPE=asan): clang with its runtimes (ASan, UBSan, libFuzzer).
BASIN_SANITIZER_PACKAGES=(clang-16 libclang-rt-16-dev)

# basin_install_deps [BUILD_TYPE]: installs the missing packages (and the sanitizer
# build's for asan).
basin_install_deps() {
  local wanted=("${BASIN_DEBIAN_PACKAGES[@]}")
  if [ "$(basin_build_dir "${1:-Release}")" = build-asan ]; then wanted+=("${BASIN_SANITIZER_PACKAGES[@]}"); fi
  local missing=()
  for p in "${wanted[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "basin: installing missing Debian packages: ${missing[*]}" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# The build folder of a BUILD_TYPE: build/ for Release and Debug, build-asan/ for asan.
basin_build_dir() {
  if [ "${1,,}" = asan ]; then echo build-asan; else echo build; fi
}

# basin_build BUILD_TYPE [TARGET...]: configures the build folder (once) and builds.
# asan: clang 16 at -O1 with line tables (assertions on), AddressSanitizer and
# UndefinedBehaviorSanitizer everywhere, and the fuzz targets (BASIN_FUZZ).
basin_build() {
  local type="$1"
  shift
  local jobs="${BASIN_JOBS:-$(nproc)}"
  local dir
  dir=$(basin_build_dir "$type")
  if [ "$dir" = build-asan ]; then
    CC=clang-16 CXX=clang++-16 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBASIN_FUZZ=ON \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" >&2
  else
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="$type" >&2
  fi
  if [ $# -gt 0 ]; then
    cmake --build "$dir" -j "$jobs" --target "$@" >&2
  else
    cmake --build "$dir" -j "$jobs" >&2
  fi
}

# The sanitizers' settings for a run of the asan build: every report fatal, with a
# stack; leaks reported except those of the libraries basin does not build
# (scripts/lib/lsan.supp).
basin_sanitizer_env() {
  local here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/lsan.supp:print_suppressions=0}"
}
