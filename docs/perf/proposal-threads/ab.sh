#!/bin/bash
# Session 50: the proposal on both cores, A/B. OLD and NEW are two basin binaries (copy
# build/bin/basin aside before rebuilding); each pair runs the old one, then the new
# one, same workload, strategy and seed, one thread for the kernels as bench/search
# runs them. Prints each run's seconds and their parts.
# Usage: OLD=/tmp/basin.old NEW=build/bin/basin ab.sh WORKLOAD STRATEGY TRIALS PAIRS
W=${1:-resnet18-c2}; S=${2:-gradient}; T=${3:-300}; P=${4:-3}
DIR=$(mktemp -d)
for i in $(seq 1 $P); do
  for b in old new; do
    bin=$OLD; [ $b = new ] && bin=$NEW
    BASIN_NUM_THREADS=1 $bin tune-op --workload $W --strategy $S --trials $T --records $DIR/$b-$i.db --json 2>/dev/null |
      /usr/bin/python3 -c "
import json, sys
d = json.load(sys.stdin)
print('$W $S pair $i $b: %.1f s, propose %.2f s, update %.2f s, measure %.1f s, overhead %.1f%%, best %.1f us' % (
    d['search_seconds'], d['propose_seconds'], d['update_seconds'], d['measure_seconds'],
    100 * d['overhead_fraction'], d['best_latency_us']))"
  done
done
rm -rf $DIR
