#!/usr/bin/python3
# Session 60: gemm-1024's 16-accumulator register tiles of AVX-512 measured alone, the
# outer splits alike (i's S1 of 8 at accumulator level 2, j's outer levels 1, k as
# given, unroll 1024): `basin op --workload gemm-1024 --config F --timing quick
# --oracle never --json`, one thread. Run from anywhere: python3 gemm_tiles.py
import json, os, subprocess, tempfile
B = os.environ.get('B', os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../build/bin/basin'))
programs = []
for sketch in ['tile.vec=j.pack.acc2', 'tile.vec=j.pack.acc1']:
    for ti, tj in [(16, 16), (8, 32), (4, 64)]:  # i x j; 2 x 128 is over 64 lanes
        for k in [1, 512]:
            s1 = 8 if sketch.endswith('acc2') else 1
            programs.append((f'{sketch} {ti}x{tj} k{k}', sketch, {'i': [1024 // ti // s1, s1, ti], 'j': [1, 1, tj], 'k': [k]}))
for sketch in ['tile.vec=i.acc2', 'tile.vec=i.pack.acc2']:  # vectorized along i: A's rows, strided unless packed
    for ti, tj in [(16, 16), (32, 8), (64, 4)]:
        programs.append((f'{sketch} {ti}x{tj} k8', sketch, {'i': [1024 // ti // 8, 8, ti], 'j': [1, 1, tj], 'k': [8]}))
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, 'config.json')
    for name, sketch, splits in programs:
        with open(path, 'w') as f:
            json.dump({'sketch': sketch, 'splits': splits, 'unroll': 1024}, f)
        r = subprocess.run([B, 'op', '--workload', 'gemm-1024', '--config', path, '--timing', 'quick', '--oracle',
                            'never', '--json'], capture_output=True, text=True,
                           env=dict(os.environ, BASIN_NUM_THREADS='1'))
        try:
            print(f"{name:36s} {json.loads(r.stdout)['latency_us']:9.1f}", flush=True)
        except ValueError:
            print(name, 'ERR', r.stderr.strip()[-200:], flush=True)
