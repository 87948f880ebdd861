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
  libxgboost-dev                     # gradient-boosted-tree estimator
  libonnx-dev                        # ONNX import
  python3-torch                      # the TorchScript estimator example (docs/estimators.md) and its test
  python3-torchvision python3-onnx   # tests export torchvision models to ONNX with PyTorch
  python3-matplotlib                 # bench/search.py's plots (a fresh machine drew none: session 40)
)

basin_install_deps() {
  local missing=()
  for p in "${BASIN_DEBIAN_PACKAGES[@]}"; do
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

# basin_build BUILD_TYPE [TARGET...]: configures build/ (once) and builds.
basin_build() {
  local type="$1"
  shift
  local jobs="${BASIN_JOBS:-$(nproc)}"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE="$type" >&2
  if [ $# -gt 0 ]; then
    cmake --build build -j "$jobs" --target "$@" >&2
  else
    cmake --build build -j "$jobs" >&2
  fi
}
