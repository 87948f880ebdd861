#!/bin/bash
B=/work/main/build/bin/basin
for i in 1 2; do
 for s in gradient annealing; do
  rm -f j$i-$s.db*
  $B tune-op --workload resnet18-c6 --strategy $s --trials 200 --compare --json --records j$i-$s.db > j$i-$s.json 2> j$i-$s.err
 done
done
echo done > DONE
