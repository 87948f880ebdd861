#!/bin/bash
while [ ! -f /tmp/s42/ab/DONE ]; do sleep 5; done
cd /work/main
for w in "resnet18-c12 3" "resnet18-c6 3" "resnet18-c9 1" "resnet18-c6 1" "resnet18-c12 1"; do
  set -- $w
  [ -f /tmp/s42/ab/STOP ] && break
  /usr/bin/python3 bench/search.py --workloads $1 --strategies annealing,gradient:nearest_tilings=0,gradient --seeds $2 --trials 1000 --retime 3 --threads 1 --interleave --out /tmp/s42/ab/$1-s$2 > /tmp/s42/ab/$1-s$2.log 2>&1
  date >> /tmp/s42/ab/progress
done
echo done > /tmp/s42/ab/DONE2
