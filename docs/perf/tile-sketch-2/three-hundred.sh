#!/bin/bash
# Session 47: 300-trial gradient runs, one thread, to compare strategy options fast.
# usage: three-hundred.sh WORKLOAD OPTIONS SEEDS...  (OPTIONS '' for the defaults,
# e.g. tile_sketch_slots=2). Prints per seed: the best, seconds, the last two bests
# (trial, us, sketch, inner h and w of the register tile) and the three sketches with
# the fastest programs (sketch, programs measured, fastest us). DIR: where the records go.
w=$1; opt=$2; shift 2
DIR=${DIR:-/tmp/s47/300}
mkdir -p $DIR
basin="$(dirname "$0")/../../../build/bin/basin"
for s in "$@"; do
  db=$DIR/$w-$opt-$s.db; rm -f $db
  BASIN_NUM_THREADS=1 $basin tune-op --workload $w --strategy "gradient${opt:+:$opt}" --trials ${TRIALS:-300} --seed $s --records $db --json > $db.json 2>/dev/null
  echo "$w $opt seed $s: $(/usr/bin/python3 -c "
import json
d=json.load(open('$db.json'))
print(round(d['best_latency_us'],1), round(d['search_seconds']), [ (b['trials'], round(b['latency_us']), b['config']['sketch'][9:], b['config']['splits'].get('h',[0])[-1], b['config']['splits'].get('w',[0])[-1]) for b in d['bests']][-2:])
") | $(sqlite3 $db "select substr(sketch,10), count(*), round(min(latency_us),1) from records group by sketch order by 3 limit 3;" | tr '\n' ' ')"
done
