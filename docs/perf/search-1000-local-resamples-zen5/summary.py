#!/usr/bin/python3
"""One line per strategy and run of an A/B: the share of annealing's trials and seconds
to reach annealing's best during tuning, on the re-timed curves, and within the
re-timings' noise d; the final program side by side against annealing's; overhead.

    /usr/bin/python3 summary.py DIR/*.results.json   (bench/search.py's results.json files)
"""
import importlib.util
import json
import os
import sys
from statistics import median

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bs", os.path.join(here, "..", "..", "..", "bench", "search.py"))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "bench"))
bs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bs)


def shares(h, ann):
    return f"{h[1] / ann['trials']:.2f}/{h[0] / ann['search_seconds']:.2f}" if h else "miss"


for path in sys.argv[1:]:
    runs = json.load(open(path))["runs"]
    if not all(r.get("bests_retimed_us") for r in runs):
        continue
    ann = next(r for r in runs if r["strategy"] == "annealing")
    target = bs.retimed_curve(ann)[-1][2]
    d = bs.timing_noise(runs)
    print(f"{os.path.basename(path)}  d={100 * d:.1f}%")
    for r in runs:
        if r is ann:
            continue
        gc = bs.retimed_curve(r)
        print(f"    {r['strategy']:30s} during {shares(bs.reach(r['curve'], ann['best_latency_us']), ann):10s} "
              f"re-timed {shares(bs.reach(gc, target), ann):10s} within d {shares(bs.reach(gc, (1 + d) * target), ann):10s} "
              f"side by side {median(r['side_by_side_us']) / median(ann['side_by_side_us']):.3f} "
              f"overhead {100 * r['overhead_fraction']:.1f}%")
