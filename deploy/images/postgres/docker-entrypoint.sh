#!/usr/bin/env bash
# Entrypoint of anyplay/postgres:local. It follows the official `postgres` image, so a caller
# drives both the same way:
#   POSTGRES_USER              superuser made by initdb (default postgres)
#   POSTGRES_PASSWORD          its password; without one POSTGRES_HOST_AUTH_METHOD must be set
#   POSTGRES_DB                database made on the first start (default: the user's name)
#   POSTGRES_HOST_AUTH_METHOD  how TCP clients authenticate (default scram-sha-256), e.g. trust
#   POSTGRES_INITDB_ARGS       more initdb arguments, e.g. --no-sync
#   PGDATA                     the cluster, made when it holds none (default /var/lib/postgresql/data)
# `postgres -p 5433 ...` or just `-p 5433 ...` runs the server with those flags; any other command
# runs as given. Started as root, it makes and serves the cluster as the postgres user, and
# postgres replaces this script (exec): it is PID 1 and receives the stop signal itself.
set -euo pipefail

say() { echo "docker-entrypoint.sh: $*" >&2; }

if [[ ${1:-} == -* ]]; then
    set -- postgres "$@"
fi
if [[ ${1:-} != postgres ]]; then
    exec "$@"
fi

export PGDATA=${PGDATA:-/var/lib/postgresql/data}
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}

# PostgreSQL refuses to run as root.
as_postgres=()
if [[ $(id -u) -eq 0 ]]; then
    as_postgres=(setpriv --reuid=postgres --regid=postgres --init-groups --)
    mkdir -p "$PGDATA" /var/run/postgresql
    chown postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
fi

init_cluster() {
    local method=${POSTGRES_HOST_AUTH_METHOD:-}
    if [[ -z $method ]]; then
        if [[ -z ${POSTGRES_PASSWORD:-} ]]; then
            say "set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust to let anyone who reaches the port in"
            exit 1
        fi
        method=scram-sha-256
    fi
    local args=(--username="$user" --auth-local=trust --auth-host="$method")
    local pwfile=
    if [[ -n ${POSTGRES_PASSWORD:-} ]]; then
        pwfile=$(mktemp)
        printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
        ((${#as_postgres[@]})) && chown postgres "$pwfile"
        args+=(--pwfile="$pwfile")
    fi
    local extra
    read -ra extra <<<"${POSTGRES_INITDB_ARGS:-}"
    "${as_postgres[@]}" initdb "${args[@]}" "${extra[@]}"
    [[ -n $pwfile ]] && rm -f "$pwfile"
    # Clients from other hosts (or containers) too, with the chosen method.
    printf '\nhost all all all %s\n' "$method" >>"$PGDATA/pg_hba.conf"

    if [[ $db != postgres ]]; then
        # Single-user mode: no server, socket or port needed before the real start. It exits 0
        # even when the statement fails, so its output tells.
        local out
        out=$(printf 'CREATE DATABASE "%s"\n' "${db//\"/\"\"}" |
            "${as_postgres[@]}" postgres --single -D "$PGDATA" postgres 2>&1)
        if [[ $out == *ERROR:* ]]; then
            echo "$out" >&2
            say "could not create database $db"
            exit 1
        fi
        say "created database $db"
    fi
}

if [[ ! -s $PGDATA/PG_VERSION ]]; then
    init_cluster
fi

exec "${as_postgres[@]}" "$@"
