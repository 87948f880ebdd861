#!/bin/bash
# gemm-1024: the gradient search with and without register-filling tiles, interleaved (a round of each in turn), seeds 1-4.
B=${B:-/work/main/build/bin/basin}
for s in 1 2 3 4; do
  rm -f s$s*.db*
  BASIN_NUM_THREADS=1 $B tune-op --workload gemm-1024 --strategy gradient,gradient:fill_slots=0:fill_first=0 --trials 300 --seed $s --records s$s.db --json > s$s.json 2> s$s.err
done
echo done > DONE
