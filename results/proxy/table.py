#!/usr/bin/env python3
"""Prints the side-by-side table of results/proxy from the raw JSON of its runs."""
import json
import pathlib

here = pathlib.Path(__file__).parent
runs = {side: [json.loads((here / f"{side}-{i}.json").read_text()) for i in (1, 2, 3)]
        for side in ("before", "after")}
measures = [row["measure"] for row in runs["before"][0]["rows"]]
print("| measure | direct (6 runs) | proxy before, runs 1/2/3 | proxy after, runs 1/2/3 | added after (p50/p99 rows) |")
print("|---|---:|---:|---:|---:|")
for k, measure in enumerate(measures):
    direct = [r["rows"][k]["direct"] for side in runs.values() for r in side]
    cell = lambda side: " / ".join(f"{r['rows'][k]['proxy']:.1f}" for r in runs[side])
    added = " / ".join(f"{r['rows'][k]['added']:.1f}" for r in runs["after"]
                       if "added" in r["rows"][k])
    print(f"| {measure} | {min(direct):.1f}–{max(direct):.1f} | {cell('before')} | {cell('after')} | {added} |")
