#!/bin/bash
source <(sed -n 2,6p /tmp/s58/grid.sh)
export B=32
run X=base
run X_MLP_WINDOW=128 X_TREE_WINDOW=128
