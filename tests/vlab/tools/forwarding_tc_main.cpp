// Runs TcNetlink inside a virtual-lab guest (whose kernel has cls_flower and act_pedit) for
// tests/vlab/forwarding_tc_test.cpp: one command per call, results as JSON lines on stdout.
//   clsact-add|clsact-has|clsact-del DEV
//   add|del (DEV PRIO DST MAC REDIRECT_DEV)...   one batch of rules
//   list DEV                                     ocslab's filters, decoded, with counters
//   raw-dump DEV FILE                            the kernel's dump bytes (fuzz corpus)
// Exit status: 0 ok, 1 usage, 2 ocslab::Error, 3 KernelError (errno and extack on stderr).
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ocslab/forwarding/tc_netlink.h"

using namespace ocslab;
using namespace ocslab::forwarding;

namespace {

std::vector<FilterRule> rules_from(int argc, char** argv, int from) {
  if ((argc - from) % 5 != 0 || argc == from) throw Error("rules come as DEV PRIO DST MAC REDIRECT_DEV groups");
  std::vector<FilterRule> out;
  for (int i = from; i < argc; i += 5) {
    FilterRule r;
    r.dev = argv[i];
    r.prio = static_cast<uint16_t>(std::stoul(argv[i + 1], nullptr, 0));
    r.dst = argv[i + 2];
    r.set_eth_dst = argv[i + 3];
    r.redirect_dev = argv[i + 4];
    out.push_back(r);
  }
  return out;
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: vlab_forwarding_tc clsact-add|clsact-has|clsact-del|add|del|list|raw-dump ...\n";
    return 1;
  }
  std::string cmd = argv[1];
  TcNetlink tc;
  if (cmd == "clsact-add") {
    tc.add_clsact(argv[2]);
  } else if (cmd == "clsact-has") {
    std::cout << (tc.has_clsact(argv[2]) ? "yes" : "no") << "\n";
  } else if (cmd == "clsact-del") {
    tc.delete_clsact(argv[2]);
  } else if (cmd == "add") {
    tc.add_filters(rules_from(argc, argv, 2));
  } else if (cmd == "del") {
    tc.delete_filters(rules_from(argc, argv, 2));
  } else if (cmd == "list") {
    for (const auto& f : tc.list_owned(argv[2])) {
      nlohmann::json j = {{"dev", f.rule.dev},
                          {"chain", f.rule.chain},
                          {"prio", f.rule.prio},
                          {"dst", f.rule.dst},
                          {"set_eth_dst", f.rule.set_eth_dst},
                          {"redirect_dev", f.rule.redirect_dev},
                          {"cookie", f.rule.cookie},
                          {"handle", f.handle},
                          {"packets", f.packets},
                          {"bytes", f.bytes},
                          {"problem", f.problem}};
      std::cout << j.dump() << "\n";
    }
  } else if (cmd == "raw-dump" && argc == 4) {
    auto bytes = tc.raw_filter_dump(argv[2]);
    std::ofstream(argv[3], std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::cout << bytes.size() << " bytes\n";
  } else {
    std::cerr << "unknown command " << cmd << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const KernelError& e) {
    std::cerr << "KernelError errno=" << e.err() << " extack='" << e.extack() << "': " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "Error: " << e.what() << "\n";
    return 2;
  }
}
