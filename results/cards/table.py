#!/usr/bin/env python3
"""Prints the table of results/cards from the raw JSON reports of its runs.

    results/cards/table.py [DIR SIDE...]   (default: this folder, sides "before" and "after")

reads DIR/STORE-SIDE-RUN.{json,load} for each store, side and run 1-3."""
import json
import pathlib
import re
import sys

here = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent
sides = sys.argv[2:] or ["before", "after"]
ROUTE = 'route="/v1/cards"'


def handler(server):
    """Mean handler time (ms) and the histogram bucket (ms) holding the p99, all nodes."""
    total = count = 0.0
    buckets = {}
    for metrics in server.values():
        total += metrics[f"anyplay_http_handler_seconds_sum{{{ROUTE}}}"]
        count += metrics[f"anyplay_http_handler_seconds_count{{{ROUTE}}}"]
        for key, value in metrics.items():
            m = re.fullmatch(r'anyplay_http_handler_seconds_bucket\{le="([^"]+)",' + re.escape(ROUTE) + r"\}", key)
            if m:
                le = float("inf") if m[1] == "+Inf" else float(m[1])
                buckets[le] = buckets.get(le, 0) + value
    p99 = min(le for le, n in buckets.items() if n >= 0.99 * count)
    return 1000 * total / count, 1000 * p99


print("| store | code | run | load avg | cards p50 ms | p95 ms | p99 ms | max ms | generator late p50 / p99 ms "
      "| handler mean ms | handler p99 ≤ ms | nodes' CPU, cores |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for store in ("sqlite", "postgres"):
    for side in sides:
        for run in (1, 2, 3):
            base = here / f"{store}-{side}-{run}"
            if not base.with_suffix(".json").exists():
                continue
            report = json.loads(base.with_suffix(".json").read_text())
            load = base.with_suffix(".load").read_text().strip()
            cards = next(s for s in report["scenarios"] if s["name"] == "cards")["ops"]["cards"]
            assert cards["ok"] == cards["count"], f"{base}: failed calls"
            lag = report["generator"]["sched_lag_ms"]
            mean, p99 = handler(report["server"])
            cpu = sum(n["cpu_cores_avg"] for n in report["process"]["nodes"])
            print(f"| {store} ({len(report['server'])} node{'s' if len(report['server']) > 1 else ''}) "
                  f"| {side} `{report['commit']}` | {run} | {load} | {cards['p50_ms']:.2f} | {cards['p95_ms']:.2f} "
                  f"| **{cards['p99_ms']:.2f}** | {cards['max_ms']:.2f} | {lag['p50']:.2f} / {lag['p99']:.2f} "
                  f"| {mean:.2f} | {p99:.1f} | {cpu:.2f} |")
