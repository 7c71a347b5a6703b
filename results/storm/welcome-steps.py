#!/usr/bin/env python3
"""The welcome's steps from a storm run's report (anyplay-load --json with --metrics-url per
node): per node and step, the welcomes counted, their mean and the bucket bounds holding the
median and the 90th percentile (cloud metric anyplay_welcome_step_seconds, issue 34).

    results/storm/welcome-steps.py REPORT.json...
"""
import json
import re
import sys

STEPS = ["turn", "token", "register", "replace", "announce", "welcome"]
SERIES = re.compile(r'anyplay_welcome_step_seconds_(bucket|count|sum)\{(.*)\}')


def labels(text):
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def series(report):
    """(node, step) -> {"count", "sum", "buckets": [(le, n)]} from every dict holding the series."""
    found = {}

    def walk(o, path):
        if isinstance(o, dict):
            for k, v in o.items():
                m = SERIES.fullmatch(k) if isinstance(v, (int, float)) else None
                if m:
                    lab = labels(m.group(2))
                    one = found.setdefault((path, lab["step"]), {"buckets": []})
                    if m.group(1) == "bucket":
                        le = float("inf") if lab["le"] == "+Inf" else float(lab["le"])
                        one["buckets"].append((le, v))
                    else:
                        one[m.group(1)] = v
                else:
                    walk(v, k)
        elif isinstance(o, list):
            for v in o:
                walk(v, path)

    walk(report, "")
    return found


def quantile_bound(buckets, q):
    buckets = sorted(buckets)
    total = buckets[-1][1]
    for le, n in buckets:
        if n >= q * total:
            return le
    return float("inf")


def ms(seconds):
    return "∞" if seconds == float("inf") else f"{seconds * 1000:,.1f}"


for path in sys.argv[1:]:
    found = series(json.load(open(path)))
    print(f"{path}\n")
    print("| node | step | welcomes | mean, ms | median ≤, ms | p90 ≤, ms |")
    print("|---|---|---:|---:|---:|---:|")
    for (node, step) in sorted(found, key=lambda k: (k[0], STEPS.index(k[1]) if k[1] in STEPS else 99)):
        one = found[(node, step)]
        count = one.get("count", 0)
        mean = one.get("sum", 0) / count if count else 0
        print(f"| {node} | {step} | {count:,.0f} | {ms(mean)} | "
              f"{ms(quantile_bound(one['buckets'], 0.5))} | {ms(quantile_bound(one['buckets'], 0.9))} |")
    print()
