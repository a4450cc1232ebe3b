#!/usr/bin/env bash
# The agent's sustained sample rate (agent_overhead --rate-only) for two builds of ocslab-agent,
# run alternately on the same machine, so that a difference between the builds is told apart
# from the machine's load (printed before each run; the benchmark prints it after).
#   tests/bench/agent_rate_compare.sh BUILD_DIR OLD_AGENT [RUNS] [SECONDS] [MAX_HEARTBEATS]
# BUILD_DIR: a build of this tree (bench/agent_overhead and bin/ocslab-agent); OLD_AGENT: an
# ocslab-agent binary of the build to compare with (e.g. built from an earlier commit).
# Prints one summary line per run: build, load before, per rate: p99 latency, the agent's longest
# heartbeat tick gap (how long it was kept off the CPU) and the machine's idle CPU.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
build=$1
old=$2
runs=${3:-3}
seconds=${4:-30}
max_hb=${5:-16}
bench=$build/bench/agent_overhead
new=$build/bin/ocslab-agent
for f in "$bench" "$new" "$old"; do
  [[ -x $f ]] || { echo "agent_rate_compare: $f is not an executable" >&2; exit 2; }
done
summary=()
for ((i = 1; i <= runs; i++)); do
  for which in new old; do
    agent=$new
    [[ $which == old ]] && agent=$old
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "=== run $i, $which build ($agent), load average before: $load"
    out=$("$bench" --rate-only --agent "$agent" --seconds "$seconds" --max-heartbeats "$max_hb")
    echo "$out"
    # Each rate row's p99 latency, the agent's longest tick gap and the machine's idle CPU.
    p99=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13 {printf "%s/s: p99 %s gap %s idle %s; ", $2, $9, $11, $13}' <<<"$out")
    best=$(sed -n 's/^highest sustained: \([0-9]*\) samples.*/\1/p' <<<"$out")
    summary+=("run $i $which: load before $load; by target rate (ms): $p99 highest sustained $best/s")
  done
done
echo
echo "summary (p99 < 50 ms and >= 95 % delivered counts as sustained):"
printf '%s\n' "${summary[@]}"
