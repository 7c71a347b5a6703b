#!/usr/bin/env bash
# Prints the markdown table of load-agent benchmark runs (deploy/bench-agents.sh output
# directories), one row per directory, every figure read from its report.json and
# memory.json.
#
#   deploy/agents-table.sh results/agents/players-50000-agents-4 ...
set -euo pipefail
echo "| run | players | agents | nodes | online | presence received / expected | storm back / hit | storm 100 % back | e2e_login p50 / p99 | agents' peak RSS (sum) | nodes' peak RSS (sum) | KB per player (agents or harness + nodes) | agents' scheduler lag p99 (worst second) | incomplete |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"
for dir in "$@"; do
    jq -r --arg run "$(basename "$dir")" --slurpfile memory "$dir/memory.json" '
        def scenario($n): [.scenarios[] | select(.name == $n)][0];
        def mb: . * 10 | round / 10;
        ($memory[0]) as $m
        | ([$m | to_entries[] | select(.key | startswith("agent-")) | .value] | add // 0) as $agents_mb
        | ([$m | to_entries[] | select(.key | startswith("node-")) | .value] | add // 0) as $nodes_mb
        | (if (.agents // []) == [] then .generator.rss_mb_peak else $agents_mb end) as $players_mb
        | scenario("login") as $login
        | scenario("presence").delivery as $d
        | scenario("storm").storm as $s
        | [
            $run,
            .settings.players,
            ((.agents // []) | length),
            (.process.nodes | length),
            $login.players.online,
            "\($d.received) / \($d.expected)",
            "\($s.players_back) / \($s.players_hit)",
            (if $s.back_s["100"] then "\($s.back_s["100"] * 100 | round / 100) s" else "not all" end),
            "\($login.ops.e2e_login.p50_ms | round) / \($login.ops.e2e_login.p99_ms | round) ms",
            (if (.agents // []) == [] then "— (harness \($players_mb | mb) MB)" else "\($agents_mb | mb) MB" end),
            "\($nodes_mb | mb) MB",
            (($players_mb + $nodes_mb) * 1024 / .settings.players | mb),
            (if (.agents // []) == [] then "—" else ([.agents[].health[].sched_lag_ms_p99] | max | mb | tostring) + " ms" end),
            .incomplete
          ]
        | "| " + (map(tostring) | join(" | ")) + " |"
    ' "$dir/report.json"
done
