import glob, os, re, sys
rows = []
for d in sorted(glob.glob(sys.argv[1] + '/*/table.md')):
    t = open(d).read().splitlines()
    sect = 0
    info = {}
    for line in t:
        if line.startswith('Against annealing'): sect = 1
        elif line.startswith('The best programs timed side by side'): sect = 2
        elif line.startswith('Re-timed curves'): sect = 3
        elif line.startswith('Tuned ResNet') or line.startswith('Tuning overhead'): sect = 4
        if not line.startswith('| ') or line.startswith('| workload') : continue
        c = [x.strip() for x in line.strip('|').split('|')]
        if sect == 0: info.setdefault((c[0], c[1], c[2]), {})['ovh'] = c[7]
        if sect == 1: info.setdefault((c[0], c[1], c[2]), {})['tune'] = c[3] + '/' + c[4]
        if sect == 2: info.setdefault((c[0], c[1], c[2]), {})['sbs'] = c[4]
        if sect == 3:
            k = info.setdefault((c[0], c[1], c[2]), {})
            k['retimed'] = c[5] + '/' + c[6]; k['d'] = c[8]; k['withind'] = c[9]
    for k, v in info.items():
        if k[2] == 'annealing': continue
        print('| %s | %s | %s | %s | %s | %s | %s | %s |' % (k[0], k[1], k[2], v.get('tune'), v.get('retimed'), v.get('withind'), v.get('sbs'), v.get('ovh')))
