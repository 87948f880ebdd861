#!/bin/bash
# Session 49: each A/B run's best program (ab.sh's records, $DIR/VARIANT/W-STRATEGY-SEED.db.json)
# timed again, all of a workload's in turn, 3 rounds, full protocol, one thread.
# usage: retime.sh WORKLOAD   (prints: variant, strategy, seed, the three latencies, their median)
w=$1
DIR=${DIR:-/tmp/s49/ab}
basin=${BASIN:-"$(dirname "$0")/../../../../build/bin/basin"}
files=$(ls $DIR/*/$w-*.db.json)
for f in $files; do
  /usr/bin/python3 -c "import json; json.dump(json.load(open('$f'))['best_config'], open('$f.cfg', 'w'))"
done
for r in 1 2 3; do for f in $files; do
  echo "$f $(BASIN_NUM_THREADS=1 $basin op --workload $w --config $f.cfg --oracle never --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["latency_us"])')"
done; done | /usr/bin/python3 -c "
import sys, statistics, collections, os
t = collections.defaultdict(list)
for line in sys.stdin:
    f, v = line.split(); t[f].append(float(v))
for f, v in sorted(t.items()):
    variant = os.path.basename(os.path.dirname(f)); name = os.path.basename(f)[:-len('.db.json')]
    print(variant, name, ' '.join('%.1f' % x for x in v), 'median %.1f' % statistics.median(v))
"
