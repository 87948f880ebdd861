#!/bin/bash
# The machine code of each sample.json program with LLVM's region limit (1000) and
# basin's (200): its optimized IR from `basin op --emit llvm`, compiled by llc-16 both
# ways, the two objects compared. Prints: index, workload, IR lines, seconds (1000),
# seconds (200), identical|differs. From the repository root:
#   docs/perf/compile-time/identical.sh > identical-code.txt
here=$(dirname "$0"); tmp=$(mktemp -d)
n=$(/usr/bin/python3 -c "import json;print(len(json.load(open('$here/sample.json'))))")
for i in $(seq 0 $((n-1))); do
  w=$(/usr/bin/python3 -c "import json;print(json.load(open('$here/sample.json'))[$i]['workload'])")
  /usr/bin/python3 -c "import json;json.dump(json.load(open('$here/sample.json'))[$i]['config'],open('$tmp/c.json','w'))"
  build/bin/basin op --workload $w --config $tmp/c.json --timing quick --oracle never --emit llvm 2>/dev/null |
    sed -n '/^; ModuleID/,/^operator  /p' | sed '$d' > $tmp/$i.ll
  a0=$(date +%s.%N); llc-16 -O3 -mcpu=znver4 -filetype=obj -dag-maps-huge-region=1000 -o $tmp/a.o $tmp/$i.ll; a1=$(date +%s.%N)
  llc-16 -O3 -mcpu=znver4 -filetype=obj -dag-maps-huge-region=200 -o $tmp/b.o $tmp/$i.ll; b1=$(date +%s.%N)
  echo "$i $w $(wc -l < $tmp/$i.ll) $(echo "$a1 - $a0" | bc) $(echo "$b1 - $a1" | bc) $(cmp -s $tmp/a.o $tmp/b.o && echo identical || echo differs)"
done
