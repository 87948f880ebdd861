#!/bin/bash
# Session 56: the seed studies on AVX2 (BASIN_VECTOR_ISA=avx2 on the Zen 4 host): for
# each workload, the gradient search with the register-filling tiles (default, 12 of
# 16 ymm), without them (fill_first=0:fill_slots=0), and annealing; 8 + 8 + 4 seeds,
# one thread per kernel (docs/perf/zen4-s54/seeds.sh).
#   WORKLOADS="resnet18-c12 resnet18-c10" OUT=/tmp/s56/avx2 docs/perf/zen4-s56/avx2.sh
here=$(cd "$(dirname "$0")" && pwd)
seeds=$here/../zen4-s54/seeds.sh
export BASIN_VECTOR_ISA=${BASIN_VECTOR_ISA:-avx2}
OUT=${OUT:?a folder for the runs}
for w in ${WORKLOADS:-resnet18-c12}; do
  d=$OUT/${w#resnet18-}
  W=$w OUT=$d ASEEDS="1 2 3 4" "$seeds" > $d.log 2>&1
  mkdir -p $d/off && cp $d/a1000s*.json $d/off/
  W=$w OUT=$d/off GSTRATEGY=gradient:fill_first=0:fill_slots=0 ASEEDS=" " "$seeds" >> $d.log 2>&1
done
echo done > $OUT/DONE
