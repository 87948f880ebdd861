# new/old latency of the same programs (task, sketch, config), by sketch family
import sqlite3,sys,math,collections
def load(p):
    c=sqlite3.connect(f"file:{p}?mode=ro",uri=True)
    return {(t,s,cf):l for t,s,cf,l in c.execute("select task_key,sketch,config,latency_us from records where error='' and latency_us>0")}
old=load(sys.argv[1]); new=load(sys.argv[2])
keys=[k for k in new if k in old]
print("paired",len(keys),"of new",len(new))
fam=collections.defaultdict(list)
for k in keys:
    s=k[1]
    f=('pack' if '.pack' in s else ('vec=c' if 'vec=c' in s else 'other'))
    fam[f].append(math.log(new[k]/old[k])); fam['all'].append(math.log(new[k]/old[k]))
for f,v in sorted(fam.items()):
    v.sort(); print(f"{f:8s} n={len(v):6d} geomean new/old {math.exp(sum(v)/len(v)):.3f}  quartiles {math.exp(v[len(v)//4]):.3f} {math.exp(v[3*len(v)//4]):.3f}")
# pairwise order agreement within task
by=collections.defaultdict(list)
for k in keys: by[k[0]].append(k)
ok=tot=0
for t,ks in by.items():
    for i in range(len(ks)):
        for j in range(i+1,len(ks)):
            a,b=ks[i],ks[j]
            if old[a]==old[b] or new[a]==new[b]: continue
            tot+=1; ok+=(old[a]<old[b])==(new[a]<new[b])
print("pairs ordered alike",round(ok/tot,3),"of",tot)
