#!/bin/bash
cd /work/main
for ws in "$@"; do
  set -- $ws
  /usr/bin/python3 bench/search.py --workloads $1 --strategies annealing,gradient,gradient:nearest_tilings=1 --seeds $2 --trials 1000 --retime 3 --threads 1 --interleave --out /tmp/s41/ab/$1-s$2 > /tmp/s41/ab/$1-s$2.log 2>&1
done
echo done > /tmp/s41/ab/DONE
