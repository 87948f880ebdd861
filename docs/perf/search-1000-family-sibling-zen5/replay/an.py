import sqlite3, sys, collections, json
fam = lambda s: s.split('.')[1] + ('.pack' if 'pack' in s else '')
for v in sys.argv[1:]:
    for seed in [3,4,5,6,7,8]:
        db=sqlite3.connect(f"{v}-{seed}.db")
        rows=db.execute("select id, sketch, min_latency_us, latency_us from records where error='' order by id").fetchall()
        out=[]
        for hi in [150,200,250,300]:
            b={}
            for r in rows[:hi]:
                f=fam(r[1]); b[f]=min(b.get(f,1e9), r[2])
            out.append(f"{hi}:p{b.get('vec=c.pack',0):.0f}/w{b.get('vec=w',0):.0f}")
        npack=sum(1 for r in rows[100:300] if 'pack' in r[1])
        print(v, seed, " ".join(out), "pack trials 100-300:", npack)
