#!/bin/bash
# A/B: one program on two threads, the static split (BASIN_PARALLEL_CHUNKS=1) and
# claimed chunks (default 4) alternating, N pairs; latency_us (min of 5 rounds) and
# median, and the host's steal jiffies during each run. BASIN is the basin binary
# (default build/bin/basin of the checkout).
B=${BASIN:-$(dirname "$0")/../../../build/bin/basin}; W=$1; CFG=$2; N=${3:-10}
for i in $(seq $N); do for k in 1 4; do
  read -r _ u n s idle io irq sirq st _ < <(head -1 /proc/stat)
  out=$(BASIN_PARALLEL_CHUNKS=$k $B op --workload $W --config $CFG --timing full --oracle never --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["latency_us"],1), round(d["latency_median_us"],1))')
  read -r _ u2 n2 s2 idle2 io2 irq2 sirq2 st2 _ < <(head -1 /proc/stat)
  echo "$i chunks=$k $out steal=$((st2-st))"
done; done
