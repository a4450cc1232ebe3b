#!/usr/bin/env bash
# Bad inventories stop every playbook in its FIRST task, naming host and variable, before any
# host changes. Runs against a never-contacted local host: the first task needs no connection.
set -uo pipefail
src=$1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail=0
expect() {  # expect NAME PLAYBOOK INVENTORY-YAML MESSAGE...
  local name=$1 pb=$2 inv=$3; shift 3
  printf '%s\n' "$inv" > "$dir/$name.yml"
  out=$(ANSIBLE_STDOUT_CALLBACK=json ansible-playbook -i "$dir/$name.yml" "$src/ansible/$pb" 2>&1)
  rc=$?
  first=$(printf '%s' "$out" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
tasks = [t for p in d["plays"] for t in p["tasks"]]
t = tasks[0]
print(len(tasks), t["task"]["name"], "|", json.dumps([r.get("msg", "") for r in t["hosts"].values()]))
print(json.dumps(d["stats"]))')
  ok=1
  [[ $rc -ne 0 ]] || ok=0
  [[ "$first" == "1 ocslab_inventory : Validate the inventory"* ]] || ok=0
  for m in "$@"; do [[ "$first" == *"$m"* ]] || ok=0; done
  if [[ $ok -eq 1 ]]; then echo "ok   $name ($pb): $first"; else echo "FAIL $name ($pb): rc $rc: $first"; fail=1; fi
}
for pb in site.yml nics.yml agent.yml check.yml; do
  expect no-mac "$pb" '{all: {hosts: {srv1: {ansible_connection: local, ocslab_nic_kind: mlx5, ocslab_nics: [{name: ens1f0}]}}}}' \
    'srv1: ocslab_nics[0] (ens1f0).mac is missing'
done
expect bad-kind site.yml '{all: {hosts: {srv2: {ansible_connection: local, ocslab_nics: [{name: ens1f0, mac: "02:00:00:00:00:01", kind: cx9}]}}}}' \
  "srv2: ocslab_nics[0] (ens1f0).kind: unknown NIC kind 'cx9'"
expect host-kind site.yml '{all: {hosts: {srv3: {ansible_connection: local, ocslab_nic_kind: nvidia, ocslab_nics: [{name: e1, mac: "02:00:00:00:00:01"}]}}}}' \
  "srv3: ocslab_nic_kind: unknown NIC kind 'nvidia'"
expect mlx-no-pci nics.yml '{all: {hosts: {srv4: {ansible_connection: local, ocslab_nics: [{name: e1, mac: "02:00:00:00:00:01", kind: mlx5, mlxconfig: {LINK_TYPE_P1: 2}}]}}}}' \
  "srv4: ocslab_nics[0] (e1).pci is missing"
expect mlx-bad-key nics.yml '{all: {hosts: {srv5: {ansible_connection: local, ocslab_nics: [{name: e1, mac: "02:00:00:00:00:01", kind: mlx5, pci: "0000:08:00.0", mlxconfig: {"link type": 2}}]}}}}' \
  "srv5: ocslab_nics[0] (e1).mlxconfig: 'link type' is not a firmware parameter name"
expect sriov-virtio nics.yml '{all: {hosts: {srv6: {ansible_connection: local, ocslab_nics: [{name: e1, mac: "02:00:00:00:00:01", kind: virtio, sriov_vfs: 2, pci: "0000:08:00.0"}]}}}}' \
  "srv6: ocslab_nics[0] (e1).sriov_vfs: not supported on NIC kind virtio"
expect bad-vfs nics.yml '{all: {hosts: {srv7: {ansible_connection: local, ocslab_nics: [{name: e1, mac: "02:00:00:00:00:01", kind: mlx5, sriov_vfs: "four", pci: "0000:08:00.0"}]}}}}' \
  "srv7: ocslab_nics[0] (e1).sriov_vfs: 'four' is not an integer"
expect two-hosts site.yml '{all: {hosts: {good: {ansible_connection: local, ocslab_nics: [{name: e1, mac: "02:00:00:00:00:01", kind: generic}]}, bad: {ansible_connection: local, ocslab_nics: [{name: e1, mac: "02:00:00:00:00:zz", kind: generic}]}}}}' \
  "bad: ocslab_nics[0] (e1).mac: '02:00:00:00:00:zz' is not a MAC address"
exit $fail
