#!/usr/bin/env python3
"""The markdown table of deploy/peers.sh's runs in a directory (its <generator>-<run>.json)."""
import json
import pathlib
import sys

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "results/peers")
machine = json.loads((here / "machine.json").read_text())
runs = [json.loads(p.read_text()) for p in sorted(here.glob("*-[0-9]*.json"))
        if not p.name.endswith(".report.json")]
order = {"anyplay-load-before": 0, "anyplay-load": 1, "locust": 2}
runs.sort(key=lambda r: (order.get(r["generator"], 9), r["run"]))
print(f"machine: {machine['nproc']} cores, {machine['cpu']}, {machine['memory_gib']} GiB, "
      f"Linux {machine['kernel']}; commit {machine['commit'][:7]}"
      + (f" (+{machine['uncommitted_changes']} uncommitted)" if machine["uncommitted_changes"] else ""))
print()
print("| generator | run | load avg | logins ok | CPU-s user + system | CPU-s / 1,000 logins "
      "| peak MB | idle MB | idle KB / player | e2e_login p50 ms | p99 ms | node CPU-s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in runs:
    cpu, mem, e2e = r["cpu"], r["memory"], r["e2e_login"]
    print(f"| {r['generator']} | {r['run']} | {r['load_avg_1m_before']:.2f} "
          f"| {e2e['ok']} of {r['players']} | {cpu['total_s']:.2f} ({cpu['user_s']:.2f} + {cpu['system_s']:.2f}) "
          f"| {cpu['per_1000_logins_s']:.3f} | {mem['peak_mb']:.1f} | {mem['idle_mb']} "
          f"| {mem['idle_kb_per_player']} | {e2e['p50_ms']:.2f} | {e2e['p99_ms']:.2f} | {r['node_cpu_s']:.2f} |")
