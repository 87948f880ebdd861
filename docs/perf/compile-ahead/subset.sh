#!/bin/bash
# Session 46: the issue's stated subset, seed 1, with each batch and contest compiled
# ahead on both cores (the default): session 45's script, C6 first. Session 46's runs
# went to /tmp/s46/search; tables, plots and results were copied into search/ here.
here="$(dirname "$0")"
OUT=${OUT:-/tmp/s46/search} WORKLOADS="resnet18-c6 resnet18-c2 resnet18-c9 resnet18-c12 gemm-1024" \
  exec "$here/../compile-time/search/run.sh"
