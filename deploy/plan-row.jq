# One row of results/plans/README.md from a run's report.json ($name given).
def detail($check): (.checks[] | select(.name == $check) | .detail) // "";
def number($text; $pattern): ($text | capture($pattern) | .n) // "—";
"| \($name) | \(.verdict) | \([.checks[] | select(.result == "pass")] | length) of \(.checks | length) | \([.checks[] | select(.result == "unknown")] | length) | "
+ number(detail("presence_missing"); "(?<n>[0-9]+) crossed nodes") + " | "
+ ((number(detail("duplicate_sessions"); "(?<n>[0-9]+) by a second device") | tonumber? // 0)
   + (number(detail("duplicate_sessions"); "(?<n>[0-9]+) of a second device") | tonumber? // 0) | tostring) + " | "
+ number(detail("lost_writes"); "(?<n>[0-9]+) in fault windows") + " |"
