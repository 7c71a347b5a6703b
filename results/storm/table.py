#!/usr/bin/env python3
"""Prints the storm table from the runs of deploy/bench-storm.sh.

    results/storm/table.py DIR...   (each DIR holds report.json and load.txt)

Runs are listed in the order given; the summary line gives each build's 100 % back.
"""
import collections
import json
import os
import sys

print("| run | load avg before | 50 % back | 99 % back | 100 % back | `ws_connect` p99 "
      "| `friends_list` p99 | `friends_list` max | errors | back / hit |")
print("|---|---|---|---|---|---|---|---|---|---|")
back = collections.defaultdict(list)
for run in sys.argv[1:]:
    with open(os.path.join(run, "report.json")) as f:
        report = json.load(f)
    storm = next(s for s in report["scenarios"] if s["name"] == "storm")
    b, ops, st = storm["storm"]["back_s"], storm["ops"], storm["storm"]
    with open(os.path.join(run, "load.txt")) as f:
        load = f.readline().split()[1]
    fl = ops["friends_list"]
    path = os.path.normpath(run)
    name = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    back[name.rsplit("-", 1)[0]].append(b["100"])
    print(f"| {name} | {load} | {b['50']:.2f} s | {b['99']:.2f} s | {b['100']:.2f} s "
          f"| {ops['ws_connect']['p99_ms']:.1f} ms | {fl['p99_ms']:.1f} ms | {fl['max_ms']:.1f} ms "
          f"| {st['errors']} | {st['players_back']:,} / {st['players_hit']:,} |")
print()
for build, seconds in back.items():
    print(f"- {build}: 100 % back in " + " / ".join(f"{s:.2f}" for s in seconds) + " s")
