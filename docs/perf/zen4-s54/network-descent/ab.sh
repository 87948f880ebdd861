#!/bin/bash
# Session 54's A/B of the gradient search's descent size in whole-network tuning:
# `basin tune zoo:resnet18 --budget 40s` with each strategy spec of SPECS in turn,
# RUNS times, the command's wall time and peak memory by /usr/bin/time. Run it in an
# empty folder, then summary.py there.
#   SPECS="gradient gradient:seeds=16 gradient:steps=16" RUNS=2 docs/perf/zen4-s54/network-descent/ab.sh
set -e
B=${B:-/work/main/build/bin/basin}
SPECS=${SPECS:-"gradient gradient:seeds=16"}
for i in $(seq 1 "${RUNS:-3}"); do
  for spec in $SPECS; do
    v=$(echo "$spec" | tr ':=,' '___')
    rm -f "$v-$i.db"
    /usr/bin/time -f "%e %M" -o "$v-$i.time" "$B" tune zoo:resnet18 --budget "${BUDGET:-40s}" --strategy "$spec" \
        --records "$v-$i.db" --json > "$v-$i.json" 2> "$v-$i.err"
  done
done
