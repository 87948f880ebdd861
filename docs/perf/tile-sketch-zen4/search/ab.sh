#!/bin/bash
cd /work/main
/usr/bin/python3 bench/search.py --workloads resnet18-c2 --strategies annealing,gradient,gradient:tile_sketch_slots=0 --seeds 1 --trials 1000 --retime 3 --threads 1 --interleave --out OUT/ab-c2-s1 > OUT/ab-c2-s1.log 2>&1
echo done > OUT/AB_DONE
