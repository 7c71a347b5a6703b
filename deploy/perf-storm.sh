#!/usr/bin/env bash
# Profiles the storm of the storm benchmark (deploy/bench-storm.sh, one run): plays the same
# run, `sqlite` (5,000 players with 10 friends each, the node in the harness's process) or
# `postgres` (5,000 players with 2 friends each against two anyplay-cloud processes on
# PostgreSQL + NATS, through deploy/bench-agents.sh), or `plan` (plans/storm.yaml, run by
# BIN_DIR's anyplay-chaos into OUT/run: its first drop), and once the harness's open files
# fall by a third (the `drop`: thousands of sockets close at once), records the whole
# machine with `perf record -a` for SECONDS (default 4, about the storm). Writes OUT/perf.data,
# OUT/by-process.txt (self time per command and shared object), OUT/symbols.txt (the top
# symbols), OUT/perf-command.txt, and the run's own files (report.json, stdout.txt,
# command.txt, load.txt). Run it alone: the profile is of everything the two cores did.
# CALL_GRAPH=dwarf records call stacks from DWARF (the release binaries keep no frame
# pointers; heavier, so at 199 Hz) for deploy/perf-summary.py.
#
#   [CALL_GRAPH=dwarf] deploy/perf-storm.sh sqlite|postgres|plan OUT BIN_DIR [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 3)) || { echo "usage: $0 sqlite|postgres|plan OUT BIN_DIR [SECONDS]" >&2; exit 2; }
backend=$1 out=$2 bin=$3 seconds=${4:-4}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=$(cd "$bin" && pwd)
command -v perf >/dev/null || { echo "perf is missing (apt-get install linux-perf)" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"
if [[ -f $bin/commit ]]; then export ANYPLAY_COMMIT=$(<"$bin/commit"); fi
case ${CALL_GRAPH:-fp} in
fp) graph=(-g -F 499) ;;
dwarf) graph=(--call-graph dwarf,16384 -F 199) ;;
*) echo "CALL_GRAPH is fp or dwarf" >&2; exit 2 ;;
esac
storm=(--players 5000 --rate 250 --scenarios storm --storm drop --reconnect spec)

echo "perf record -a ${graph[*]} for ${seconds} s from the drop" >"$out/perf-command.txt"
echo "before: $(cat /proc/loadavg)" >"$out/load.txt"
case $backend in
sqlite)
    echo "anyplay-load ${storm[*]} --friends 10 --json report.json" >"$out/command.txt"
    (cd /tmp && exec "$bin/anyplay-load" "${storm[@]}" --friends 10 --json "$out/report.json") \
        >"$out/stdout.txt" 2>"$out/stderr.txt" &
    run=$!
    harness=$run
    ;;
postgres)
    ANYPLAY_BIN=$bin deploy/bench-agents.sh "$out" 5000 2 0 "${storm[@]:2}" --friends 2 >/dev/null &
    run=$!
    harness=""
    # The coordinator plays the players in its own process (no agents).
    until [[ -n $harness ]] || ! kill -0 "$run" 2>/dev/null; do
        harness=$(pgrep -n -f "^$bin/anyplay-load --players" || true)
        sleep 0.2
    done
    ;;
plan)
    echo "anyplay-chaos run plans/storm.yaml --out run" >"$out/command.txt"
    rm -rf "$out/run"
    "$bin/anyplay-chaos" run plans/storm.yaml --out "$out/run" >"$out/stdout.txt" 2>"$out/stderr.txt" &
    run=$!
    harness=$run
    ;;
*) echo "unknown backend $backend" >&2; exit 2 ;;
esac

# The drop: the harness's open files fall from their peak by a third within one poll.
open_files() { ls "/proc/$harness/fd" 2>/dev/null | wc -l; }
peak=0
while [[ -n $harness ]] && kill -0 "$harness" 2>/dev/null; do
    n=$(open_files)
    ((n > peak)) && peak=$n
    if ((peak > 3000 && n < peak * 2 / 3)); then
        perf record -a "${graph[@]}" -o "$out/perf.data" -- sleep "$seconds" 2>"$out/perf-record.txt"
        break
    fi
    sleep 0.01
done
wait "$run" && status=0 || status=$?
echo "after:  $(cat /proc/loadavg); the run's exit status $status" >>"$out/load.txt"
[[ -f $out/perf.data ]] || { echo "no drop seen: nothing recorded" >&2; exit 1; }
perf report -i "$out/perf.data" --no-children --sort comm,dso --stdio -g none 2>/dev/null \
    | grep -v '^$' | head -60 >"$out/by-process.txt" || true
perf report -i "$out/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null \
    | grep -v '^$' | head -120 >"$out/symbols.txt" || true
tail -n 20 "$out/stdout.txt"
exit "$status"
