#!/usr/bin/env python3
"""Prints the faults of plans/storm.yaml runs as one Markdown table, with how many players the
login wave got online (fewer players return faster, so runs compare only at equal numbers).

    results/storm/plan-table.py RUN_DIR...   (each holding run/report.json and run/load.json)
"""

import json
import sys


def row(path):
    report = json.load(open(f"{path}/run/report.json"))
    login = next(s for s in json.load(open(f"{path}/run/load.json"))["scenarios"] if s["name"] == "login")
    players = login["players"]
    for fault in report["faults"]:
        back = fault["back_s"]
        yield (
            f"| {path.rstrip('/').split('/')[-1]} | {players['online']:,} / {players['asked']:,} "
            f"| {login['ops']['e2e_login']['p50_ms']:,.0f} ms | {fault['at']:g} s | {fault['players_hit']:,} "
            f"| {back['50']} s | {back['99']} s | {back['100']} s | {fault['errors']} |"
        )


print("| run | online / asked | e2e_login p50 | drop at | hit | 50 % back | 99 % back | 100 % back | errors |")
print("|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    for line in row(path):
        print(line)
