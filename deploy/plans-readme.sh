#!/usr/bin/env bash
# Writes results/plans/README.md from what is there: RUNS.md (how each report came to be)
# and one table over every plan's report.json (deploy/plan-row.jq), then each plan's
# checks and faults tables from its summary.md. Run again after a plan's report changes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=results/plans
{
    echo "# Every shipped plan, at full size, on the cloud as it is"
    echo
    echo "Each folder holds a run's \`report.json\` and \`summary.md\` as anyplay-chaos wrote them;"
    echo "[RUNS.md](RUNS.md) says for each how it was made (machine, commit, command, exit code)."
    echo "The table is \`jq -f deploy/plan-row.jq\` over each \`report.json\`: the verdict, every"
    echo "check's result, and from the checks' details the presence deliveries that crossed"
    echo "nodes, the 4001 replacements that involved a second device, and the writes made"
    echo "inside fault windows."
    echo
    echo "| plan | verdict | checks passed | unknown | cross-node deliveries judged | second-device replacements | writes in fault windows |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    for report in "$out"/*/report.json; do
        jq -r --arg name "$(basename "$(dirname "$report")")" -f deploy/plan-row.jq "$report"
    done
    for summary in "$out"/*/summary.md; do
        echo
        echo "## $(basename "$(dirname "$summary")")"
        echo
        sed -n '/^## Checks/,$p' "$summary" | sed 's/^## /### /'
    done
} >"$out/README.md"
