#!/bin/bash
# Session 46: compiling each batch ahead on both cores (--compile-threads 2) against
# compiling each program just before it runs (--compile-threads 1). The random
# strategy with one seed measures the same programs both ways, so the runs differ only
# in how they compile. Kernels on one thread; each workload A B B A.
# Run from the repository root: OUT=dir docs/perf/compile-ahead/ab.sh
OUT=${OUT:-/tmp/s46/ab}
TRIALS=${TRIALS:-96}
mkdir -p $OUT
export BASIN_NUM_THREADS=1
for w in resnet18-c2 resnet18-c6 resnet18-c12 gemm-1024; do
  k=0
  for t in 1 2 2 1; do
    k=$((k+1))
    rm -f $OUT/$w.$t.$k.db*
    build/bin/basin tune-op --workload $w --strategy random --trials $TRIALS --records $OUT/$w.$t.$k.db \
      --compile-threads $t --json --quiet > $OUT/$w.$t.$k.json 2> $OUT/$w.$t.$k.err
  done
done
echo done > $OUT/DONE
