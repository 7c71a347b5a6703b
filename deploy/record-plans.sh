#!/usr/bin/env bash
# Runs every shipped plan (plans/*.yaml) at full size on the cloud as it is, one after the
# other, and publishes their verdicts under results/plans/: each plan's report.json and
# summary.md as the tool wrote them, RUNS.md naming the machine, the commit and the exact
# commands, and README.md made from them by deploy/plans-readme.sh. The runs' histories
# and logs stay in a scratch directory (named in RUNS.md).
#   deploy/record-plans.sh              every plan, RUNS.md written anew
#   deploy/record-plans.sh NAME...      only those plans, their section appended to RUNS.md
set -euo pipefail
cd "$(dirname "$0")/.."
out=results/plans
scratch=$(mktemp -d -t anyplay-plans.XXXXXX)
# Before the old results go: their removal is not a change of what runs.
commit=$(git rev-parse HEAD)
dirty=$(git status --porcelain --untracked-files=no | wc -l)
if (($#)); then
    plans=()
    for name in "$@"; do
        [[ -f plans/$name.yaml ]] || { echo "record-plans.sh: no plans/$name.yaml" >&2; exit 2; }
        plans+=("plans/$name.yaml")
    done
    what="$*"
else
    rm -rf "$out"
    plans=(plans/*.yaml)
    what="every plan"
fi
mkdir -p "$out"
cargo build --release -q -p anyplay-chaos
# The plans run a copy, so that building the workspace meanwhile changes nothing they run.
cp target/release/anyplay-chaos "$scratch/anyplay-chaos"
codes=()
for plan in "${plans[@]}"; do
    name=$(basename "$plan" .yaml)
    echo "record-plans.sh: $plan" >&2
    code=0
    "$scratch/anyplay-chaos" run "$plan" --out "$scratch/$name" \
        >"$scratch/$name.stdout" 2>"$scratch/$name.stderr" || code=$?
    mkdir -p "$out/$name"
    cp "$scratch/$name/report.json" "$scratch/$name/summary.md" "$out/$name/"
    codes+=("$name $code")
done
{
    (($#)) && echo
    echo "## $(date -u +%Y-%m-%dT%H:%M:%SZ): $what"
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| command | \`deploy/record-plans.sh\`: \`cargo build --release -p anyplay-chaos\`, then for each \`plans/NAME.yaml\`, \`anyplay-chaos run plans/NAME.yaml --out $scratch/NAME\` (a copy of that build) |"
    echo "| commit | \`$commit\`$( ((dirty)) && echo " (with $dirty uncommitted changes)") |"
    echo "| machine | $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(. /etc/os-release; echo "$PRETTY_NAME") |"
    echo "| exit codes | $(IFS=,; echo "${codes[*]}" | sed 's/,/, /g') |"
} >"$out/RUNS.md.new"
if (($#)); then
    cat "$out/RUNS.md.new" >>"$out/RUNS.md"
    rm "$out/RUNS.md.new"
else
    mv "$out/RUNS.md.new" "$out/RUNS.md"
fi
deploy/plans-readme.sh
echo "results: $out (runs in $scratch)"
