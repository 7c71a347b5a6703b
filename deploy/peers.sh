#!/usr/bin/env bash
# The peer comparison of issue 16: the same login wave played by anyplay-load and by Locust
# (deploy/peers/locustfile.py), each alone against a fresh anyplay-cloud node on SQLite with
# the rate limits lifted. PLAYERS players at RATE per second: email, the code from the node's
# mail log, signup, the event WebSocket's welcome, the friends list; then they stay connected,
# idle, for HOLD seconds. Per generator and run it measures the generator process only: CPU
# (user and system, /usr/bin/time -v), peak memory, memory once the wave is over (VmRSS,
# HOLD/2 seconds after the wave's planned end), e2e_login p50/p99 as the generator saw it.
#
#   deploy/peers.sh [OUT]       (default results/peers)
#
# Environment: PLAYERS (3000), RATE (150), HOLD (10), RUNS (1: rounds, generators alternating),
# ANYPLAY_LOAD_BEFORE (an older anyplay-load binary to run as a third generator, "before").
# Writes OUT/<generator>-<run>.json (the figures), the raw output beside it (anyplay-load's
# --json report, Locust's CSV and summary), OUT/machine.json, and prints the table
# (deploy/peers/table.py OUT). Each run holds the machine lock /tmp/anyplay-bench.lock.
# Locust comes from Debian (python3-locust, python3-websocket), installed when missing, and
# runs on Debian's own /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/peers}
players=${PLAYERS:-3000} rate=${RATE:-150} hold=${HOLD:-10} runs=${RUNS:-1}
python=/usr/bin/python3

if ! "$python" -c 'import locust, websocket' 2>/dev/null; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3-locust python3-websocket
fi
cargo build --release --locked -p anyplay-cloud -p anyplay-load >&2
bin=${CARGO_TARGET_DIR:-$PWD/target}/release
mkdir -p "$out"
out=$(cd "$out" && pwd)
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d /tmp/anyplay-peers.XXXXXX)
node=""
cleanup() {
    [[ -n $node ]] && kill "$node" 2>/dev/null && wait "$node" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

source deploy/free-port.sh

"$python" - "$out/machine.json" <<'EOF'
import json, os, platform, subprocess, sys
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
mem_kb = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True).stdout.strip()
json.dump({"nproc": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem_kb / 2**20, 1),
           "kernel": platform.release(), "commit": git("rev-parse", "HEAD"),
           "uncommitted_changes": len(git("status", "--porcelain", "--", ".", ":(exclude)results").splitlines())},
          open(sys.argv[1], "w"), indent=1)
EOF

# One generator's run against a fresh node: `run NAME RUN`.
run() {
    local name=$1 round=$2 dir="$work/$1-$2"
    mkdir -p "$dir"
    local api ops
    api=$(free_port) ops=$(free_port)
    "$bin/anyplay-cloud" --listen "127.0.0.1:$api" --ops-listen "127.0.0.1:$ops" \
        --database-url "sqlite:$dir/anyplay.db" --mail-log "$dir/mail.log" --no-rate-limits \
        >"$dir/node.log" 2>&1 &
    node=$!
    until curl -sf -o /dev/null "http://127.0.0.1:$ops/readyz"; do sleep 0.1; done
    local raw="$out/$name-$round" cmd
    case $name in
        anyplay-load*)
            local load=$bin/anyplay-load
            [[ $name == anyplay-load-before ]] && load=$ANYPLAY_LOAD_BEFORE
            # The presence scenario at 1 change a second, with no friends to tell, is the hold.
            cmd=("$load" --url "http://127.0.0.1:$api" --mail-log "$dir/mail.log"
                --players "$players" --rate "$rate" --friends 0 --scenarios presence
                --presence-rate 1 --presence-seconds "$hold" --json "$raw.report.json")
            ;;
        locust)
            cmd=("$python" /usr/bin/locust -f "$PWD/deploy/peers/locustfile.py" --headless
                --host "http://127.0.0.1:$api" --users "$players" --spawn-rate "$rate"
                --run-time "$(((players + rate - 1) / rate + hold))s" --only-summary
                --loglevel WARNING --csv "$raw")
            ;;
    esac
    local load_avg started
    load_avg=$(cut -d' ' -f1 /proc/loadavg)
    started=$(date +%s.%N)
    (cd "$dir" && ANYPLAY_MAIL_LOG="$dir/mail.log" ANYPLAY_PEER_TAG="${name//-/}$round" \
        exec /usr/bin/time -v -o "$dir/time.txt" "${cmd[@]}" >"$raw.stdout.txt" 2>"$dir/stderr.txt") &
    local timer=$! generator=""
    until [[ -n $generator ]]; do generator=$(pgrep -P "$timer" || true); sleep 0.05; done
    # Memory once the wave is over: HOLD/2 seconds after its planned end.
    local idle_at idle_kb=null
    idle_at=$("$python" -c "print($started + $players / $rate + $hold / 2)")
    while kill -0 "$generator" 2>/dev/null; do
        if "$python" -c "import sys, time; sys.exit(time.time() < $idle_at)"; then
            idle_kb=$(awk '/^VmRSS/ { print $2 }' "/proc/$generator/status" 2>/dev/null || echo null)
            break
        fi
        sleep 0.1
    done
    local status=0
    wait "$timer" || status=$?
    local node_ticks
    node_ticks=$(awk '{ print $14 + $15 }' "/proc/$node/stat")
    kill "$node" && wait "$node" 2>/dev/null || true
    node=""
    tail -n 20 "$dir/stderr.txt" >"$raw.stderr.txt"
    "$python" "$PWD/deploy/peers/collect.py" "$name" "$round" "$raw" "$dir/time.txt" \
        "$idle_kb" "$load_avg" "$status" "$((node_ticks))" "$(getconf CLK_TCK)" \
        "$players" "$rate" "$hold" "${cmd[*]}" >"$raw.json"
}

generators=(anyplay-load locust)
[[ -n ${ANYPLAY_LOAD_BEFORE:-} ]] && generators=(anyplay-load-before "${generators[@]}")
for round in $(seq 1 "$runs"); do
    for name in "${generators[@]}"; do
        echo "peers: $name, run $round" >&2
        exec 9>/tmp/anyplay-bench.lock
        flock 9
        run "$name" "$round"
        exec 9>&-
    done
done
"$python" deploy/peers/table.py "$out"
