#!/usr/bin/env python3
# Session 59's programs measured alone: each group's configurations, one `basin op
# --workload W --config F --json` each, one thread per kernel, printed with their
# latency. Run from anywhere: python3 programs.py GROUP [NAME-PREFIX...]
#   c2-tiles           resnet18-c2, vec=w.acc1.stage register tiles
#   avx2-c12-blocks    resnet18-c12, level-1 accumulator blocks (set BASIN_VECTOR_ISA=avx2)
#   avx2-blocks-more   the same on C12, C10 and C9 (set BASIN_VECTOR_ISA=avx2)
import json, os, subprocess, sys, tempfile

GROUPS = {
  'c2-tiles': [
    ('a 4x4x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [16, 1, 4], 'h': [1, 1, 4], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('4x7x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [16, 1, 4], 'h': [1, 1, 7], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('8x2x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [8, 1, 8], 'h': [1, 1, 2], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('4x2x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [16, 1, 4], 'h': [1, 1, 2], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('2x14x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [32, 1, 2], 'h': [1, 1, 14], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('4x4x8 rc64', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [16, 1, 4], 'h': [1, 1, 4], 'w': [7, 1, 8], 'rc': [64]}, 512),
    ('g4 acc2 4x4x8', 'resnet18-c2', 'tile.vec=w.acc2.stage', {'c': [4, 4, 4], 'h': [2, 1, 4], 'w': [1, 1, 8], 'rc': [64]}, 1024),
    ('vec=c 1x28 c16', 'resnet18-c2', 'tile.vec=c.acc1.stage', {'c': [2, 1, 16], 'h': [28, 1, 1], 'w': [2, 1, 28], 'rc': [32]}, 1024),
    ('1x28x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [64, 1, 1], 'h': [1, 1, 28], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('2x7x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [32, 1, 2], 'h': [1, 1, 7], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('16x1x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [4, 1, 16], 'h': [1, 1, 1], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('2x8x8', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [32, 1, 2], 'h': [1, 1, 8], 'w': [7, 1, 8], 'rc': [8]}, 512),
    ('4x4x16', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [16, 1, 4], 'h': [1, 1, 4], 'w': [4, 1, 16], 'rc': [8]}, 512),
    ('2x4x16', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [32, 1, 2], 'h': [1, 1, 4], 'w': [4, 1, 16], 'rc': [8]}, 512),
    ('4x2x16', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [16, 1, 4], 'h': [1, 1, 2], 'w': [4, 1, 16], 'rc': [8]}, 512),
    ('4x4x8 u1024', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [16, 1, 4], 'h': [1, 1, 4], 'w': [7, 1, 8], 'rc': [8]}, 1024),
    ('4x7x8 u1024', 'resnet18-c2', 'tile.vec=w.acc1.stage', {'c': [16, 1, 4], 'h': [1, 1, 7], 'w': [7, 1, 8], 'rc': [8]}, 1024),
  ],
  'avx2-c12-blocks': [
    ('g1 c2.2.8 h1.1.7 w1.7.1 u16', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [2, 2, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('S2 folded c4.1.8 w7.1.1', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [4, 1, 8], 'h': [1, 1, 7], 'w': [7, 1, 1], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('S2 c only c2.2.8 w7.1.1', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [2, 2, 8], 'h': [1, 1, 7], 'w': [7, 1, 1], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('S2 w only c4.1.8 w1.7.1', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [4, 1, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('g1 acc2', 'resnet18-c12', 'tile.vec=c.pack.acc2.stage', {'c': [2, 2, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('g1 rc8', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [2, 2, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [8], 'rh': [3], 'rw': [1]}, 16),
    ('g1 rw3', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [2, 2, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [1], 'rh': [3], 'rw': [3]}, 16),
    ('g5 c4.4.8', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [4, 4, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('a1 c4.8.8 h7.1.1 w1.1.7', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [4, 8, 8], 'h': [7, 1, 1], 'w': [1, 1, 7], 'rc': [1], 'rh': [3], 'rw': [3]}, 16),
  ],
  'avx2-blocks-more': [
    ('c10 g1 S2=1', 'resnet18-c10', 'tile.vec=c.pack.acc1.stage', {'c': [64, 1, 8], 'h': [7, 1, 1], 'w': [1, 1, 7], 'rc': [1], 'rh': [1], 'rw': [3]}, 64),
    ('c10 g1 S2 h7', 'resnet18-c10', 'tile.vec=c.pack.acc1.stage', {'c': [64, 1, 8], 'h': [1, 7, 1], 'w': [1, 1, 7], 'rc': [1], 'rh': [1], 'rw': [3]}, 64),
    ('c10 g5 S2=1', 'resnet18-c10', 'tile.vec=c.pack.acc1.stage', {'c': [2, 1, 8], 'h': [7, 1, 1], 'w': [1, 1, 7], 'rc': [2], 'rh': [3], 'rw': [3]}, 64),
    ('c10 g5 S2 h7', 'resnet18-c10', 'tile.vec=c.pack.acc1.stage', {'c': [2, 1, 8], 'h': [1, 7, 1], 'w': [1, 1, 7], 'rc': [2], 'rh': [3], 'rw': [3]}, 64),
    ('c10 g5 S2 h7 rc1', 'resnet18-c10', 'tile.vec=c.pack.acc1.stage', {'c': [2, 1, 8], 'h': [1, 7, 1], 'w': [1, 1, 7], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('c12 S2 h7 (w tile)', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [4, 1, 8], 'h': [1, 7, 1], 'w': [1, 1, 7], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('c12 S2 w7 u64', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [4, 1, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [1], 'rh': [3], 'rw': [1]}, 64),
    ('c12 S2 w7 rc8 rw3', 'resnet18-c12', 'tile.vec=c.pack.acc1.stage', {'c': [4, 1, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [8], 'rh': [3], 'rw': [3]}, 64),
    ('c12 unpacked S2 w7', 'resnet18-c12', 'tile.vec=c.acc1.stage', {'c': [4, 1, 8], 'h': [1, 1, 7], 'w': [1, 7, 1], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('c9 S2=1', 'resnet18-c9', 'tile.vec=c.pack.acc1.stage', {'c': [4, 1, 8], 'h': [14, 1, 1], 'w': [2, 1, 7], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('c9 S2 h14', 'resnet18-c9', 'tile.vec=c.pack.acc1.stage', {'c': [4, 1, 8], 'h': [1, 14, 1], 'w': [2, 1, 7], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
    ('c9 S2 h7', 'resnet18-c9', 'tile.vec=c.pack.acc1.stage', {'c': [4, 1, 8], 'h': [2, 7, 1], 'w': [2, 1, 7], 'rc': [1], 'rh': [3], 'rw': [1]}, 16),
  ],
}

BASIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), '../../../build/bin/basin')
group, prefixes = sys.argv[1], sys.argv[2:]
with tempfile.TemporaryDirectory() as tmp:
    config = os.path.join(tmp, 'config.json')
    for name, workload, sketch, splits, unroll in GROUPS[group]:
        if prefixes and not any(name.startswith(p) for p in prefixes):
            continue
        with open(config, 'w') as f:
            json.dump({'sketch': sketch, 'splits': {'n': [1, 1, 1], 'rh': [3], 'rw': [3], **splits}, 'unroll': unroll}, f)
        r = subprocess.run([BASIN, 'op', '--workload', workload, '--config', config, '--json'], capture_output=True,
                           text=True, env=dict(os.environ, BASIN_NUM_THREADS='1'))
        try:
            d = json.loads(r.stdout)
            print(f"{name:32s} {d['latency_us']:9.1f} verified={d['verified']}", flush=True)
        except ValueError:
            print(name, 'ERR', r.stderr[-300:], flush=True)
