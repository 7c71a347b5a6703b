#!/usr/bin/env bash
# Profiles the storm of the SQLite storm benchmark (deploy/bench-storm.sh sqlite, one run):
# plays the same anyplay-load command (5,000 players, 10 friends each, the node in process)
# and, once the process's open files fall by a third (the `drop`: 10,000 sockets close at
# once), records the whole machine with `perf record -a -g` for SECONDS (default 4, about
# the storm). Writes OUT/perf.data, OUT/by-process.txt (self time per command and shared
# object), OUT/symbols.txt (the top symbols), OUT/report.json, stdout.txt, command.txt and
# load.txt. Run it alone: the profile is of everything the two cores did. CALL_GRAPH=dwarf
# records call stacks from DWARF (the release binaries keep no frame pointers; heavier, so at
# 199 Hz) to see who calls what, e.g. the allocator.
#
#   [CALL_GRAPH=dwarf] deploy/perf-storm.sh OUT BIN_DIR [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 2)) || { echo "usage: $0 OUT BIN_DIR [SECONDS]" >&2; exit 2; }
out=$1 bin=$2 seconds=${3:-4}
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
flags=(--players 5000 --rate 250 --scenarios storm --storm drop --reconnect spec --friends 10)
echo "anyplay-load ${flags[*]} --json report.json; perf record -a ${graph[*]} for ${seconds} s from the drop" >"$out/command.txt"
echo "before: $(cat /proc/loadavg)" >"$out/load.txt"
(cd /tmp && exec "$bin/anyplay-load" "${flags[@]}" --json "$out/report.json") >"$out/stdout.txt" 2>"$out/stderr.txt" &
load=$!

# The drop: the open files fall from their peak by a third within one poll.
open_files() { ls "/proc/$load/fd" 2>/dev/null | wc -l; }
peak=0
while kill -0 "$load" 2>/dev/null; do
    n=$(open_files)
    ((n > peak)) && peak=$n
    if ((peak > 3000 && n < peak * 2 / 3)); then
        perf record -a "${graph[@]}" -o "$out/perf.data" -- sleep "$seconds" 2>"$out/perf-record.txt"
        break
    fi
    sleep 0.01
done
wait "$load"
echo "after:  $(cat /proc/loadavg)" >>"$out/load.txt"
[[ -f $out/perf.data ]] || { echo "no drop seen: nothing recorded" >&2; exit 1; }
perf report -i "$out/perf.data" --no-children --sort comm,dso --stdio -g none 2>/dev/null \
    | grep -v '^$' | head -60 >"$out/by-process.txt" || true
perf report -i "$out/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null \
    | grep -v '^$' | head -120 >"$out/symbols.txt" || true
tail -n 20 "$out/stdout.txt"
