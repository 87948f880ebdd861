#!/bin/bash
# Session 47: two places a batch for other sketches' register tiles. The stated
# subset's C12 and C6 (seed 1, 1000 trials, interleaved, one thread) through session
# 45's script; the runs go to /tmp/s47/search, and the tables, plots and results were
# copied to search/ here. C2 and C9 after them:
#   WORKLOADS="resnet18-c2 resnet18-c9" OUT=/tmp/s47/search2 ./subset.sh
WORKLOADS=${WORKLOADS:-"resnet18-c12 resnet18-c6"} OUT=${OUT:-/tmp/s47/search} \
  "$(dirname "$0")/../compile-time/search/run.sh"
