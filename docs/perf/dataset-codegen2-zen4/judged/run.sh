#!/bin/bash
B=/work/main/build/bin/basin
for p in "1 gradient" "1 annealing" "2 annealing" "2 gradient"; do
  set -- $p
  /usr/bin/time -f "%e s" $B tune-op --workload resnet18-c6 --strategy $2 --trials 200 --records j$1-$2.db --compare --json > j$1-$2.json 2> j$1-$2.err
done
echo done > DONE
