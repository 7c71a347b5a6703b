#!/usr/bin/env python3
"""One generator run of deploy/peers.sh as JSON: its CPU and memory (from /usr/bin/time -v and
a VmRSS sample), and e2e_login as the generator itself reported it (anyplay-load's --json
report, Locust's CSV)."""
import csv
import json
import sys

(name, run, raw, time_file, idle_kb, load_avg, status, node_ticks, clk_tck,
 players, rate, hold, command) = sys.argv[1:14]

times = {}
for line in open(time_file):
    key, _, value = line.strip().rpartition(": ")
    times[key] = value
user, system = float(times["User time (seconds)"]), float(times["System time (seconds)"])
peak_kb = int(times["Maximum resident set size (kbytes)"])

if name.startswith("anyplay-load"):
    report = json.load(open(f"{raw}.report.json"))
    login = next(s for s in report["scenarios"] if s["name"] == "login")
    e2e = login["ops"]["e2e_login"]
    ok, p50, p99 = e2e["ok"], e2e["p50_ms"], e2e["p99_ms"]
else:
    # Locust's percentiles are its own: whole milliseconds below 100 ms, two digits above.
    row = next(r for r in csv.DictReader(open(f"{raw}_stats.csv")) if r["Name"] == "e2e_login")
    ok = int(row["Request Count"]) - int(row["Failure Count"])
    p50, p99 = float(row["50%"]), float(row["99%"])

idle = None if idle_kb == "null" else int(idle_kb)
json.dump({
    "generator": name,
    "run": int(run),
    "command": command,
    "players": int(players),
    "rate": float(rate),
    "hold_s": float(hold),
    "load_avg_1m_before": float(load_avg),
    "exit_status": int(status),
    "cpu": {
        "user_s": user,
        "system_s": system,
        "total_s": round(user + system, 2),
        "per_1000_logins_s": round((user + system) / ok * 1000, 3) if ok else None,
    },
    "memory": {
        "peak_mb": round(peak_kb / 1024, 1),
        "idle_mb": None if idle is None else round(idle / 1024, 1),
        "idle_kb_per_player": None if idle is None or not ok else round(idle / ok, 1),
    },
    "e2e_login": {"ok": ok, "p50_ms": p50, "p99_ms": p99},
    "node_cpu_s": round(int(node_ticks) / int(clk_tck), 2),
}, sys.stdout, indent=1)
print()
