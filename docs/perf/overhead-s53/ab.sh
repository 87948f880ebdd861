#!/bin/bash
# Session 53's A/B of the network tuner's overhead: `basin tune zoo:resnet18 --budget
# 40s`, three runs of each binary in turn, the command's wall time and peak memory by
# /usr/bin/time. BASE and NEW are the two `basin` binaries (session 53: daf3d78 and
# this session's build); run it in an empty folder, then summary.py there.
set -e
: "${BASE:?the base basin binary}" "${NEW:?the new basin binary}"
for i in 1 2 3; do
  for v in base new; do
    bin=$BASE; [ $v = new ] && bin=$NEW
    rm -f $v$i.db
    /usr/bin/time -f "%e %M" -o $v$i.time "$bin" tune zoo:resnet18 --budget 40s --records $v$i.db --json > $v$i.json 2> $v$i.err
  done
done
