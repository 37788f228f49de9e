#!/usr/bin/env python3
"""Checks that the includes between components follow the layering written in
docs/ARCHITECTURE.md (its ```layers block) and that they form no cycle other
than one the block names as tolerated. A component is a folder under src/, or
cli/ or witness/; include/proto/ (the wire formats) is open to all.
Prints one line per violation; exits 1 when there is any."""
import os
import re
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
doc = open(os.path.join(root, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
m = re.search(r"```layers\n(.*?)```", doc, re.S)
if not m:
    sys.exit("check-includes: no ```layers block in docs/ARCHITECTURE.md")
allowed, tolerated = {}, set()
for line in m.group(1).splitlines():
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, deps = line.partition(":")
    if name.strip() == "tolerated-cycle":
        tolerated.add(frozenset(deps.split()))
        continue
    allowed[name.strip()] = set(deps.split())

def component_dirs():
    for c in sorted(os.listdir(os.path.join(root, "src"))):
        if os.path.isdir(os.path.join(root, "src", c)):
            yield c, os.path.join(root, "src", c)
    for c in ("cli", "witness"):
        yield c, os.path.join(root, c)

inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
edges, bad = {}, []
for comp, d in component_dirs():
    if comp not in allowed:
        bad.append("%s: not in the layers block of docs/ARCHITECTURE.md" % comp)
        continue
    edges[comp] = set()
    for f in sorted(os.listdir(d)):
        if not f.endswith((".c", ".h")):
            continue
        path = os.path.join(d, f)
        for target in inc.findall(open(path, encoding="utf-8").read()):
            full = os.path.normpath(os.path.join(d, target))
            rel = os.path.relpath(full, root).split(os.sep)
            if rel[0] == "include":
                continue
            dep = rel[1] if rel[0] == "src" and len(rel) > 2 else rel[0]
            if dep == comp:
                continue
            edges[comp].add(dep)
            if dep not in allowed[comp]:
                bad.append("%s/%s includes %s: %s may not depend on %s (docs/ARCHITECTURE.md)"
                           % (os.path.relpath(d, root), f, target, comp, dep))

# Cycles: strongly connected components of the include graph (Tarjan).
index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = n[0]
    n[0] += 1
    stack.append(v)
    on.add(v)
    for w in sorted(edges.get(v, ())):
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        scc = set()
        while True:
            w = stack.pop()
            on.discard(w)
            scc.add(w)
            if w == v:
                break
        sccs.append(scc)
for v in sorted(edges):
    if v not in index:
        visit(v)
for scc in sccs:
    if len(scc) > 1:
        if frozenset(scc) in tolerated:
            print("check-includes: tolerated cycle (to be removed): %s" % " <-> ".join(sorted(scc)))
        else:
            bad.append("include cycle: %s" % " <-> ".join(sorted(scc)))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
