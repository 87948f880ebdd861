#!/bin/bash
# Session 49: 300-trial runs of strategy variants over seeds, one thread, one at a time.
# usage: [BASIN=binary] ab.sh WORKLOAD REF_US STRATEGY SEEDS...   (records in $DIR)
# Prints per seed: the best during tuning (us), seconds, the best program's sketch and
# register tile (inner c, h, w), and the first trial at which the run held a program
# within 2% and within 5% of REF_US (a reference latency: annealing's 1000-trial best
# on this host), "-" if it never did.
w=$1; ref=$2; st=$3; shift 3
DIR=${DIR:-/tmp/s49/ab}
mkdir -p $DIR
basin=${BASIN:-"$(dirname "$0")/../../../../build/bin/basin"}
for s in "$@"; do
  db=$DIR/$w-$st-$s.db; rm -f $db*
  BASIN_NUM_THREADS=1 $basin tune-op --workload $w --strategy $st --trials ${TRIALS:-300} --seed $s --records $db --json > $db.json 2>/dev/null
  /usr/bin/python3 -c "
import json
d=json.load(open('$db.json'))
b=d['best_config']; best=d['best_latency_us']; ref=$ref
def first(m):
  t=[c[1] for c in d['curve'] if 0<c[2]<=ref*m]
  return str(min(t)) if t else '-'
sp=b['splits']
tile='x'.join(str(sp[k][-1]) for k in ('c','h','w','i','j') if k in sp)
print('$w', '$st', 'seed $s:', round(best,1), str(round(d['search_seconds']))+'s', b['sketch'][5:], tile, '| 2%:', first(1.02), '5%:', first(1.05))
"
done
