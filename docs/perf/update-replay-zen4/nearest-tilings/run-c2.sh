#!/bin/bash
while kill -0 12518 2>/dev/null; do sleep 2; done
cd /work/main
/usr/bin/python3 bench/search.py --workloads resnet18-c2 --strategies annealing,gradient:nearest_tilings=0,gradient --seeds 2 --trials 1000 --retime 3 --threads 1 --interleave --out /tmp/s41/ab/resnet18-c2-s2 > /tmp/s41/ab/resnet18-c2-s2.log 2>&1
echo done > /tmp/s41/ab/DONE2
