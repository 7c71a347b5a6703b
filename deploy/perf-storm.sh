#!/usr/bin/env bash
# Profiles the storm of the storm benchmark (deploy/bench-storm.sh, one run): plays the same
# run, `sqlite` (5,000 players with 10 friends each, the node in the harness's process) or
# `postgres` (5,000 players with 2 friends each against two anyplay-cloud processes on
# PostgreSQL + NATS, through deploy/bench-agents.sh), `agents` (results/agents' storm: 50,000
# players on four nodes through four agents, whose first agent is watched), or `plan`
# (plans/storm.yaml, run by BIN_DIR's anyplay-chaos into OUT/run: its first drop), and once
# the harness's open files fall by a third (the `drop`: thousands of sockets close at once),
# records the whole machine with `perf record -a` for SECONDS (default 4, about the storm).
# Writes OUT/perf.data, OUT/cpu-start.txt (the run's processes and their CPU ticks as the
# recording starts, which results/agents/profile/storm-cpu.py names samples by),
# OUT/by-process.txt (self time per command and shared object), OUT/symbols.txt (the top
# symbols), OUT/perf-command.txt, and the run's own files (report.json, stdout.txt,
# command.txt, load.txt). Run it alone: the profile is of everything the two cores did.
# CALL_GRAPH=dwarf records call stacks from DWARF (the release binaries keep no frame
# pointers; heavier, so at 199 Hz) for deploy/perf-summary.py; CALL_GRAPH=none samples
# without stacks at 199 Hz (the default of `agents`, whose minute of stacks would fill the disk).
#
#   [CALL_GRAPH=fp|dwarf|none] deploy/perf-storm.sh sqlite|postgres|agents|plan OUT BIN_DIR [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 3)) || { echo "usage: $0 sqlite|postgres|agents|plan OUT BIN_DIR [SECONDS]" >&2; exit 2; }
backend=$1 out=$2 bin=$3 seconds=${4:-4}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bin=$(cd "$bin" && pwd)
command -v perf >/dev/null || { echo "perf is missing (apt-get install linux-perf)" >&2; exit 1; }
ulimit -n "$(ulimit -Hn)"
if [[ -f $bin/commit ]]; then export ANYPLAY_COMMIT=$(<"$bin/commit"); fi
[[ $backend == agents ]] && default_graph=none || default_graph=fp
case ${CALL_GRAPH:-$default_graph} in
fp) graph=(-g -F 499) ;;
dwarf) graph=(--call-graph dwarf,16384 -F 199) ;;
none) graph=(-F 199) ;;
*) echo "CALL_GRAPH is fp, dwarf or none" >&2; exit 2 ;;
esac
storm=(--players 5000 --rate 250 --scenarios storm --storm drop --reconnect spec)

# The newest process whose command line matches $1, once the run (pid $run) started it;
# nothing when the run ended first.
process_of_run() {
    local pid=""
    until [[ -n $pid ]] || ! kill -0 "$run" 2>/dev/null; do
        pid=$(pgrep -n -f "$1" || true)
        sleep 0.2
    done
    echo "$pid"
}

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
    # The coordinator plays the players in its own process (no agents).
    harness=$(process_of_run "^$bin/anyplay-load --players")
    ;;
agents)
    ANYPLAY_BIN=$bin deploy/bench-agents.sh "$out" 50000 4 4 --rate 100 --scenarios presence,storm \
        --storm drop --friends 2 --presence-rate 500 --presence-seconds 10 --storm-timeout 300 \
        >/dev/null &
    run=$!
    harness=$(process_of_run "^$bin/anyplay-load agent .*--name agent-1( |$)")
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

# Each process of the run and its CPU ticks (user + system): pid, command, ticks, arguments.
cpu_ticks() {
    for p in /proc/[0-9]*; do
        comm=$(cat "$p/comm" 2>/dev/null) || continue
        case $comm in postgres | nats-server | anyplay-* | tokio-rt-worker) ;; *) continue ;; esac
        ticks=$(awk '{print $14 + $15}' "$p/stat" 2>/dev/null) || continue
        echo "${p#/proc/} $comm $ticks $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-60)"
    done
}
# The drop: the harness's open files fall from their peak by a third within one poll.
open_files() { ls "/proc/$harness/fd" 2>/dev/null | wc -l; }
peak=0
while [[ -n $harness ]] && kill -0 "$harness" 2>/dev/null; do
    n=$(open_files)
    ((n > peak)) && peak=$n
    if ((peak > 3000 && n < peak * 2 / 3)); then
        # The recording first: listing the processes forks a few tools each, which would
        # cost the storm's first tenths of a second.
        perf record -a "${graph[@]}" -o "$out/perf.data" -- sleep "$seconds" 2>"$out/perf-record.txt" &
        recording=$!
        cpu_ticks >"$out/cpu-start.txt"
        wait "$recording"
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
