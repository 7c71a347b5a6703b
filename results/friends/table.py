#!/usr/bin/env python3
"""Prints the friend-writes table from runs of deploy/bench-storm.sh (its friends phase).

    results/friends/table.py DIR...   (each DIR holds report.json and load.txt)

Writes per second are the phase's requests and accepts over its duration; in-flight is
the run's --max-in-flight (the phase is closed loop: that many calls at once).
"""
import json
import os
import sys

print("| run | commit | load avg before | in flight | writes | seconds | writes/s "
      "| request p50 / p99 | accept p50 / p99 | not ok |")
print("|---|---|---|--:|--:|--:|--:|---|---|--:|")
for run in sys.argv[1:]:
    with open(os.path.join(run, "report.json")) as f:
        report = json.load(f)
    phase = next(s for s in report["scenarios"] if s["name"] == "friends")
    ops = phase["ops"]
    req, acc = ops["friend_request"], ops["friend_accept"]
    writes = req["count"] + acc["count"]
    not_ok = writes - req["ok"] - acc["ok"]
    with open(os.path.join(run, "load.txt")) as f:
        load = f.readline().split()[1]
    path = os.path.normpath(run)
    name = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    print(f"| {name} | `{report['commit'][:7]}` | {load} | {report['settings']['max_in_flight']} "
          f"| {writes:,} | {phase['seconds']:.1f} | {writes / phase['seconds']:,.0f} "
          f"| {req['p50_ms']:.0f} / {req['p99_ms']:.0f} ms | {acc['p50_ms']:.0f} / {acc['p99_ms']:.0f} ms "
          f"| {not_ok} |")
