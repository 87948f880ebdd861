#!/bin/bash
cd /work/main
export DIR=${DIR:-/tmp/s48/300}
for w in resnet18-c2 resnet18-c12 resnet18-c6; do
  docs/perf/tile-sketch-2/three-hundred.sh $w 'sketch_followups=0' 1 2 3
  docs/perf/tile-sketch-2/three-hundred.sh $w '' 1 2 3
done
echo done
