#include "ocslab/agent/forwarding_fabric_cli.h"
#include "ocslab/common/exit_code.h"

#include <fmt/format.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ocslab/forwarding/wiring.h"
#include "ocslab/ocsctl/credentials.h"
#include "ocslab/ocsctl/driver.h"
#include "ocslab/ocsctl/mapping.h"

namespace po = boost::program_options;
namespace fw = ocslab::forwarding;

namespace ocslab::agent {

namespace {

po::options_description fabric_options() {
  po::options_description d("forwarding fabric options");
  d.add_options()("wiring", po::value<std::string>(), "wiring file: hosts, ports and their OCS tx/rx ports")(
      "mapping", po::value<std::string>(), "the OCS circuits as an ocsctl mapping file (ocsctl apply's format)")(
      "from-switch", po::value<std::string>(),
      "read the circuits from the switch instead (ocsctl's URLs: tl1://user@host[:3082], tl1+ssh://, netconf://, "
      "scpi://)")("output,o", po::value<std::string>(), "write the fabric here (default: stdout)")(
      "allow", po::value<std::string>(),
      "the switch ports that are this lab's, e.g. 1..8,17..24: circuits with an end outside are not read, and every "
      "wired port must be inside")("credentials", po::value<std::string>(),
                                   "--from-switch: credentials file (mode 0600), as ocsctl; $OCSLAB_OCS_PASSWORD "
                                   "takes precedence for the host $OCSLAB_OCS_PASSWORD_HOST names (alone: loopback)")(
      "identity,i", po::value<std::string>(), "--from-switch over SSH: private key")(
      "known-hosts", po::value<std::string>(), "--from-switch over SSH: known_hosts file")(
      "accept-unknown-host", "--from-switch over SSH: accept a host key not in known_hosts")(
      "timeout-ms", po::value<int>()->default_value(10000), "--from-switch: deadline for connecting and each reply")(
      "help,h", "show this help");
  return d;
}

// Circuits with an end outside the allow-list belong to another lab on a shared switch.
std::vector<fw::OcsCircuit> in_scope(const std::vector<fw::OcsCircuit>& all, const ocs::PortSet& allow,
                                     std::vector<fw::OcsCircuit>& outside) {
  std::vector<fw::OcsCircuit> kept;
  for (const auto& c : all) {
    if (allow.contains(c.ingress) && allow.contains(c.egress))
      kept.push_back(c);
    else
      outside.push_back(c);
  }
  return kept;
}

// Also checks the wiring against the switch's port layout, read at connect time.
std::vector<fw::OcsCircuit> from_switch(const po::variables_map& vm, const std::string& url_text,
                                        const fw::Wiring& wiring) {
  ocs::SwitchUrl url = ocs::SwitchUrl::parse(url_text);
  ocs::DriverOptions o;
  o.reply_timeout = std::chrono::milliseconds(vm["timeout-ms"].as<int>());
  o.connect_timeout = o.reply_timeout;
  if (vm.count("allow")) o.allow = ocs::PortSet::parse(vm["allow"].as<std::string>());
  if (vm.count("identity")) o.identity_file = vm["identity"].as<std::string>();
  if (vm.count("known-hosts")) o.known_hosts_file = vm["known-hosts"].as<std::string>();
  o.accept_unknown_host = vm.count("accept-unknown-host") > 0;
  std::string cred = vm.count("credentials") ? vm["credentials"].as<std::string>() : ocs::default_credentials_path();
  o.password = ocs::resolve_password(url, cred);
  auto driver = ocs::make_driver(url, std::move(o));
  std::vector<fw::OcsCircuit> out;
  std::string where = "switch " + driver->name();
  ocs::SwitchInfo info = driver->info();
  fw::check_wiring_ports(wiring, info.ingress_ports, info.egress_ports, where);
  for (const auto& c : driver->list()) out.push_back({c.ingress, c.egress, where});
  driver->close();
  return out;
}

// Written next to the target and renamed over it: a reader never sees half a fabric, and an
// error leaves an earlier file in place.
void write_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw Error("cannot write " + tmp);
    f << text;
    f.flush();
    if (!f) throw Error("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw Error("cannot write " + path + ": " + ec.message());
  }
}

std::string list(const std::vector<fw::OcsCircuit>& cs) {
  std::string s;
  for (const auto& c : cs) s += fmt::format("{}{}-{}", s.empty() ? "" : " ", c.ingress, c.egress);
  return s;
}

}  // namespace

std::string forwarding_fabric_help() {
  std::ostringstream s;
  s << "Usage: ocslab-agent forwarding fabric --wiring WIRING.yaml (--mapping MAPPING.yaml | --from-switch URL)\n"
       "                                      [-o FABRIC.yaml] [--allow PORTS]\n\n"
       "Derive the fabric file (plan/apply/verify --fabric) from how the hosts are cabled to the OCS\n"
       "and the circuits it makes. A link needs both directions: the circuit a.tx -> b.rx and the\n"
       "circuit b.tx -> a.rx. A circuit with only one end wired, a missing or diverted reverse\n"
       "direction, or a host the circuits leave unreachable is an error naming the circuit; circuits\n"
       "with no wired end (another lab's) are ignored and listed on stderr. Nothing is written on an\n"
       "error. Schema and example: docs/forwarding.md, \"Deriving the fabric\".\n\n"
    << fabric_options()
    << "\nExit codes:\n"
       "  0  success\n"
       "  1  bad command line\n"
       "  2  bad input: wiring or mapping file, circuits that make no fabric, URL, allow-list, credentials\n"
       "  4  the switch cannot be reached, refused the request or answered garbage\n\n"
       "These are the codes of every ocslab program, with what they mean here (docs/exit-codes.md).\n\n"
       "Examples:\n"
       "  ocslab-agent forwarding fabric --wiring lab.wiring.yaml --mapping rail-a.yaml -o fabric.yaml\n"
       "  OCSLAB_OCS_PASSWORD=... OCSLAB_OCS_PASSWORD_HOST=10.0.0.5 ocslab-agent forwarding fabric \\\n"
       "      --wiring lab.wiring.yaml \\\n"
       "      --from-switch tl1://admin@10.0.0.5 --allow 1..8,33..40 -o fabric.yaml\n";
  return s.str();
}

int run_forwarding_fabric_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const char* me = "ocslab-agent forwarding fabric";
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(fabric_options()).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << me << ": " << e.what() << "\nTry '" << me << " --help'.\n";
    return kExitUsage;
  }
  if (vm.count("help")) {
    out << forwarding_fabric_help();
    return kExitOk;
  }
  if (!vm.count("wiring") || vm.count("mapping") + vm.count("from-switch") != 1) {
    err << me << ": give --wiring FILE and one of --mapping FILE and --from-switch URL\nTry '" << me << " --help'.\n";
    return kExitUsage;
  }
  try {
    const std::string wiring_path = vm["wiring"].as<std::string>();
    fw::Wiring wiring = fw::load_wiring_file(wiring_path);
    std::optional<ocs::PortSet> allow;
    if (vm.count("allow")) {
      allow = ocs::PortSet::parse(vm["allow"].as<std::string>());
      for (const auto& c : wiring.cables)
        for (auto [port, role] : {std::pair{c.tx, "tx"}, std::pair{c.rx, "rx"}})
          if (!allow->contains(port))
            throw ConfigError(fmt::format("{}: {} {} {} is outside the allow-list ({})", c.where, fw::to_string(c.port),
                                          role, port, allow->to_string()));
    }
    // Bad local input is reported before the switch is contacted.
    std::string source;
    std::vector<fw::OcsCircuit> circuits;
    if (vm.count("mapping")) {
      source = vm["mapping"].as<std::string>();
      for (const auto& e : ocs::load_mapping_entries(source))
        circuits.push_back({e.circuit.ingress, e.circuit.egress, e.where});
    } else {
      circuits = from_switch(vm, vm["from-switch"].as<std::string>(), wiring);
      source = "switch " + ocs::SwitchUrl::parse(vm["from-switch"].as<std::string>()).to_string();
    }
    std::vector<fw::OcsCircuit> outside;
    if (allow) circuits = in_scope(circuits, *allow, outside);
    fw::DerivedFabric d = fw::derive_fabric(wiring, circuits);
    if (!outside.empty())
      err << fmt::format("note: {} circuit(s) with an end outside --allow not read: {}\n", outside.size(),
                         list(outside));
    if (!d.ignored.empty())
      err << fmt::format("note: {} circuit(s) between ports the wiring does not name ignored: {}\n", d.ignored.size(),
                         list(d.ignored));
    std::string yaml =
        fw::to_yaml(d.fabric, fmt::format("Derived by ocslab-agent forwarding fabric from the wiring {}\n"
                                          "and the circuits of {}.",
                                          wiring_path, source));
    if (vm.count("output")) {
      std::string path = vm["output"].as<std::string>();
      write_file(path, yaml);
      size_t ports = 0;
      for (const auto& h : d.fabric.hosts) ports += h.ports.size();
      out << fmt::format("wrote {}: {} hosts, {} ports, {} circuits\n", path, d.fabric.hosts.size(), ports,
                         d.fabric.circuits.size());
    } else {
      out << yaml;
    }
    return kExitOk;
  } catch (const ocs::PortError& e) {
    err << me << ": " << e.what() << "\n";
    return kExitInput;
  } catch (const ocs::OcsError& e) {
    err << me << ": " << e.what() << "\n";
    return kExitUnreachable;
  } catch (const Error& e) {
    err << me << ": " << e.what() << "\n";
    return kExitInput;
  }
}

}  // namespace ocslab::agent
