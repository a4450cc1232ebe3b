#include "ocslab/agent/module_cli.h"

#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "ocslab/common/error.h"
#include "ocslab/common/exit_code.h"

namespace po = boost::program_options;

namespace ocslab::agent {

namespace {

constexpr const char* kModuleUsage =
    "Usage: ocslab-agent module IF [--json]\n\n"
    "Prints the transceiver in IF: identity (identifier, connector, vendor, part, revision,\n"
    "serial) and DDM (temperature, supply voltage, per-lane Rx and Tx power in mW and dBm, Rx LOS),\n"
    "like 'ethtool -m', through the Rx power probe's reader and decoders (SFF-8472, SFF-8636,\n"
    "CMIS). Rx LOS of SFF-8636 and CMIS is latched: set when LOS was asserted since the last read,\n"
    "and this read clears it. An interface without a module says why: no such interface (2), the\n"
    "NIC has no module EEPROM access, e.g. lo, veth, virtio (3), no module plugged in (8).\n"
    "With --json: one JSON object, also for those three (field 'error').\n";

std::string dbm_text(double dbm) { return std::isinf(dbm) ? "-inf dBm" : fmt::format("{:.2f} dBm", dbm); }

nlohmann::ordered_json lanes_json(const std::vector<probes::LanePower>& lanes) {
  auto a = nlohmann::ordered_json::array();
  for (const auto& l : lanes) {
    nlohmann::ordered_json j;
    j["lane"] = l.lane;
    j["mw"] = l.mw;
    j["dbm"] = std::isinf(l.dbm) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(l.dbm);
    j["los"] = l.los ? nlohmann::ordered_json(*l.los) : nlohmann::ordered_json(nullptr);
    a.push_back(j);
  }
  return a;
}

int exit_for(probes::ModuleAbsence a) {
  switch (a) {
    case probes::ModuleAbsence::kNoInterface:
      return kExitInput;
    case probes::ModuleAbsence::kNotSupported:
      return kExitRefused;
    case probes::ModuleAbsence::kNoModule:
      break;
  }
  return kExitAbsent;
}

}  // namespace

void print_module_text(std::ostream& out, const probes::ModuleInfo& info) {
  const auto& id = info.identity;
  auto line = [&](const std::string& key, const std::string& value) {
    out << fmt::format("\t{:<34}: {}\n", key, value);
  };
  out << fmt::format("Module in {}\n", info.interface);
  line("Identifier", fmt::format("0x{:02x} ({})", id.identifier, id.identifier_name));
  line("Management interface", probes::to_string(info.type));
  line("Connector", fmt::format("0x{:02x} ({})", id.connector, id.connector_name));
  line("Vendor name", id.vendor);
  line("Vendor PN", id.part);
  line("Vendor rev", id.revision);
  line("Vendor SN", id.serial);
  if (info.ddm && info.ddm->temperature_c)
    line("Module temperature", fmt::format("{:.2f} degrees C", *info.ddm->temperature_c));
  if (info.voltage_v) line("Module voltage", fmt::format("{:.4f} V", *info.voltage_v));
  if (!info.ddm) {
    line("DDM", "unavailable: " + info.ddm_unavailable);
    return;
  }
  line("DDM format", info.ddm->format);
  for (const auto& l : info.ddm->rx) {
    line(fmt::format("Rx power lane {}", l.lane), fmt::format("{:.4f} mW / {}", l.mw, dbm_text(l.dbm)));
  }
  for (const auto& l : info.ddm->tx) {
    line(fmt::format("Tx power lane {}", l.lane), fmt::format("{:.4f} mW / {}", l.mw, dbm_text(l.dbm)));
  }
  for (const auto& l : info.ddm->rx) {
    if (!l.los) continue;
    line(fmt::format("Rx LOS lane {}{}", l.lane, info.ddm->los_latched ? " (latched)" : ""), *l.los ? "yes" : "no");
  }
}

std::string module_json(const probes::ModuleInfo& info) {
  nlohmann::ordered_json j;
  const auto& id = info.identity;
  j["interface"] = info.interface;
  j["identifier"] = {{"code", id.identifier}, {"name", id.identifier_name}};
  j["management"] = probes::to_string(info.type);
  j["connector"] = {{"code", id.connector}, {"name", id.connector_name}};
  j["vendor"] = id.vendor;
  j["part"] = id.part;
  j["revision"] = id.revision;
  j["serial"] = id.serial;
  j["temperature_c"] = info.ddm && info.ddm->temperature_c ? nlohmann::ordered_json(*info.ddm->temperature_c)
                                                           : nlohmann::ordered_json(nullptr);
  j["voltage_v"] = info.voltage_v ? nlohmann::ordered_json(*info.voltage_v) : nlohmann::ordered_json(nullptr);
  if (info.ddm) {
    j["ddm"] = {{"format", info.ddm->format},
                {"los_latched", info.ddm->los_latched},
                {"rx", lanes_json(info.ddm->rx)},
                {"tx", lanes_json(info.ddm->tx)}};
  } else {
    j["ddm"] = nullptr;
    j["ddm_unavailable"] = info.ddm_unavailable;
  }
  return j.dump(2);
}

int run_module_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                   const ModuleSource& source) {
  po::options_description d("module options");
  d.add_options()("json", "print one JSON object")("help,h", "this help")("if", po::value<std::string>());
  po::positional_options_description pos;
  pos.add("if", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(d).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "ocslab-agent module: " << e.what() << "\nTry 'ocslab-agent module --help'.\n";
    return kExitUsage;
  }
  if (vm.count("help")) {
    out << kModuleUsage << "\n" << exit_code_help();
    return kExitOk;
  }
  if (!vm.count("if")) {
    err << "ocslab-agent module: missing IF (the network interface of the module)\nTry 'ocslab-agent module --help'.\n";
    return kExitUsage;
  }
  const std::string ifname = vm["if"].as<std::string>();
  const bool json = vm.count("json") > 0;
  try {
    std::unique_ptr<probes::EepromReader> own;
    probes::EepromReader* reader = source.reader;
    if (!reader) {
      own = std::make_unique<probes::EthtoolEepromReader>();
      reader = own.get();
    }
    probes::ModuleInfoResult r = probes::read_module_info(*reader, ifname, source.driver_of);
    if (!r.info) {
      if (json) {
        nlohmann::ordered_json j;
        j["interface"] = ifname;
        j["error"] = probes::to_string(r.absence);
        j["message"] = r.message;
        j["driver"] = r.driver.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.driver);
        out << j.dump(2) << "\n";
      }
      err << "ocslab-agent module: " << r.message << "\n";
      return exit_for(r.absence);
    }
    if (json) {
      out << module_json(*r.info) << "\n";
    } else {
      print_module_text(out, *r.info);
    }
    return kExitOk;
  } catch (const Error& e) {
    if (json)
      out << nlohmann::ordered_json{{"interface", ifname}, {"error", "undecodable"}, {"message", e.what()}}.dump(2)
          << "\n";
    err << "ocslab-agent module: " << ifname << ": " << e.what() << "\n";
    return kExitInput;
  }
}

}  // namespace ocslab::agent
