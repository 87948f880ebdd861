#!/bin/bash
# Session 46: the issue's stated subset, seed 1, with each batch and contest compiled
# ahead on both cores (the default). As session 45's docs/perf/compile-time/search/run.sh.
# OUT: where the runs go (session 46: /tmp/s46/search; tables, plots and results copied here).
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/s46/search}
mkdir -p $OUT
for w in resnet18-c6 resnet18-c2 resnet18-c9 resnet18-c12 gemm-1024; do
  /usr/bin/python3 bench/search.py --workloads $w --strategies annealing,gradient --seeds 1 --trials 1000 --retime 3 --threads 1 --interleave --out $OUT/$w-s1 > $OUT/$w-s1.log 2>&1
done
echo done > $OUT/DONE
