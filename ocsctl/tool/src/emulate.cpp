#include "ocslab/tool/emulate.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <ostream>
#include <thread>

#include "ocslab/emulator/emulator.h"
#include "ocslab/tool/cli.h"

namespace ocslab::tool {

namespace {

// Flags are merged into the lab file's YAML so they go through the same validation (and the
// same error messages) as the file; nodes from the file keep their line numbers.
void apply_flags(YamlDoc& doc, const EmulateOptions& o) {
  if (doc.root.IsNull()) doc.root = YAML::Load("switch: {}");  // an empty file: flags only
  YAML::Node sw = doc.root["switch"];
  if (!sw || sw.IsNull()) sw = doc.root["switch"] = YAML::Node(YAML::NodeType::Map);
  if (o.preset) sw["preset"] = *o.preset;
  if (o.size) sw["size"] = *o.size;
  if (o.seed) sw["seed"] = *o.seed;
  if (o.switching_ms) sw["switching_ms"] = YAML::Load(*o.switching_ms);
  YAML::Node listen = sw["listen"];
  bool any_listen = o.tl1 || o.tl1_ssh || o.netconf || o.scpi || o.events;
  if (!listen || listen.IsNull()) {
    listen = YAML::Node(YAML::NodeType::Map);
    if (!any_listen) listen["tl1"] = "127.0.0.1:3082";  // the Polatis default, on loopback
  }
  if (o.tl1) listen["tl1"] = *o.tl1;
  if (o.tl1_ssh) listen["tl1_ssh"] = *o.tl1_ssh;
  if (o.netconf) listen["netconf"] = *o.netconf;
  if (o.scpi) listen["scpi"] = *o.scpi;
  if (o.events) listen["events"] = *o.events;
  sw["listen"] = listen;
  if (o.ground_truth) doc.root["ground_truth"] = *o.ground_truth;
}

// After the merged document was refused: each flag given, checked alone in a document named
// after the flag, so a bad flag value is reported as "--switching-ms:1:2: ..." and not as a
// place in the lab file or in no file. Returns when every flag alone is fine (the lab file is
// what was refused, and its error stands).
void blame_flag(const EmulateOptions& o) {
  auto check = [](const char* name, EmulateOptions one) {
    YamlDoc d = load_yaml_string("switch: {}\n", name);
    apply_flags(d, one);
    emu::parse_emulator_config(d);
  };
  auto alone = [&](const char* name, auto member, const auto& value) {
    if (!value) return;
    EmulateOptions one;
    one.*member = value;
    check(name, one);
  };
  alone("--preset", &EmulateOptions::preset, o.preset);
  alone("--size", &EmulateOptions::size, o.size);
  alone("--seed", &EmulateOptions::seed, o.seed);
  alone("--switching-ms", &EmulateOptions::switching_ms, o.switching_ms);
  alone("--listen", &EmulateOptions::tl1, o.tl1);
  alone("--tl1-ssh", &EmulateOptions::tl1_ssh, o.tl1_ssh);
  alone("--netconf", &EmulateOptions::netconf, o.netconf);
  alone("--scpi", &EmulateOptions::scpi, o.scpi);
  alone("--events", &EmulateOptions::events, o.events);
  alone("--ground-truth", &EmulateOptions::ground_truth, o.ground_truth);
}

emu::EmulatorConfig build_config(const EmulateOptions& o) {
  YamlDoc doc = o.lab_file.empty() ? load_yaml_string("switch: {}\n", "<flags>") : load_yaml_file(o.lab_file);
  apply_flags(doc, o);
  try {
    return emu::parse_emulator_config(doc);
  } catch (const ConfigError&) {
    blame_flag(o);
    throw;
  }
}

}  // namespace

int run_emulate(const EmulateOptions& o, std::ostream& out, std::ostream& err, const std::atomic<bool>& stop) {
  emu::EmulatorConfig cfg = build_config(o);
  if (o.dry_run) {
    out << cfg.describe();
    return ocslab::kExitOk;
  }
  emu::Emulator emulator(cfg);
  emulator.start();
  auto ports = emulator.ports();
  nlohmann::json ready = {{"switch", cfg.sw.name}, {"pid", ::getpid()}};
  auto report = [&](const char* name, const std::optional<int>& port, const std::optional<emu::ListenAddress>& where) {
    if (!port) return;
    ready[name] = *port;
    err << fmt::format("ocsctl emulate: {:<8} {}:{}\n", name, where ? where->host : "127.0.0.1", *port);
  };
  report("tl1", ports.tl1, cfg.control.tl1);
  report("tl1_ssh", ports.tl1_ssh, cfg.control.tl1_ssh);
  report("netconf", ports.netconf, cfg.control.netconf);
  report("scpi", ports.scpi, cfg.control.scpi);
  report("events", emulator.events_port(), cfg.control.events);
  for (auto [name, port] : {std::pair{"tl1_ssh", ports.tl1_ssh}, std::pair{"netconf", ports.netconf}}) {
    if (port) ready["known_hosts"][name] = emulator.known_hosts("127.0.0.1", *port);
  }
  if (!o.ready_file.empty()) {
    std::string tmp = o.ready_file + ".tmp";
    std::ofstream(tmp) << ready.dump(2) << "\n";
    std::rename(tmp.c_str(), o.ready_file.c_str());  // readers never see half a file
  }
  err << fmt::format("ocsctl emulate: {} ready ({}x{}, {} NIC(s)); Ctrl-C to stop\n", cfg.sw.name,
                     cfg.sw.ingress_ports, cfg.sw.egress_ports, cfg.nics.size());
  // The login a client needs. The default password is the documented one and is shown; a
  // password from the lab file is the user's secret and is not.
  const bool default_password = cfg.control.password == emu::ControlPlaneConfig{}.password;
  err << fmt::format("ocsctl emulate: login {} / {}\n", cfg.control.user,
                     default_password ? "'" + cfg.control.password + "' (the default; OCSLAB_OCS_PASSWORD=" +
                                            cfg.control.password + ")"
                                      : "the lab file's password");
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  emulator.stop();
  err << "ocsctl emulate: stopped\n";
  return ocslab::kExitOk;
}

}  // namespace ocslab::tool
