#!/bin/bash
cd /work/main
export DIR=${DIR:-/tmp/s48/300}
for o in sketch_followup_margin=0.02 sketch_followups=1; do
for w in resnet18-c12 resnet18-c2; do
  docs/perf/tile-sketch-2/three-hundred.sh $w $o 1 2 3
done; done
echo done
