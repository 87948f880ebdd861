#!/bin/bash
# time.sh ROUNDS MODE(quiet|load) CONFIGS...  -> lines: round cfg latency
R=$1; M=$2; shift 2
cd /work/main
TP=""
if [ $M = load ]; then taskset -c 1 /tmp/frag/thrash 24 & TP=$!; sleep 1; fi
for r in $(seq 1 $R); do for c in "$@"; do
  l=$(BASIN_NUM_THREADS=1 taskset -c 0 build/bin/basin op --workload resnet18-c2 --config /tmp/frag/$c.json --oracle never --json 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["latency_us"])')
  echo "$M $r $c $l"
done; done
[ -n "$TP" ] && kill $TP
