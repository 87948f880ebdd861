#!/bin/bash
# Session 48: which sketch family a 300-trial run ends in, over seeds, for each strategy.
# usage: seeds.sh WORKLOAD STRATEGY SEEDS...   (one thread; records in $DIR)
# Prints per seed: the best during tuning (us), seconds, the best program's sketch and
# the inner h and w of its register tile, the trial at which the run first held a
# program within 2% of its final best, and the three sketches with the fastest programs
# (sketch, programs measured, fastest us).
w=$1; st=$2; shift 2
DIR=${DIR:-/tmp/s48/families}
mkdir -p $DIR
basin="$(dirname "$0")/../../../build/bin/basin"
for s in "$@"; do
  db=$DIR/$w-$st-$s.db; rm -f $db*
  BASIN_NUM_THREADS=1 $basin tune-op --workload $w --strategy $st --trials ${TRIALS:-300} --seed $s --records $db --json > $db.json 2>/dev/null
  echo "$w $st seed $s: $(/usr/bin/python3 -c "
import json
d=json.load(open('$db.json'))
b=d['best_config']; best=d['best_latency_us']
first=min([t for t,x in [(c[1],c[2]) for c in d['curve']] if 0<x<=best*1.02] or [0])
print(round(best,1), round(d['search_seconds']), b['sketch'][9:], b['splits'].get('h',[0])[-1], b['splits'].get('w',[0])[-1], 'within 2% at', first)
") | $(sqlite3 $db "select substr(sketch,10), count(*), round(min(latency_us),1) from records group by sketch order by 3 limit 3;" | tr '\n' ' ')"
done
