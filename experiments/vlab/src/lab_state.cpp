#include "ocslab/vlab/lab_state.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ocslab/common/error.h"
#include "ocslab/common/file.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ocslab::vlab {

namespace {

// Far above any lab's (a few KiB per host).
constexpr size_t kMaxStateFile = 16 << 20;

json nic_json(const NicState& n) {
  return {{"name", n.name},
          {"mac", n.mac},
          {"ip", n.ip},
          {"rdma_device", n.rdma_device},
          {"if2", n.if2},
          {"if2_mac", n.if2_mac},
          {"tx_port", n.tx_port},
          {"rx_port", n.rx_port},
          {"emulator_udp_port", n.emulator_udp_port},
          {"qemu_udp_port", n.qemu_udp_port},
          {"qmp_socket", n.qmp_socket},
          {"linked_at_start", n.linked_at_start},
          {"standby_for", n.standby_for}};
}

NicState nic_from(const json& j) {
  NicState n;
  n.name = j.at("name");
  n.mac = j.at("mac");
  n.ip = j.at("ip");
  n.rdma_device = j.value("rdma_device", "");
  n.if2 = j.value("if2", "");
  n.if2_mac = j.value("if2_mac", "");
  n.standby_for = j.value("standby_for", "");
  n.tx_port = j.at("tx_port");
  n.rx_port = j.at("rx_port");
  n.emulator_udp_port = j.at("emulator_udp_port");
  n.qemu_udp_port = j.at("qemu_udp_port");
  n.qmp_socket = j.at("qmp_socket");
  n.linked_at_start = j.value("linked_at_start", false);
  return n;
}

json distribution_json(const emu::Distribution& d) {
  using K = emu::Distribution::Kind;
  switch (d.kind) {
    case K::kUniform:
      return {{"kind", "uniform"}, {"low_ms", d.a_ms}, {"high_ms", d.b_ms}, {"text", d.to_string()}};
    case K::kNormal:
      return {{"kind", "normal"},
              {"mean_ms", d.a_ms},
              {"sd_ms", d.b_ms},
              {"floor_ms", d.floor_ms},
              {"text", d.to_string()}};
    case K::kFixed:
      break;
  }
  return {{"kind", "fixed"}, {"ms", d.a_ms}, {"text", d.to_string()}};
}

emu::Distribution distribution_from(const json& j) {
  std::string kind = j.value("kind", "fixed");
  if (kind == "uniform") return emu::Distribution::uniform(j.at("low_ms"), j.at("high_ms"));
  if (kind == "normal") return emu::Distribution::normal(j.at("mean_ms"), j.at("sd_ms"), j.at("floor_ms"));
  return emu::Distribution::fixed(j.value("ms", 0.0));
}

json timing_json(const TimingState& t) {
  return {{"switch_preset", t.switch_preset},
          {"switching", distribution_json(t.switching)},
          {"nic_model", t.nic_model},
          {"los_ms", t.los_ms},
          {"firmware_up", distribution_json(t.firmware_up)},
          {"rapid_window_ms", t.rapid_window_ms},
          {"rapid_extra", distribution_json(t.rapid_extra)},
          {"max_up_ms", t.max_up_ms},
          {"held_down", t.held_down},
          {"dark_ports", t.dark_ports},
          {"link_gbps", t.link_gbps},
          {"summary", t.summary()}};
}

void timing_from(const json& j, TimingState& t) {
  t.generation = j.value("timing_generation", uint64_t{0});
  t.error = j.value("timing_error", "");
  if (!j.contains("timing")) return;
  const json& v = j.at("timing");
  t.switch_preset = v.value("switch_preset", "");
  t.switching = distribution_from(v.value("switching", json::object()));
  t.nic_model = v.value("nic_model", "");
  t.los_ms = v.value("los_ms", 0.0);
  t.firmware_up = distribution_from(v.value("firmware_up", json::object()));
  t.rapid_window_ms = v.value("rapid_window_ms", 0.0);
  t.rapid_extra = distribution_from(v.value("rapid_extra", json::object()));
  t.max_up_ms = v.value("max_up_ms", 0.0);
  t.held_down = v.value("held_down", std::vector<std::string>{});
  t.dark_ports = v.value("dark_ports", std::vector<int>{});
  t.link_gbps = v.value("link_gbps", 0.0);
}

}  // namespace

std::string TimingState::summary() const {
  std::string out = fmt::format("switch {} ({})", switch_preset.empty() ? "?" : switch_preset, switching.to_string());
  const std::string capped = link_gbps > 0 ? fmt::format("; circuits capped at {:g} Gbit/s", link_gbps) : "";
  if (nic_model.empty()) return out + ", no NICs" + capped;
  out += fmt::format(", NICs {} (up {}, LOS {} ms", nic_model, firmware_up.to_string(), los_ms);
  if (rapid_window_ms > 0) out += fmt::format(", +{} within {} ms", rapid_extra.to_string(), rapid_window_ms);
  out += ")";
  if (!held_down.empty()) out += fmt::format("; held down: {}", fmt::join(held_down, ", "));
  if (!dark_ports.empty()) out += fmt::format("; dark ports: {}", fmt::join(dark_ports, ", "));
  return out + capped;
}

std::string LabState::switch_url() const { return fmt::format("tl1://{}@127.0.0.1:{}", switch_user, tl1_port); }

const HostState& LabState::host(const std::string& host_name) const {
  std::string known;
  for (const auto& h : hosts) {
    if (h.name == host_name) return h;
    known += (known.empty() ? "" : ", ") + h.name;
  }
  throw Error("lab " + name + " has no host '" + host_name + "' (hosts: " + known + ")");
}

std::string LabState::to_json() const {
  json hs = json::array();
  for (const auto& h : hosts) {
    json nics = json::array();
    for (const auto& n : h.nics) nics.push_back(nic_json(n));
    hs.push_back({{"name", h.name},
                  {"cpus", h.cpus},
                  {"memory_mb", h.memory_mb},
                  {"tcg_cache_mb", h.tcg_cache_mb},
                  {"ssh_port", h.ssh_port},
                  {"mgmt_mac", h.mgmt_mac},
                  {"lan_mac", h.lan_mac},
                  {"lan_ip", h.lan_ip},
                  {"lan_hub_port", h.lan_hub_port},
                  {"lan_qemu_port", h.lan_qemu_port},
                  {"nics", nics},
                  {"pid", h.pid},
                  {"alive", h.alive},
                  {"exit", h.exit}});
  }
  json j = {{"name", name},
            {"dir", dir},
            {"spec", spec},
            {"phase", phase},
            {"error", error},
            {"supervisor_pid", supervisor_pid},
            {"kernel", kernel},
            {"vmlinuz", vmlinuz},
            {"boot_image", boot_image},
            {"initramfs", initramfs},
            {"modules_dir", modules_dir},
            {"switch",
             {{"url", tl1_port ? switch_url() : ""},
              {"user", switch_user},
              {"password", switch_password},
              {"tl1_port", tl1_port},
              {"events_port", events_port},
              {"netconf_port", netconf_port},
              {"scpi_port", scpi_port}}},
            {"client_key", client_key()},
            {"known_hosts", known_hosts()},
            {"hosts", hs},
            {"slurm", slurm},
            {"timing_generation", timing.generation},
            {"timing_error", timing.error},
            {"timing", timing_json(timing)}};
  return j.dump(2) + "\n";
}

LabState LabState::from_json(const std::string& text, const std::string& origin) {
  try {
    json j = json::parse(text);
    LabState s;
    s.name = j.at("name");
    s.dir = j.at("dir");
    s.spec = j.value("spec", "");
    s.phase = j.at("phase");
    s.error = j.value("error", "");
    s.supervisor_pid = j.value("supervisor_pid", 0);
    s.kernel = j.value("kernel", "");
    s.vmlinuz = j.value("vmlinuz", "");
    s.boot_image = j.value("boot_image", "");
    s.initramfs = j.value("initramfs", "");
    s.modules_dir = j.value("modules_dir", "");
    const json& sw = j.at("switch");
    s.switch_user = sw.value("user", "");
    s.switch_password = sw.value("password", "");
    s.tl1_port = sw.value("tl1_port", 0);
    s.events_port = sw.value("events_port", 0);
    s.netconf_port = sw.value("netconf_port", 0);
    s.scpi_port = sw.value("scpi_port", 0);
    for (const auto& h : j.at("hosts")) {
      HostState hs;
      hs.name = h.at("name");
      hs.cpus = h.value("cpus", 1);
      hs.memory_mb = h.value("memory_mb", 512);
      hs.tcg_cache_mb = h.value("tcg_cache_mb", 0);
      hs.ssh_port = h.at("ssh_port");
      hs.mgmt_mac = h.value("mgmt_mac", "");
      hs.lan_mac = h.value("lan_mac", "");
      hs.lan_ip = h.value("lan_ip", "");
      hs.lan_hub_port = h.value("lan_hub_port", 0);
      hs.lan_qemu_port = h.value("lan_qemu_port", 0);
      for (const auto& n : h.at("nics")) hs.nics.push_back(nic_from(n));
      hs.pid = h.value("pid", 0);
      hs.alive = h.value("alive", false);
      hs.exit = h.value("exit", "");
      s.hosts.push_back(std::move(hs));
    }
    s.slurm = j.value("slurm", false);
    timing_from(j, s.timing);
    return s;
  } catch (const json::exception& e) {
    throw Error(origin + ": not a virtual-lab state file: " + e.what());
  }
}

void LabState::save() const { write_private_file(dir + "/state.json", to_json()); }

LabState LabState::load(const std::string& dir) {
  std::string path = dir + "/state.json";
  // It holds the switch password: a file anyone else could read or have written is refused.
  auto text = read_checked_file(path, "virtual-lab state file", kMaxStateFile, FileAccess::kOwnerOnly);
  if (!text) throw Error("no virtual lab at " + dir + " (" + path + " is missing)");
  return from_json(*text, path);
}

std::string timing_to_json(const std::string& lab, const TimingState& timing) {
  json j = {{"lab", lab},
            {"timing_generation", timing.generation},
            {"timing_error", timing.error},
            {"timing", timing_json(timing)}};
  return j.dump(2) + "\n";
}

std::string default_cache_dir() {
  if (const char* c = std::getenv("OCSLAB_VLAB_CACHE"); c && *c) return c;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.cache/ocslab/vlab";
}

std::string labs_dir(const std::string& cache_dir) { return cache_dir + "/labs"; }

std::vector<LabState> list_labs(const std::string& cache_dir) {
  std::vector<LabState> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(labs_dir(cache_dir), ec)) {
    if (!fs::exists(e.path() / "state.json")) continue;
    try {
      out.push_back(LabState::load(e.path().string()));
    } catch (const Error&) {
      // A half-written folder from an interrupted `up`: `down NAME` cleans it.
    }
  }
  return out;
}

}  // namespace ocslab::vlab
