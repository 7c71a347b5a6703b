# shellcheck shell=bash
# Sourced by deploy/test.sh: makes sure a Docker engine answers on this machine. When dockerd
# is installed but not running (a fresh machine, a CI container), it starts one as root in the
# background, with its output in a log file so it holds none of the caller's pipes, and leaves
# it running for the next use. Fails (does not skip) when no engine can be had.

docker_engine_log=/var/log/anyplay-dockerd.log

if ! docker info >/dev/null 2>&1; then
    if [[ $(id -u) -ne 0 ]]; then
        echo "deploy/test.sh: the Docker engine does not answer, and only root can start dockerd" >&2
        exit 1
    fi
    echo "deploy/test.sh: starting dockerd (log: $docker_engine_log)" >&2
    dockerd=$(command -v dockerd || echo /usr/sbin/dockerd)
    setsid "$dockerd" >"$docker_engine_log" 2>&1 </dev/null &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        echo "deploy/test.sh: dockerd did not come up within 30 s; its log:" >&2
        tail -n 30 "$docker_engine_log" >&2
        exit 1
    fi
fi
