"""The table of deploy/bench.sh: one row per figure, this commit beside its baseline measured
in the same run, this ÷ baseline, and issue 34's target. Reads the files deploy/bench.sh wrote."""
import glob
import json
import os
import sys

out = sys.argv[1]


def load(path):
    with open(path) as f:
        return json.load(f)


def proxy_rows():
    runs = [load(p) for p in sorted(glob.glob(os.path.join(out, "proxy-*.json")))]
    if not runs:
        return []

    def row(measure):
        return [next(r for r in run["rows"] if r["measure"] == measure) for run in runs]

    stream = row("throughput, 1 stream(s), MB/s")
    ratios = [r["proxy"] / r["direct"] for r in stream]
    added = [r["added"] for r in row("32-byte ping-pong p50, µs")]
    return [
        ("proxy: one stream, MB/s", median([r["proxy"] for r in stream]),
         "loopback", median([r["direct"] for r in stream]), median(ratios), "≥ 0.60 of loopback"),
        ("proxy: 32-byte ping-pong added at p50, µs", median(added), "", None, None, "≤ 20"),
    ]


def generator_rows():
    per = {}
    for path in glob.glob(os.path.join(out, "peers", "*-1.json")):
        figures = load(path)
        if "generator" in figures:
            per[figures["generator"]] = figures["cpu"]["per_1000_logins_s"]
    if "anyplay-load" not in per:
        return []
    locust = per.get("locust")
    return [("generator: CPU-s per 1,000 logins", per["anyplay-load"], "Locust", locust,
             per["anyplay-load"] / locust if locust else None, "≤ 0.4, and ≤ 0.10 of Locust")]


def storm_rows():
    def figures(name):
        path = os.path.join(out, f"storm-{name}.report.json")
        if not os.path.exists(path):
            return None
        scenarios = {s["name"]: s for s in load(path)["scenarios"]}
        storm = scenarios["storm"]["storm"]
        back = storm["back_s"]["100"] if storm["players_back"] == storm["players_hit"] else None
        return {
            "back": back,
            "login": scenarios["login"]["ops"]["e2e_login"]["p99_ms"],
            "cards": scenarios["cards"]["ops"]["cards"]["p99_ms"],
        }

    this, before = figures("this"), figures("before")
    if this is None:
        return []
    rows = []
    for key, label, target in [
        ("back", "storm drop, 5,000 players, one SQLite node: 100 % back, s", "≤ 1.7"),
        ("login", "e2e_login p99 at 200/s, 5,000 players, ms", "≤ 20"),
        ("cards", "cards ×100 p99, ms", "≤ 3"),
    ]:
        base = before[key] if before else None
        ratio = this[key] / base if base and this[key] else None
        rows.append((label, this[key], "previous release" if before else "", base, ratio, target))
    return rows


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def fmt(value):
    if value is None:
        return "–"
    return f"{value:,.2f}"


machine = load(os.path.join(out, "machine.json"))
print(f"machine: {machine['nproc']} cores, {machine['cpu']}, {machine['memory_gib']} GiB, "
      f"Linux {machine['kernel']}; commit {machine['commit'][:7]}"
      + (f" (+{machine['uncommitted_changes']} uncommitted)" if machine["uncommitted_changes"] else ""))
print()
print("| figure | this commit | baseline | baseline's figure | this ÷ baseline | target |")
print("|---|---:|---|---:|---:|---|")
for label, value, baseline, base, ratio, target in proxy_rows() + generator_rows() + storm_rows():
    print(f"| {label} | {fmt(value)} | {baseline} | {fmt(base)} | {fmt(ratio)} | {target} |")
