#!/usr/bin/env bash
# Creates the peers' Python virtual environment from PyPI, with pinned versions:
# ONNX Runtime, OpenVINO, torch 2.x with torchvision (eager and torch.compile), the ONNX
# exporters' dependencies and Hugging Face transformers (models built from config
# objects, nothing downloaded at run time). About 7 GB (torch's wheels pull the CUDA
# runtime). Idempotent: a second run installs nothing new.
#
#   bench/peers/setup.sh            # creates .cache/peers (the default the benchmarks use)
#   BASIN_PEERS_VENV=DIR bench/peers/setup.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${BASIN_PEERS_VENV:-$PWD/.cache/peers}"
PY=/usr/bin/python3
if ! $PY -c 'import venv, ensurepip' 2>/dev/null; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >&2
fi
[ -x "$VENV/bin/python" ] || $PY -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -r bench/peers/requirements.txt
"$VENV/bin/python" bench/peers/versions.py
