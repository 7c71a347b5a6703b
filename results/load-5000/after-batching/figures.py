#!/usr/bin/env python3
"""Prints the README's before/after tables from the reports in this folder (run it here)."""
import json

def storm(path):
    d = json.load(open(path))
    return next(s for s in d["scenarios"] if s["name"] == "storm")

def waiting_peak(path):
    # The storm's peak of anyplay_store_pool_waiting: from the first sample above
    # 2,000 (the break; the friend graph holds ~1,000) to the first 0 after it. The
    # players' disconnects at the end of the run come later and are not the storm.
    try:
        v = [int(float(line.split()[2])) for line in open(path)]
    except FileNotFoundError:
        return "not scraped"
    start = next(i for i, x in enumerate(v) if x > 2000)
    end = next((i for i in range(start, len(v)) if v[i] == 0), len(v))
    return f"{max(v[start:end]):,}"

print("| storm-only run | 50 % back | 99 % back | 100 % back | `ws_connect` p99 | `friends_list` p99 | errors | `pool_waiting` peak |")
print("|---|---|---|---|---|---|---|---|")
for run in ["before-1", "before-2", "before-3", "after-1", "after-2", "after-3"]:
    s = storm(f"storm-only/{run}/report.json")
    b, o = s["storm"]["back_s"], s["ops"]
    print(f"| {run} | {b['50']:.2f} s | {b['99']:.2f} s | {b['100']:.2f} s "
          f"| {o['ws_connect']['p99_ms']:.1f} ms | {o['friends_list']['p99_ms']:.1f} ms "
          f"| {s['storm']['errors']} | {waiting_peak(f'storm-only/{run}/pool-waiting.txt')} |")

print()
# Time inside the node's `/v1/friends` handler (the report's `server` section, whole run):
# the smallest histogram bucket that holds every call, and the calls above 25.6 ms.
for run in ["before-1", "before-2", "before-3", "after-1", "after-2", "after-3"]:
    srv = json.load(open(f"storm-only/{run}/report.json"))["server"]["node-1"]
    key = 'anyplay_http_handler_seconds_bucket{le="%s",route="/v1/friends"}'
    les = sorted(float(k.split('le="')[1].split('"')[0]) for k in srv
                 if k.startswith("anyplay_http_handler_seconds_bucket{le=") and 'route="/v1/friends"' in k
                 and "+Inf" not in k)
    total = srv[key % "+Inf"]
    slowest = next(le for le in les if srv.get(key % f"{le:g}", 0) == total)
    above = total - srv[key % "0.0256"]
    print(f"- {run}: every `/v1/friends` handler within {slowest * 1000:g} ms; "
          f"{above:,.0f} of {total:,.0f} above 25.6 ms")

print()
runs = {"run 1": "run-1/report.json", "run 2": "run-2/report.json"}
rows = {}
for name, path in runs.items():
    d = json.load(open(path))
    S = {s["name"]: s for s in d["scenarios"]}
    st, b = S["storm"], S["storm"]["storm"]["back_s"]
    login = S["login"]["players"]
    deliv = S["presence"]["delivery"]
    cards = S["cards"]["ops"]["cards"]
    ses = S["sessions"]["ops"]
    storm_failed = sum(o["count"] - o["ok"] for o in st["ops"].values()) + st["storm"]["errors"]
    rows.setdefault("signed in and online | all 5,000", []).append(f"{login['online']:,} of {login['asked']:,}")
    rows.setdefault("`e2e_login` p99 | ≤ 150 ms", []).append(f"{S['login']['ops']['e2e_login']['p99_ms']:.1f} ms")
    rows.setdefault("presence delivery p99 | ≤ 50 ms", []).append(f"{deliv['p99_ms']:.2f} ms")
    rows.setdefault("presence events received | all expected", []).append(f"{deliv['received']:,} of {deliv['expected']:,}")
    rows.setdefault("storm `drop`, `spec`: 100 % back | ≤ 3 s after the break", []).append(
        f"{b['100']:.2f} s (50 % {b['50']:.2f} s, 99 % {b['99']:.2f} s)")
    fl = st["ops"]["friends_list"]["p99_ms"]
    rows.setdefault("`friends_list` p99 in the storm | ≤ 300 ms", []).append(
        f"{fl:.1f} ms" + (" **(missed)**" if fl > 300 else ""))
    rows.setdefault("failed requests in the storm | none", []).append(f"{storm_failed}")
    rows.setdefault("cards (100 ids, 200/s) p99 | ≤ 10 ms", []).append(f"{cards['p99_ms']:.2f} ms")
    rows.setdefault("cards `wrong_count` | none", []).append(
        f"{cards['status'].get('wrong_count', 0)} ({cards['status'].get('200', 0):,} of {cards['count']:,} answered 200)")
    rows.setdefault("sessions at 30/s: create / join / leave answered | every call", []).append(
        ", ".join(f"{ses[k]['ok']}/{ses[k]['count']}" for k in ["session_create", "session_join", "session_leave"])
        + f"; slowest call {max(ses[k]['max_ms'] for k in ses):.1f} ms")
    rows.setdefault("peak memory, harness + cloud | ≤ 1 GB", []).append(f"{d['generator']['rss_mb_peak']:.0f} MB")
print("| Figure | Target | " + " | ".join(runs) + " |")
print("|---|---|" + "---|" * len(runs))
for k, v in rows.items():
    print(f"| {k} | " + " | ".join(v) + " |")
print()
for name, path in runs.items():
    d = json.load(open(path))
    g = d["generator"]
    reached = all(s.get("rate", {}).get("reached", True) and s["skipped_saturated"] == 0 for s in d["scenarios"])
    print(f"- {name}: scheduler late p50 {g['sched_lag_ms']['p50']:.2f} ms, p99 {g['sched_lag_ms']['p99']:.2f} ms, "
          f"max {g['sched_lag_ms']['max']:.1f} ms; {g['cpu_cores_avg']:.2f} cores; every rate reached, nothing skipped: {reached}; commit {d['commit']}")
