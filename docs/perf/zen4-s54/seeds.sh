#!/bin/bash
# The seed study of sessions 54 and 55: independent runs of one workload, one thread
# per kernel (BASIN_NUM_THREADS=1, as bench/search --threads 1), one after another: the gradient
# search for GTRIALS trials on GSEEDS, annealing for ATRIALS trials on ASEEDS. Then
# pairs.py: for every (gradient seed, annealing seed) pair, whether the gradient run
# reached the annealing run's final best within 20% of its trials and seconds.
#   W=resnet18-c12 GSEEDS="1 2 3 4 5 6 7 8" ASEEDS="1 2 3 4" OUT=/tmp/c12 docs/perf/zen4-s54/seeds.sh
# GSTRATEGY sets the gradient runs' spec (a variant: GSTRATEGY=gradient:fill_slots=0);
# ASEEDS=" " skips the annealing runs (pairs.py then reads the a*.json already in OUT).
here=$(cd "$(dirname "$0")" && pwd)
B=${B:-$here/../../../build/bin/basin}
W=${W:-resnet18-c12}
OUT=${OUT:?a folder for the runs}
mkdir -p "$OUT" && cd "$OUT" || exit 1
run() {  # run NAME STRATEGY TRIALS SEED
  rm -f $1.db*
  BASIN_NUM_THREADS=1 "$B" tune-op --workload "$W" --strategy $2 --trials $3 --seed $4 --records $1.db --json > $1.json 2> $1.err
  /usr/bin/python3 -c "import json; j=json.load(open('$1.json')); print('$1', round(j['best_latency_us'], 1), 'us', round(j['search_seconds'], 1), 's')"
}
for s in ${GSEEDS:-1 2 3 4 5 6 7 8}; do run g${GTRIALS:-300}s$s ${GSTRATEGY:-gradient} ${GTRIALS:-300} $s; done
for s in ${ASEEDS:-1 2 3 4}; do run a${ATRIALS:-1000}s$s annealing ${ATRIALS:-1000} $s; done
/usr/bin/python3 "$here/pairs.py" "$(ls g*.json | paste -sd,)" "$(ls a${ATRIALS:-1000}s*.json | paste -sd,)" | tee pairs.txt
