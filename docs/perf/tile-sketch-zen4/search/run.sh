#!/bin/bash
cd /work/main
for w in resnet18-c12 resnet18-c10 resnet18-c6 resnet18-c2; do
  /usr/bin/python3 bench/search.py --workloads $w --strategies annealing,gradient --seeds 1 --trials 1000 --retime 3 --threads 1 --interleave --out OUT/$w-s1 > OUT/$w-s1.log 2>&1
done
echo done > OUT/DONE
