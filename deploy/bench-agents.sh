#!/usr/bin/env bash
# The load agents' benchmark (results/agents/): a PostgreSQL + NATS cluster of NODES
# anyplay-cloud processes, AGENTS `anyplay-load agent` processes (each with loopback
# source addresses of its own, 127.1.N.1-250, so none meets the ephemeral-port wall), and
# one coordinator, `anyplay-load --agents AGENTS`, that plays PLAYERS through them: the
# login wave, the friend ring, presence, then a `drop` storm. AGENTS 0 plays them in the
# coordinator's own process instead (the in-process figure beside). Writes OUT/report.json
# (the coordinator's), OUT/stdout.txt, OUT/command.txt and OUT/memory.json (each process's
# peak resident memory, from /proc, and per connected player), and prints the table row.
#
#   deploy/bench-agents.sh OUT PLAYERS NODES AGENTS [more anyplay-load flags]
set -euo pipefail
cd "$(dirname "$0")/.."
(($# >= 4)) || { echo "usage: $0 OUT PLAYERS NODES AGENTS [flags]" >&2; exit 2; }
out=$1 players=$2 nodes=$3 agents=$4
shift 4
mkdir -p "$out"
out=$(cd "$out" && pwd)
# ANYPLAY_BIN: a directory of prebuilt binaries (to compare two builds); else build here.
bin=${ANYPLAY_BIN:-}
if [[ -z $bin ]]; then
    cargo build --release --locked -p anyplay-cloud -p anyplay-load >&2
    bin=$PWD/target/release
fi
ulimit -n "$(ulimit -Hn)"

source deploy/test-services.sh
work=$(mktemp -d /tmp/anyplay-bench-agents.XXXXXX)
pids=()
stop_all() {
    ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
    stop_services
    rm -rf "$work"
}
trap stop_all EXIT

# Each process's peak resident memory (MB), read before it ends.
peak_mb() { awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

readyz=() node_pids=() node_flags=()
for n in $(seq 1 "$nodes"); do
    api=$(free_port) ops=$(free_port)
    "$bin/anyplay-cloud" --listen "127.0.0.1:$api" --ops-listen "127.0.0.1:$ops" \
        --node-id "node-$n" --database-url "$ANYPLAY_TEST_POSTGRES_URL" \
        --nats-url "$ANYPLAY_TEST_NATS_URL" --db-connections 16 --no-rate-limits \
        --mail-log "$work/mail.log" >"$work/node-$n.log" 2>&1 &
    pids+=($!) node_pids+=($!)
    readyz+=("http://127.0.0.1:$ops/readyz")
    node_flags+=(--url "http://127.0.0.1:$api" --metrics-url "http://127.0.0.1:$ops/metrics" --pid "$!")
done
# Coordinator and agents share a secret: every message between them is sealed with it.
ANYPLAY_LOAD_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export ANYPLAY_LOAD_SECRET
agent_pids=()
for n in $(seq 1 "$agents"); do
    "$bin/anyplay-load" agent --nats "$ANYPLAY_TEST_NATS_URL" --name "agent-$n" \
        --source-ips "127.1.$n.1-127.1.$n.250" >"$work/agent-$n.log" 2>&1 &
    pids+=($!) agent_pids+=($!)
done
for url in "${readyz[@]}"; do
    until curl -sf -o /dev/null "$url"; do sleep 0.2; done
done

spread=()
if ((agents > 0)); then
    spread=(--agents "$agents" --nats "$ANYPLAY_TEST_NATS_URL")
else
    spread=(--source-ips 127.1.0.1-127.1.0.250)
fi
command=(anyplay-load --players "$players" "${spread[@]}" --mail-log MAIL_LOG "$@")
echo "deploy/bench-agents.sh $out $players $nodes $agents $*" >"$out/command.txt"
echo "coordinator: ${command[*]} (with --url/--metrics-url/--pid per node)" >>"$out/command.txt"
"$bin/anyplay-load" --players "$players" "${spread[@]}" --mail-log "$work/mail.log" \
    "${node_flags[@]}" --json "$out/report.json" "$@" \
    > >(tee "$out/stdout.txt") 2> >(tail -n 200 >"$out/stderr.txt") &
coordinator=$!
# Peaks are read while the processes still run: the coordinator's end leaves them idle.
wait "$coordinator" && status=0 || status=$?
{
    echo "{"
    for i in "${!node_pids[@]}"; do echo "  \"node-$((i + 1))\": $(peak_mb "${node_pids[$i]}"),"; done
    for i in "${!agent_pids[@]}"; do echo "  \"agent-$((i + 1))\": $(peak_mb "${agent_pids[$i]}"),"; done
    echo "  \"players\": $players"
    echo "}"
} >"$out/memory.json"
shopt -s nullglob
# The last lines that say something: sqlx's slow-statement warnings would bury the rest.
for log in "$work"/node-*.log "$work"/agent-*.log; do
    grep -v -e "slow statement" -e "slow threshold" "$log" | tail -n 200 \
        >"$out/$(basename "$log" .log).log.tail" || true
done
exit "$status"
