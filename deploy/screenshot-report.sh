#!/usr/bin/env bash
# Screenshots a run's report as headless Debian Chromium draws it (the flags of
# chaos/tests/browser.rs), 1400x1800:
#   deploy/screenshot-report.sh RUN_DIR OUT.png
# The report is rendered afresh by `anyplay-chaos report` from the run's plan.yaml,
# events.jsonl (or events.jsonl.gz) and load.json in a scratch directory, so the run
# directory stays as it is and the picture shows what this build draws.
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 RUN_DIR OUT.png" >&2
    exit 2
fi
run=$(cd "$1" && pwd)
out=$(realpath -m "$2")
chromium=/usr/bin/chromium
if [ ! -x "$chromium" ]; then
    echo "$chromium is missing: apt-get install chromium" >&2
    exit 1
fi
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp "$run/plan.yaml" "$scratch/"
if [ -f "$run/load.json" ]; then cp "$run/load.json" "$scratch/"; fi
if [ -f "$run/events.jsonl" ]; then
    cp "$run/events.jsonl" "$scratch/"
else
    gzip -dc "$run/events.jsonl.gz" >"$scratch/events.jsonl"
fi
# Exit 1 is a report whose verdict is FAIL: still a report to show.
cargo run --quiet --release -p anyplay-chaos -- report "$scratch" >/dev/null || [ $? -eq 1 ]
mkdir -p "$scratch/profile"
# Chromium's stderr is noisy (D-Bus) even when it works: shown only when it fails.
if ! "$chromium" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$scratch/profile" --window-size=1400,1800 \
    --screenshot="$out" "file://$scratch/report.html" 2>"$scratch/chromium.log" ||
    [ ! -s "$out" ]; then
    cat "$scratch/chromium.log" >&2
    echo "chromium wrote no screenshot to $out" >&2
    exit 1
fi
echo "screenshot: $out"
