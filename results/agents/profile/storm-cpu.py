#!/usr/bin/env python3
"""Where the two cores went in a 50,000-player storm, from `perf record -a` (deploy/perf-storm.sh agents).

    perf script -i DIR/perf.data -F comm,pid,time,ip,dso | results/agents/profile/storm-cpu.py DIR SECONDS

Groups each sample by the process it came from (DIR/cpu-start.txt names the processes by pid),
over the first SECONDS from the drop (the storm's 100 % back): idle, PostgreSQL, the nodes, the
agents, the coordinator, NATS, the rest; then the busy share per 5 s, and the nodes' and agents'
samples by where they ran (the kernel, libc, their own code).
"""
import collections
import re
import sys

out, seconds = sys.argv[1], float(sys.argv[2])
groups = {}
for line in open(f"{out}/cpu-start.txt"):
    parts = line.split(None, 3)
    if len(parts) < 4:
        continue
    pid, comm, _, args = parts
    if "anyplay-cloud" in args:
        groups[pid] = "nodes (anyplay-cloud ×4)"
    elif "anyplay-load agent" in args:
        groups[pid] = "agents (anyplay-load agent ×4)"
    elif "anyplay-load" in args:
        groups[pid] = "coordinator (anyplay-load)"
    elif comm == "postgres":
        groups[pid] = "PostgreSQL"
    elif comm == "nats-server":
        groups[pid] = "NATS"

sample = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+([\d.]+):\s+\S+\s+\((.*)\)")
start = None
by_group = collections.Counter()
by_bucket = collections.defaultdict(collections.Counter)
by_dso = collections.defaultdict(collections.Counter)
total = 0
for line in sys.stdin:
    m = sample.match(line)
    if not m:
        continue
    comm, pid, t, dso = m.group(1), m.group(2), float(m.group(3)), m.group(4)
    start = t if start is None else start
    if t - start > seconds:
        continue
    if comm == "swapper":
        group = "idle"
    else:
        group = groups.get(pid) or ("PostgreSQL" if comm == "postgres" else "other")
    total += 1
    by_group[group] += 1
    by_bucket[int((t - start) // 5)][group != "idle"] += 1
    if group.startswith(("nodes", "agents")):
        where = "kernel" if "kernel" in dso else dso.rsplit("/", 1)[-1]
        by_dso[group][where] += 1

print(f"{total} samples of both CPUs over the first {seconds:g} s from the drop\n")
print("| where | share of all samples |")
print("|---|--:|")
for group, n in by_group.most_common():
    print(f"| {group} | {100 * n / total:.1f} % |")
print("\n| seconds from the drop | busy |")
print("|---|--:|")
for b in sorted(by_bucket):
    c = by_bucket[b]
    print(f"| {5 * b}–{5 * b + 5} | {100 * c[True] / (c[True] + c[False]):.0f} % |")
for group in sorted(by_dso):
    c = by_dso[group]
    n = sum(c.values())
    parts = ", ".join(f"{dso} {100 * k / n:.0f} %" for dso, k in c.most_common(4))
    print(f"\n{group}: {parts}")
