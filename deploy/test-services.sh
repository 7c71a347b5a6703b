# Sourced by deploy/test.sh: starts a throwaway PostgreSQL and NATS on free
# loopback ports for the cloud's store and cluster tests, exports their URLs
# (ANYPLAY_TEST_POSTGRES_URL, ANYPLAY_TEST_NATS_URL) and stops them on exit.
# (anyplay-chaos starts its own for every run; this is only for `cargo test`.)

source "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

services_dir=$(mktemp -d /tmp/anyplay-test-services.XXXXXX)
pg_bin=$(dirname "$(compgen -G "/usr/lib/postgresql/*/bin/initdb" | sort -V | tail -n 1)")
pg_port=$(free_port)
nats_port=$(free_port)

# initdb and postgres refuse to run as root: run them as the postgres user.
as_pg() {
    if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
[[ $(id -u) -eq 0 ]] && chown postgres "$services_dir"

stop_services() {
    as_pg "$pg_bin/pg_ctl" -D "$services_dir/pg" -m immediate stop >/dev/null 2>&1 || true
    [[ -n ${nats_pid:-} ]] && kill "$nats_pid" 2>/dev/null || true
    rm -rf "$services_dir"
}
trap stop_services EXIT

as_pg "$pg_bin/initdb" -D "$services_dir/pg" -U anyplay --auth=trust -E UTF8 >"$services_dir/initdb.log"
as_pg "$pg_bin/pg_ctl" -D "$services_dir/pg" -l "$services_dir/pg/server.log" -w \
    -o "-p $pg_port -k $services_dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=500" \
    start >/dev/null
"$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U anyplay anyplay_test
export ANYPLAY_TEST_POSTGRES_URL="postgres://anyplay@127.0.0.1:$pg_port/anyplay_test"

nats_bin=$(command -v nats-server || echo /usr/sbin/nats-server)
"$nats_bin" -a 127.0.0.1 -p "$nats_port" >"$services_dir/nats.log" 2>&1 &
nats_pid=$!
export ANYPLAY_TEST_NATS_URL="nats://127.0.0.1:$nats_port"
echo "deploy/test.sh: PostgreSQL on 127.0.0.1:$pg_port, NATS on 127.0.0.1:$nats_port" >&2
