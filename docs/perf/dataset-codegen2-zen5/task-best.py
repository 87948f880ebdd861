import sqlite3, math
import sys  # OLD NEW (session 40); session 39 ran it with the defaults
o = sqlite3.connect(sys.argv[1] if len(sys.argv) > 2 else "zen5-old.db"); n = sqlite3.connect(sys.argv[2] if len(sys.argv) > 2 else "ds/zen5-cg2.db")
def load(c):
    return {(t,s,cfg): lat for t,s,cfg,lat in c.execute("select task_key, sketch, config, min_latency_us from records where error='' and min_latency_us is not null")}
O = load(o); N = load(n)
best = {}
for k, v in O.items(): best[k[0]] = min(best.get(k[0], 1e30), v)
bestn = {}
for k, v in N.items(): bestn[k[0]] = min(bestn.get(k[0], 1e30), v)
good = [k for k in N if k in O and O[k] < 1.5 * best[k[0]]]
print("good programs", len(good), "slower >1.2:", sum(N[k]/O[k] > 1.2 for k in good), "faster <0.83:", sum(N[k]/O[k] < 0.83 for k in good))
# task best change
tb = [bestn[t]/best[t] for t in bestn if t in best]
tb.sort(); print("task best new/old quantiles", [round(tb[int(q*(len(tb)-1))],3) for q in (0,0.05,0.25,0.5,0.75,0.95,1)], "geomean %.3f" % math.exp(sum(map(math.log,tb))/len(tb)))
print()
for t in sorted(bestn, key=lambda t: -bestn[t]/best.get(t, 1e30)):
    if t in best and bestn[t]/best[t] > 1.12:
        kb = min((k for k in O if k[0]==t), key=lambda k:O[k])
        print("%.2f best old %.1f new %.1f | that program new %.1f | %s | %s" % (bestn[t]/best[t], best[t], bestn[t], N.get(kb, -1), t[:100], kb[2][:140]))
