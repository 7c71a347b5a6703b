#!/usr/bin/env bash
# Builds anyplay's Docker images on a machine that cannot pull from a registry:
#   anyplay/base:local      Debian bookworm (debootstrap minbase) with postgresql and nats-server
#   anyplay/postgres:local  PostgreSQL, driven like the official `postgres` image
#   anyplay/nats:local      nats-server as the entrypoint, like the official `nats` image
#   anyplay/node:local      the anyplay-cloud binary of this checkout
# Each image is kept while its tag exists; the node image is rebuilt whenever the binary
# changed (its sha256 is in the label anyplay.binary.sha256). --services-only builds the first
# three, which need no binary (deploy/test.sh builds them while cargo compiles).
#   deploy/images/build.sh [--rebuild] [--services-only] [--binary PATH]
set -euo pipefail
cd "$(dirname "$0")/../.."

images=deploy/images
mirror=${ANYPLAY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Libraries the node binary links besides libc6 (`ldd target/release/anyplay-cloud`); the node
# image's smoke test below fails if the binary ever needs one more.
node_libs=libgcc-s1

say() { echo "deploy/images/build.sh: $*" >&2; }
die() {
    say "$*"
    exit 1
}

usage() {
    echo "usage: deploy/images/build.sh [--rebuild] [--services-only] [--binary PATH]" >&2
    exit "${1:-2}"
}

rebuild=0
services_only=0
binary=target/release/anyplay-cloud
while (($#)); do
    case $1 in
    --rebuild) rebuild=1 ;;
    --services-only) services_only=1 ;;
    --binary)
        (($# >= 2)) || usage
        binary=$2
        shift
        ;;
    -h | --help) usage 0 ;;
    *)
        say "unknown argument: $1"
        usage
        ;;
    esac
    shift
done

((services_only)) || [[ -f $binary ]] || die "$binary does not exist: build it first with \`cargo build --release -p anyplay-cloud\` (or name another with --binary PATH)"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer (\`docker info\`): start it, e.g. \`dockerd > /tmp/dockerd.log 2>&1 &\`"

has_image() { docker image inspect "$1" >/dev/null 2>&1; }
image_id() { docker image inspect -f '{{.Id}}' "$1" 2>/dev/null || true; }

# Images a rebuild untagged, newest first: removed at the end, children before their parents.
replaced=()
retire() {
    local old=$1 tag=$2
    if [[ -n $old && $old != "$(image_id "$tag")" ]]; then
        replaced=("$old" "${replaced[@]}")
    fi
}

# The one scratch directory of this run, removed on exit whatever happens. A debootstrap that
# failed half-way may leave /proc or /sys mounted inside it: unmount those before removing.
scratch=$(mktemp -d /tmp/anyplay-images.XXXXXX)
cleanup() {
    findmnt -rn -o TARGET | grep "^$scratch/" | sort -r | xargs -r umount -l 2>/dev/null || true
    rm -rf --one-file-system "$scratch"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

ensure_debootstrap() {
    command -v debootstrap >/dev/null 2>&1 && return
    [[ $(id -u) -eq 0 ]] || die "debootstrap is missing: run as root to install it, or install it yourself (apt-get install debootstrap)"
    say "installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

build_base() {
    [[ $(id -u) -eq 0 ]] || die "building anyplay/base:local needs root (debootstrap)"
    ensure_debootstrap
    local root=$scratch/root log=$scratch/debootstrap.log old
    old=$(image_id anyplay/base:local)
    say "building anyplay/base:local: debootstrap bookworm from $mirror (a minute or two)"
    if ! debootstrap --variant=minbase --include="postgresql,nats-server,ca-certificates,$node_libs" \
        bookworm "$root" "$mirror" >"$log" 2>&1; then
        tail -n 30 "$log" >&2
        die "debootstrap failed (the last lines are above)"
    fi

    # The image needs no package caches, docs or message translations, nor the cluster the
    # postgresql package creates on install: containers make their own in $PGDATA.
    rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
        "$root"/usr/share/locale/* \
        "$root"/var/lib/postgresql/* "$root"/etc/postgresql/*

    local major
    major=$(find "$root/usr/lib/postgresql" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
    [[ -x $root/usr/lib/postgresql/$major/bin/postgres ]] || die "no PostgreSQL server in the Debian root"
    tar --numeric-owner -C "$root" -c . | docker import \
        --change "ENV PATH=/usr/lib/postgresql/$major/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' \
        --message "debootstrap minbase bookworm: postgresql $major, nats-server" \
        - anyplay/base:local >/dev/null
    retire "$old" anyplay/base:local
}

# `docker build` on top of the local base: never pulls. Its output (with the legacy builder's
# deprecation notice) is shown only when the build fails.
build_from_base() {
    local tag=$1 context=$2 out old
    shift 2
    say "building $tag"
    old=$(image_id "$tag")
    if ! out=$(docker build --pull=false -t "$tag" "$@" "$context" 2>&1); then
        echo "$out" >&2
        die "building $tag failed (the output is above)"
    fi
    retire "$old" "$tag"
}

# Runs a freshly built image once, so a broken one fails here and not in a chaos run.
smoke() {
    local tag=$1
    shift
    docker run --rm --network none "$@" >/dev/null 2>&1 ||
        die "$tag does not start (\`docker run --rm $*\`); try again with --rebuild"
}

fresh_base=0
if ((rebuild)) || ! has_image anyplay/base:local; then
    build_base
    fresh_base=1
fi
# Images on top of a new base are rebuilt too, so none keeps the old one.
rebuild_derived=$((rebuild || fresh_base))

if ((rebuild_derived)) || ! has_image anyplay/postgres:local; then
    build_from_base anyplay/postgres:local "$images/postgres"
    smoke anyplay/postgres:local --entrypoint postgres anyplay/postgres:local --version
fi

if ((rebuild_derived)) || ! has_image anyplay/nats:local; then
    build_from_base anyplay/nats:local "$images/nats"
    smoke anyplay/nats:local anyplay/nats:local --version
fi

if ((services_only)); then
    # The node image waits for the binary (a later call without --services-only); one built on
    # the base just replaced goes now, so that call builds it again.
    if ((fresh_base)) && has_image anyplay/node:local; then
        docker image rm anyplay/node:local >/dev/null
    fi
else
    sha=$(sha256sum "$binary" | cut -d' ' -f1)
    built_sha=$(docker image inspect -f '{{index .Config.Labels "anyplay.binary.sha256"}}' anyplay/node:local 2>/dev/null || true)
    if ((rebuild_derived)) || [[ $built_sha != "$sha" ]]; then
        # The context holds the binary alone: never the repository's target/.
        context=$scratch/node
        mkdir -p "$context"
        cp "$binary" "$context/anyplay-cloud"
        build_from_base anyplay/node:local "$context" -f "$images/node/Dockerfile" --build-arg "BINARY_SHA256=$sha"
        smoke anyplay/node:local anyplay/node:local --version
    fi
fi

# One still used by a container stays.
for id in "${replaced[@]}"; do
    docker rmi "$id" >/dev/null 2>&1 || true
done

docker image ls --format 'table {{.Repository}}:{{.Tag}}\t{{.Size}}\t{{.CreatedSince}}' 'anyplay/*:local'
