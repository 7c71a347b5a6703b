#!/usr/bin/env bash
# Runs a chaos plan and keeps its report under results/<name>/ for publishing:
# report.json, summary.md, report.html, plan.yaml, load.json, the logs and the
# history (gzipped), with a README that names the machine, the commit and the
# exact command. The figures are the run's own; nothing is edited by hand.
#   deploy/record-run.sh plans/node-crash.yaml [name] [-- more run flags]
#   e.g. deploy/record-run.sh plans/node-crash.yaml node-crash-docker -- --backend docker
set -euo pipefail
cd "$(dirname "$0")/.."
plan=$1
name=${2:-$(basename "$plan" .yaml)}
# results/$name is emptied below: a name of [a-z0-9-] only can name nothing but a
# directory right under results/ (no "", ".", "..", "/", spaces or globs).
if [[ ! $name =~ ^[a-z0-9][a-z0-9-]*$ ]]; then
    echo "record-run.sh: bad name '$name': use lowercase letters, digits and '-' (e.g. node-crash-docker)" >&2
    exit 2
fi
shift $(($# < 2 ? $# : 2))
[[ ${1:-} == -- ]] && shift
out=results/$name
rm -rf "$out"
mkdir -p "$out"
command="cargo run --release -p anyplay-chaos -- run $plan --out $out/run${*:+ $*}"
status=0
$command >"$out/stdout.txt" 2>"$out/stderr.txt" || status=$?
# The databases are scratch; the history is kept compressed.
rm -rf "$out/run/postgres" "$out/run/cloud.db" "$out/run/cloud.db-wal" "$out/run/cloud.db-shm" "$out/run/mail.log"
gzip -9 "$out/run/events.jsonl"
dirty=$(git status --porcelain --untracked-files=no | wc -l)
{
    echo "# $name"
    echo
    echo "| | |"
    echo "|---|---|"
    echo "| command | \`$command\` |"
    echo "| exit code | $status |"
    echo "| commit | \`$(git rev-parse HEAD)\`$( ((dirty)) && echo " (with $dirty uncommitted changes)") |"
    echo "| date | $(date -u +%Y-%m-%dT%H:%M:%SZ) |"
    echo "| machine | $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(. /etc/os-release; echo "$PRETTY_NAME") |"
    echo
    echo "Files: \`run/report.json\`, \`run/summary.md\`, \`run/report.html\`, \`run/plan.yaml\` (resolved), \`run/load.json\`, \`run/logs/\`, \`run/events.jsonl.gz\`."
    echo
    sed -n '/^## Checks/,$p' "$out/run/summary.md"
} >"$out/README.md"
echo "results: $out (exit $status)"
