#!/bin/bash
# C1 to C12, the gradient search, 200 trials each, two threads, LibTorch (oneDNN) timed in the same run.
B=${B:-/work/main/build/bin/basin}
for i in $(seq 1 12); do
  rm -f c$i.db*
  $B tune-op --workload resnet18-c$i --strategy gradient --trials 200 --compare --json --records c$i.db > c$i.json 2> c$i.err
done
echo done > DONE
