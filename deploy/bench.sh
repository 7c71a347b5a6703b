#!/usr/bin/env bash
# One benchmark table per commit (issue 34): the figures that fit in about 15 minutes, each
# measured side by side with its baseline in the same run, so a regression shows as a ratio
# whatever the machine's hour.
#
#   deploy/bench.sh [OUT]       (default results/bench/<short commit>)
#
# Rows, each beside its baseline:
#   proxy      one stream through the fault proxy against straight loopback, and the µs a
#              32-byte ping-pong gains at p50 (chaos/examples/proxy_bench, 3 rounds)
#   generator  CPU-s per 1,000 logins of a 3,000-player wave at 150/s: anyplay-load against
#              Locust (deploy/peers.sh, one round each)
#   storm      5,000 players on one SQLite node in process (presence, cards ×100, storm drop):
#              seconds until every player is back, e2e_login and cards p99; beside the same
#              run of ANYPLAY_LOAD_BEFORE (an earlier release's anyplay-load) when given
# Writes OUT/proxy-N.json, OUT/peers/, OUT/storm-*.report.json, OUT/machine.json and
# OUT/table.md (deploy/bench/table.py OUT), and prints the table. Each measurement holds the
# machine lock /tmp/anyplay-bench.lock.
set -euo pipefail
cd "$(dirname "$0")/.."
python=/usr/bin/python3
commit=$(git rev-parse --short HEAD)
out=${1:-results/bench/$commit}
mkdir -p "$out"
out=$(cd "$out" && pwd)

cargo build --release --locked -p anyplay-cloud -p anyplay-load >&2
cargo build --release --locked -p anyplay-chaos --example proxy_bench >&2
bin=${CARGO_TARGET_DIR:-$PWD/target}/release
ulimit -n "$(ulimit -Hn)"

locked() {
    exec 9>/tmp/anyplay-bench.lock
    flock 9
    "$@"
    exec 9>&-
}

for round in 1 2 3; do
    echo "bench: proxy, round $round" >&2
    locked "$bin/examples/proxy_bench" --json "$out/proxy-$round.json" >"$out/proxy-$round.txt"
done

echo "bench: generator against Locust" >&2
PLAYERS=3000 RATE=150 HOLD=10 RUNS=1 deploy/peers.sh "$out/peers" >/dev/null

storm() {
    local name=$1 load=$2
    echo "bench: storm, $name" >&2
    locked "$load" --players 5000 --rate 200 --presence-rate 200 --cards-rate 200 \
        --cards-size 100 --scenarios presence,cards,storm --json "$out/storm-$name.report.json" \
        >"$out/storm-$name.stdout.txt" 2>"$out/storm-$name.stderr.txt"
}
storm this "$bin/anyplay-load"
[[ -n ${ANYPLAY_LOAD_BEFORE:-} ]] && storm before "$ANYPLAY_LOAD_BEFORE"

cp "$out/peers/machine.json" "$out/machine.json"
"$python" deploy/bench/table.py "$out" | tee "$out/table.md"
