#!/usr/bin/env bash
# Runs every test of the workspace, on a fresh machine as on a developer's:
# installs what the tests need when it is missing (with apt-get, as root),
# builds everything once in the release profile, starts a Docker engine and
# builds the local images, then runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v nats-server >/dev/null 2>&1 || [[ -x /usr/sbin/nats-server ]] || missing+=(nats-server)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
getent passwd postgres >/dev/null || missing+=(postgresql)
# The Docker backend's tests: the engine, and debootstrap for the local images.
command -v dockerd >/dev/null 2>&1 || [[ -x /usr/sbin/dockerd ]] || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [[ -x /usr/sbin/debootstrap ]] || missing+=(debootstrap)
# The `clock` fault: libfaketime, preloaded into the services it skews.
compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null || missing+=(faketime)
# netns hosts: namespaces, veths and bridges (ip), firewall partitions (nft).
command -v ip >/dev/null 2>&1 || [[ -x /usr/sbin/ip ]] || [[ -x /sbin/ip ]] || missing+=(iproute2)
command -v nft >/dev/null 2>&1 || [[ -x /usr/sbin/nft ]] || missing+=(nftables)
# The remote-engine test's certificates.
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# deploy/test-binaries.sh: the test binaries cargo built, from its JSON messages.
command -v jq >/dev/null 2>&1 || missing+=(jq)
# The control API's test drives `up --api` with Toxiproxy's own Node client (npm).
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# ... and with Toxiproxy's Python client, and checks `--metrics` with Prometheus' own
# OpenMetrics parser (PyPI, in a venv).
/usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
# ... and with Toxiproxy's Rust client (crates.io, reqwest 0.11 on OpenSSL), built below.
pkg-config --exists openssl 2>/dev/null || missing+=(pkg-config libssl-dev)
# The report's browser test.
command -v chromium >/dev/null 2>&1 || missing+=(chromium fonts-dejavu-core)
if ((${#missing[@]})) && [[ $(id -u) -ne 0 ]]; then
    echo "deploy/test.sh: missing ${missing[*]}; run as root to install them, or install them yourself" >&2
    exit 1
fi

# What needs no compiled code (packages, the Docker engine, the service images: network and
# disk) is prepared in the background while cargo compiles (CPU); on a fresh machine that hides
# most of its minutes. Its output is shown once it is done. The packages come first, and say so:
# the self-test needs them (PostgreSQL, NATS), not the images.
packages_ready=$(mktemp -u -t anyplay-packages-ready.XXXXXX)
prepare() {
    if ((${#missing[@]})); then
        echo "deploy/test.sh: installing ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    # Toxiproxy's client at the version its lock file pins.
    npm ci --prefix deploy/toxiproxy-client --no-audit --no-fund --loglevel=error
    [[ -x deploy/python/.venv/bin/python ]] || /usr/bin/python3 -m venv deploy/python/.venv
    deploy/python/.venv/bin/pip install -q -r deploy/python/requirements.txt
    touch "$packages_ready"
    source deploy/docker-engine.sh
    deploy/images/build.sh --services-only
}
prepare_log=$(mktemp -t anyplay-prepare.XXXXXX)
prepare >"$prepare_log" 2>&1 &
prepare_pid=$!

# A first build (a fresh clone, CI) gains nothing from incremental compilation and pays for
# writing its caches: 6 % of the workspace crates' cold build (results/ci). Later builds keep
# the profile's incremental setting.
[[ -d target/release ]] || export CARGO_INCREMENTAL=0

# The self-test's binary first, with the defects seeded into the cloud, and kept aside: the
# workspace build after it puts the plain anyplay-chaos back where the tests run it from, and
# recompiles only the three crates (dependencies are shared).
selftest_bin=target/selftest/anyplay-chaos
cargo build --release --locked -p anyplay-chaos --features seeded-defects
mkdir -p "$(dirname "$selftest_bin")"
cp target/release/anyplay-chaos "$selftest_bin"

# The checks proven against defects seeded into the cloud: one short plan runs clean and once
# per defect, two at a time, from here to the end, beside the workspace's build and its tests.
# Whole runs mostly wait on their timelines, but five at once (three here, two of chaos's
# tests) left two cores no room: deliveries came seconds late and measurements starved
# (results/ci). The build beside them runs at a lower priority, so it takes only what the runs
# leave. Progress goes to stderr as it comes, marked; the table waits for the end.
while [[ ! -e $packages_ready ]] && kill -0 "$prepare_pid" 2>/dev/null; do sleep 1; done
selftest_table=$(mktemp -t anyplay-selftest-table.XXXXXX)
"$selftest_bin" selftest --jobs 2 --out "$(mktemp -d -t anyplay-selftest.XXXXXX)" \
    >"$selftest_table" 2> >(sed -u 's/^/[selftest] /' >&2) &
selftest_pid=$!
# What ends the script early ends the self-test's runs too (they stop as on Ctrl-C).
stop_selftest() { kill "$selftest_pid" 2>/dev/null || true; wait "$selftest_pid" || true; }

# One profile for tests and binaries, so everything is compiled once.
nice -n 10 cargo build --release --workspace --all-targets --locked || { stop_selftest; exit 1; }

prepared=0
wait "$prepare_pid" || prepared=$?
cat "$prepare_log" >&2
rm -f "$prepare_log" "$packages_ready"
if ((prepared)); then
    echo "deploy/test.sh: preparing the machine failed (its output is above)" >&2
    stop_selftest
    exit "$prepared"
fi
# Toxiproxy's Rust client for the control API's test: a project of its own, in the dev
# profile without debug info (half the release build's time; it only sends a few requests),
# once the packages are in (it links OpenSSL).
nice -n 10 cargo build --locked --manifest-path deploy/toxiproxy-rust/Cargo.toml \
    --target-dir target/toxiproxy-rust || { stop_selftest; exit 1; }
# The node image follows the binary just built.
deploy/images/build.sh || { stop_selftest; exit 1; }

source deploy/test-services.sh
status=0

# Every test binary runs even after a failure, so one run shows everything that fails;
# chaos's whole runs in one lane, every other binary beside them in another.
test_log=$(mktemp -t anyplay-cargo-test.XXXXXX)
deploy/test-binaries.sh "$test_log" || status=$?

wait "$selftest_pid" || status=$?
# The self-test's table, then the failed tests named again below it, where a reader of the
# tail (CI shows only that) finds them.
cat "$selftest_table" >&2
rm -f "$selftest_table"
if grep -q -e 'test .* FAILED$' -e 'test result: FAILED' "$test_log"; then
    echo "deploy/test.sh: cargo test failed:" >&2
    grep -e 'test .* FAILED$' -e 'test result: FAILED' -e '---- .* stdout ----$' -A30 "$test_log" |
        head -n 300 >&2
fi
rm -f "$test_log"
exit "$status"
