#!/usr/bin/env bash
# storm-watch2.sh OUT: waits for the agents' drop (agent-1's open files fall by a third from a
# peak above 3,000: the storm's `drop` closes every socket at once), snapshots CPU ticks per
# process, records `perf record -a` for SECONDS (default 60), snapshots again.
out=$1 seconds=${2:-60}
snap() {
    for p in /proc/[0-9]*; do
        c=$(cat $p/comm 2>/dev/null) || continue
        case $c in postgres|nats-server|anyplay-cloud|anyplay-load|tokio-rt-worker) ;; *) continue ;; esac
        args=$(tr '\0' ' ' < $p/cmdline 2>/dev/null | cut -c1-60)
        t=$(awk '{print $14+$15}' $p/stat 2>/dev/null) || continue
        echo "${p#/proc/} $c $t $args"
    done
}
agent=""
until [[ -n $agent ]]; do agent=$(pgrep -f "anyplay-load agent .*--name agent-1" | head -1); sleep 0.5; done
peak=0
while kill -0 "$agent" 2>/dev/null; do
    n=$(ls /proc/$agent/fd 2>/dev/null | wc -l)
    ((n > peak)) && peak=$n
    if ((peak > 3000 && n < peak * 2 / 3)); then
        date +%s.%N > "$out/storm-start.txt"; snap > "$out/cpu-start.txt"
        perf record -a -F 199 -o "$out/perf.data" -- sleep "$seconds" 2> "$out/perf.log"
        date +%s.%N > "$out/storm-perf-end.txt"; snap > "$out/cpu-end.txt"
        exit 0
    fi
    sleep 0.2
done
echo "no drop seen" >&2; exit 1
