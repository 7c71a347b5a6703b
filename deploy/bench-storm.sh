#!/usr/bin/env bash
# The storm benchmark of results/storm/: 5,000 players, every connection dropped at once,
# back by the spec rule, on one SQLite node in process (`sqlite`) or a 2-node PostgreSQL +
# NATS cluster (`postgres`, through deploy/bench-agents.sh). Runs ROUNDS rounds, each with
# every BIN_DIR in turn (directories holding anyplay-load and anyplay-cloud, e.g. builds
# of two commits), into OUT/<backend>/<name of BIN_DIR>-<round>/. Each run holds the
# machine lock (/tmp/anyplay-bench.lock) and first waits up to 90 s for no compiler and a
# 1-minute load average below 1; load.txt records what the machine had. A file `commit` in
# a BIN_DIR names the commit its binaries were built from (the reports' "commit"; else
# the harness asks git of this tree at run time, which need not be what was built).
# Flags after `--` go to anyplay-load as well (e.g. `--max-in-flight 250`). The friends
# phase before the storm (5,000 players x 10 friends on SQLite, x 2 on the cluster) is
# results/friends/'s benchmark.
#
#   deploy/bench-storm.sh sqlite|postgres OUT ROUNDS BIN_DIR... [-- ANYPLAY_LOAD_FLAGS...]
set -uo pipefail
cd "$(dirname "$0")/.."
(($# >= 4)) || { echo "usage: $0 sqlite|postgres OUT ROUNDS BIN_DIR... [-- FLAGS...]" >&2; exit 2; }
backend=$1 out=$2 rounds=$3
shift 3
bins=()
while (($#)) && [[ $1 != -- ]]; do bins+=("$1"); shift; done
(($#)) && shift
ulimit -n "$(ulimit -Hn)"
# 250 logins a second: at 500 this machine's login wave skips players as saturated.
storm=(--rate 250 --scenarios storm --storm drop --reconnect spec "$@")

quiet() {
    for _ in $(seq 1 90); do
        if ! pgrep -x rustc >/dev/null && awk '{ exit !($1 < 1.0) }' /proc/loadavg; then return; fi
        sleep 1
    done
}

one_run() {
    local bin=$1 dir=$2
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ -f $bin/commit ]]; then export ANYPLAY_COMMIT=$(<"$bin/commit"); fi
    quiet
    echo "before: $(cat /proc/loadavg)" >"$dir/load.txt"
    case $backend in
    sqlite)
        echo "anyplay-load --players 5000 ${storm[*]} --friends 10 --json report.json" >"$dir/command.txt"
        (cd /tmp && "$bin/anyplay-load" --players 5000 "${storm[@]}" --friends 10 --json "$dir/report.json" \
            >"$dir/stdout.txt" 2>"$dir/stderr.txt")
        ;;
    postgres)
        ANYPLAY_BIN=$bin deploy/bench-agents.sh "$dir" 5000 2 0 "${storm[@]}" --friends 2 >/dev/null
        ;;
    *) echo "unknown backend $backend" >&2; exit 2 ;;
    esac
    local status=$?
    echo "after:  $(cat /proc/loadavg)" >>"$dir/load.txt"
    echo "$(basename "$dir"): exit $status, $(head -1 "$dir/load.txt")" >&2
}

for round in $(seq 1 "$rounds"); do
    for bin in "${bins[@]}"; do
        bin=$(cd "$bin" && pwd)
        flock /tmp/anyplay-bench.lock bash -c "$(declare -f quiet one_run); $(declare -p backend storm); one_run '$bin' '$out/$backend/$(basename "$bin")-$round'"
    done
done
