#!/usr/bin/env bash
# Runs every shipped plan (plans/*.yaml) at full size on the cloud as it is, one after the
# other, and publishes their verdicts under results/plans/: each plan's report.json and
# summary.md as the tool wrote them, and a README.md naming the machine, the commit and
# the exact commands, with one table over all plans made from the report.json files.
# The runs' histories and logs stay in a scratch directory (named in the README).
#   deploy/record-plans.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=results/plans
scratch=$(mktemp -d -t anyplay-plans.XXXXXX)
rm -rf "$out"
mkdir -p "$out"
cargo build --release -q -p anyplay-chaos
commit=$(git rev-parse HEAD)
dirty=$(git status --porcelain --untracked-files=no | wc -l)
rows=()
for plan in plans/*.yaml; do
    name=$(basename "$plan" .yaml)
    echo "record-plans.sh: $plan" >&2
    code=0
    cargo run --release -q -p anyplay-chaos -- run "$plan" --out "$scratch/$name" \
        >"$scratch/$name.stdout" 2>"$scratch/$name.stderr" || code=$?
    mkdir -p "$out/$name"
    cp "$scratch/$name/report.json" "$scratch/$name/summary.md" "$out/$name/"
    rows+=("$(jq -r --arg name "$name" --arg code "$code" -f deploy/plan-row.jq "$out/$name/report.json")")
done
{
    echo "# Every shipped plan, at full size, on the cloud as it is"
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| command | \`deploy/record-plans.sh\`: for each \`plans/NAME.yaml\`, \`cargo run --release -p anyplay-chaos -- run plans/NAME.yaml --out $scratch/NAME\` |"
    echo "| commit | \`$commit\`$( ((dirty)) && echo " (with $dirty uncommitted changes)") |"
    echo "| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) |"
    echo "| machine | $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(. /etc/os-release; echo "$PRETTY_NAME") |"
    echo
    echo "Each folder holds the run's \`report.json\` and \`summary.md\` as anyplay-chaos wrote them."
    echo "The table is \`jq -f deploy/plan-row.jq\` over each \`report.json\`: the exit code, the"
    echo "verdict, every check's result, and from the checks' details the presence deliveries"
    echo "that crossed nodes, the 4001 replacements that involved a second device, and the"
    echo "writes made inside fault windows."
    echo
    echo "| plan | exit | verdict | checks passed | unknown | cross-node deliveries judged | second-device replacements | writes in fault windows |"
    echo "|---|---:|---|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
    for plan in plans/*.yaml; do
        name=$(basename "$plan" .yaml)
        echo
        echo "## $name"
        echo
        sed -n '/^## Checks/,$p' "$out/$name/summary.md" | sed 's/^## /### /'
    done
} >"$out/README.md"
echo "results: $out (runs in $scratch)"
