# One line per run of ab.sh (in the folder given, else this script's own).
import glob, json, os, sys
d0 = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for f in sorted(glob.glob(os.path.join(d0, '*.json'))):
    if os.path.getsize(f) == 0:
        continue
    d = json.load(open(f))
    wall, rss = open(f[:-5] + '.time').read().split()[:2]
    print(f"{os.path.basename(f)[:-5]:28s} overhead {100 * d['overhead_fraction']:.1f}%  search {d['search_seconds']:.2f} s  "
          f"measure {d['measure_seconds']:.2f}  setup {d['setup_seconds']:.2f}  propose {d['propose_seconds']:.2f}  "
          f"update {d['update_seconds']:.2f}  trials {d['trials']}  estimate {d['estimated_latency_us'] / 1000:.3f} ms  "
          f"command {wall} s  peak {int(rss) / 1024:.0f} MB")
