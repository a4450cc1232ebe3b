#!/usr/bin/env bash
# agent_overhead --vlab in a two-host virtual lab it boots for the purpose and always takes
# down: the agent's CPU inside guest h1 with carrier + firmware (1 ms, ibv_query_port) + the
# RDMA probe (1 kHz, against h2), against an idle agent and the probe library without the agent.
# Boots VMs: run it alone, e.g. `flock /work/vlab.lock tests/bench/agent_overhead_vlab.sh build`.
#   tests/bench/agent_overhead_vlab.sh BUILD_DIR [SECONDS] [LAB_NAME]
set -euo pipefail
if [[ $# -lt 1 ]]; then
  sed -n '2,6p' "$0" >&2
  exit 2
fi
build=$1
seconds=${2:-10}
name=${3:-agent-overhead-$$}
here=$(cd "$(dirname "$0")/../.." && pwd)
cache=${OCSLAB_VLAB_CACHE:-$HOME/.cache/ocslab/vlab}
mkdir -p "$cache"
lab=$(mktemp "$cache/$name.XXXXXX.yaml")
sed "s/^name: .*/name: $name/" "$here/experiments/labs/two-hosts.yaml" >"$lab"
down() {
  "$build/bin/ocslab" vlab down "$name" >/dev/null 2>&1 || true
  rm -f "$lab"
}
trap down EXIT
echo "load average before boot: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bin/ocslab" vlab up "$lab" >/dev/null
echo "lab $name up; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bench/agent_overhead" --vlab "$name" --ocslab "$build/bin/ocslab" --seconds "$seconds"
