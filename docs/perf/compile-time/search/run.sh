#!/bin/bash
# Session 45: the issue's stated subset, seed 1, on code generation `llvm 3`.
# WORKLOADS: which, in order (default: the subset's five). OUT: where the runs go
# (session 45: /tmp/s45/search; the tables, plots and results were copied here).
# SEEDS: which seeds, in order (default 1); each workload and seed is a run of its own.
cd "$(dirname "$0")/../../../.."
OUT=${OUT:-/tmp/s45/search}
mkdir -p $OUT
for seed in ${SEEDS:-1}; do
  for w in ${WORKLOADS:-resnet18-c2 resnet18-c6 resnet18-c9 resnet18-c12 gemm-1024}; do
    /usr/bin/python3 bench/search.py --workloads $w --strategies annealing,gradient --seeds $seed --trials 1000 --retime 3 --threads 1 --interleave --out $OUT/$w-s$seed > $OUT/$w-s$seed.log 2>&1
  done
done
echo done > $OUT/DONE
