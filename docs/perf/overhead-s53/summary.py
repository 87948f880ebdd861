# One line per run of ab.sh (in the folder given, else this script's own).
import json, os, sys
d0 = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
for v in ['base', 'new']:
    for i in [1, 2, 3]:
        f = os.path.join(d0, f'{v}{i}.json')
        if not os.path.exists(f) or os.path.getsize(f) == 0:
            continue
        d = json.load(open(f))
        wall, rss = open(os.path.join(d0, f'{v}{i}.time')).read().split()[:2]
        print(f"{v}{i}: overhead {100 * d['overhead_fraction']:.1f}%  search {d['search_seconds']:.2f} s  "
              f"measure {d['measure_seconds']:.2f}  setup {d['setup_seconds']:.2f}  propose {d['propose_seconds']:.2f}  "
              f"update {d['update_seconds']:.2f}  trials {d['trials']}  estimate {d['estimated_latency_us'] / 1000:.2f} ms  "
              f"command {wall} s  peak {int(rss) / 1024:.0f} MB")
