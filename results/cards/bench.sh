#!/usr/bin/env bash
# One run of the cards benchmark (results/cards/): NODES anyplay-cloud processes (rate
# limits lifted) on a fresh store, `sqlite` (one node, a new database file) or `postgres`
# (a throwaway PostgreSQL + NATS from deploy/test-services.sh, as deploy/bench-agents.sh
# starts them), and anyplay-load against them in external mode: 1,000 players signing in
# at 200/s with 10 friends each, then 10 s of gamer-card calls of 100 ids at 200/s.
# Writes OUT.json (the load report), OUT.txt (its table) and OUT.load (the 1-minute load
# average just before the load starts).
#
#   results/cards/bench.sh sqlite|postgres NODES OUT [BIN_DIR]   (default: target/release)
#
# Run it under the machine lock, with the commit the binaries came from:
#   ANYPLAY_COMMIT=abc1234 flock /tmp/anyplay-bench.lock results/cards/bench.sh sqlite 1 OUT DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
(($# >= 3)) || { echo "usage: $0 sqlite|postgres NODES OUT [BIN_DIR]" >&2; exit 2; }
store=$1 nodes=$2 out=$3
bin=${4:-$PWD/target/release}
ulimit -n "$(ulimit -Hn)"

source deploy/test-services.sh   # free_port; PostgreSQL and NATS (stopped on exit)
work=$(mktemp -d /tmp/anyplay-bench-cards.XXXXXX)
pids=()
stop_all() {
    ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
    stop_services
    rm -rf "$work"
}
trap stop_all EXIT

case $store in
    sqlite) ((nodes == 1)) || { echo "sqlite is one node" >&2; exit 2; }
            store_flags=(--database-url "sqlite:$work/anyplay.db") ;;
    postgres) store_flags=(--database-url "$ANYPLAY_TEST_POSTGRES_URL" --nats-url "$ANYPLAY_TEST_NATS_URL"
                           --db-connections 16) ;;
    *) echo "unknown store $store" >&2; exit 2 ;;
esac
node_flags=() readyz=()
for n in $(seq 1 "$nodes"); do
    api=$(free_port) ops=$(free_port)
    "$bin/anyplay-cloud" --listen "127.0.0.1:$api" --ops-listen "127.0.0.1:$ops" \
        --node-id "node-$n" "${store_flags[@]}" --no-rate-limits \
        --mail-log "$work/mail.log" >"$work/node-$n.log" 2>&1 &
    pids+=($!)
    readyz+=("http://127.0.0.1:$ops/readyz")
    node_flags+=(--url "http://127.0.0.1:$api" --metrics-url "http://127.0.0.1:$ops/metrics" --pid "$!")
done
for url in "${readyz[@]}"; do
    until curl -sf -o /dev/null "$url"; do sleep 0.2; done
done
cut -d' ' -f1 /proc/loadavg >"$out.load"
"$bin/anyplay-load" "${node_flags[@]}" --mail-log "$work/mail.log" --json "$out.json" \
    --players 1000 --rate 200 --friends 10 --scenarios cards --cards-size 100 --cards-rate 200 \
    >"$out.txt" 2>"$work/load.err" || { tail -n 20 "$work/load.err" >&2; exit 1; }
