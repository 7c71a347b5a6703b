#!/usr/bin/env bash
# Runs every test binary of the workspace's release build as `cargo test` would (each from its
# package's directory, every test of it even after a failure), in two lanes at once: chaos's
# integration tests (whole runs one after another, most of the time) in one, every other
# binary in the other. `cargo test` runs its binaries one after another and holds the build
# directory while they run, so a second `cargo test` beside it would only wait. The crates
# have no doc tests (`doctest = false`).
#   deploy/test-binaries.sh LOG   every line of output, marked by lane, also in LOG;
#                                 exit 1 when a test failed
set -euo pipefail
cd "$(dirname "$0")/.."
log=$1
: >"$log"
list=$(mktemp -t anyplay-test-binaries.XXXXXX)
lanes=$(mktemp -d -t anyplay-test-lanes.XXXXXX)
trap 'rm -rf "$list" "$lanes"' EXIT

# Built already (deploy/test.sh builds every target first): this only names them.
cargo test --release --workspace --locked --no-run --message-format=json 2>/dev/null |
    jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
           | [.executable, (.manifest_path | sub("/Cargo.toml$"; "")), .target.name] | @tsv' \
        >"$list"
if [[ ! -s $list ]]; then
    echo "deploy/test-binaries.sh: cargo named no test binary" >&2
    exit 1
fi

# Runs the binaries of lane $1 (lines of $list picked by awk program $2); its status in a file.
lane() {
    local name=$1 pick=$2 failed=0
    while IFS=$'\t' read -r executable dir target; do
        echo "     Running ${dir##*/} $target ($executable)"
        (cd "$dir" && "$executable") || failed=1
    done < <(awk -F'\t' "$pick" "$list")
    echo "$failed" >"$lanes/$name.failed"
}

chaos_runs='$2 ~ /\/chaos$/ && $3 == "integration"'
lane runs "$chaos_runs" 2>&1 | sed -u 's/^/[runs] /' | tee -a "$log" &
runs=$!
lane others "!($chaos_runs)" 2>&1 | sed -u 's/^/[others] /' | tee -a "$log" &
others=$!
wait "$runs" "$others"

status=0
for name in runs others; do
    [[ $(cat "$lanes/$name.failed" 2>/dev/null) == 0 ]] || status=1
done
exit "$status"
