#!/usr/bin/env python3
"""Summarizes `perf script` output of a profile recorded with call stacks (deploy/perf-storm.sh
with CALL_GRAPH=dwarf): each sample is charged to a component by its own frame (self time),
to the side that made it (the cloud node, the load harness, or chaos's fault proxy and checks,
by the outermost anyplay frame on its stack), and the allocator's samples to the code that
called the allocator.

    perf script -i OUT/perf.data | deploy/perf-summary.py > OUT/summary.md
"""

import collections
import re
import sys

ALLOCATOR = re.compile(
    r"^(_int_malloc|_int_free|_int_realloc|malloc|malloc_consolidate|unlink_chunk.*|cfree.*"
    r"|__GI___libc_malloc|__GI___libc_free|__libc_malloc|__libc_free|realloc|__libc_realloc"
    r"|tcache_.*|alloc_perturb|free|_int_memalign|sysmalloc)$"
)

# Self time: the first rule that matches the sample's own frame (symbol, object).
COMPONENTS = [
    ("idle", lambda s, o: s in ("pv_native_safe_halt", "default_idle", "cpu_idle_poll")),
    ("allocator (malloc/free)", lambda s, o: "libc" in o and ALLOCATOR.match(s)),
    ("libc: memcpy/memmove/memset/strings", lambda s, o: "libc" in o and re.match(r"__(mem|str)", s)),
    ("libc: locks and other", lambda s, o: "libc" in o),
    ("kernel", lambda s, o: "kernel" in o or o == "[unknown]" and s.startswith("0x")),
    ("SQLite", lambda s, o: s.startswith("sqlite3") or s in ("pcache1Fetch", "vdbeRecordCompareInt")),
    ("sqlx", lambda s, o: "sqlx" in s),
    ("tokio", lambda s, o: s.startswith("tokio::") or "<tokio::" in s),
    ("HTTP: hyper, axum, tower, http, reqwest", lambda s, o: re.search(r"\b(hyper|axum|tower|http|reqwest|httparse|h2)(_[a-z]+)?::", s)),
    ("WebSocket: tungstenite", lambda s, o: "tungstenite" in s),
    ("serde_json", lambda s, o: "serde_json" in s),
    ("anyplay_cloud", lambda s, o: "anyplay_cloud" in s),
    ("anyplay_load", lambda s, o: "anyplay_load" in s),
    ("anyplay_chaos", lambda s, o: "anyplay_chaos" in s),
    ("other", lambda s, o: True),
]


def samples(lines):
    """Yields (command, [(symbol, object), ...] innermost first) per sample."""
    command, frames = None, []
    for line in lines:
        if not line.strip():
            if command is not None:
                yield command, frames
            command, frames = None, []
        elif not line[0].isspace():
            command = line.split()[0]
        else:
            m = re.match(r"\s+[0-9a-f]+ (.*?)(?:\+0x[0-9a-f]+)? \((.*)\)$", line)
            if m:
                frames.append((m.group(1), m.group(2)))
    if command is not None:
        yield command, frames


def side(command, frames):
    """The cloud, the harness or chaos, by the outermost anyplay frame (a task's root); SQLite's
    worker threads are the cloud's store."""
    if command.startswith("sqlx-sqlite"):
        return "cloud node: SQLite worker threads"
    if command in ("postgres", "nats-server"):
        return command
    for symbol, _ in reversed(frames):
        if "anyplay_cloud" in symbol:
            return "cloud node: runtime tasks"
        if "anyplay_load" in symbol:
            return "load harness"
        if "anyplay_chaos::proxy" in symbol:
            return "chaos: fault proxy"
        if "anyplay_chaos" in symbol:
            return "chaos: supervisor and checks"
    return "no anyplay frame (the runtime's scheduler and I/O driver, other processes)"


def caller(frames):
    """The first frame outside the allocator and Rust's allocation glue: who asked for memory."""
    for symbol, obj in frames:
        if "libc" in obj or "inlined" == obj:
            continue
        if re.match(r"^(alloc|core|std)::", symbol) or symbol.startswith("<alloc::"):
            continue
        return symbol
    return "?"


def short(symbol):
    """The symbol without generic arguments (kept: `<Type as Trait>` of an impl)."""
    while True:
        shorter = re.sub(r"(\w)<[^<>]*>", r"\1", symbol)
        if shorter == symbol:
            return symbol[:120]
        symbol = shorter


def ours(frames):
    """The anyplay function nearest the sample's own frame: which of our code paths (with
    what it calls in libraries) the sample belongs to."""
    for symbol, _ in frames:
        if symbol.startswith("anyplay_") or "anyplay_" in symbol.split("::")[0]:
            return short(symbol)
    return None


def table(title, counts, total, limit=20):
    out = [f"\n## {title}\n", "| share | |", "|--:|---|"]
    for name, n in counts.most_common(limit):
        out.append(f"| {100 * n / total:.1f} % | {name.replace('|', '/')} |")
    return "\n".join(out)


def main():
    component, sides, callers, busy, others, nearest, syscalls = (
        collections.Counter() for _ in range(7)
    )
    total = 0
    for command, frames in samples(sys.stdin):
        if not frames:
            continue
        total += 1
        # perf lists inlined frames first, without their object: the sample's own
        # function is the first frame with one; an allocator frame counts either way.
        symbol, obj = next((f for f in frames if f[1] != "inlined"), frames[0])
        if any(ALLOCATOR.match(f[0]) for f in frames[:3] if f[1] in ("inlined",) or "libc" in f[1]):
            symbol, obj = "malloc", "libc"
        name = next(n for n, rule in COMPONENTS if rule(symbol, obj))
        if name == "other":
            others[short(symbol)] += 1
        if name == "kernel":
            entry = next((f[0] for f in frames if f[0].startswith("__x64_sys_")), None)
            syscalls[entry or "(no system call: interrupts, softirq, scheduling)"] += 1
        component[name] += 1
        if name == "idle":
            continue
        busy[command] += 1
        sides[side(command, frames)] += 1
        nearest[ours(frames) or "(no anyplay frame)"] += 1
        if name.startswith("allocator"):
            callers[short(caller(frames))] += 1
    idle = component["idle"]
    print(f"{total} samples, {100 * idle / max(total, 1):.1f} % idle.")
    print(table("Self time by component (all samples)", component, total))
    print(table("Busy samples by side (outermost anyplay frame)", sides, total))
    print(table("Busy samples by thread", busy, total, 8))
    print(table("Busy samples by the nearest anyplay function on the stack", nearest, total, 30))
    print(table("Kernel samples by system call (share of all samples)", syscalls, total, 15))
    print(table("Allocator samples by caller (share of all samples)", callers, total, 25))
    print(table("Samples in no component above, by function", others, total, 25))


if __name__ == "__main__":
    main()
