#!/bin/bash
# The committed configurations on one thread, the code generation before (OLD: a build of
# e236bed) and after (NEW: a build of 9ea0d01) in turn, PASSES times; LibTorch (oneDNN,
# OpenBLAS) timed in each run. Usage: OLD=... NEW=... ./run-kernels.sh 2; then summ.py.
D=$(cd "$(dirname "$0")" && pwd)
for p in $(seq 1 "${1:-2}"); do
  for b in old new; do
    if [ $b = old ]; then B=$OLD; else B=$NEW; fi
    (cd /work/main && BASIN_NUM_THREADS=1 taskset -c 0 "$B" --random 0 --json > "$D/kb-$b-$p.json" 2> "$D/kb-$b-$p.err")
  done
done
