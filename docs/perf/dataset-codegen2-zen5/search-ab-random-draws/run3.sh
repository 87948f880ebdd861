#!/bin/bash
cd /work/main
for ws in "resnet18-c12 3" "resnet18-c12 2" "resnet18-c6 3"; do
  set -- $ws
  /usr/bin/python3 bench/search.py --workloads $1 --strategies annealing,gradient,gradient:random_draws=256 --seeds $2 --trials 1000 --retime 3 --threads 1 --interleave --out /tmp/s39/sb/ab-$1-s$2 > /tmp/s39/sb/ab-$1-s$2.log 2>&1
done
echo done > /tmp/s39/sb/ALLDONE3
