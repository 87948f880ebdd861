#!/usr/bin/env bash
# Session 54's GPU run, in two parts on one machine (docs/PERFORMANCE.md, "The CUDA
# target again, and a GPU dataset"). Run from the repository root on the GPU machine,
# after scripts/gpu-pack here has written .gpu/ (carried). W keeps the records and the
# trained estimator between the parts; each part ends by packing W's logs into OUT.
#   part 1: the GPU correctness suite, the CUDA network test, a GPU dataset of random
#           programs of held-out tasks (resnet18's layers but C6 and C9, random shapes
#           and networks), and an ensemble trained on it (held-out accuracy, then all);
#   part 2: resnet18-c6 and -c9, 200 trials: the gradient search with its default
#           estimator (untrained on cuda) and annealing; then the gradient search with
#           the ensemble of part 1.
#   docs/perf/gpu-session54/run.sh 1|2
# The working tree travels to the GPU machine only under 64 MiB: move docs/perf's other
# folders aside for the call and back after it (docs/gpu.md, "The next GPU session's run").
set -uo pipefail
part=${1:?part 1 or 2}
TL=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
export LD_LIBRARY_PATH=$PWD/.gpu/lib:$TL/lib:$TL/../nvidia/cu13/lib:/usr/local/cuda/lib64
mkdir -p /tmp/basin-gpu-build && ln -sfn "$PWD/.gpu/bin" /tmp/basin-gpu-build/bin  # the tests find basin there
B=$PWD/.gpu/bin/basin
W=${W:-/tmp/gs}
OUT=${OUT:-gpu-session54-out}
mkdir -p "$W" "$OUT"
step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  echo "== $name: $*"
  timeout "$limit" "$@" > "$W/$name.log" 2>&1
  rc=$?
  echo "== $name: rc $rc in $((SECONDS - t0)) s"
  tail -n "${TAIL:-12}" "$W/$name.log"
}
held_out=resnet18-c1,resnet18-c2,resnet18-c3,resnet18-c4,resnet18-c5,resnet18-c7,resnet18-c8,resnet18-c10,resnet18-c11,resnet18-c12
if [[ $part == 1 ]]; then
  nvidia-smi -L; nproc
  step cuda_test 180 .gpu/bin/cuda_test --gtest_filter='CudaOnGpu.*:Cuda.TheTargetSaysWhenThereIsNoGpu'
  step network_test 90 .gpu/bin/network_test --gtest_filter='*Cuda*'
  step dataset "${DATASET_S:-150}" "$B" estimator dataset --target cuda --records "$W/gpu.db" \
      --tasks "$held_out,shapes:40,nets:10" --per-task 16 --seed 54 --timeout 5 --json
  step train_heldout 60 "$B" estimator train --target cuda --records "$W/gpu.db" --estimator ensemble --seed 1 --json
  step train_all 60 "$B" estimator train --target cuda --records "$W/gpu.db" --estimator ensemble --seed 1 \
      --test-fraction 0 --out "$W/gpu_ensemble.bin" --json
  cp "$W/gpu.db" "$W/gpu_ensemble.bin" "$OUT/" 2>/dev/null
else
  # A fresh machine has no W: the ensemble that part 1 sent back, carried in .gpu/data.
  [[ -f $W/gpu_ensemble.bin ]] || cp .gpu/data/gpu_ensemble.bin "$W/"
  step base 280 env PYTHONUNBUFFERED=1 python3 bench/gpu_ops.py --workloads resnet18-c6,resnet18-c9 \
      --strategies gradient,annealing --trials 200 --seed 1 --basin "$B" --out "$W/base"
  step pretrained 160 env PYTHONUNBUFFERED=1 python3 bench/gpu_ops.py --workloads resnet18-c6,resnet18-c9 \
      --strategies gradient --trials 200 --seed 1 --estimator "$W/gpu_ensemble.bin" --basin "$B" --out "$W/pretrained"
fi
tar czf "$OUT/part$part.tgz" -C "$W" --exclude='*.db' --exclude='*.bin' .
ls -la "$OUT"
