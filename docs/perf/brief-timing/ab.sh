#!/bin/bash
# Session 51: brief timing of slow programs (TuneOptions::slow_factor), A/B on one build.
# Usage: ab.sh WORKLOAD STRATEGY TRIALS PAIRS [BASIN]. Each pair tunes the workload
# from an empty records file with --slow-factor 0 (every program timed in full) and
# then 2 (the default), the same seed, one thread for the kernels; prints one line
# per run: the factor, search seconds, compile-and-measure seconds, programs timed
# briefly, the best latency during tuning, and the overhead.
W=$1; S=$2; N=$3; P=${4:-1}; BASIN=${5:-build/bin/basin}
D=$(mktemp -d)
for p in $(seq 1 $P); do
  for f in 0 2; do
    BASIN_NUM_THREADS=1 $BASIN tune-op --workload $W --strategy $S --trials $N --records $D/$p-$f.db \
      --slow-factor $f --seed $p --quiet --json > $D/$p-$f.json
    /usr/bin/python3 -c "
import json,sys; j=json.load(open('$D/$p-$f.json'))
print(f\"$W $S seed $p factor $f: {j['search_seconds']:.1f} s, measure {j['measure_seconds']:.1f} s, brief {j['brief']}, best {j['best_latency_us']:.1f} us, overhead {100*j['overhead_fraction']:.1f}%\")"
  done
done
rm -rf $D
