# Sourced by the test and benchmark scripts: free_port prints a loopback port nothing
# listens on (picked at random below the ephemeral range).
free_port() {
    local port
    while :; do
        port=$((20000 + RANDOM % 12000))
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
    done
}
