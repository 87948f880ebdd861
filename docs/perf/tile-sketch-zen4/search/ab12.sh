#!/bin/bash
cd /work/main
/usr/bin/python3 bench/search.py --workloads resnet18-c12 --strategies annealing,gradient,gradient:tile_sketch_slots=0 --seeds 2 --trials 1000 --retime 3 --threads 1 --interleave --out OUT/ab-c12-s2 > OUT/ab-c12-s2.log 2>&1
echo done > OUT/AB12_DONE
