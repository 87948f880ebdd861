#!/bin/bash
AB=/work/main/docs/perf/intel-host/ab/ab.sh
cd /tmp/s49
run() { # label binary workload ref strategy seeds...
  local label=$1 bin=$2; shift 2
  DIR=/tmp/s49/ab/$label BASIN=$bin $AB "$@" | sed "s/^/$label /"
}
for s in 1 2 3 4; do
  run old /tmp/s49/basin-old resnet18-c2 1308.7 gradient $s
  run reshape /tmp/s49/basin-new resnet18-c2 1308.7 gradient:block_slots=0 $s
  run new /tmp/s49/basin-new resnet18-c2 1308.7 gradient $s
done
for s in 1 2 3; do
  run old /tmp/s49/basin-old gemm-1024 12609.5 gradient $s
  run new /tmp/s49/basin-new gemm-1024 12609.5 gradient $s
done
for s in 1 2 3; do
  run old /tmp/s49/basin-old resnet18-c6 1276.2 gradient $s
  run new /tmp/s49/basin-new resnet18-c6 1276.2 gradient $s
done
for s in 1 2; do for w in "resnet18-c9 1402.9" "resnet18-c12 2078.5"; do
  run old /tmp/s49/basin-old $w gradient $s
  run new /tmp/s49/basin-new $w gradient $s
done; done
echo done
