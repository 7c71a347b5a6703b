#!/usr/bin/env bash
# Mutation testing of the verdict (a benchmark, not CI): cargo-mutants' mutants of the cloud's
# event, presence, session, friend, connection and bus code, each judged by a whole chaos run
# of the self-test's plan instead of by unit tests. A mutant that makes no check fail has
# survived: either the checks or the traffic have a hole, or the mutant changes nothing the
# contract promises.
#
# One build serves every mutant: a seeded sample is gated into a copy of the committed tree
# behind `ANYPLAY_MUTANT=N` (deploy/mutants/gate), mutants whose gate does not compile are left
# out, and the plan runs once per mutant with that variable in the nodes' environment, plus the
# cloud as it is before and after (both must pass, or the score means nothing).
#
#   deploy/mutants.sh [--count N] [--seed S] [--jobs J] [--plan PLAN] [--work DIR] [--out DIR]
#                     [--ids "3 7 12"]
#
# --ids runs only those mutants of the sample (the survivors of a previous run, say, after a
# change of the checks or the traffic); the same count and seed draw the same sample as long
# as the cloud's code in scope is the same.
#
# Needs what deploy/test.sh needs for a process run (PostgreSQL, NATS) and cargo-mutants
# (installed from crates.io when missing). Writes OUT/mutants-<commit>.json and .md.
set -euo pipefail
cd "$(dirname "$0")/.."

count=60 seed=1 jobs=2 only=
plan=plans/selftest/selftest.yaml
work=${TMPDIR:-/tmp}/anyplay-mutants
out=results/mutants
command="deploy/mutants.sh $*"
while (($#)); do
    case $1 in
    --count) count=$2 ;;
    --seed) seed=$2 ;;
    --jobs) jobs=$2 ;;
    --plan) plan=$2 ;;
    --work) work=$2 ;;
    --out) out=$2 ;;
    --ids) only=$2 ;;
    *) echo "deploy/mutants.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift 2
done
[[ $count =~ ^[0-9]+$ && $seed =~ ^[0-9]+$ && $jobs =~ ^[1-9][0-9]*$ && $only =~ ^[0-9\ ]*$ ]] ||
    { echo "deploy/mutants.sh: --count, --seed, --jobs and --ids take numbers" >&2; exit 2; }
grep -q '^    env:$' "$plan" ||
    { echo "deploy/mutants.sh: $plan has no services.nodes.env to put the mutant in" >&2; exit 2; }

# The cloud's code whose behaviour the checks judge.
scope=(
    'cloud/src/events/*.rs' cloud/src/presence.rs cloud/src/bus.rs cloud/src/fence.rs
    cloud/src/routes/events.rs cloud/src/routes/presence.rs cloud/src/routes/sessions.rs
    cloud/src/routes/friends.rs cloud/src/store/friends.rs cloud/src/store/friend_writes.rs
    cloud/src/store/sessions.rs cloud/src/store/presence.rs cloud/src/store/connections.rs
    cloud/src/store/connection_writes.rs
)
files=()
for f in "${scope[@]}"; do files+=(-f "$f"); done

command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants
commit=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD -- cloud ||
    echo "deploy/mutants.sh: cloud/ has uncommitted changes; the mutants are of $commit" >&2
mkdir -p "$work" "$out"
work=$(realpath "$work")
log() { echo "deploy/mutants.sh: $(date -u +%H:%M:%S) $*" >&2; }

log "building the gate"
CARGO_TARGET_DIR="$work/gate-target" cargo build --release --locked --quiet \
    --manifest-path deploy/mutants/gate/Cargo.toml
gate=$work/gate-target/release/anyplay-mutants-gate

cargo mutants --list --json -p anyplay-cloud "${files[@]}" >"$work/all.json"
"$gate" sample "$work/all.json" "$count" "$seed" >"$work/sample.json"

# Gate the sample into a copy of the commit; leave out what the compiler blames, and again.
skip=()
for attempt in 1 2 3 4 5 6 7 8; do
    rm -rf "$work/src"
    mkdir -p "$work/src"
    git archive HEAD | tar -x -C "$work/src"
    "$gate" apply "$work/src" "$work/sample.json" "${skip[@]}" >"$work/applied.json"
    log "building the cloud with the sample gated in (attempt $attempt, ${#skip[@]} left out)"
    if (cd "$work/src" && CARGO_TARGET_DIR="$work/target" cargo build --release --locked \
        -p anyplay-chaos --message-format json >"$work/build.jsonl"); then
        break
    fi
    mapfile -t blamed < <("$gate" blame "$work/src" <"$work/build.jsonl")
    if ((${#blamed[@]} == 0)); then
        log "the build failed and no gate is to blame: see $work/build.jsonl"
        exit 2
    fi
    skip+=("${blamed[@]}")
    [[ $attempt == 8 ]] && { log "still no build after 8 attempts"; exit 2; }
done
chaos=$work/target/release/anyplay-chaos

mkdir -p "$work/plans"
rm -rf "$work/runs"
mkdir -p "$work/runs"
# One run: RUN names it (its directory and exit code under runs/), ID is the mutant (0: none).
run() {
    local name=$1 id=$2
    sed "s/^    env:\$/    env:\n      ANYPLAY_MUTANT: \"$id\"/" "$plan" >"$work/plans/$name.yaml"
    local rc=0
    timeout 900 "$chaos" run "$work/plans/$name.yaml" --out "$work/runs/$name" \
        >"$work/runs/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$work/runs/$name.rc"
    log "run $name: exit $rc"
}

run 0 0
if [[ $(cat "$work/runs/0.rc") != 0 ]]; then
    log "the cloud as it is failed the plan ($work/runs/0): no mutant can be judged"
    exit 1
fi
mapfile -t ids < <(sed -n 's/^ *"id": \([0-9]*\),$/\1/p' "$work/applied.json")
if [[ -n $only ]]; then
    read -ra wanted <<<"$only"
    mapfile -t ids < <(printf '%s\n' "${ids[@]}" | grep -Fxf <(printf '%s\n' "${wanted[@]}"))
fi
log "${#ids[@]} mutants to run, $jobs at a time"
for id in "${ids[@]}"; do
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
    run "$id" "$id" &
done
wait
run 0-end 0

result=$out/mutants-$commit${only:+-rerun}
"$gate" report "$work" "$command" "$commit" >"$result.json"
cp "$work/result.md" "$result.md"
log "wrote $result.json and .md"
grep -m1 'Of those that ran' "$result.md" >&2
